package bcm

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
)

// TestTranslationStep: after the exact translation step the translation
// part of the Euclidean gradient, N_p, vanishes at every pose (so p is the
// joint minimizer given Y), F does not increase, the Y blocks and the
// anchored translations are unchanged; on a graph of two components.
func TestTranslationStep(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 12))
	for d := 2; d <= 3; d++ {
		g1 := randomGraph(rng, d, 30, 20, 0.2)
		g2 := randomGraph(rng, d, 20, 10, 0.2)
		g := &posegraph.Graph{D: d, IDs: make([]int, 50)}
		for i := range g.IDs {
			g.IDs[i] = i
		}
		g.Edges = append(g.Edges, g1.Edges...)
		for _, e := range g2.Edges {
			e.I, e.J = e.I+30, e.J+30
			g.Edges = append(g.Edges, e)
		}
		q := g.Laplacian(posegraph.Poses)
		for _, r := range []int{d, 5} {
			x := sparse.NewBlocks(r, q.B, q.N)
			RandomStiefel(x, d, 3)
			before := append([]float64(nil), x.Data...)
			f0 := denseCost(q, x)
			ts, err := newTransSolver(q, d)
			if err != nil {
				t.Fatal(err)
			}
			n := sparse.NewBlocks(r, q.B, q.N)
			q.MulBlocks(n, x)
			ts.step(x, n, d)
			f1 := denseCost(q, x)
			if f1 > f0*(1+1e-12) {
				t.Fatalf("d=%d r=%d: F rose from %v to %v", d, r, f0, f1)
			}
			q.MulBlocks(n, x)
			scale := 0.0
			for _, v := range n.Data {
				scale = math.Max(scale, math.Abs(v))
			}
			for i := 0; i < q.N; i++ {
				for a := 0; a < r; a++ {
					k := i*r*q.B + a*q.B
					for c := 0; c < d; c++ {
						if x.Data[k+c] != before[k+c] {
							t.Fatalf("Y block %d changed", i)
						}
					}
					if (i == 0 || i == 30) && x.Data[k+d] != before[k+d] {
						t.Fatalf("anchored translation of pose %d changed", i)
					}
					if v := n.Data[k+d]; math.Abs(v) > 1e-10*scale {
						t.Fatalf("d=%d r=%d: N_p of pose %d row %d = %v after the step", d, r, i, a, v)
					}
				}
			}
		}
	}
}

// TestSolveTranslations: with the translation step F still never increases
// over sweeps; and from a point whose rotations are nearly optimal but whose
// translations are scrambled, it recovers in a few sweeps what plain sweeps,
// diffusing translations along a long chain, do not.
func TestSolveTranslations(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 13))
	g := randomGraph(rng, 2, 400, 4, 0.05)
	q := g.Laplacian(posegraph.Poses)
	s := New(q, 2, posegraph.Poses)
	start := sparse.NewBlocks(3, q.B, q.N)
	RandomStiefel(start, 2, 5)
	if _, err := s.Solve(context.Background(), start, Options{SolveTranslations: true, MaxSweeps: 3000}); err != nil {
		t.Fatal(err)
	}
	ref := s.Cost(start)
	for i := 0; i < q.N; i++ {
		for a := 0; a < 3; a++ {
			start.Data[i*3*q.B+a*q.B+2] = 10 * rng.NormFloat64()
		}
	}
	final := map[bool]float64{}
	for _, on := range []bool{false, true} {
		x := &sparse.Blocks{R: 3, B: q.B, N: q.N, Data: append([]float64(nil), start.Data...)}
		res, err := s.Solve(context.Background(), x, Options{Rule: Cyclic, SolveTranslations: on, MaxSweeps: 20})
		if err != nil {
			t.Fatal(err)
		}
		for k := 1; k < len(res.History); k++ {
			if a, b := res.History[k-1].F, res.History[k].F; b > a+1e-12*math.Abs(a) {
				t.Fatalf("translations %v: F rose from %v to %v", on, a, b)
			}
		}
		final[on] = res.F
		t.Logf("translation step %v: F %.6g -> %.6g after %d sweeps (before scrambling %.6g)", on, res.History[0].F, res.F, res.Sweeps, ref)
	}
	if final[true] > 1.01*ref || final[false] < 2*ref {
		t.Fatalf("translation step: F %v, plain sweeps %v, reference %v", final[true], final[false], ref)
	}
}

