package sync

import (
	"context"
	"fmt"
	"math"
	stdsync "sync"
	"testing"

	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
)

// TestForChunks: every pose is visited exactly once, in contiguous ranges,
// each with its own chunk index.
func TestForChunks(t *testing.T) {
	for _, n := range []int{0, 1, 100, parallelMinPoses - 1, parallelMinPoses, 3*parallelMinPoses + 7, 100000} {
		for _, threads := range []int{0, 1, 2, 3, 8} {
			seen := make([]int, n)
			var mu stdsync.Mutex
			calls := 0
			chunks := poseChunks(n, threads)
			forChunks(n, chunks, func(c, lo, hi int) {
				mu.Lock()
				calls++
				mu.Unlock()
				if c < 0 || c >= chunks {
					t.Errorf("chunk index %d of %d", c, chunks)
				}
				for i := lo; i < hi; i++ {
					seen[i]++
				}
			})
			for i, c := range seen {
				if c != 1 {
					t.Fatalf("n=%d threads=%d: pose %d visited %d times", n, threads, i, c)
				}
			}
			if calls != chunks || n < parallelMinPoses && calls != 1 {
				t.Errorf("n=%d threads=%d: %d calls for %d chunks", n, threads, calls, chunks)
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
	old := parallelMinPoses
	parallelMinPoses = 1024 // split this 2,744-pose graph
	defer func() { parallelMinPoses = old }()
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

// TestPerPoseLoopsDoNotAllocate: on one thread the trust region's per-pose
// loops, which run on every inner iteration, allocate nothing.
func TestPerPoseLoopsDoNotAllocate(t *testing.T) {
	g, _, err := datasets.Cube(6, 6, 6, datasets.Config{Kappa: 200, Tau: 100, LoopProb: 0.1, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	q := g.Laplacian(posegraph.Poses)
	d, r := g.D, g.D+1
	m := newManifold(q, d, r, 1)
	x := g.Lift(centered(g.Initial, d), posegraph.Poses, r)
	perturbRows(x, d, 1)
	nq, v, w, dst := m.newBlocks(), m.newBlocks(), m.newBlocks(), m.newBlocks()
	m.mulQ(nq, x)
	copyBlocks(v, nq)
	lam := make([]float64, q.N*d*d)
	gg := newGauge(r)
	gg.threads = 1
	gg.setPoint(x)
	hp := newHessianPrecond(q, d, sparse.BlockAMD(q, 0), 1e-9*q.MaxDiag())
	hp.threads = 1
	m.lambda(lam, x, nq)
	// coords and vector need the bases update computes; whether the
	// Hessian at this arbitrary point factors does not matter here.
	hp.update(x, lam)
	for name, f := range map[string]func(){
		"lambda":  func() { m.lambda(lam, x, nq) },
		"proj":    func() { m.proj(dst, x, v) },
		"hess":    func() { m.hess(dst, x, v, lam, w) },
		"retract": func() { m.retract(dst, x, v) },
		"remove":  func() { gg.remove(v) },
		"shift":   func() { m.removeShift(v) },
		"coords":  func() { hp.coords(hp.c, hp.sc, v) },
		"vector":  func() { hp.vector(dst, hp.c, hp.sz) },
	} {
		if a := testing.AllocsPerRun(20, f); a != 0 {
			t.Errorf("%s: %v allocations per call", name, a)
		}
	}
}

// TestReductionsSameBits: xxT and removeShift sum over the poses by fixed
// ranges (reduceChunk), so one, two or three goroutines give the same bits;
// on one range the sum is the plain serial one; and both agree with a
// straightforward sum to rounding.
func TestReductionsSameBits(t *testing.T) {
	const r, b, d = 4, 4, 3
	for _, n := range []int{1, 100, reduceChunk, reduceChunk + 1, 3*reduceChunk + 17} {
		a, c := sparse.NewBlocks(r, b, n), sparse.NewBlocks(r, b, n)
		for k := range a.Data {
			a.Data[k] = math.Sin(float64(k)*0.7) + 0.5
			c.Data[k] = math.Cos(float64(k)*1.3) - 0.25
		}
		// Straightforward sums, pose by pose.
		var want [r * r]float64
		var mean [r]float64
		for i := 0; i < n; i++ {
			ai, ci := a.Block(i), c.Block(i)
			for p := 0; p < r; p++ {
				for q := 0; q < r; q++ {
					for k := 0; k < b; k++ {
						want[p*r+q] += ai[p*b+k] * ci[q*b+k]
					}
				}
				mean[p] += ai[p*b+d] / float64(n)
			}
		}
		var first []float64
		var firstShift *sparse.Blocks
		for _, threads := range []int{1, 2, 3} {
			old := parallelMinPoses
			parallelMinPoses = 1024
			var parts []float64
			out := make([]float64, r*r)
			xxT(out, a, c, threads, &parts)
			m := &manifold{d: d, r: r, b: b, n: n, threads: threads, h: make([]float64, r*d)}
			v := sparse.NewBlocks(r, b, n)
			copy(v.Data, a.Data)
			m.removeShift(v)
			parallelMinPoses = old
			for k := range out {
				if math.Abs(out[k]-want[k]) > 1e-12*float64(n) {
					t.Errorf("n=%d threads=%d: xxT[%d] = %v, want %v", n, threads, k, out[k], want[k])
				}
			}
			for i := 0; i < n; i++ {
				for p := 0; p < r; p++ {
					if got, w := v.Block(i)[p*b+d], a.Block(i)[p*b+d]-mean[p]; math.Abs(got-w) > 1e-12 {
						t.Fatalf("n=%d threads=%d: pose %d row %d translation %v after removeShift, want %v", n, threads, i, p, got, w)
					}
				}
			}
			if first == nil {
				first, firstShift = out, v
				continue
			}
			for k := range out {
				if math.Float64bits(out[k]) != math.Float64bits(first[k]) {
					t.Errorf("n=%d: xxT[%d] = %v with %d threads, %v with 1", n, k, out[k], threads, first[k])
				}
			}
			for k := range v.Data {
				if math.Float64bits(v.Data[k]) != math.Float64bits(firstShift.Data[k]) {
					t.Fatalf("n=%d: removeShift entry %d = %v with %d threads, %v with 1", n, k, v.Data[k], threads, firstShift.Data[k])
				}
			}
		}
		if n <= reduceChunk {
			// One range: the serial sum, pose after pose.
			var serial [r * r]float64
			for i := 0; i < n; i++ {
				ai, ci := a.Block(i), c.Block(i)
				for p := 0; p < r; p++ {
					for q := 0; q < r; q++ {
						s := 0.0
						for k := 0; k < b; k++ {
							s += ai[p*b+k] * ci[q*b+k]
						}
						serial[p*r+q] += s
					}
				}
			}
			for k := range serial {
				if math.Float64bits(serial[k]) != math.Float64bits(first[k]) {
					t.Errorf("n=%d: xxT[%d] = %v, serial sum %v", n, k, first[k], serial[k])
				}
			}
		}
	}
}

// BenchmarkHorizontal measures the trust region's projection onto the
// horizontal space (removeShift and the gauge removal, run on every inner
// iteration) on the scaling grids' sizes, rank 3 with translations.
func BenchmarkHorizontal(b *testing.B) {
	const r, bs = 3, 4
	for _, n := range []int{10648, 97336, 1000000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			x, v := sparse.NewBlocks(r, bs, n), sparse.NewBlocks(r, bs, n)
			for k := range x.Data {
				x.Data[k] = math.Sin(float64(k) * 0.7)
				v.Data[k] = math.Cos(float64(k) * 1.3)
			}
			m := &manifold{d: r, r: r, b: bs, n: n, h: make([]float64, r*r)}
			gg := newGauge(r)
			gg.setPoint(x)
			for b.Loop() {
				m.removeShift(v)
				gg.remove(v)
			}
		})
	}
}
