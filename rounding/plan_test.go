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

// TestPlanRefactorFrom: a plan of a grown graph whose translation factor
// copies from the smaller graph's plan (RefactorFrom, given the plan's
// TranslationsOnly) recovers the
// translations to the bit of a plan that factors afresh, copies part of
// the factor in the kept order, and copies nothing from a released plan.
func TestPlanRefactorFrom(t *testing.T) {
	rng := rand.New(rand.NewPCG(45, 46))
	for _, d := range []int{2, 3} {
		g1, truth := randomGraph(rng, d, 120, 30, 0.1, 0.2)
		n0 := 90
		g0 := &posegraph.Graph{D: d, Source: "prefix", IDs: g1.IDs[:n0]}
		for _, e := range g1.Edges {
			if e.I < n0 && e.J < n0 {
				g0.Edges = append(g0.Edges, e)
			}
		}
		q0, q1 := g0.Laplacian(posegraph.Poses), g1.Laplacian(posegraph.Poses)
		sym0, err := sparse.AnalyzeBlockPattern(q0, sparse.BlockOrder(q0, 0))
		if err != nil {
			t.Fatal(err)
		}
		prev, parent := sym0.Tree()
		touched := make([]bool, g1.N())
		for _, e := range g1.Edges {
			if e.I >= n0 || e.J >= n0 {
				touched[e.I], touched[e.J] = true, true
			}
		}
		perm, _, err := sparse.ReorderBlocks(q1, slices.Clone(prev), slices.Clone(parent), touched)
		if err != nil {
			t.Fatal(err)
		}
		sym1, err := sparse.AnalyzeBlockPattern(q1, perm)
		if err != nil {
			t.Fatal(err)
		}
		order := func(s *sparse.BlockSymbolic) []int {
			o, _ := s.Tree()
			return slices.Clone(o)
		}
		poseMap := make([]int, n0)
		for i := range poseMap {
			poseMap[i] = i
		}
		for _, release := range []bool{false, true} {
			p0 := NewPlan(g0, order(sym0), sym0)
			p0.RefactorFrom(nil, nil) // kept for p1 to copy from
			if err := p0.RecoverTranslations(slices.Clone(truth[:n0])); err != nil {
				t.Fatal(err)
			}
			// The earlier plan as sync keeps it: its translation system
			// alone.
			kept := p0.TranslationsOnly()
			p1 := NewPlan(g1, order(sym1), sym1)
			p1.RefactorFrom(kept, poseMap)
			if release {
				kept.Release()
			}
			got := slices.Clone(truth)
			if err := p1.RecoverTranslations(got); err != nil {
				t.Fatal(err)
			}
			want := slices.Clone(truth)
			if err := NewPlan(g1, order(sym1), sym1).RecoverTranslations(want); err != nil {
				t.Fatal(err)
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("d=%d: pose %d: %v copied, %v afresh", d, i, got[i].T, want[i].T)
				}
			}
			u := p1.Reused()
			switch {
			case u.Supernodes == 0 || u.Flops == 0:
				t.Fatalf("d=%d: no counts: %+v", d, u)
			case release && u.Copied != 0:
				t.Fatalf("d=%d: %d supernodes copied from a released plan", d, u.Copied)
			case !release && (u.Copied == 0 || u.Copied == u.Supernodes):
				t.Fatalf("d=%d: %d of %d supernodes copied", d, u.Copied, u.Supernodes)
			}
		}
		// A plan no RefactorFrom named (a batch solve's) keeps neither its
		// system's matrix nor its factor's record of it: a later plan
		// copies nothing from it.
		p0 := NewPlan(g0, order(sym0), sym0)
		if err := p0.RecoverTranslations(slices.Clone(truth[:n0])); err != nil {
			t.Fatal(err)
		}
		if p0.ts.lap != nil {
			t.Fatalf("d=%d: an unasked plan keeps its system's matrix", d)
		}
		p1 := NewPlan(g1, order(sym1), sym1)
		p1.RefactorFrom(p0.TranslationsOnly(), poseMap)
		if err := p1.RecoverTranslations(slices.Clone(truth)); err != nil {
			t.Fatal(err)
		}
		if u := p1.Reused(); u.Copied != 0 {
			t.Fatalf("d=%d: %d supernodes copied from an unasked plan", d, u.Copied)
		}
	}
}