// denseTranslations is a TranslationSolver for tests: the anchored
// translation Laplacian of Q, factored densely by gonum.
type denseTranslations struct {
	anchor int
	chol   mat.Cholesky
	calls  int
}

func newDenseTranslations(t *testing.T, q *sparse.BlockSym, d, anchor int) *denseTranslations {
	n, b := q.N, q.B
	l := mat.NewSymDense(n-1, nil)
	red := func(i int) int {
		if i > anchor {
			return i - 1
		}
		return i
	}
	for i := 0; i < n; i++ {
		for pos := q.RowPtr[i]; pos < q.RowPtr[i+1]; pos++ {
			if j := q.ColIdx[pos]; i != anchor && j != anchor && j >= i {
				l.SetSym(red(i), red(j), q.Block(pos)[d*b+d])
			}
		}
	}
	dt := &denseTranslations{anchor: anchor}
	if !dt.chol.Factorize(l) {
		t.Fatal("translation Laplacian not positive definite")
	}
	return dt
}

func (dt *denseTranslations) Anchor() int { return dt.anchor }

func (dt *denseTranslations) SolveTranslations(x, rhs []float64) error {
	dt.calls++
	var v mat.VecDense
	if err := dt.chol.SolveVecTo(&v, mat.NewVecDense(len(rhs), rhs)); err != nil {
		return err
	}
	copy(x, v.RawVector().Data)
	return nil
}

// TestTranslationSolver: a caller's solver of the translation system (any
// anchor) gives the steps of Solve's own factorization, up to rounding: the
// same F after the same sweeps, never increasing.
func TestTranslationSolver(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 17))
	for _, d := range []int{2, 3} {
		g := randomGraph(rng, d, 60, 20, 0.2)
		q := g.Laplacian(posegraph.Poses)
		start := sparse.NewBlocks(d+1, q.B, q.N)
		RandomStiefel(start, d, 9)
		own := New(q, d, posegraph.Poses)
		x0 := &sparse.Blocks{R: start.R, B: q.B, N: q.N, Data: append([]float64(nil), start.Data...)}
		want, err := own.Solve(context.Background(), x0, Options{Rule: Cyclic, SolveTranslations: true, MaxSweeps: 6})
		if err != nil {
			t.Fatal(err)
		}
		for _, anchor := range []int{0, 7, q.N - 1} {
			dt := newDenseTranslations(t, q, d, anchor)
			x := &sparse.Blocks{R: start.R, B: q.B, N: q.N, Data: append([]float64(nil), start.Data...)}
			got, err := New(q, d, posegraph.Poses).Solve(context.Background(), x, Options{Rule: Cyclic, SolveTranslations: true, MaxSweeps: 6, Translations: dt})
			if err != nil {
				t.Fatal(err)
			}
			if dt.calls != 6*start.R {
				t.Errorf("d %d anchor %d: %d solves, want %d (one per row and sweep)", d, anchor, dt.calls, 6*start.R)
			}
			for k := range want.History {
				a, b := want.History[k].F, got.History[k].F
				if math.Abs(a-b) > 1e-9*math.Abs(a) {
					t.Fatalf("d %d anchor %d sweep %d: F %v with the caller's solver, %v with Solve's own", d, anchor, k, b, a)
				}
				if k > 0 && b > got.History[k-1].F*(1+1e-12) {
					t.Fatalf("d %d anchor %d: F rose at sweep %d", d, anchor, k)
				}
			}
		}
	}
}

