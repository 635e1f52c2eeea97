package sync

import (
	"context"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
	"github.com/bcmsync/bcmsync/rounding"
)

// TestKernels23 checks the unrolled SE(2) kernels bit for bit against the
// generic loops they replace, as TestKernels34 does the SE(3) ones: each
// per-pose operation of the trust region at random points of ranks 2 and
// 3 (and 4 for the two that take any r), on random vectors with some
// entries -0 and on vectors of -0 only; then a whole solve of a graph
// whose relaxation is not tight, which escapes to rank 3 and refines at
// rank 2, and must take the same path to the same bits.
func TestKernels23(t *testing.T) {
	same := func(got, want float64) bool {
		if runtime.GOARCH == "amd64" {
			return math.Float64bits(got) == math.Float64bits(want)
		}
		return math.Abs(got-want) <= 1e-12*(1+math.Abs(want))
	}
	defer func() { kernels23 = true }()
	g := notTightGraph(t)
	q := g.Laplacian(posegraph.Poses)
	rng := rand.New(rand.NewPCG(5, 6))
	for _, r := range []int{2, 3, 4} {
		x := g.Lift(rounding.Random(g, 7), posegraph.Poses, r)
		m := newManifold(q, 2, r, 1)
		if r > 2 {
			// Rotate the lifted blocks out of the first two rows.
			for k := range x.Data {
				x.Data[k] += 0.1 * rng.NormFloat64()
			}
			m.retract(x, x, m.newBlocks())
		}
		lam := multipliers(m, x)
		k := 3
		if r == 3 {
			k = 6
		}
		v, z := m.newBlocks(), make([]float64, m.n*k)
		for i := range v.Data {
			v.Data[i] = rng.NormFloat64()
			if i%5 == 0 {
				v.Data[i] = math.Copysign(0, -1)
			}
		}
		for i := range z {
			z[i] = math.Sin(float64(i))
			if i%3 == 0 {
				z[i] = math.Copysign(0, -1)
			}
		}
		// Each case runs an operation with the kernels on and off and
		// returns what it wrote.
		cases := map[string]func() []float64{
			"proj": func() []float64 {
				dst := m.newBlocks()
				m.proj(dst, x, v)
				return dst.Data
			},
			"proj in place": func() []float64 {
				dst := m.newBlocks()
				copyBlocks(dst, v)
				m.proj(dst, x, dst)
				return dst.Data
			},
			"hess": func() []float64 {
				dst, work := m.newBlocks(), m.newBlocks()
				m.hess(dst, x, v, lam, work)
				return dst.Data
			},
		}
		if r <= 3 {
			cases["xxT"] = func() []float64 {
				out := make([]float64, r*r)
				var parts []float64
				xxT(out, v, x, 1, &parts)
				return out
			}
			cases["gauge"] = func() []float64 {
				gg := newGauge(r)
				gg.setPoint(x)
				dst := m.newBlocks()
				copyBlocks(dst, v)
				gg.remove(dst)
				return dst.Data
			}
			// The full form of the Hessian's basis at r = 3 (the split
			// form keeps the generic loops).
			p := newHessianPrecond(q, 2, sparse.BlockAMD(q, 0), 1e-9*q.MaxDiag())
			p.fullAt = 3
			p.setRank(r)
			if p.split || p.k != k {
				t.Fatalf("r=%d: basis of %d (split %v), want the full %d", r, p.k, p.split, k)
			}
			for i := 0; i < q.N; i++ {
				p.complete(p.works[0], p.w[i*r*r:(i+1)*r*r], x.Block(i))
			}
			cases["coords"] = func() []float64 {
				c := make([]float64, len(p.c))
				p.coords(c, nil, v)
				return c
			}
			cases["vector"] = func() []float64 {
				dst := m.newBlocks()
				p.vector(dst, z, nil)
				return dst.Data
			}
		}
		for _, fill := range []string{"random", "-0"} {
			if fill == "-0" {
				for i := range v.Data {
					v.Data[i] = math.Copysign(0, -1)
				}
				for i := range z {
					z[i] = math.Copysign(0, -1)
				}
			}
			for name, run := range cases {
				kernels23 = false
				want := run()
				kernels23 = true
				got := run()
				for i := range want {
					if !same(got[i], want[i]) {
						t.Fatalf("r=%d %s, %s vector: entry %d is %v unrolled, %v generic", r, name, fill, i, got[i], want[i])
					}
				}
			}
		}
	}

	solve := func() *Result {
		res, err := Solve(context.Background(), g, Options{Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	kernels23 = false
	want := solve()
	kernels23 = true
	got := solve()
	if got.Rank != 3 || got.Refine == nil {
		t.Fatalf("solve: rank %d, refinement %v: the graph should escape to rank 3 and refine at rank 2", got.Rank, got.Refine != nil)
	}
	if got.Status != want.Status || len(got.History) != len(want.History) || !same(got.Objective, want.Objective) || !same(got.DualBound, want.DualBound) {
		t.Fatalf("solve: %s, F %v, dual %v in %d records unrolled; %s, F %v, dual %v in %d records generic",
			got.Status, got.Objective, got.DualBound, len(got.History), want.Status, want.Objective, want.DualBound, len(want.History))
	}
	for i := range got.History {
		if !same(got.History[i].F, want.History[i].F) || got.History[i].Inner != want.History[i].Inner {
			t.Fatalf("solve: record %d is %+v unrolled, %+v generic", i, got.History[i], want.History[i])
		}
	}
	for i := range got.Poses {
		if runtime.GOARCH == "amd64" && got.Poses[i] != want.Poses[i] {
			t.Fatalf("solve: pose %d is %v unrolled, %v generic", i, got.Poses[i], want.Poses[i])
		}
	}
}
