package sync

import (
	"runtime"
	stdsync "sync"
)

// parallelMinPoses is the number of poses below which forPoses runs on the
// calling goroutine: a per-pose kernel here costs 50 to 500 ns, and
// starting goroutines costs a few microseconds.
const parallelMinPoses = 2048

// forPoses calls body on contiguous ranges covering [0, n), one per thread
// (threads <= 0: GOMAXPROCS), concurrently. body must write only what
// belongs to the poses of its range: then the result does not depend on
// the split, and is bit for bit that of one call body(0, n).
func forPoses(n, threads int, body func(lo, hi int)) {
	forPosesChunks(n, threads, func(_, lo, hi int) { body(lo, hi) })
}

// poseChunks is the number of ranges forPoses splits n poses into.
func poseChunks(n, threads int) int {
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	if threads == 1 || n < parallelMinPoses {
		return 1
	}
	return min(threads, n/(parallelMinPoses/2))
}

// forPosesChunks is forPoses telling body the index t < poseChunks(n,
// threads) of its range, for per-goroutine scratch.
func forPosesChunks(n, threads int, body func(t, lo, hi int)) {
	chunks := poseChunks(n, threads)
	if chunks == 1 {
		body(0, 0, n)
		return
	}
	var wg stdsync.WaitGroup
	for t := 1; t < chunks; t++ {
		wg.Add(1)
		go func(t int) {
			defer wg.Done()
			body(t, n*t/chunks, n*(t+1)/chunks)
		}(t)
	}
	body(0, 0, n/chunks)
	wg.Wait()
}
