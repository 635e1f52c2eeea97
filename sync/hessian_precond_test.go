package sync

import (
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/bcmsync/bcmsync/bcm"
	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
)

// newtonCase is one test configuration: a graph, a rank and a point.
type newtonCase struct {
	name string
	q    *sparse.BlockSym
	d, r int
	x    *sparse.Blocks
	// critical: x is (close to) a second-order critical point whose S is
	// positive semidefinite, so the Hessian is positive definite on the
	// horizontal space.
	critical bool
}

// newtonCases returns random points and near-critical points at ranks
// d..d+3 for SE(d) and SO(d), d = 2, 3.
func newtonCases(t *testing.T) []newtonCase {
	t.Helper()
	var cases []newtonCase
	for _, prob := range []posegraph.Problem{posegraph.Poses, posegraph.Rotations} {
		for _, d := range []int{2, 3} {
			g, truth := noisyGraph(d, 9, 4, 0.05, 0.05, uint64(10+d))
			q := g.Laplacian(prob)
			// The rank-d minimum, by the trust region from the truth.
			xd := g.Lift(centered(truth, d), prob, d)
			m := newManifold(q, d, d, 1)
			hp := newHessianPrecond(q, d, nil, 1e-12*q.MaxDiag())
			rr, err := rtr(context.Background(), m, xd, nil, hp, rtrOptions{GradTol: 1e-12, MaxIter: 100})
			if err != nil {
				t.Fatal(err)
			}
			if rr.RelGrad > 1e-10 {
				t.Fatalf("%v d=%d: no critical point (relative gradient %g, %+v)", prob, d, rr.RelGrad, rr)
			}
			rng := rand.New(rand.NewPCG(uint64(d), 5))
			for r := d; r <= d+3; r++ {
				x := sparse.NewBlocks(r, q.B, q.N)
				bcm.RandomStiefel(x, d, uint64(100*d+r))
				cases = append(cases, newtonCase{fmt.Sprintf("%v/d=%d/r=%d/random", prob, d, r), q, d, r, x, false})
				// [X_d; 0] rotated by a random orthogonal O: still critical,
				// and no block has structure the completion could rely on.
				g := mat.NewDense(r, r, nil)
				for a := 0; a < r; a++ {
					for c := 0; c < r; c++ {
						g.Set(a, c, rng.NormFloat64())
					}
				}
				var qr mat.QR
				qr.Factorize(g)
				var od mat.Dense
				qr.QTo(&od)
				o := od.RawMatrix().Data
				xc := sparse.NewBlocks(r, q.B, q.N)
				for i := 0; i < q.N; i++ {
					src, dst := xd.Block(i), xc.Block(i)
					for a := 0; a < r; a++ {
						for c := 0; c < q.B; c++ {
							s := 0.0
							for t := 0; t < d; t++ {
								s += o[a*r+t] * src[t*q.B+c]
							}
							dst[a*q.B+c] = s
						}
					}
				}
				cases = append(cases, newtonCase{fmt.Sprintf("%v/d=%d/r=%d/critical", prob, d, r), q, d, r, xc, true})
				// Away from the minimum the Hessian is indefinite and update
				// shifts it; a random tangent step of size delta per block.
				for _, delta := range []float64{0.03, 0.3} {
					mr := newManifold(q, d, r, 1)
					v, xp := mr.newBlocks(), mr.newBlocks()
					for k := range v.Data {
						v.Data[k] = delta * rng.NormFloat64()
					}
					mr.proj(v, xc, v)
					mr.retract(xp, xc, v)
					cases = append(cases, newtonCase{fmt.Sprintf("%v/d=%d/r=%d/perturbed %g", prob, d, r, delta), q, d, r, xp, false})
				}
			}
		}
	}
	return cases
}

// refBasis lists the basis matrices A_k (r x b) in the documented order,
// written out independently of the implementation.
func refBasis(d, r, b int) [][]float64 { return refBasisRows(d, r, r, b) }

// refBasisRows is refBasis with only the basis matrices supported on rows
// 0..rows-1 (rows = d: the span part of the split form).
func refBasisRows(d, r, rows, b int) [][]float64 {
	var out [][]float64
	unit := func(entries ...[3]float64) {
		a := make([]float64, r*b)
		for _, e := range entries {
			a[int(e[0])*b+int(e[1])] = e[2]
		}
		out = append(out, a)
	}
	s := math.Sqrt(0.5)
	for a := 0; a < d; a++ {
		for c := a + 1; c < d; c++ {
			unit([3]float64{float64(a), float64(c), s}, [3]float64{float64(c), float64(a), -s})
		}
	}
	for a := d; a < rows; a++ {
		for c := 0; c < d; c++ {
			unit([3]float64{float64(a), float64(c), 1})
		}
	}
	if b > d {
		for a := 0; a < rows; a++ {
			unit([3]float64{float64(a), float64(d), 1})
		}
	}
	return out
}

