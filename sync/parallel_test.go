package sync

import (
	"context"
	"math"
	stdsync "sync"
	"testing"

	"github.com/bcmsync/bcmsync/datasets"
)

// TestForPoses: every pose is visited exactly once, in contiguous ranges.
func TestForPoses(t *testing.T) {
	for _, n := range []int{0, 1, 100, parallelMinPoses - 1, parallelMinPoses, 3*parallelMinPoses + 7, 100000} {
		for _, threads := range []int{0, 1, 2, 3, 8} {
			seen := make([]int, n)
			var mu stdsync.Mutex
			calls := 0
			forPoses(n, threads, func(lo, hi int) {
				mu.Lock()
				calls++
				mu.Unlock()
				for i := lo; i < hi; i++ {
					seen[i]++
				}
			})
			for i, c := range seen {
				if c != 1 {
					t.Fatalf("n=%d threads=%d: pose %d visited %d times", n, threads, i, c)
				}
			}
			if n < parallelMinPoses && calls != 1 {
				t.Errorf("n=%d threads=%d: %d calls below the parallel threshold", n, threads, calls)
			}
		}
	}
}

// TestSolveThreadsSameBits: the per-pose loops of the trust region run on
// several goroutines above parallelMinPoses poses; each pose is written by
// one of them, so the solve gives the same bits with one thread or two.
func TestSolveThreadsSameBits(t *testing.T) {
	if testing.Short() {
		t.Skip("solves a 2,744-pose graph twice")
	}
	g, _, err := datasets.Cube(14, 14, 14, datasets.Config{Kappa: 200, Tau: 100, LoopProb: 0.05, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	if g.N() < parallelMinPoses {
		t.Fatalf("%d poses: below the parallel threshold %d", g.N(), parallelMinPoses)
	}
	var res [2]*Result
	for k, threads := range []int{1, 2} {
		res[k], err = Solve(context.Background(), g, Options{Threads: threads})
		if err != nil {
			t.Fatal(err)
		}
	}
	a, b := res[0], res[1]
	if !a.Certified || !b.Certified {
		t.Fatalf("status %s and %s, want certified", a.Status, b.Status)
	}
	if math.Float64bits(a.Objective) != math.Float64bits(b.Objective) || math.Float64bits(a.DualBound) != math.Float64bits(b.DualBound) {
		t.Errorf("F %.17g / %.17g, dual bound %.17g / %.17g with 1 and 2 threads", a.Objective, b.Objective, a.DualBound, b.DualBound)
	}
	for i := range a.Poses {
		if a.Poses[i] != b.Poses[i] {
			t.Fatalf("pose %d differs: %+v / %+v", i, a.Poses[i], b.Poses[i])
		}
	}
}
