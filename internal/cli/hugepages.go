package cli

import (
	"os"
	"sync/atomic"

	"github.com/bcmsync/bcmsync/internal/hugeheap"
)

// A solve's heap peaks at about 30 times its input file's size, in 2-D and
// 3-D graphs alike (from CSAIL at 128 KB to torus3D at 3.3 MB; the
// 97,336-pose lattice reaches 20 times). reserveHeap reserves twice that: a
// region reserved and not used costs only address space and some runtime
// bookkeeping, while heap growth past it faults in 4 KB pages again.
const heapPerInputByte = 64

// replayPerInputByte is replay's: its heap peaks at about 90 times the
// file (city10000: 157 MB for 1.75 MB), each step's factors and buffers
// garbage by the next, so its collector lets the heap grow to twice what a
// step keeps. Past a solve's 64 times, 13,600 to 18,600 of its page
// faults were 4 KB ones (50 steps of city10000); at 160 times 3,900 to
// 5,100, and the replay took 2.61 to 2.75 s instead of 2.83 to 2.96 s
// (quiet, 64 and 160 alternating, four runs each).
const replayPerInputByte = 160

// minReserve is the smallest reservation worth its collection: the
// runtime's minimum heap goal. A solve whose heap stays below it may never
// collect, and there the forced collection's own first-time costs (some
// 250 page faults, most of them the first blocks of the runtime's span
// sets, written by the first sweep) exceed what huge pages save; above it
// the solve collects anyway.
const minReserve = 4 << 20

// reservedOnce is set by the process's first reserveHeap.
var reservedOnce atomic.Bool

// reserveHeap asks for huge pages (internal/hugeheap) on the heap a solve
// of file will use, sized from the file's size; it does nothing for
// standard input or a small file. Call it before reading the file, so that
// the graph's own allocations get them too. The commands that solve the
// whole graph in their process call it (solve, replay, view); distributed's
// coordinator and agents do not: they hold a part, and their memory is the
// measured figure there (docs/distributed.md).
func reserveHeap(file string, perInputByte int64) {
	if file == stdio {
		return
	}
	// Once per process: a second reservation would find the first's
	// pages free, and the allocation would clear (touch) them all.
	if !reservedOnce.CompareAndSwap(false, true) {
		return
	}
	st, err := os.Stat(file)
	if err != nil || !st.Mode().IsRegular() {
		return
	}
	n := perInputByte * st.Size()
	if n < minReserve || n != int64(int(n)) {
		return
	}
	if start, end := hugeheap.Reserve(int(n)); end > start {
		heapReserved(int64(end - start))
	}
}
