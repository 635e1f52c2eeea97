package sync

import (
	"context"
	"fmt"
	"github.com/bcmsync/bcmsync/internal/fpfuse"
	"math"
	"math/rand/v2"
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
		var p *hessianPrecond
		if r == 3 {
			p = newHessianPrecond(q, 3, sparse.BlockAMD(q, 0), 1e-9*q.MaxDiag())
			p.setRank(r)
			for i := 0; i < q.N; i++ {
				p.complete(p.works[0], p.w[i*9:(i+1)*9], x.Block(i))
			}
		}
		v, z := kernelVectors(m, 6, rng)
		cases := kernelCases(m, x, v, lam, z, p)
		compareKernels(t, fmt.Sprintf("r=%d", r), &kernels34, cases, v.Data, z)
	}

	res := compareSolves(t, &kernels34, g, Options{})
	if !res.Certified {
		t.Fatalf("solve: %s", res.Status)
	}
}

// sameBits reports whether got is want bit for bit where the compiler
// never fuses a multiply and an add (fpfuse), and to the last places
// elsewhere.
func sameBits(got, want float64) bool {
	if !fpfuse.Fuses {
		return math.Float64bits(got) == math.Float64bits(want)
	}
	return math.Abs(got-want) <= 1e-12*(1+math.Abs(want))
}

// compareKernels runs each case with the kernels that *on enables turned
// off and on, and fails unless both wrote the same bits: on the random
// vectors v and z as given, then on both filled with -0 (a sum of -0
// products must come out +0 as in the generic loops).
func compareKernels(t *testing.T, name string, on *bool, cases map[string]func() []float64, v, z []float64) {
	t.Helper()
	defer func() { *on = true }()
	for _, fill := range []string{"random", "-0"} {
		if fill == "-0" {
			for _, w := range [][]float64{v, z} {
				for k := range w {
					w[k] = math.Copysign(0, -1)
				}
			}
		}
		for op, run := range cases {
			*on = false
			want := run()
			*on = true
			got := run()
			for k := range want {
				if !sameBits(got[k], want[k]) {
					t.Fatalf("%s %s, %s vector: entry %d is %v unrolled, %v generic", name, op, fill, k, got[k], want[k])
				}
			}
		}
	}
}

// compareSolves solves g with the kernels that *on enables turned off and
// on, fails unless the two took the same path (the same records, F and
// inner iterations) to the same status, bounds and poses, and returns the
// solve with them on.
func compareSolves(t *testing.T, on *bool, g *posegraph.Graph, opts Options) *Result {
	t.Helper()
	defer func() { *on = true }()
	solve := func() *Result {
		res, err := Solve(context.Background(), g, opts)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	*on = false
	want := solve()
	*on = true
	got := solve()
	if got.Status != want.Status || len(got.History) != len(want.History) || !sameBits(got.Objective, want.Objective) || !sameBits(got.DualBound, want.DualBound) {
		t.Fatalf("solve: %s, F %v, dual %v in %d records unrolled; %s, F %v, dual %v in %d records generic",
			got.Status, got.Objective, got.DualBound, len(got.History), want.Status, want.Objective, want.DualBound, len(want.History))
	}
	for i := range got.History {
		if !sameBits(got.History[i].F, want.History[i].F) || got.History[i].Inner != want.History[i].Inner {
			t.Fatalf("solve: record %d is %+v unrolled, %+v generic", i, got.History[i], want.History[i])
		}
	}
	for i := range got.Poses {
		if !fpfuse.Fuses && got.Poses[i] != want.Poses[i] {
			t.Fatalf("solve: pose %d is %v unrolled, %v generic", i, got.Poses[i], want.Poses[i])
		}
	}
	return got
}

// kernelVectors returns a random tangent-sized block vector and k
// coordinates per pose, each with some entries -0.
func kernelVectors(m *manifold, k int, rng *rand.Rand) (*sparse.Blocks, []float64) {
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
	return v, z
}

// kernelCases lists the per-pose operations of the trust region at x, on
// v (and z, coordinates in p's basis), each returning what it wrote: the
// projection (also in place) and the Hessian product, and with p (nil:
// none) the gauge's sums and removal and p's coordinates and vectors.
func kernelCases(m *manifold, x, v *sparse.Blocks, lam, z []float64, p *hessianPrecond) map[string]func() []float64 {
	r := m.r
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
	if p == nil {
		return cases
	}
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
	return cases
}
