package sync

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/bcmsync/bcmsync/bcm"
	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
)

// denseMinEig is the oracle: lambda_min of S = Q - Lambda(X) by gonum.
func denseMinEig(t *testing.T, q *sparse.BlockSym, lam []float64, d int) float64 {
	t.Helper()
	c := newCertifier(q, d, 1e-6, 0, 0, nil, 1)
	c.buildS(lam, d)
	var es mat.EigenSym
	if !es.Factorize(mat.NewSymDense(c.s.Dim(), c.s.Dense()), false) {
		t.Fatal("EigenSym failed")
	}
	return es.Values(nil)[0]
}

func TestCertificateMatchesDenseEigenvalues(t *testing.T) {
	for _, prob := range []posegraph.Problem{posegraph.Poses, posegraph.Rotations} {
		for _, d := range []int{2, 3} {
			g, _ := noisyGraph(d, 25, 10, 0.05, 0.05, uint64(d))
			q := g.Laplacian(prob)
			for _, r := range []int{d, d + 2} {
				// A random point: S is indefinite, the eigensolver path.
				x := sparse.NewBlocks(r, q.B, q.N)
				bcm.RandomStiefel(x, d, 7)
				m := newManifold(q, d, r, 1)
				c, err := newCertifier(q, d, 1e-6, 0, 1e-13, nil, 3).check(m, x)
				if err != nil {
					t.Fatal(err)
				}
				want := denseMinEig(t, q, c.lam, d)
				if c.psd || math.Abs(c.minEig-want) > 1e-5*q.MaxDiag() {
					t.Errorf("%v d=%d r=%d random point: minEig %g (psd %v), dense %g", prob, d, r, c.minEig, c.psd, want)
				}
				// The eigenvector is a unit eigenvector of S.
				sv := make([]float64, len(c.vector))
				cc := newCertifier(q, d, 1e-6, 0, 0, nil, 1)
				cc.buildS(c.lam, d)
				cc.s.MulVec(sv, c.vector)
				res, nv := 0.0, 0.0
				for k, v := range c.vector {
					res += (sv[k] - c.minEig*v) * (sv[k] - c.minEig*v)
					nv += v * v
				}
				if math.Abs(nv-1) > 1e-8 || math.Sqrt(res) > 1e-4*q.MaxDiag() {
					t.Errorf("%v d=%d r=%d: eigenvector norm %g residual %g", prob, d, r, nv, math.Sqrt(res))
				}
			}
		}
	}
}

// The Hessian-vector product matches a finite difference of the Riemannian
// gradient along a geodesic-like curve, and is symmetric.
func TestHessianFiniteDifference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, prob := range []posegraph.Problem{posegraph.Poses, posegraph.Rotations} {
		for _, d := range []int{2, 3} {
			g, _ := noisyGraph(d, 12, 6, 0.1, 0.1, 5)
			q := g.Laplacian(prob)
			r := d + 1
			m := newManifold(q, d, r, 1)
			x := m.newBlocks()
			bcm.RandomStiefel(x, d, 11)
			nq := m.newBlocks()
			m.mulQ(nq, x)
			lam := make([]float64, m.n*d*d)
			m.lambda(lam, x, nq)
			v, w := m.newBlocks(), m.newBlocks()
			for k := range v.Data {
				v.Data[k] = rng.NormFloat64()
				w.Data[k] = rng.NormFloat64()
			}
			m.proj(v, x, v)
			m.proj(w, x, w)
			hv, hw, work := m.newBlocks(), m.newBlocks(), m.newBlocks()
			m.hess(hv, x, v, lam, work)
			m.hess(hw, x, w, lam, work)
			if a, b := inner(w, hv), inner(v, hw); math.Abs(a-b) > 1e-9*math.Max(1, math.Abs(a)) {
				t.Errorf("%v d=%d: Hessian not symmetric: %g vs %g", prob, d, a, b)
			}
			// Second derivative of F along the retraction curve: for the
			// polar retraction f(R_x(tv)) = f(x) + t<g,v> + t^2/2 <Hv,v> + O(t^3).
			f := func(tt float64) float64 {
				y, tv := m.newBlocks(), m.newBlocks()
				for k := range tv.Data {
					tv.Data[k] = tt * v.Data[k]
				}
				m.retract(y, x, tv)
				m.mulQ(work, y)
				return inner(y, work)
			}
			h := 1e-4
			fd := (f(h) - 2*f(0) + f(-h)) / (h * h)
			if want := inner(v, hv); math.Abs(fd-want) > 1e-4*math.Max(1, math.Abs(want)) {
				t.Errorf("%v d=%d: d2F along v = %g by finite differences, <v, Hess v> = %g", prob, d, fd, want)
			}
		}
	}
}

