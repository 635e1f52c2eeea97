package cli

import (
	"runtime"
	"runtime/debug"
)

// The collector's setting for the process (unless GOGC is set): the
// runtime's default, 100, while the heap is small, and 50 once a
// collection finds more than largeHeap bytes live (except in replay:
// watchesHeap).
//
// 50 cuts the peak RSS of a large solve, whose buffers live for the whole
// solve so that the default headroom is mostly unused memory. On a small
// one it costs time: the minimum heap scales with the percentage (2 MB at
// 50 against 4 MB), so a 1,000-pose solve of some 8 MB of allocation ran 6
// collections, 11% of its instructions, each one waking a mark worker on
// the second core the solver uses (docs/tuning.md).
const (
	smallHeapGCPercent = 100
	largeHeapGCPercent = 50
	largeHeap          = 32 << 20
	// coordinatorGCPercent is distributed's percentage on a large heap:
	// the coordinator holds the graph, Q and its boundary systems for the
	// whole run and computes little (the agents do the work), so the
	// collector's headroom is mostly unused memory, and the issue's
	// target is the coordinator's peak RSS (docs/distributed.md,
	// "Memory").
	coordinatorGCPercent = 20
)

// largePercent is the percentage checkHeap switches to (setGCPolicy).
var largePercent = largeHeapGCPercent

// setGCPolicy sets the collector's percentage to smallHeapGCPercent and,
// unless command is one that keeps it (watchesHeap), watches the live heap
// after each collection, until it exceeds largeHeap; from then on the
// percentage is largeHeapGCPercent (coordinatorGCPercent for distributed).
func setGCPolicy(command string) {
	debug.SetGCPercent(smallHeapGCPercent)
	largePercent = largeHeapGCPercent
	if command == "distributed" {
		largePercent = coordinatorGCPercent
	}
	if watchesHeap(command) {
		armHeapWatch()
	}
}

// watchesHeap reports whether command switches to largeHeapGCPercent on
// a large live heap. replay does not: each step's factors and buffers are
// garbage by the next, so its allocation runs at many times its live heap
// and at 50 the collector ran about twice as often for memory the steps
// would not have kept: replay's time falls and its peak RSS rises by
// about a third (docs/online.md, "The collector"), while a batch solve is
// unchanged.
func watchesHeap(command string) bool {
	return command != "replay"
}

// heapSentinel is an object only a finalizer refers to: it becomes
// unreachable at once, so its finalizer runs after the next collection.
// (It holds a pointer so that it is not batched with other tiny objects,
// whose finalizers may never run.)
type heapSentinel struct{ _ *int }

// armHeapWatch schedules checkHeap after the next collection.
func armHeapWatch() {
	runtime.SetFinalizer(&heapSentinel{}, checkHeap)
}

// checkHeap runs on the finalizer goroutine after a collection: it
// switches to largeHeapGCPercent when the live heap exceeds largeHeap,
// and otherwise waits for the next collection.
//
// The live heap is read from the heap goal the collection set, which at
// smallHeapGCPercent (100) is twice the live heap plus the roots (stacks
// and globals, well under a megabyte here). runtime/metrics reads the
// live heap itself, but importing it costs every process 0.49M
// instructions of package initialization (building its table of
// descriptions), a fifth of `bcmsync --version`; ReadMemStats stops the
// world for microseconds, once per collection while the heap is small.
func checkHeap(*heapSentinel) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if ms.NextGC > largeHeap*(100+smallHeapGCPercent)/100 {
		debug.SetGCPercent(largePercent)
		return
	}
	armHeapWatch()
}
