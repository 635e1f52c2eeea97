package rounding

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
)

// TestPlan: a plan gives the bits of ChordalOrdered, ChordalRotationsOrdered
// and RecoverTranslationsOrdered with its order, with and without the
// shared block analysis and however often its translation system serves
// (before and after Release), and solves that system exactly for bcm.
func TestPlan(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 44))
	for _, d := range []int{2, 3} {
		for _, anchor := range []int{0, 17} {
			n := 60
			g, _ := randomGraph(rng, d, n, 80, 0.1, 0.2)
			if anchor != 0 {
				g.Fixed = []int{anchor}
			}
			order := rng.Perm(n)
			q := g.Laplacian(posegraph.Poses)
			sym, err := sparse.AnalyzeBlockPattern(q, blockPerm(order, q.B))
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range []*sparse.BlockSymbolic{sym, nil} {
				plan := NewPlan(g, order, s)
				want, err := ChordalOrdered(g, order)
				if err != nil {
					t.Fatal(err)
				}
				got, err := plan.Chordal()
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, want) {
					t.Fatalf("d=%d anchor %d: Plan.Chordal differs from ChordalOrdered", d, anchor)
				}
				wantR, _ := ChordalRotationsOrdered(g, order)
				gotR, err := plan.ChordalRotations()
				if err != nil || !slices.Equal(gotR, wantR) {
					t.Fatalf("d=%d anchor %d: Plan.ChordalRotations differs (%v)", d, anchor, err)
				}
				for k := range 2 {
					if k == 1 {
						plan.Release() // the next use factors again
					}
					a := make([]posegraph.Pose, n)
					for i := range a {
						a[i].R = RandomRotation(rng, d)
						a[i].T = [3]float64{rng.NormFloat64(), rng.NormFloat64(), 0}
					}
					b := slices.Clone(a)
					if err := RecoverTranslationsOrdered(g, a, order); err != nil {
						t.Fatal(err)
					}
					if err := plan.RecoverTranslations(b); err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(a, b) {
						t.Fatalf("d=%d anchor %d: Plan.RecoverTranslations differs", d, anchor)
					}
				}
				// The system bcm solves: L x = rhs without the anchor.
				if plan.Anchor() != anchor {
					t.Fatalf("anchor %d, want %d", plan.Anchor(), anchor)
				}
				rhs := make([]float64, n-1)
				for i := range rhs {
					rhs[i] = rng.NormFloat64()
				}
				x := make([]float64, n-1)
				if err := plan.SolveTranslations(x, rhs); err != nil {
					t.Fatal(err)
				}
				lap := laplacianCSC(g, anchor)
				res := slices.Clone(rhs)
				for j := 0; j < lap.N; j++ {
					for p := lap.ColPtr[j]; p < lap.ColPtr[j+1]; p++ {
						i, v := lap.RowIdx[p], lap.Val[p]
						res[i] -= v * x[j]
						if i != j {
							res[j] -= v * x[i]
						}
					}
				}
				for i, r := range res {
					if math.Abs(r) > 1e-9*(1+math.Abs(rhs[i])) {
						t.Fatalf("d=%d anchor %d: residual %g at %d", d, anchor, r, i)
					}
				}
			}
		}
	}
}

// TestGroundedSystem: the grounded translation system (all poses, the
// anchor's unknown decoupled, on Q's pattern) gives the anchored system's
// translations (RecoverTranslations, the anchor's row and column removed,
// its own AMD order) to 1e-12 relative, with the anchor first, in the
// middle and last, and with a parallel edge and an edge of zero tau in
// the graph.
func TestGroundedSystem(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, d := range []int{2, 3} {
		n := 50
		g, _ := randomGraph(rng, d, n, 60, 0.1, 0.2)
		par := g.Edges[7]
		zero := g.Edges[11]
		zero.I, zero.J = 4, 40
		zero.Tau = 0
		g.Edges = append(g.Edges, par, zero)
		for _, anchor := range []int{0, n / 2, n - 1} {
			g.Fixed = []int{anchor}
			order := rng.Perm(n)
			q := g.Laplacian(posegraph.Poses)
			sym, err := sparse.AnalyzeBlockPattern(q, blockPerm(order, q.B))
			if err != nil {
				t.Fatal(err)
			}
			a := make([]posegraph.Pose, n)
			for i := range a {
				a[i].R = RandomRotation(rng, d)
				a[i].T = [3]float64{rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()}
				if d == 2 {
					a[i].T[2] = 0
				}
			}
			if groundedOn(g, sym) == nil {
				t.Fatalf("d=%d anchor %d: the translation system does not take Q's analysis", d, anchor)
			}
			b := slices.Clone(a)
			if err := RecoverTranslations(g, a); err != nil {
				t.Fatal(err)
			}
			if err := NewPlan(g, order, sym).RecoverTranslations(b); err != nil {
				t.Fatal(err)
			}
			scale := 0.0
			for i := range a {
				for k := 0; k < d; k++ {
					scale = max(scale, math.Abs(a[i].T[k]))
				}
			}
			for i := range a {
				for k := 0; k < d; k++ {
					if diff := math.Abs(a[i].T[k] - b[i].T[k]); diff > 1e-12*scale {
						t.Fatalf("d=%d anchor %d: pose %d coordinate %d: grounded %g, anchored %g", d, anchor, i, k, b[i].T[k], a[i].T[k])
					}
				}
			}
			if b[anchor].T != a[anchor].T {
				t.Fatalf("d=%d anchor %d: the anchor moved", d, anchor)
			}
		}
	}
}