// explicitBasis returns the tangent vectors V_{i,k} = W_i A_k (zero outside
// block i) in coordinate order i*k + l, with W_i taken from p.
func explicitBasis(p *hessianPrecond, x *sparse.Blocks) []*sparse.Blocks {
	r, b := x.R, x.B
	as := refBasis(p.d, r, b)
	if p.split {
		as = refBasisRows(p.d, r, p.d, b)
	}
	var vs []*sparse.Blocks
	for i := 0; i < x.N; i++ {
		w := p.w[i*r*r : (i+1)*r*r]
		for _, a := range as {
			v := sparse.NewBlocks(r, b, x.N)
			vi := v.Block(i)
			for t := 0; t < r; t++ {
				for c := 0; c < b; c++ {
					s := 0.0
					for u := 0; u < r; u++ {
						s += w[t*r+u] * a[u*b+c]
					}
					vi[t*b+c] = s
				}
			}
			vs = append(vs, v)
		}
	}
	return vs
}

func multipliers(m *manifold, x *sparse.Blocks) []float64 {
	nq := m.newBlocks()
	m.mulQ(nq, x)
	lam := make([]float64, m.n*m.d*m.d)
	m.lambda(lam, x, nq)
	return lam
}

func maxAbs(a []float64) float64 {
	s := 0.0
	for _, v := range a {
		s = math.Max(s, math.Abs(v))
	}
	return s
}

// TestHessianPrecond checks, at every rank d..d+3, that W_i completes Y_i
// to an orthogonal matrix, that the basis is orthonormal and tangent, that
// the assembled H is the matrix of <V_k, hess V_l> computed by the manifold,
// and that apply solves with H (plus the reported shift).
func TestHessianPrecond(t *testing.T) {
	cases := newtonCases(t)
	// One preconditioner per (problem, d), reused across ranks and points as
	// the solver reuses it across the staircase, rank changes included.
	pre := map[*sparse.BlockSym]*hessianPrecond{}
	raisedCases := 0 // points whose factor raised pivots (modified factorization)
	defer func() {
		if raisedCases == 0 {
			t.Error("no case exercised the modified factorization")
		}
	}()
	for _, tc := range cases {
		q, d, r, x := tc.q, tc.d, tc.r, tc.x
		p := pre[q]
		if p == nil {
			p = newHessianPrecond(q, d, sparse.BlockAMD(q, 0), 1e-12*q.MaxDiag())
			p.exact = true
			pre[q] = p
		}
		m := newManifold(q, d, r, 1)
		lam := multipliers(m, x)
		ok := p.update(x, lam)
		if p.r != r {
			t.Fatalf("%s: preconditioner at rank %d", tc.name, p.r)
		}

		// W_i is orthogonal and starts with Y_i.
		for i := 0; i < q.N; i++ {
			w, xi := p.w[i*r*r:(i+1)*r*r], x.Block(i)
			for a := 0; a < r; a++ {
				for c := 0; c < r; c++ {
					s := 0.0
					for u := 0; u < r; u++ {
						s += w[u*r+a] * w[u*r+c]
					}
					if a == c {
						s--
					}
					if math.Abs(s) > 1e-13 {
						t.Fatalf("%s: W_%d^T W_%d - I has entry %g at (%d, %d)", tc.name, i, i, s, a, c)
					}
				}
				for c := 0; c < d; c++ {
					if w[a*r+c] != xi[a*q.B+c] {
						t.Fatalf("%s: W_%d column %d is not Y's", tc.name, i, c)
					}
				}
			}
		}

		// The basis is orthonormal and tangent.
		vs := explicitBasis(p, x)
		n := len(vs)
		if n != q.N*p.k {
			t.Fatalf("%s: %d basis vectors, want %d", tc.name, n, q.N*p.k)
		}
		pv := m.newBlocks()
		for k, v := range vs {
			m.proj(pv, x, v)
			for e := range pv.Data {
				if math.Abs(pv.Data[e]-v.Data[e]) > 1e-13 {
					t.Fatalf("%s: basis vector %d is not tangent", tc.name, k)
				}
			}
			for l := k; l < n; l++ {
				want := 0.0
				if k == l {
					want = 1
				}
				if got := inner(v, vs[l]); math.Abs(got-want) > 1e-13 {
					t.Fatalf("%s: <V_%d, V_%d> = %g", tc.name, k, l, got)
				}
			}
		}

		// H is the matrix of the Riemannian Hessian in the basis.
		ref := make([]float64, n*n)
		hv, work := m.newBlocks(), m.newBlocks()
		for l, v := range vs {
			m.hess(hv, x, v, lam, work)
			for k, u := range vs {
				ref[k*n+l] = inner(u, hv)
			}
		}
		got := p.h.Dense()
		tol := 1e-9 * maxAbs(ref)
		for e := range ref {
			if math.Abs(got[e]-ref[e]) > tol {
				t.Fatalf("%s: H[%d][%d] = %g, want %g", tc.name, e/n, e%n, got[e], ref[e])
			}
		}
		if !ok {
			if tc.critical {
				t.Errorf("%s: Hessian not positive definite at a minimum", tc.name)
			}
			continue
		}

		// apply solves (H + shift I) y = c: check the residual of the
		// coordinates y of apply(v) (backward error, so that conditioning
		// does not matter), with c the coordinates of a random tangent v.
		rng := rand.New(rand.NewPCG(uint64(r), 9))
		c := make([]float64, n)
		v := m.newBlocks()
		for k := range c {
			c[k] = rng.NormFloat64()
			axpy(c[k], vs[k], v)
		}
		y := m.newBlocks()
		p.apply(y, v)
		yc := make([]float64, n)
		for k, u := range vs {
			yc[k] = inner(u, y)
		}
		// A modified factor (p.raised > 0) solves (H + shift I + E) y = c
		// with E >= 0 diagonal on p.raised coordinates: there the residual
		// is E_kk y_k, of the sign of y_k; everywhere else it vanishes.
		ynorm := 0.0
		for k := range yc {
			ynorm = math.Max(ynorm, math.Abs(yc[k]))
		}
		tolRes := 1e-9 * (maxAbs(ref)*ynorm + maxAbs(c))
		res, off := 0.0, 0
		for k := 0; k < n; k++ {
			s := p.shift * yc[k]
			for l := 0; l < n; l++ {
				s += ref[k*n+l] * yc[l]
			}
			rk := c[k] - s
			if p.raised > 0 && math.Abs(rk) > tolRes {
				off++
				if rk*yc[k] < 0 {
					t.Errorf("%s: coordinate %d: residual %g against y %g: E would be negative", tc.name, k, rk, yc[k])
				}
				continue
			}
			res = math.Max(res, math.Abs(rk))
		}
		if off > p.raised {
			t.Errorf("%s: the solve misses %d coordinates, %d pivots were raised", tc.name, off, p.raised)
		}
		if res > tolRes {
			t.Errorf("%s: residual of the solve %g (|y| %g, shift %g)", tc.name, res, ynorm, p.shift)
		}
		if p.raised > 0 {
			raisedCases++
		}
		// apply returns a tangent vector.
		m.proj(pv, x, y)
		for e := range pv.Data {
			if math.Abs(pv.Data[e]-y.Data[e]) > 1e-9*ynorm {
				t.Fatalf("%s: apply left the tangent space", tc.name)
			}
		}

		if !tc.critical {
			continue
		}
		// At a minimum H is positive semidefinite with the gauge directions
		// as null space, so on the horizontal space apply inverts the
		// Hessian: hess(apply v) = v, both made horizontal as rtr does.
		if p.shift > 2*p.mu {
			t.Errorf("%s: shifted by %g at a minimum", tc.name, p.shift)
		}
		gg := newGauge(r)
		gg.setPoint(x)
		horizontal := func(v *sparse.Blocks) {
			m.removeShift(v)
			gg.remove(v)
		}
		horizontal(v)
		p.apply(y, v)
		m.proj(y, x, y)
		horizontal(y)
		m.hess(hv, x, y, lam, work)
		horizontal(hv)
		diff := 0.0
		for e := range hv.Data {
			diff = math.Max(diff, math.Abs(hv.Data[e]-v.Data[e]))
		}
		if diff > 1e-6*maxAbs(v.Data) {
			t.Errorf("%s: hess(apply v) - v = %g (|v| %g)", tc.name, diff, maxAbs(v.Data))
		}
	}
}

