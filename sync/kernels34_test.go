package sync

import (
	"context"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
	"github.com/bcmsync/bcmsync/rounding"
)

// TestKernels34 checks the unrolled SE(3) kernels bit for bit against the
// generic loops they replace: each per-pose operation of the trust region
// at random points, on random vectors with some entries -0 and on vectors
// of -0 only (a sum of -0 products must come out +0 as in the generic
// loops), at rank 3 and at rank 5 for the two that take any r; then a
// whole solve, which must take the same path to the same bits. Off amd64
// Go may fuse multiply-adds differently in the two, and the comparisons
// allow the last place (see kernels34.go).
func TestKernels34(t *testing.T) {
	same := func(got, want float64) bool {
		if runtime.GOARCH == "amd64" {
			return math.Float64bits(got) == math.Float64bits(want)
		}
		return math.Abs(got-want) <= 1e-12*(1+math.Abs(want))
	}
	defer func() { kernels34 = true }()
	g, _, err := datasets.Cube(6, 6, 6, datasets.Config{Kappa: 200, Tau: 100, LoopProb: 0.2, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	q := g.Laplacian(posegraph.Poses)
	rng := rand.New(rand.NewPCG(5, 6))
	for _, r := range []int{3, 5} {
		x := g.Lift(rounding.Random(g, 7), posegraph.Poses, r)
		if r > 3 {
			// Rotate the lifted blocks out of the first three rows.
			for k := range x.Data {
				x.Data[k] += 0.1 * rng.NormFloat64()
			}
			m := newManifold(q, 3, r, 1)
			m.retract(x, x, m.newBlocks())
		}
		m := newManifold(q, 3, r, 1)
		lam := multipliers(m, x)
		v, z := m.newBlocks(), make([]float64, m.n*6)
		for k := range v.Data {
			v.Data[k] = rng.NormFloat64()
			if k%5 == 0 {
				v.Data[k] = math.Copysign(0, -1)
			}
		}
		for k := range z {
			z[k] = math.Sin(float64(k))
			if k%3 == 0 {
				z[k] = math.Copysign(0, -1)
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
			"hess": func() []float64 {
				dst, work := m.newBlocks(), m.newBlocks()
				m.hess(dst, x, v, lam, work)
				return dst.Data
			},
		}
		if r == 3 {
			cases["xxT"] = func() []float64 {
				out := make([]float64, 9)
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
			p := newHessianPrecond(q, 3, sparse.BlockAMD(q, 0), 1e-9*q.MaxDiag())
			p.setRank(r)
			for i := 0; i < q.N; i++ {
				p.complete(p.works[0], p.w[i*9:(i+1)*9], x.Block(i))
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
				for k := range v.Data {
					v.Data[k] = math.Copysign(0, -1)
				}
				for k := range z {
					z[k] = math.Copysign(0, -1)
				}
			}
			for name, run := range cases {
				kernels34 = false
				want := run()
				kernels34 = true
				got := run()
				for k := range want {
					if !same(got[k], want[k]) {
						t.Fatalf("r=%d %s, %s vector: entry %d is %v unrolled, %v generic", r, name, fill, k, got[k], want[k])
					}
				}
			}
		}
	}

	solve := func() *Result {
		res, err := Solve(context.Background(), g, Options{})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	kernels34 = false
	want := solve()
	kernels34 = true
	got := solve()
	if !got.Certified || len(got.History) != len(want.History) || !same(got.Objective, want.Objective) {
		t.Fatalf("solve: %s, F %v in %d records unrolled; %s, F %v in %d records generic",
			got.Status, got.Objective, len(got.History), want.Status, want.Objective, len(want.History))
	}
	for i := range got.Poses {
		if runtime.GOARCH == "amd64" && got.Poses[i] != want.Poses[i] {
			t.Fatalf("solve: pose %d is %v unrolled, %v generic", i, got.Poses[i], want.Poses[i])
		}
	}
}
