package sync

import (
	"runtime"
	stdsync "sync"
)

// parallelMinPoses is the number of poses below which the per-pose loops
// run on the calling goroutine. A per-pose kernel costs 20 to 500 ns, and
// handing half a loop to another core costs the wake-up of an idle one,
// tens of microseconds on this kind of VM; paired runs of the benchmark
// graphs (up to 10^4 poses) showed no gain from splitting, so only larger
// graphs split. A variable so that tests can split small graphs.
var parallelMinPoses = 16384

// poseChunks is the number of contiguous ranges a loop over n poses splits
// into with threads threads (0: GOMAXPROCS): 1 below parallelMinPoses.
func poseChunks(n, threads int) int {
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	if threads == 1 || n < parallelMinPoses {
		return 1
	}
	return min(threads, n/(parallelMinPoses/2))
}

// forChunks calls body(t, lo, hi) on chunks contiguous ranges covering
// [0, n), concurrently; t < chunks indexes per-goroutine scratch. body must
// write only what belongs to the poses of its range: then the result does
// not depend on the split, and is bit for bit that of one call body(0, 0,
// n).
//
// The per-pose loops call their kernel directly when poseChunks is 1 and
// come here only otherwise: a function literal handed to goroutines is
// allocated where it is created, and the loops run on every inner
// iteration of the trust region.
func forChunks(n, chunks int, body func(t, lo, hi int)) {
	if chunks <= 1 {
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

// reduceChunk is the number of poses whose terms a parallel sum over poses
// (xxT, removeShift) adds up on their own. The partial sums of consecutive
// ranges of reduceChunk poses are then added in range order, so the result
// has the same bits whatever the number of goroutines; below reduceChunk
// poses there is one range, and the sum is the plain serial one.
const reduceChunk = 8192

// reduceRanges returns the number of ranges of reduceChunk poses that cover
// n poses (at least 1).
func reduceRanges(n int) int { return max(1, (n+reduceChunk-1)/reduceChunk) }

// sumRanges sets out[k] to the sum over ranges c of parts[c*w+k], in range
// order (w = len(out)).
func sumRanges(out, parts []float64, ranges int) {
	w := len(out)
	copy(out, parts[:w])
	for c := 1; c < ranges; c++ {
		for k, v := range parts[c*w : (c+1)*w] {
			out[k] += v
		}
	}
}

// growZero returns buf resized to n and zeroed, reusing its storage.
func growZero(buf []float64, n int) []float64 {
	if cap(buf) < n {
		return make([]float64, n)
	}
	buf = buf[:n]
	clear(buf)
	return buf
}