// TestHessianPrecondSplit checks the split form used at r > d: W_i is
// orthogonal and starts with Y_i, the span block of H is the Riemannian
// Hessian on the span basis, and at a rank-deficient minimum (where the
// staircase converges) the complements agree across blocks and the split
// preconditioner equals the exact one on the horizontal space.
func TestHessianPrecondSplit(t *testing.T) {
	for _, tc := range newtonCases(t) {
		q, d, r, x := tc.q, tc.d, tc.r, tc.x
		if r == d {
			continue
		}
		p := newHessianPrecond(q, d, sparse.BlockAMD(q, 0), 1e-12*q.MaxDiag())
		p.keepSplit = true
		pe := newHessianPrecond(q, d, sparse.BlockAMD(q, 0), 1e-12*q.MaxDiag())
		pe.exact = true
		m := newManifold(q, d, r, 1)
		lam := multipliers(m, x)
		ok := p.update(x, lam)
		okExact := pe.update(x, lam)
		if !p.split || pe.split {
			t.Fatalf("%s: split %v, exact's split %v", tc.name, p.split, pe.split)
		}
		for i := 0; i < q.N; i++ {
			wi, xi := p.w[i*r*r:(i+1)*r*r], x.Block(i)
			for j := 0; j < q.N; j++ {
				wj := p.w[j*r*r : (j+1)*r*r]
				for a := 0; a < r; a++ {
					for c := 0; c < r; c++ {
						s := 0.0
						for u := 0; u < r; u++ {
							s += wj[u*r+a] * wi[u*r+c]
						}
						if a == c && (i == j || a >= d && tc.critical) {
							s--
						}
						// W_i^T W_i = I everywhere; Yperp_j^T Yperp_i = I
						// and Yperp_j^T Y_i = 0 at a rank-deficient point.
						if (i == j || tc.critical && (a >= d)) && math.Abs(s) > 1e-12 {
							t.Fatalf("%s: (W_%d^T W_%d)[%d][%d] off by %g", tc.name, j, i, a, c, s)
						}
					}
				}
			}
			for a := 0; a < r; a++ {
				for c := 0; c < d; c++ {
					if wi[a*r+c] != xi[a*q.B+c] {
						t.Fatalf("%s: W_%d column %d is not Y's", tc.name, i, c)
					}
				}
			}
		}
		vs := explicitBasis(p, x)
		n := len(vs)
		if n != q.N*p.k {
			t.Fatalf("%s: %d span basis vectors, want %d", tc.name, n, q.N*p.k)
		}
		ref := make([]float64, n*n)
		hv, work := m.newBlocks(), m.newBlocks()
		for l, v := range vs {
			m.hess(hv, x, v, lam, work)
			for k, u := range vs {
				ref[k*n+l] = inner(u, hv)
			}
		}
		got := p.h.Dense()
		tol := 1e-9 * maxAbs(ref)
		for e := range ref {
			if math.Abs(got[e]-ref[e]) > tol {
				t.Fatalf("%s: span H[%d][%d] = %g, want %g", tc.name, e/n, e%n, got[e], ref[e])
			}
		}
		if !tc.critical {
			continue
		}
		if !ok || !okExact || p.shift > 2*p.mu || p.sshift > 2*p.mu || pe.shift > 2*pe.mu {
			t.Fatalf("%s: not positive definite at a minimum (split %v shifts %g %g, exact %v %g)",
				tc.name, ok, p.shift, p.sshift, okExact, pe.shift)
		}
		gg := newGauge(r)
		gg.setPoint(x)
		horizontal := func(v *sparse.Blocks) {
			m.proj(v, x, v)
			m.removeShift(v)
			gg.remove(v)
		}
		rng := rand.New(rand.NewPCG(uint64(r), 3))
		v, ys, ye := m.newBlocks(), m.newBlocks(), m.newBlocks()
		for k := range v.Data {
			v.Data[k] = rng.NormFloat64()
		}
		horizontal(v)
		p.apply(ys, v)
		pe.apply(ye, v)
		horizontal(ys)
		horizontal(ye)
		diff := 0.0
		for k := range ys.Data {
			diff = math.Max(diff, math.Abs(ys.Data[k]-ye.Data[k]))
		}
		if diff > 1e-6*maxAbs(ye.Data) {
			t.Errorf("%s: split and exact preconditioners differ by %g (|y| %g)", tc.name, diff, maxAbs(ye.Data))
		}
	}
}

