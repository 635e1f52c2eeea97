package cli

import (
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"sync/atomic"
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
	// distributedGCPercent is the percentage on a large heap of
	// distributed (the coordinator): it holds the graph, Q and its
	// boundary systems for the whole run and computes little (the agents
	// do the work), so the collector's headroom is mostly unused memory,
	// and the targets are the processes' peak RSS
	// (docs/distributed.md, "Memory").
	distributedGCPercent = 20
	// agentGCPercent is agent's: an agent holds its rows, factors and
	// trust-region vectors for the whole run (sync.BlockProblem keeps
	// them) and allocates little per update, and its resident set follows
	// its heap goal (its memory limit, memoryLimitFor), so the headroom is
	// the peak's margin over the live heap (the runs at 5, 10 and 20,
	// their peaks and CPU time: docs/distributed.md, "Memory").
	agentGCPercent = 5
	// hugeHeapGCPercent is the percentage once a collection finds more
	// than hugeHeap bytes live: a solve of that size holds its factors and
	// vectors to the end, and at the 10^6-pose lattice's 5 GB live even
	// 20% of headroom is a gigabyte of memory for no use. At 10 its peak
	// RSS was 5.92e9 bytes against 6.31e9 at 50, for 72 s against 67 s
	// (docs/tuning.md, "The peak memory, third pass").
	hugeHeapGCPercent = 10
)

// hugeHeap is the live heap past which hugeHeapGCPercent applies (a
// variable for the tests).
var hugeHeap uint64 = 1 << 30

// A process whose heap was reserved in huge pages (reserveHeap) collects
// less while its heap is small: at up to reservedHeapGCPercent, as long as
// the heap goal stays within the reservation. There fresh memory costs a
// page fault per 2 MB instead of per 4 KB, so the collections the default
// percentage runs to keep the heap small cost more than the memory they
// save: smallGrid3D, MIT, CSAIL, FR079 and intel run up to 3 collections
// fewer and 1.4 to 3.8% fewer instructions (docs/tuning.md). Beyond the
// reservation new memory would fault in 4 KB pages again, and peak memory
// would grow with no bound but the percentage, so once a collection sets a
// goal past it the percentage falls back to smallHeapGCPercent.
const (
	reservedHeapGCPercent = 400
	// maxRaisedReserve bounds the reservations that raise the
	// percentage: the small solves, whose collections are a visible part
	// of their time, and whose peak memory grows by at most this much.
	// At 32 MB it left out kitti_00 once the region was rounded up to
	// whole huge pages (35 MB asked, 36 marked), which then ran 6
	// collections instead of 2 and took 12 ms more; at 40 MB it also takes
	// manhattan (38 MB), 5 to 6 collections down to 2 and about 10 ms
	// less (docs/tuning.md, "A small process, fourth pass").
	maxRaisedReserve = 40 << 20
)

var (
	// policyOn is set by setGCPolicy: the process's collector follows
	// this policy (the command line's own process, with GOGC unset, and
	// not a test calling a command in-process); checkHeap stops watching
	// when it is cleared.
	policyOn atomic.Bool
	// smallPercent is the percentage in force while the live heap is
	// small; reserved the bytes reserved in huge pages (0: none, or the
	// goal went past them). checkHeap reads them on the finalizer
	// goroutine.
	smallPercent atomic.Int64
	reserved     atomic.Int64
	// largePercent is the percentage checkHeap switches to once the
	// live heap is large (setGCPolicy); large is set when it has.
	largePercent atomic.Int64
	large        atomic.Bool
	// limitsMemory is set for agent (setGCPolicy): on a large heap, each
	// check sets the memory limit after the heap goal (memoryLimitFor).
	limitsMemory atomic.Bool
)