func TestSolveRecoversGroundTruth(t *testing.T) {
	for _, d := range []int{2, 3} {
		g, truth := noisyGraph(d, 60, 30, 0.01, 0.01, uint64(10+d))
		res, err := Solve(context.Background(), g, Options{Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Certified {
			t.Fatalf("d=%d: not certified: %s (min eig %g, gap %g)", d, res.Status, res.MinEigenvalue, res.SuboptimalityBound)
		}
		if res.SuboptimalityBound > res.GapAllowed || res.SuboptimalityBound < -1e-9*res.Objective {
			t.Errorf("d=%d: suboptimality bound %g for F = %g", d, res.SuboptimalityBound, res.Objective)
		}
		// Pose 0 is the anchor and has no VERTEX estimate: it stays at the
		// identity, as the truth's pose 0 is, so errors are comparable.
		maxR, maxT := 0.0, 0.0
		for i := range truth {
			for k := 0; k < d*d; k++ {
				maxR = math.Max(maxR, math.Abs(res.Poses[i].R[k]-truth[i].R[k]))
			}
			for k := 0; k < d; k++ {
				maxT = math.Max(maxT, math.Abs(res.Poses[i].T[k]-truth[i].T[k]))
			}
		}
		if maxR > 0.1 || maxT > 0.5 {
			t.Errorf("d=%d: estimate far from the truth: max rotation entry error %g, translation %g", d, maxR, maxT)
		}
		// F at the estimate is no more than at the truth (it is optimal).
		if ft := g.Cost(truth, posegraph.Poses); res.Objective > ft*(1+1e-9) {
			t.Errorf("d=%d: F(estimate) = %g > F(truth) = %g", d, res.Objective, ft)
		}
		// The history never increases F within a level.
		for k := 1; k < len(res.History); k++ {
			a, b := res.History[k-1], res.History[k]
			if a.Rank == b.Rank && b.F > a.F*(1+1e-12)+1e-12 {
				t.Errorf("d=%d: F increased from %g to %g at record %d", d, a.F, b.F, k)
			}
		}
	}
}

// The suboptimality bound is rigorous: on loosely converged runs (stopped
// far from the optimum) it must still bound F(estimate) - F*, with F* from
// a tight solve. This is the property the certificate exists for.
func TestSuboptimalityBoundIsRigorous(t *testing.T) {
	for _, d := range []int{2, 3} {
		g, _ := noisyGraph(d, 200, 60, 0.05, 0.05, 3)
		tight, err := Solve(context.Background(), g, Options{Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		if !tight.Certified {
			t.Fatalf("d=%d: tight solve not certified: %s", d, tight.Status)
		}
		for _, o := range []Options{
			{GradTol: 1e-2, BCMMaxSweeps: 5},
			{GradTol: 1e-3, BCMMaxSweeps: -1},
			{GradTol: 1e-1, BCMMaxSweeps: 2, Init: InitOdometry},
		} {
			o.Seed = 1
			loose, err := Solve(context.Background(), g, o)
			if err != nil {
				t.Fatal(err)
			}
			trueGap := loose.Objective - tight.Objective
			if loose.HasBound && loose.SuboptimalityBound < trueGap-1e-9*tight.Objective {
				t.Errorf("d=%d %+v: reported bound %g < true gap %g (status %s)", d, o, loose.SuboptimalityBound, trueGap, loose.Status)
			}
			if loose.Certified && trueGap > o.GapTol*loose.Objective+1e-6*loose.Objective {
				t.Errorf("d=%d: certified although %g above the optimum", d, trueGap)
			}
		}
	}
}

// Noise-free graphs have F* = 0, where a relative tolerance cannot be
// proven: the certificate's shift is at least its rounding floor, so the
// bound is positive while GapTol |F| is ~1e-21. By default (GapAbs 0) the
// status says so; with an absolute tolerance above the floor's cost the
// same solve certifies, and GapAllowed is exactly
// max(GapTol max(FUnit, |F|), GapAbs).
func TestZeroResidualCertified(t *testing.T) {
	for _, prob := range []posegraph.Problem{posegraph.Poses, posegraph.Rotations} {
		for _, d := range []int{2, 3} {
			g, _ := noisyGraph(d, 30, 10, 0, 0, 4)
			for k := range g.Edges {
				// Exact measurements with ordinary weights: the rounding
				// floor's cost then lies far below 1e-6.
				g.Edges[k].Kappa, g.Edges[k].Tau = 50, 10
			}
			for _, gapAbs := range []float64{0, 1e-6} {
				res, err := Solve(context.Background(), g, Options{Problem: prob, GapAbs: gapAbs})
				if err != nil {
					t.Fatal(err)
				}
				if res.Objective > 1e-12*float64(g.M()) || !res.HasBound {
					t.Errorf("%v d=%d GapAbs %g: F = %g, has bound %v", prob, d, gapAbs, res.Objective, res.HasBound)
				}
				if want := math.Max(1e-6*math.Max(res.FUnit, res.Objective), gapAbs); !(res.FUnit > 0) || res.GapAllowed != want {
					t.Errorf("%v d=%d GapAbs %g: gap allowed %g, want %g", prob, d, gapAbs, res.GapAllowed, want)
				}
				if res.Certified != (res.SuboptimalityBound <= res.GapAllowed) {
					t.Errorf("%v d=%d GapAbs %g: certified %v with bound %g, allowed %g", prob, d, gapAbs, res.Certified, res.SuboptimalityBound, res.GapAllowed)
				}
				// F* = 0 data certify by default: the allowance is
				// GapTol max(FUnit, |F|), not a relative 1e-6 of F ~ 1e-27.
				if res.Status != Certified {
					t.Errorf("%v d=%d GapAbs %g: status %q, want %q (bound %g)", prob, d, gapAbs, res.Status, Certified, res.SuboptimalityBound)
				}
				if prob == posegraph.Rotations {
					for i := range res.Poses {
						if res.Poses[i].T != [3]float64{} {
							t.Fatalf("rotation result carries a translation at %d", i)
						}
					}
				}
			}
		}
	}
}

// The horizontal projection (common shift, then Omega X) leaves a vector
// orthogonal to every gauge direction, removes an added gauge component
// exactly, and is idempotent.
func TestGaugeProjection(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	for _, d := range []int{2, 3} {
		g, _ := noisyGraph(d, 15, 5, 0.1, 0.1, 9)
		q := g.Laplacian(posegraph.Poses)
		for _, r := range []int{d, d + 2} {
			m := newManifold(q, d, r, 1)
			x := m.newBlocks()
			bcm.RandomStiefel(x, d, 4)
			for i := 0; i < x.N; i++ { // translations, centered below
				for k := 0; k < r; k++ {
					x.Block(i)[k*x.B+d] = 10 * rng.NormFloat64()
				}
			}
			m.removeShift(x)
			gg := newGauge(r)
			gg.setPoint(x)
			v := m.newBlocks()
			for k := range v.Data {
				v.Data[k] = rng.NormFloat64()
			}
			horizontal := func(w *sparse.Blocks) { m.removeShift(w); gg.remove(w) }
			horizontal(v)
			// Orthogonal to Psi X for every skew Psi and to the shifts.
			for a := 0; a < r; a++ {
				for c := a + 1; c < r; c++ {
					px := m.newBlocks()
					for i := 0; i < x.N; i++ {
						xi, pi := x.Block(i), px.Block(i)
						for col := 0; col < x.B; col++ {
							pi[a*x.B+col] = xi[c*x.B+col]
							pi[c*x.B+col] = -xi[a*x.B+col]
						}
					}
					if ip := inner(v, px); math.Abs(ip) > 1e-9*math.Sqrt(inner(v, v)*inner(px, px)) {
						t.Errorf("d=%d r=%d: <v, Psi_%d%d X> = %g after projection", d, r, a, c, ip)
					}
				}
				sum := 0.0
				for i := 0; i < x.N; i++ {
					sum += v.Block(i)[a*x.B+d]
				}
				if math.Abs(sum) > 1e-9 {
					t.Errorf("d=%d r=%d: translation row %d sums to %g", d, r, a, sum)
				}
			}
			// Idempotent, and an added gauge component is removed exactly.
			w := m.newBlocks()
			copyBlocks(w, v)
			for i := 0; i < x.N; i++ {
				xi, wi := x.Block(i), w.Block(i)
				for col := 0; col < x.B; col++ {
					wi[0*x.B+col] += 0.7 * xi[1*x.B+col]
					wi[1*x.B+col] -= 0.7 * xi[0*x.B+col]
				}
				wi[d] += 3 // a common shift of row 0
			}
			horizontal(w)
			diff := 0.0
			for k := range w.Data {
				diff = math.Max(diff, math.Abs(w.Data[k]-v.Data[k]))
			}
			if diff > 1e-9 {
				t.Errorf("d=%d r=%d: gauge component not removed exactly (max diff %g)", d, r, diff)
			}
		}
	}
}

// The rounded estimate is certified on its own only when the relaxation's
// bound leaves more than the allowed gap: a relaxation stopped with
// inaccurate translations still ends certified through the estimate's
// exactly optimal translations, and a converged one keeps the relaxation's
// bound, which already met the tolerance, without a second factorization.
// The trust region's trial points have optimal translations (varpro.go), so
// the inaccurate ones come from a start at the optimum with its
// translations perturbed and a tolerance the start already meets. The
// saddle instances of TestStaircaseEscapesSaddle add levels above rank d.
func TestEstimateCertifiedWhenRelaxationBoundIsLoose(t *testing.T) {
	type instance struct {
		d    int
		g    *posegraph.Graph
		opts Options
	}
	var cases []instance
	for _, d := range []int{2, 3} {
		g, _ := noisyGraph(d, 200, 60, 0.05, 0.05, 3)
		for _, tol := range []float64{1e-4, 1e-5, 1e-6, 0} {
			cases = append(cases, instance{d, g, Options{Seed: 1, GradTol: tol, BCMMaxSweeps: -1}})
		}
		opt, err := Solve(context.Background(), g, Options{Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(5, uint64(d)))
		start := append([]posegraph.Pose(nil), opt.Poses...)
		for i := range start {
			for a := 0; a < d; a++ {
				start[i].T[a] += 1e-4 * rng.NormFloat64()
			}
		}
		cases = append(cases, instance{d, g, Options{Seed: 1, GradTol: 0.03, BCMMaxSweeps: -1, InitialPoses: start}})
	}
	for _, c := range saddleInstances() {
		cases = append(cases, instance{c.d, c.graph(), c.options()})
	}
	rescued, kept, above := 0, 0, 0
	for _, c := range cases {
		d, tol := c.d, c.opts.GradTol
		res, err := Solve(context.Background(), c.g, c.opts)
		if err != nil {
			t.Fatal(err)
		}
		lv := res.Levels[len(res.Levels)-1]
		if !lv.Certified {
			continue
		}
		if res.Rank > d {
			above++
		}
		relaxGap := res.Objective - *lv.DualBound
		switch {
		case relaxGap > res.GapAllowed:
			rescued++
			if !res.Certified || res.DualBound <= *lv.DualBound {
				t.Errorf("d=%d tol %g: relaxation gap %g > allowed %g, and the estimate's bound %g (status %s) did not improve on it",
					d, tol, relaxGap, res.GapAllowed, res.DualBound, res.Status)
			}
		default:
			kept++
			if !res.Certified || res.DualBound != *lv.DualBound {
				t.Errorf("d=%d tol %g: relaxation gap %g within %g, but status %s and bound %g instead of the relaxation's %g",
					d, tol, relaxGap, res.GapAllowed, res.Status, res.DualBound, *lv.DualBound)
			}
		}
	}
	// Solve's trust region re-solves the translations exactly after every
	// step, so its rank-d points rarely need the rescue; a point whose
	// translations are off (from another level optimizer: here one that
	// hands the staircase a fixed point) does.
	for _, d := range []int{2, 3} {
		g, _ := noisyGraph(d, 200, 60, 0.05, 0.05, 3)
		res, err := Solve(context.Background(), g, Options{Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		x := res.final
		for i := 0; i < x.N; i++ {
			// Off by up to 1.2e-7: S stays positive semidefinite (five
			// times more and it does not), and F - tr(Lambda) = <p, N_p>
			// exceeds the allowance.
			x.Block(i)[d] += 2e-8 * float64(i%7)
		}
		out, err := SolveWith(context.Background(), g, Options{Seed: 1, Rank0: x.R, MaxRank: x.R}, &fixedPoint{x: x, poses: res.Poses})
		if err != nil {
			t.Fatal(err)
		}
		lv := out.Levels[0]
		if !lv.Certified || out.Objective-*lv.DualBound <= out.GapAllowed {
			t.Fatalf("d=%d: perturbed translations: proof %v with relaxation gap %g, allowed %g: no rescue to test", d, lv.Certified, out.Objective-*lv.DualBound, out.GapAllowed)
		}
		rescued++
		if !out.Certified || out.DualBound <= *lv.DualBound {
			t.Errorf("d=%d: perturbed translations: relaxation gap %g > allowed %g, and the estimate's bound %g (status %s) did not improve on it",
				d, out.Objective-*lv.DualBound, out.GapAllowed, out.DualBound, out.Status)
		}
	}
	if rescued == 0 || kept == 0 || above == 0 {
		t.Fatalf("the instances should cover both cases and a rank above d: %d rescued by the estimate, %d kept the relaxation's bound, %d above rank d", rescued, kept, above)
	}
}

// TestCertificateMinEigAtCriticalPoint: at a certified point the reported
// lambda_min(S), from inverse iteration on the factor of S + eta I, is the
// dense oracle's to within the shift eta, from the fixed start and from
// the point's own row (nullStart, Incremental's warm steps).
func TestCertificateMinEigAtCriticalPoint(t *testing.T) {
	for _, prob := range []posegraph.Problem{posegraph.Poses, posegraph.Rotations} {
		for _, d := range []int{2, 3} {
			g, truth := noisyGraph(d, 25, 10, 0.05, 0.05, uint64(20+d))
			q := g.Laplacian(prob)
			x := g.Lift(centered(truth, d), prob, d)
			m := newManifold(q, d, d, 1)
			hp := newHessianPrecond(q, d, nil, 1e-12*q.MaxDiag())
			if rr, err := rtr(context.Background(), m, x, nil, hp, rtrOptions{GradTol: 1e-12, MaxIter: 100}); err != nil || rr.RelGrad > 1e-10 {
				t.Fatalf("%v d=%d: no critical point (%+v, %v)", prob, d, rr, err)
			}
			for _, null := range []bool{false, true} {
				cf := newCertifier(q, d, 1e-6, 0, 1e-13, nil, 3)
				cf.nullStart = null
				c, err := cf.check(m, x)
				if err != nil {
					t.Fatal(err)
				}
				if !c.psd {
					t.Fatalf("%v d=%d: the minimum is not certified", prob, d)
				}
				want := denseMinEig(t, q, c.lam, d)
				if math.Abs(c.minEig-want) > c.eta+1e-12*q.MaxDiag() {
					t.Errorf("%v d=%d nullStart=%v: minEig %g, dense %g, eta %g", prob, d, null, c.minEig, want, c.eta)
				}
			}
		}
	}
}

// fixedPoint is a LevelOptimizer whose every level ends at the point x
// (whatever it is given at x's rank; other ranks are left as they come),
// converged: it shows what the staircase makes of a point another
// optimizer computed. poses is the initial estimate.
type fixedPoint struct {
	x     *sparse.Blocks
	poses []posegraph.Pose
}

func (f *fixedPoint) Method(*Run) MethodInfo {
	return MethodInfo{Name: "fixed point", FirstTol: 1e-9}
}

func (f *fixedPoint) Init(context.Context, *Run) ([]posegraph.Pose, Init, error) {
	return f.poses, InitGiven, nil
}

func (f *fixedPoint) Optimize(_ context.Context, r *Run, x *sparse.Blocks, _ Goal, lv *Level) (Outcome, error) {
	if x.R == f.x.R {
		copy(x.Data, f.x.Data)
	}
	lv.F = posegraph.TraceCost(r.Q(), x, sparse.NewBlocks(x.R, x.B, x.N))
	return Outcome{Started: true, Converged: true, Steps: 1}, nil
}

// shortInit is a level optimizer whose initial estimate misses a pose.
type shortInit struct{ LevelOptimizer }

func (s shortInit) Init(ctx context.Context, r *Run) ([]posegraph.Pose, Init, error) {
	p, name, err := s.LevelOptimizer.Init(ctx, r)
	return p[:len(p)-1], name, err
}

// An optimizer's initial estimate of the wrong size is an error, not a
// panic.
func TestSolveWithChecksInit(t *testing.T) {
	g, _ := noisyGraph(2, 20, 5, 0.05, 0.05, 1)
	_, err := SolveWith(context.Background(), g, Options{}, shortInit{NewBCMRTR()})
	if err == nil || !strings.Contains(err.Error(), "initial estimate of 19 poses for a graph of 20") {
		t.Errorf("error %v", err)
	}
}