// BenchmarkHessianPrecond times the assembly and factorization (update) and
// one solve (apply) on a synthetic SE(3) lattice world (datasets.Cube, 1000
// poses, local loop closures like the benchmark graphs), at rank d and at
// rank 5 in the exact and the split form, against the row-wise factor of
// Q + sigma I it replaces. The exact factor's flops grow like k^3 with the
// block size k of the Hessian. Run with
//
//	go test ./sync -run '^$' -bench HessianPrecond -benchtime 3x
func BenchmarkHessianPrecond(b *testing.B) {
	const d = 3
	g, truth, err := datasets.Cube(10, 10, 10, datasets.Config{Kappa: 200, Tau: 100, LoopProb: 0.3, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	q := g.Laplacian(posegraph.Poses)
	perm := sparse.BlockAMD(q, 0)
	scale := q.MaxDiag()
	pchol, err := sparse.NewCholeskyPerm(sparse.LowerCSC(q, 1e-9*scale, 0), perm)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		r     int
		exact bool
	}{{3, false}, {5, true}, {5, false}} {
		r := c.r
		name := fmt.Sprintf("r=%d", r)
		if r > d {
			name += map[bool]string{true: "/exact", false: "/split"}[c.exact]
		}
		x := g.Lift(centered(truth, d), posegraph.Poses, r)
		m := newManifold(q, d, r, 1)
		lam := multipliers(m, x)
		p := newHessianPrecond(q, d, perm, 1e-9*scale)
		p.exact = c.exact
		p.update(x, lam)
		v, dst := m.newBlocks(), m.newBlocks()
		for k := range v.Data {
			v.Data[k] = float64(k%7) - 3
		}
		m.proj(v, x, v)
		b.Run("update/"+name, func(b *testing.B) {
			for b.Loop() {
				p.update(x, lam)
			}
		})
		b.Run("apply/"+name, func(b *testing.B) {
			for b.Loop() {
				p.apply(dst, v)
			}
		})
		rs := newRowSolver(&lazyFactor{build: func() (*sparse.Cholesky, error) { return pchol, nil }})
		b.Run("rowsolver/"+name, func(b *testing.B) {
			for b.Loop() {
				rs.apply(dst, v)
			}
		})
	}
}

// BenchmarkHessianUpdateGrid times the trust region's factorization of
// the Riemannian Hessian at rank d (assembly included) on the scaling
// grids of BenchmarkScalingGrid3D, at the ground truth, in the order Solve
// uses. The 10^6-pose grid, whose factor takes gigabytes, runs only with
// -bcmsync.large:
//
//	go test ./sync -run '^$' -bench HessianUpdateGrid -benchtime 3x
func BenchmarkHessianUpdateGrid(b *testing.B) {
	large := flag.Lookup("bcmsync.large")
	for _, side := range []int{22, 46, 100} {
		b.Run(fmt.Sprintf("n=%d", side*side*side), func(b *testing.B) {
			if side > 50 && (large == nil || large.Value.String() != "true") {
				b.Skip("10^6 poses take minutes and GBs; run with -bcmsync.large")
			}
			_, x, lam, p := gridHessian(b, side)
			for b.Loop() {
				if !p.update(x, lam) {
					b.Fatal("the Hessian at the ground truth does not factor")
				}
			}
		})
	}
}

// gridHessian builds BenchmarkScalingGrid3D's grid of side^3 poses, lifts
// its ground truth at rank d = 3 and prepares the Hessian's preconditioner
// there in the order Solve uses, with one update made (the symbolic
// analysis, as in a solve).
func gridHessian(b *testing.B, side int) (*manifold, *sparse.Blocks, []float64, *hessianPrecond) {
	const d = 3
	g, truth, err := datasets.Cube(side, side, side, datasets.Config{Kappa: 200, Tau: 100, LoopProb: 0.05, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	q := g.Laplacian(posegraph.Poses)
	x := g.Lift(centered(truth, d), posegraph.Poses, d)
	m := newManifold(q, d, d, 0)
	lam := multipliers(m, x)
	p := newHessianPrecond(q, d, sparse.BlockOrder(q, 0), 1e-9*q.MaxDiag())
	if !p.update(x, lam) {
		b.Fatal("the Hessian at the ground truth does not factor")
	}
	return m, x, lam, p
}

// TestStaleFactor checks the refactoring rule: one step alone refactors
// when its inner iterations exceed refactorAfter, as the rule did before
// it summed; steps under the threshold add their iterations beyond a
// fresh factor's until the sum passes the budget; a factorization starts
// the count anew.
func TestStaleFactor(t *testing.T) {
	for after := freshInner; after <= 20; after++ {
		for inner := 0; inner <= 30; inner++ {
			var s staleFactor
			if got, want := s.step(inner, after), inner > after; got != want {
				t.Errorf("after %d: one step of %d inner iterations refactors %t, want %t", after, inner, got, want)
			}
		}
	}
	// The 10^6-pose grid's steps, threshold 13 (budget 10).
	var s staleFactor
	for k, c := range []struct {
		inner int
		want  bool
	}{{12, false}, {11, true}} {
		if got := s.step(c.inner, 13); got != c.want {
			t.Errorf("step %d (%d inner): refactor %t, want %t", k, c.inner, got, c.want)
		}
	}
	s.factored()
	for k, inner := range []int{2, 3, 1, 13} {
		if s.step(inner, 13) {
			t.Errorf("after the factorization, step %d (%d inner) refactors with an excess of %d", k, inner, s.excess)
		}
	}
	if !s.step(4, 13) {
		t.Errorf("an excess of %d does not refactor with a budget of 10", s.excess)
	}
}

// TestFactorShiftedFrom checks where the shift ladder starts: at 0 it
// tries the modified factorization first, which raises a pivot just below
// zero; from a rung it skips that attempt and the rungs below, and climbs
// until the matrix factors.
func TestFactorShiftedFrom(t *testing.T) {
	bb := sparse.NewBlockBuilder(3, 1)
	for i, v := range []float64{1, 0.5, -5e-5} {
		bb.AddDiag(i, []float64{v})
	}
	bb.AddOff(0, 1, []float64{0.1})
	h := bb.Build()
	chol, err := sparse.AnalyzeBlocks(h, nil)
	if err != nil {
		t.Fatal(err)
	}
	scale := h.MaxDiag()
	for _, c := range []struct {
		from, rung           int
		wantRung, wantRaised int
		wantAttempts         int
	}{
		{from: 0, rung: 0, wantRung: 0, wantRaised: 1, wantAttempts: 1},
		// 1e-5 leaves the last pivot negative, 1e-4 makes it positive.
		{from: 1, rung: 0, wantRung: 2, wantRaised: 0, wantAttempts: 2},
		{from: 2, rung: 2, wantRung: 2, wantRaised: 0, wantAttempts: 1},
		{from: 3, rung: 3, wantRung: 3, wantRaised: 0, wantAttempts: 1},
	} {
		rung, attempts := c.rung, 0
		shift, raised, ok := factorShifted(h, chol, 0, scale, &rung, c.from, len(shiftLadder)-1, true, &attempts)
		if !ok || rung != c.wantRung || raised != c.wantRaised || attempts != c.wantAttempts {
			t.Errorf("from %d: ok %t, rung %d, %d raised, %d attempts; want rung %d, %d raised, %d attempts",
				c.from, ok, rung, raised, attempts, c.wantRung, c.wantRaised, c.wantAttempts)
			continue
		}
		if want := shiftLadder[c.wantRung] * scale; shift != want {
			t.Errorf("from %d: shift %g, want %g", c.from, shift, want)
		}
	}
}

// TestRaiseLimit checks how far below zero the modified attempt raises a
// pivot: at -5e-2 of the largest diagonal entry (between the ladder's top
// rung and raiseLimit) it makes one factor with that pivot raised to its
// magnitude, the factor of H + E with E diagonal, nonnegative and nonzero
// at the raised pivot only (a dense gonum oracle: the inverse of the
// factor's solve); at -2e-1 the attempt fails, and so does every rung,
// whose shifts are far smaller.
func TestRaiseLimit(t *testing.T) {
	for _, c := range []struct {
		last     float64
		ok       bool
		attempts int
	}{
		{last: -5e-2, ok: true, attempts: 1},
		{last: -2e-1, ok: false, attempts: len(shiftLadder)},
	} {
		bb := sparse.NewBlockBuilder(3, 1)
		for i, v := range []float64{1, 0.5, c.last} {
			bb.AddDiag(i, []float64{v})
		}
		bb.AddOff(0, 1, []float64{0.1})
		bb.AddOff(1, 2, []float64{1e-3})
		h := bb.Build()
		chol, err := sparse.AnalyzeBlocks(h, nil)
		if err != nil {
			t.Fatal(err)
		}
		rung, attempts := 0, 0
		shift, raised, ok := factorShifted(h, chol, 0, h.MaxDiag(), &rung, 0, len(shiftLadder)-1, true, &attempts)
		if ok != c.ok || attempts != c.attempts {
			t.Errorf("last diagonal entry %g: ok %t after %d attempts, want %t after %d", c.last, ok, attempts, c.ok, c.attempts)
			continue
		}
		if !ok {
			continue
		}
		if shift != 0 || rung != 0 || raised != 1 {
			t.Errorf("last diagonal entry %g: shift %g, rung %d, %d raised; want 0, 0, 1", c.last, shift, rung, raised)
		}
		// M = (solve)^{-1}, column by column, against H.
		n := 3
		inv := mat.NewDense(n, n, nil)
		e, x := make([]float64, n), make([]float64, n)
		for j := 0; j < n; j++ {
			clear(e)
			e[j] = 1
			chol.Solve(x, e)
			inv.SetCol(j, x)
		}
		var m mat.Dense
		if err := m.Inverse(inv); err != nil {
			t.Fatal(err)
		}
		hd := mat.NewDense(n, n, h.Dense())
		var mins float64
		nonzero := 0
		for i := 0; i < n; i++ {
			for j := 0; j < n; j++ {
				diff := m.At(i, j) - hd.At(i, j)
				switch {
				case i != j && math.Abs(diff) > 1e-12:
					t.Errorf("last diagonal entry %g: factor minus H has (%d,%d) = %g, want a diagonal difference", c.last, i, j, diff)
				case i == j && diff < -1e-12:
					t.Errorf("last diagonal entry %g: factor minus H has (%d,%d) = %g < 0", c.last, i, j, diff)
				case i == j && diff > 1e-12:
					nonzero++
					mins = diff
				}
			}
		}
		// The pivot -|p| raised to |p| adds 2|p| at its place.
		if nonzero != 1 || math.Abs(mins-2*math.Abs(c.last)) > 1e-4 {
			t.Errorf("last diagonal entry %g: %d raised entries, the last raised by %g; want 1 raised by about %g", c.last, nonzero, mins, 2*math.Abs(c.last))
		}
	}
}

// TestTCGConverged checks truncated CG's stopping rule: far from the
// optimum the residual must shrink by a tenth, nearer by the relative
// gradient (superlinear), and never below a tenth of the outer tolerance,
// which is where the last step on the 10^6-pose grid spent 10 iterations.
func TestTCGConverged(t *testing.T) {
	const enorm, tol = 1e4, 1e-9
	for _, c := range []struct {
		rel, shrink float64 // the gradient relative to enorm; rn / r0
		want        bool
	}{
		{1e-1, 0.11, false}, {1e-1, 0.1, true}, // kappa
		{1e-3, 2e-3, false}, {1e-3, 1e-3, true}, // rel
		{1e-4, 2e-4, false}, {1e-4, 1e-4, true}, // rel, still above the floor
		// From rel 1e-6 the floor (1e-10 relative) asks for 1e-4, less
		// than the superlinear rule's 1e-6; from 7e-9, for 1.4e-2.
		{1e-6, 1.1e-4, false}, {1e-6, 0.9e-4, true},
		{7e-9, 0.015, false}, {7e-9, 0.014, true},
	} {
		r0 := c.rel * enorm
		if got := tcgConverged(c.shrink*r0, r0, enorm, tol); got != c.want {
			t.Errorf("rel %g, residual shrunk to %g: converged %t, want %t", c.rel, c.shrink, got, c.want)
		}
	}
}

// TestTCGShrink checks that tcgShrink is the shrink tcgConverged asks for:
// a residual just below it converges, one just above does not.
func TestTCGShrink(t *testing.T) {
	const enorm, tol = 1e4, 1e-9
	for _, rel := range []float64{0.5, 1e-1, 1e-3, 2.25e-5, 1e-6, 3.93e-8, 7e-9} {
		r0 := rel * enorm
		shrink := tcgShrink(rel, tol)
		if !tcgConverged(shrink*r0*(1-1e-9), r0, enorm, tol) || tcgConverged(shrink*r0*(1+1e-9), r0, enorm, tol) {
			t.Errorf("rel %g: tcgShrink %g is not tcgConverged's threshold", rel, shrink)
		}
	}
}

// TestKeepForLastStep checks the rule on the last steps of the benchmark
// graphs (rel at the last point, the kept factor's shrink per iteration in
// its run before, a factorization's flop ratio over refactorBreakEven):
// the graphs where the kept factor ran fewer instructions keep it, those
// where it ran more refactor; and its guards.
func TestKeepForLastStep(t *testing.T) {
	const tol = 1e-9
	for _, c := range []struct {
		name            string
		rel, rn         float64 // rn: the run before's residual shrink, in iters
		iters           int
		flopRatio       float64
		want            bool
		keptIn, freshIn int // the last step's inner iterations each way
	}{
		{"cubicle", 2.25e-5, 2.24e-3, 7, 49.9, true, 10, 2},
		{"city10000", 3.93e-8, 4.96e-5, 4, 16.2, true, 3, 1},
		{"kitti_00", 1.93e-8, 1.3e-4, 5, 0.705, true, 4, 4},
		{"parking-garage", 1.58e-5, 5.65e-4, 15, 6.56, false, 16, 3},
		{"intel", 2e-7, 4.03e-5, 5, 1.84, false, 5, 1},
		{"MIT", 4.95e-6, 2.13e-3, 5, 0.666, false, 8, 3},
	} {
		rate := math.Pow(c.rn, 1/float64(c.iters))
		if got := keepForLastStep(c.rel, tol, rate, 1000, func() float64 { return c.flopRatio / refactorBreakEven }); got != c.want {
			t.Errorf("%s: keep %t, want %t (kept factor %d inner iterations, fresh %d)", c.name, got, c.want, c.keptIn, c.freshIn)
		}
	}
	for _, c := range []struct {
		rel, rate, factorIters float64
		budget                 int     // restartAfter's (0: 1000)
		tol                    float64 // the gradient tolerance (0: tol)
		want                   bool
	}{
		{rel: 1e-4, rate: 0.1, factorIters: 1e6, want: false}, // not the last step: rel^2 > tol
		{rel: 1e-6, rate: 0, factorIters: 1e6, want: false},   // no rate known
		{rel: 1e-6, rate: 1, factorIters: 1e6, want: false},   // a run that did not shrink
		{rel: 1e-6, rate: math.NaN(), factorIters: 1e6, want: false},
		{rel: 1e-6, rate: 0.5, factorIters: 0, want: false}, // 0.5^k <= 1e-4: 14 iterations
		{rel: 1e-6, rate: 0.5, factorIters: 11, want: true}, // 14 - freshInner
		{rel: 1e-6, rate: 0.5, factorIters: 10.9, want: false},
		{rel: 1e-6, rate: 0.5, factorIters: 11, budget: 13, want: false}, // past restartAfter's budget
		{rel: 1e-6, rate: 0.5, factorIters: 11, budget: 14, want: true},
		{rel: 1e-6, rate: 0.5, factorIters: 1e6, tol: 1e-3, want: false}, // a loose tolerance (GNC's inner solves)
	} {
		budget, ctol := 1000, tol
		if c.budget > 0 {
			budget = c.budget
		}
		if c.tol > 0 {
			ctol = c.tol
		}
		if got := keepForLastStep(c.rel, ctol, c.rate, budget, func() float64 { return c.factorIters }); got != c.want {
			t.Errorf("rel %g, rate %g, factor %g iterations, budget %d, tol %g: keep %t, want %t", c.rel, c.rate, c.factorIters, budget, ctol, got, c.want)
		}
	}
}

// TestNextRadius checks the trust region's radius update: a poor step
// leaves a region that excludes it, so the same tCG cannot run again at the
// same point and return the same step, whether the step was on the boundary
// or far inside; a good step on the boundary doubles the radius up to its
// cap; any other step keeps it.
func TestNextRadius(t *testing.T) {
	const maxRadius = 100.0
	for _, tc := range []struct {
		radius, step, rho float64
		boundary          bool
	}{
		{10, 10, -1, true},   // rejected on the boundary
		{10, 0.5, -1, false}, // rejected far inside: a quarter of the radius still holds it
		{10, 0.5, 0.2, false},
		{10, 9, 0.1, false},
	} {
		got := nextRadius(tc.radius, maxRadius, tc.step, tc.rho, tc.boundary)
		if !(got < tc.step) || !(got > 0) {
			t.Errorf("radius %v, step %v, rho %v: next radius %v, want in (0, step)", tc.radius, tc.step, tc.rho, got)
		}
	}
	for _, tc := range []struct {
		radius, step, rho float64
		boundary          bool
		want              float64
	}{
		{10, 10, 0.9, true, 20},
		{60, 60, 0.9, true, maxRadius},
		{10, 3, 0.9, false, 10}, // interior: the radius did not bind
		{10, 10, 0.5, true, 10},
		{10, 3, 0.25, false, 10},
	} {
		if got := nextRadius(tc.radius, maxRadius, tc.step, tc.rho, tc.boundary); got != tc.want {
			t.Errorf("radius %v, step %v, rho %v, boundary %v: next radius %v, want %v", tc.radius, tc.step, tc.rho, tc.boundary, got, tc.want)
		}
	}
}

// TestHessianPrecondRelease: after release the next update rebuilds
// everything, at the same rank or another, and the preconditioner then
// applies exactly as a fresh one does; release reports the bytes of the
// Hessian and its factors, and nothing once they are gone.
func TestHessianPrecondRelease(t *testing.T) {
	cases := newtonCases(t)
	for k, tc := range cases {
		if k+1 >= len(cases) || cases[k+1].q != tc.q {
			continue
		}
		next := cases[k+1] // same graph, the next rank or point
		used := newHessianPrecond(tc.q, tc.d, sparse.BlockAMD(tc.q, 0), 1e-12*tc.q.MaxDiag())
		m := newManifold(tc.q, tc.d, tc.r, 1)
		used.update(tc.x, multipliers(m, tc.x))
		want := 8 * int64(len(used.h.Val)+used.chol.StoredNNZ())
		if used.schol != nil {
			want += 8 * int64(used.schol.StoredNNZ())
		}
		if got := used.release(); got != want {
			t.Errorf("%s: release freed %d bytes, want %d", tc.name, got, want)
		}
		if got := used.release(); got != 0 {
			t.Errorf("%s: a second release freed %d bytes", tc.name, got)
		}
		for _, pt := range []newtonCase{tc, next} {
			fresh := newHessianPrecond(pt.q, pt.d, sparse.BlockAMD(pt.q, 0), 1e-12*pt.q.MaxDiag())
			mp := newManifold(pt.q, pt.d, pt.r, 1)
			lam := multipliers(mp, pt.x)
			okUsed, okFresh := used.update(pt.x, lam), fresh.update(pt.x, lam)
			if okUsed != okFresh {
				t.Fatalf("%s after release: update %v, fresh %v", pt.name, okUsed, okFresh)
			}
			if !okFresh {
				continue
			}
			v := mp.newBlocks()
			for i := range v.Data {
				v.Data[i] = math.Sin(float64(i) + 0.3)
			}
			mp.proj(v, pt.x, v)
			a, b := mp.newBlocks(), mp.newBlocks()
			used.apply(a, v)
			fresh.apply(b, v)
			for i := range a.Data {
				if math.Float64bits(a.Data[i]) != math.Float64bits(b.Data[i]) {
					t.Fatalf("%s after release: entry %d = %v, fresh %v", pt.name, i, a.Data[i], b.Data[i])
				}
			}
			used.release()
		}
	}
}

// TestHessianPrecondLazy checks that the Hessian computed as its factor
// assembles it (lazy, the path of large graphs) preconditions exactly as
// the stored one: the same shifts, raised pivots and factorizations, and
// the same preconditioned vector bit for bit, in the full form and the
// split one, on one thread and two; and that its rows are the stored
// Hessian's.
func TestHessianPrecondLazy(t *testing.T) {
	for _, tc := range newtonCases(t) {
		perm := sparse.BlockAMD(tc.q, 0)
		sym, err := sparse.AnalyzeBlockPattern(tc.q, perm)
		if err != nil {
			t.Fatal(err)
		}
		for _, exact := range []bool{false, true} {
			for _, threads := range []int{1, 2} {
				mu := 1e-12 * tc.q.MaxDiag()
				stored, lazy := newHessianPrecond(tc.q, tc.d, perm, mu), newHessianPrecond(tc.q, tc.d, perm, mu)
				stored.sym, lazy.sym = sym, sym
				lazy.lazyMin = 0
				for _, p := range []*hessianPrecond{stored, lazy} {
					p.exact, p.threads = exact, threads
				}
				m := newManifold(tc.q, tc.d, tc.r, 1)
				lam := multipliers(m, tc.x)
				okS, okL := stored.update(tc.x, lam), lazy.update(tc.x, lam)
				name := fmt.Sprintf("%s exact=%v threads=%d", tc.name, exact, threads)
				if stored.lazy || !lazy.lazy {
					t.Fatalf("%s: stored lazy %v, lazy lazy %v", name, stored.lazy, lazy.lazy)
				}
				if okS != okL || stored.shift != lazy.shift || stored.raised != lazy.raised ||
					stored.factorizations != lazy.factorizations || stored.split != lazy.split || stored.scale != lazy.scale {
					t.Fatalf("%s: stored ok %v shift %g raised %d attempts %d scale %g; lazy %v %g %d %d %g", name,
						okS, stored.shift, stored.raised, stored.factorizations, stored.scale,
						okL, lazy.shift, lazy.raised, lazy.factorizations, lazy.scale)
				}
				got := lazy.rows.Dense()
				for e, v := range stored.h.Val {
					if got.Val[e] != v {
						t.Fatalf("%s: H value %d is %g, stored %g", name, e, got.Val[e], v)
					}
				}
				if !okS {
					continue
				}
				rng := rand.New(rand.NewPCG(7, uint64(tc.r)))
				v, ds, dl := m.newBlocks(), m.newBlocks(), m.newBlocks()
				for k := range v.Data {
					v.Data[k] = rng.NormFloat64()
				}
				m.proj(v, tc.x, v)
				stored.apply(ds, v)
				lazy.apply(dl, v)
				for k := range ds.Data {
					if ds.Data[k] != dl.Data[k] {
						t.Fatalf("%s: preconditioned vector differs at %d: %g, stored %g", name, k, dl.Data[k], ds.Data[k])
					}
				}
			}
		}
	}
}