// memoryLimitFor is an agent's memory limit after a collection that left
// ms: the heap goal and a tenth of it, plus the runtime's memory outside
// the heap. The runtime returns freed pages to the system in the
// background, slowly (about 1% of a core), so an agent whose rounds free a
// trust region's vectors and whose certificate lets factors go kept 10 to
// 40 MB of freed pages in its resident set, at 10^5 poses up to a fifth
// of its peak; near its limit the runtime returns them at once. The goal
// is the runtime's NextGC, the lower of the percentage's goal and the one
// the limit implies (the limit less the runtime's other memory,
// fragmentation and 3% of headroom). So after a phase that grows the live
// heap by more than that headroom, the limit rises only some 7% per
// collection, with collections close together: deliberately, as the
// agent's peak memory is the target. A limit from the
// percentage's goal ran faster and peaked some 7 MB higher per agent on
// the 46^3 lattice (docs/distributed.md, "Memory").
func memoryLimitFor(ms *runtime.MemStats) int64 {
	return int64(ms.NextGC + ms.NextGC/10 + (ms.Sys - ms.HeapSys))
}

// setGCPolicy sets the collector's percentage to smallHeapGCPercent and,
// unless command is one that keeps it (watchesHeap), watches the live heap
// after each collection, until it exceeds largeHeap; from then on the
// percentage is largeHeapGCPercent (distributedGCPercent for distributed,
// agentGCPercent for agent), and past hugeHeap live hugeHeapGCPercent.
func setGCPolicy(command string) {
	debug.SetGCPercent(smallHeapGCPercent)
	smallPercent.Store(smallHeapGCPercent)
	largePercent.Store(largeHeapGCPercent)
	large.Store(false)
	switch command {
	case "distributed":
		largePercent.Store(distributedGCPercent)
	case "agent":
		largePercent.Store(agentGCPercent)
	}
	limitsMemory.Store(command == "agent" && os.Getenv("GOMEMLIMIT") == "")
	if watchesHeap(command) {
		policyOn.Store(true)
		armHeapWatch()
	}
}

// heapReserved raises the percentage for a heap of which n bytes are
// reserved in huge pages, when the policy is on and the reservation is a
// small solve's (maxRaisedReserve): to the percentage whose minimum heap
// (4 MB times the percentage over 100) is the reservation, at most
// reservedHeapGCPercent. It is called before the solve's allocations,
// while the live heap is small.
func heapReserved(n int64) {
	if !policyOn.Load() || n > maxRaisedReserve {
		return
	}
	p := min(smallHeapGCPercent*n/(4<<20), reservedHeapGCPercent)
	if p <= smallHeapGCPercent {
		return
	}
	reserved.Store(n)
	smallPercent.Store(p)
	debug.SetGCPercent(int(p))
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
// then to hugeHeapGCPercent when it exceeds hugeHeap, and otherwise waits
// for the next collection.
//
// The live heap is read from the heap goal the collection set, which at
// a percentage p is (1 + p/100) times the live heap plus the roots (stacks
// and globals, well under a megabyte here). runtime/metrics reads the live
// heap itself, but importing it costs every process 0.49M instructions of
// package initialization (building its table of descriptions), a fifth of
// `bcmsync --version`; ReadMemStats stops the world for microseconds, once
// per collection while the heap is small. Under a raised percentage
// (heapReserved), a goal past the reservation restores smallHeapGCPercent.
func checkHeap(*heapSentinel) {
	if !policyOn.Load() {
		return
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if large.Load() {
		// The large heap's percentage is in force: past hugeHeap live,
		// the smaller one, and the watch ends.
		lp := uint64(largePercent.Load())
		if ms.NextGC > hugeHeap*(100+lp)/100 {
			debug.SetGCPercent(min(hugeHeapGCPercent, int(lp)))
			if limitsMemory.Load() {
				// The watch ends: a limit left behind would not follow the heap.
				debug.SetMemoryLimit(math.MaxInt64)
			}
			return
		}
		if limitsMemory.Load() {
			debug.SetMemoryLimit(memoryLimitFor(&ms))
		}
		armHeapWatch()
		return
	}
	p := uint64(smallPercent.Load())
	if ms.NextGC > largeHeap*(100+p)/100 {
		debug.SetGCPercent(int(largePercent.Load()))
		large.Store(true)
		armHeapWatch() // the next check, at the large percentage's goal, sets the limit
		return
	}
	if r := reserved.Load(); r > 0 && ms.NextGC > uint64(r) {
		reserved.Store(0)
		smallPercent.Store(smallHeapGCPercent)
		debug.SetGCPercent(smallHeapGCPercent)
	}
	armHeapWatch()
}