// TestStepTranslations: the exported step returns F's decrease, equal to
// the drop of the dense objective, leaves N_p zero (a second step changes
// nothing), and does nothing for rotations.
func TestStepTranslations(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 13))
	for d := 2; d <= 3; d++ {
		g := randomGraph(rng, d, 40, 25, 0.2)
		q := g.Laplacian(posegraph.Poses)
		s := New(q, d, posegraph.Poses)
		for _, r := range []int{d, d + 2} {
			x := sparse.NewBlocks(r, q.B, q.N)
			RandomStiefel(x, d, 5)
			n := sparse.NewBlocks(r, q.B, q.N)
			q.MulBlocks(n, x)
			f0 := denseCost(q, x)
			dec, err := s.StepTranslations(x, n)
			if err != nil {
				t.Fatal(err)
			}
			f1 := denseCost(q, x)
			if !(dec >= 0) || math.Abs((f0-f1)-dec) > 1e-9*f0 {
				t.Errorf("d=%d r=%d: decrease %g, F dropped by %g", d, r, dec, f0-f1)
			}
			q.MulBlocks(n, x)
			if again, _ := s.StepTranslations(x, n); again > 1e-9*f1 {
				t.Errorf("d=%d r=%d: a second step still lowers F by %g", d, r, again)
			}
		}
		rot := New(g.Laplacian(posegraph.Rotations), d, posegraph.Rotations)
		x := sparse.NewBlocks(d, d, g.N())
		RandomStiefel(x, d, 1)
		if dec, err := rot.StepTranslations(x, x); dec != 0 || err != nil {
			t.Errorf("d=%d rotations: decrease %g, %v", d, dec, err)
		}
	}
}

// TestTranslations: the step made for one call from Q's rows a chunk at a
// time (NewTranslationsByRows) moves x and
// reports F's decrease as StepTranslations does, to the bit, on graphs of
// more poses than a chunk, with several components.
func TestTranslations(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 3))
	bits := func(v []float64) []uint64 {
		u := make([]uint64, len(v))
		for k, x := range v {
			u[k] = math.Float64bits(x)
		}
		return u
	}
	for d := 2; d <= 3; d++ {
		for _, n := range []int{40, 9000} { // 9000: more poses than a chunk of rows
			g := randomGraph(rng, d, n, n/2, 0.2)
			if n > 40 {
				// A second component: the last ten poses cut off.
				keep := g.Edges[:0]
				for _, e := range g.Edges {
					if (e.I >= n-10) == (e.J >= n-10) {
						keep = append(keep, e)
					}
				}
				g.Edges = keep
			}
			q := g.Laplacian(posegraph.Poses)
			rows := g.NewLaplacianRows(posegraph.Poses)
			r := d + 1
			x := sparse.NewBlocks(r, q.B, q.N)
			RandomStiefel(x, d, 7)
			for k := range x.Data {
				if k%q.B == d {
					x.Data[k] = rng.NormFloat64()
				}
			}
			nq := sparse.NewBlocks(r, q.B, q.N)
			q.MulBlocks(nq, x)
			want := sparse.NewBlocks(r, q.B, q.N)
			copy(want.Data, x.Data)
			wdec, err := New(q, d, posegraph.Poses).StepTranslations(want, nq)
			if err != nil {
				t.Fatal(err)
			}
			ts, err := NewTranslationsByRows(q.N, d, rows.Chunks)
			if err != nil {
				t.Fatal(err)
			}
			got := sparse.NewBlocks(r, q.B, q.N)
			copy(got.Data, x.Data)
			dec, err := ts.Step(got, nq)
			if err != nil {
				t.Fatal(err)
			}
			if math.Float64bits(dec) != math.Float64bits(wdec) || !slices.Equal(bits(got.Data), bits(want.Data)) {
				t.Errorf("d %d n %d: decrease %v, StepTranslations %v, or another point", d, n, dec, wdec)
			}
		}
	}
}
