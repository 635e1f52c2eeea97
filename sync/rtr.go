package sync

import (
	"context"
	"math"
	"time"

	"github.com/bcmsync/bcmsync/internal/sparse"
)

// The finishing phase: a Riemannian trust-region method (Absil, Baker and
// Gallivan) whose subproblems are solved by truncated conjugate gradients
// (Steihaug-Toint) on the horizontal space (the gauge projected out),
// preconditioned by a sparse Cholesky factor of the Riemannian Hessian in an
// orthonormal tangent basis (newton.go; exact at rank d, split above), and
// by a factor of Q + sigma I applied row by row when the Hessian does not
// factor even shifted. BCM brings X into
// the basin cheaply; near a critical point this converges superlinearly,
// which is what the certificate needs (an accurate critical point).

// rtrOptions controls the finishing phase.
type rtrOptions struct {
	GradTol  float64 // stop when ||grad|| / ||2 X Q|| <= GradTol
	MaxIter  int     // outer iterations
	MaxInner int     // tCG iterations per outer iteration
	Deadline time.Time
	// OnRecord receives iteration iter's point (F and the gradient) and,
	// for iter > 0, the statistics of the step that led to it (see
	// Record); the caller fills in the rest.
	OnRecord  func(iter int, rec Record)
	Precision float64 // relative change of F below which a step counts as no progress
	// Translations, when set, minimizes F exactly over the translation
	// columns of x given n = X Q (the Y blocks fixed) and returns F's
	// decrease; it runs after every accepted step (see rtr).
	Translations func(x, n *sparse.Blocks) (float64, error)
	// Radius is the first trust-region radius (0: a default from the size
	// of x); rtrResult.Radius is the last, which the next rank starts from.
	Radius float64
}

type rtrResult struct {
	F, GradNorm, RelGrad float64
	Iterations           int
	InnerIterations      int
	Stop                 string
	Radius               float64
}

// tcgConverged reports whether truncated CG may stop with residual norm
// rn, started from the gradient's norm r0 at a point where ||2XQ|| is
// enorm. The usual superlinear rule (theta 1, kappa 0.1) stops when the
// residual has shrunk by min(rel, 0.1), rel = r0 / enorm being the
// gradient relative to ||2XQ||, so that the rule does not depend on the
// units of the weights. It also stops once the residual is a tenth of the
// outer tolerance: the gradient at the new point is the residual plus
// terms of second order in the step, so solving further buys nothing, and
// near the optimum the superlinear rule would ask for rel^2.
func tcgConverged(rn, r0, enorm, gradTol float64) bool {
	const theta, kappa = 1.0, 0.1
	return rn <= r0*math.Min(math.Pow(r0/enorm, theta), kappa) || rn <= 0.1*gradTol*enorm
}

// nextRadius returns the trust region's radius after a step of norm
// stepNorm (in the preconditioner's metric, the one tCG bounds) whose
// actual decrease is rho times the model's; hitBoundary says tCG stopped
// on the boundary. A poor step (rho < 1/4) shrinks the region to a quarter
// of the step, not of the radius: when tCG converged well inside the
// region, a quarter of the radius may still contain the step, and a
// rejected step would be recomputed unchanged at the same point, with the
// same factor, at the full cost of its inner iterations. A good step on the
// boundary doubles the radius, up to maxRadius; any other keeps it.
func nextRadius(radius, maxRadius, stepNorm, rho float64, hitBoundary bool) float64 {
	switch {
	case rho < 0.25:
		return math.Min(radius, stepNorm) / 4
	case rho > 0.75 && hitBoundary:
		return math.Min(2*radius, maxRadius)
	}
	return radius
}

// lazyFactor makes a factor on first use and keeps it, or its error, for
// every later call: at rank d the Hessian's factor serves, and most solves
// never need Q's; once refused, the row solver would otherwise retry on
// every inner iteration. It counts the attempt and its time for the trust
// region's step records.
type lazyFactor struct {
	build    func() (*sparse.Cholesky, error)
	chol     *sparse.Cholesky
	err      error
	attempts int
	seconds  float64
}

func (l *lazyFactor) get() (*sparse.Cholesky, error) {
	if l.chol == nil && l.err == nil {
		start := time.Now()
		l.chol, l.err = l.build()
		l.attempts++
		l.seconds += time.Since(start).Seconds()
	}
	return l.chol, l.err
}

// rowSolver applies (Q + sigma I)^{-1} to every row of a block matrix,
// with the factor made on first use.
type rowSolver struct {
	factor  *lazyFactor
	rhs, in []float64
}

func newRowSolver(factor *lazyFactor, r, dim int) *rowSolver {
	return &rowSolver{factor: factor, rhs: make([]float64, r*dim), in: make([]float64, r*dim)}
}

// apply sets dst = V (Q + sigma I)^{-1} and reports whether it had a
// factor; without one (it was refused) it copies v, leaving CG
// unpreconditioned.
func (s *rowSolver) apply(dst, v *sparse.Blocks) bool {
	chol, err := s.factor.get()
	if err != nil {
		copyBlocks(dst, v)
		return false
	}
	r, b := v.R, v.B
	dim := v.N * b
	for i := 0; i < v.N; i++ {
		vi := v.Block(i)
		for a := 0; a < r; a++ {
			copy(s.in[a*dim+i*b:a*dim+(i+1)*b], vi[a*b:(a+1)*b])
		}
	}
	chol.SolveMany(s.rhs, s.in, r)
	for i := 0; i < v.N; i++ {
		di := dst.Block(i)
		for a := 0; a < r; a++ {
			copy(di[a*b:(a+1)*b], s.rhs[a*dim+i*b:a*dim+(i+1)*b])
		}
	}
	return true
}

// rtr runs the trust region from x (updated in place).
func rtr(ctx context.Context, m *manifold, x *sparse.Blocks, pre *rowSolver, hp *hessianPrecond, opts rtrOptions) (rtrResult, error) {
	// Accepted steps swap x with a scratch buffer; the caller's storage
	// receives the final point.
	orig := x
	defer func() {
		if x != orig {
			copyBlocks(orig, x)
		}
	}()
	nq := m.newBlocks()
	grad := m.newBlocks()
	eta, heta := m.newBlocks(), m.newBlocks()
	res, z, delta, hdelta := m.newBlocks(), m.newBlocks(), m.newBlocks(), m.newBlocks()
	work, xnew, nqNew := m.newBlocks(), m.newBlocks(), m.newBlocks()
	lam := make([]float64, m.n*m.d*m.d)

	gg := newGauge(m.r)
	gg.threads = m.threads
	// The Hessian's factor is the dominant cost of a step on large graphs.
	// Near the minimum it changes little from step to step, and the factor
	// from the previous point still preconditions tCG almost exactly, so it
	// is kept while tCG converges in a few inner iterations (more on large
	// graphs, where a factorization costs more: see refactorAfter and
	// staleFactor), unless it was shifted by resumeShift or more, or was
	// made by resumeFrom's rule, is still shifted and landed below the
	// factor it replaced (see resumeFrom).
	// The update is lazy (pending): the point that meets the tolerance
	// never runs tCG, so it must not pay for a factorization.
	useHessian, refactor, pending := false, true, false
	var stale staleFactor
	setPoint := func() {
		m.lambda(lam, x, nq)
		gg.setPoint(m.gaugePoint(x))
		pending = hp != nil && (refactor || !useHessian)
	}
	// horizontal removes the gauge directions (Omega X and the common
	// translation): tCG works on their orthogonal complement, where the
	// Hessian is nonsingular at a strict minimum. Away from a critical point
	// the Hessian maps gauge directions to non-gauge ones and back, so both
	// its output and the preconditioner's are projected.
	horizontal := func(v *sparse.Blocks) {
		m.removeShift(v)
		gg.remove(v)
		m.maskFree(v) // landmark Y coordinates are not variables
	}
	var step Record // the statistics of the step being taken
	// factorTotals counts the factorizations made so far (the Hessian's
	// and Q's) and their seconds; a record's share is the difference
	// from the last record's totals.
	factorTotals := func() (n int, secs float64) {
		if hp != nil {
			n, secs = hp.factorizations, hp.updateSeconds
		}
		if pre != nil {
			n, secs = n+pre.factor.attempts, secs+pre.factor.seconds
		}
		return n, secs
	}
	lastFactors, lastSeconds := factorTotals()
	precond := func(dst, v *sparse.Blocks) {
		if pending {
			useHessian, pending = hp.update(x, lam), false
			stale.factored()
			if useHessian {
				step.Shift, step.Raised = shiftLadder[hp.rung], hp.raised
			}
		}
		switch {
		case useHessian:
			step.Precond = "hessian"
			hp.apply(dst, v)
		case pre != nil:
			step.Precond = "q"
			if !pre.apply(dst, v) {
				step.Precond = "none"
				return
			}
		default:
			step.Precond = "none"
			copyBlocks(dst, v)
			return
		}
		m.proj(dst, x, dst)
		horizontal(dst)
	}

	// Center the translations (F is invariant): the gauge projection is
	// orthogonal to the common shift only when they sum to zero, and BCM's
	// translation solve, which pins pose 0, moves the centroid.
	m.removeShift(x)
	m.mulQ(nq, x)
	f := inner(x, nq)
	gnorm, enorm := m.gradient(grad, x, nq)
	setPoint()

	// fFloor stands for F where F is near 0: below it a change of F is
	// judged against the problem's own scale, not against |F| (see
	// weightUnit).
	fFloor := rtrFloor * weightUnit(m.q, m.d, m.free)
	dim := float64(len(x.Data))
	maxRadius := math.Sqrt(dim) * math.Max(1, math.Sqrt(inner(x, x)/dim)) * 10
	radius := maxRadius / 80
	// tCG measures steps in the preconditioner's metric, the Hessian's or
	// Q's, whose scale is the weights': a step of a given length in X is
	// sqrt(weight) times longer there. The cap is raised accordingly (the
	// first radius is not: at the benchmark graphs' weights it is tuned),
	// so that the radius can grow to what heavy weights need: with every
	// weight of intel times 1e12 it stayed a millionth of the step and the
	// trust region spent its 500 steps crawling.
	maxRadius *= math.Max(1, math.Sqrt(fFloor/rtrFloor))
	if opts.Radius > 0 {
		radius = math.Min(opts.Radius, maxRadius)
	}
	if opts.MaxInner <= 0 {
		opts.MaxInner = 1000
	}
	if opts.MaxIter <= 0 {
		opts.MaxIter = 500
	}
	var out rtrResult
	rel := func() float64 {
		if enorm == 0 {
			return 0
		}
		return gnorm / enorm
	}
	stall := 0
	for it := 0; ; it++ {
		out = rtrResult{F: f, GradNorm: gnorm, RelGrad: rel(), Iterations: it, InnerIterations: out.InnerIterations, Radius: radius}
		if opts.OnRecord != nil {
			step.F, step.GradNorm, step.RelGrad = f, gnorm, rel()
			n, secs := factorTotals()
			step.Factorizations, step.FactorSeconds = n-lastFactors, secs-lastSeconds
			lastFactors, lastSeconds = n, secs
			opts.OnRecord(it, step)
		}
		step = Record{}
		switch {
		case rel() <= opts.GradTol:
			out.Stop = "gradient"
			return out, nil
		case it >= opts.MaxIter:
			out.Stop = "iterations"
			return out, nil
		case !opts.Deadline.IsZero() && time.Now().After(opts.Deadline):
			out.Stop = "time"
			return out, nil
		case stall >= 12, stall >= 2 && rel() <= 100*opts.GradTol:
			// Near the tolerance, steps that make no progress mean the
			// gradient has reached its rounding floor: more iterations
			// only refactor the Hessian to no effect.
			out.Stop = "stalled"
			return out, nil
		}
		if err := ctx.Err(); err != nil {
			out.Stop = "cancelled"
			return out, err
		}

		// Truncated CG on the model m(eta) = <grad, eta> + <eta, H eta>/2
		// inside ||eta||_P <= radius.
		zeroBlocks(eta)
		zeroBlocks(heta)
		// The gradient is orthogonal to the gauge in exact arithmetic;
		// its rounding-level gauge part would sit in the residual forever.
		copyBlocks(res, grad)
		horizontal(res)
		precond(z, res)
		zr := inner(z, res)
		if !(zr > 0) {
			// The preconditioned gradient vanished (all gauge, or a
			// failed preconditioner): there is no step to take.
			out.Stop = "stalled"
			return out, nil
		}
		dPd, ePe, ePd := zr, 0.0, 0.0
		for k := range delta.Data {
			delta.Data[k] = -z.Data[k]
		}
		r0 := gnorm
		hitBoundary := false
		inner1 := 0
		for j := 0; j < opts.MaxInner; j++ {
			inner1++
			m.hess(hdelta, x, delta, lam, work)
			horizontal(hdelta)
			dHd := inner(delta, hdelta)
			alpha := zr / dHd
			ePeNew := ePe + 2*alpha*ePd + alpha*alpha*dPd
			if dHd <= 0 || ePeNew >= radius*radius {
				tau := (-ePd + math.Sqrt(ePd*ePd+dPd*(radius*radius-ePe))) / dPd
				axpy(tau, delta, eta)
				axpy(tau, hdelta, heta)
				hitBoundary = true
				break
			}
			ePe = ePeNew
			axpy(alpha, delta, eta)
			axpy(alpha, hdelta, heta)
			axpy(alpha, hdelta, res)
			m.proj(res, x, res)
			if tcgConverged(math.Sqrt(inner(res, res)), r0, enorm, opts.GradTol) {
				break
			}
			precond(z, res)
			zrOld := zr
			zr = inner(z, res)
			beta := zr / zrOld
			for k := range delta.Data {
				delta.Data[k] = -z.Data[k] + beta*delta.Data[k]
			}
			ePd = beta * (ePd + alpha*dPd)
			dPd = zr + beta*beta*dPd
		}
		out.InnerIterations += inner1
		step.Inner = inner1
		refactor = hp == nil || stale.step(inner1, hp.refactorAfter())
		if useHessian {
			if from := resumeFrom(hp.rung, hp.resumed, hp.replaced); from >= 0 {
				refactor, hp.resume, hp.resumeAt = true, true, from
			}
		}

		m.retract(xnew, x, eta)
		m.mulQ(nqNew, xnew)
		// F is a sum of terms far larger than F itself near an optimum
		// (tau t^2 against small residuals), so F(new) - F(old) formed by
		// subtraction is mostly rounding. The exact identity
		// F(new) - F(old) = <X_new - X, (X_new + X) Q> uses the two products
		// at hand and loses nothing to cancellation.
		decrease := 0.0
		for k, v := range xnew.Data {
			decrease -= (v - x.Data[k]) * (nqNew.Data[k] + nq.Data[k])
		}
		model := inner(grad, eta) + inner(eta, heta)/2
		// Regularize rho so that steps whose decrease is at the level of
		// rounding are not judged by noise.
		reg := math.Max(fFloor, math.Abs(f)) * 1e-15
		rho := (decrease + reg) / (-model + reg)
		stepNorm := math.Sqrt(ePe) // eta's norm in the preconditioner's metric
		if hitBoundary {
			stepNorm = radius
		}
		radius = nextRadius(radius, maxRadius, stepNorm, rho, hitBoundary)
		if rho > 0.1 && decrease >= -reg {
			if decrease/math.Max(fFloor, math.Abs(f)) < 1e-16 {
				stall++
			} else {
				stall = 0
			}
			step.Accepted = true
			x, xnew = xnew, x
			nq, nqNew = nqNew, nq
			// Track F through the accurate decrease: re-evaluating
			// tr(XQX^T) would add rounding noise of relative size ~1e-10.
			f -= decrease
			if opts.Translations != nil && hitBoundary {
				// The translations enter F quadratically, so their exact
				// minimizer given the new Y blocks is one sparse solve: a
				// block-coordinate step that a step cut short by the
				// trust region did not take. Far from a critical point
				// (M3500b from its chordal estimate, 0.2 rad of rotation
				// noise) the translations lag the rotations, and the
				// rank-2 level took 35 steps without it, 18 with it. An
				// interior step is a Newton step, which moved the
				// translations to second order already: re-solving there
				// gained nothing on the suite and cost a stale factor.
				dec, err := opts.Translations(x, nq)
				if err != nil {
					return out, err
				}
				f -= dec
				m.removeShift(x) // the solve pins one pose, not the centroid
				m.mulQ(nq, x)
			}
			gnorm, enorm = m.gradient(grad, x, nq)
			setPoint()
		} else {
			stall++
		}
	}
}

// rtrFloor times weightUnit is the F below which the trust region judges
// a step's decrease against the problem's scale rather than against |F|
// (which vanishes at an exact optimum).
const rtrFloor = 1e-5

// weightUnit is the problem's own scale of F: the mean over the poses
// (landmarks, free = true, aside) of the trace of the rotation part of
// Q's diagonal block, the weight of the measurements at a pose. It is
// proportional to the weights, so a test against it means the same
// whatever their units: a uniform scaling of every weight scales F, Q,
// Lambda and every bound by the same factor, and a decision made against
// weightUnit (never against an absolute number such as 1) does not change.
func weightUnit(q *sparse.BlockSym, d int, free []bool) float64 {
	b, w, n := q.B, 0.0, 0
	for i := 0; i < q.N; i++ {
		if free != nil && free[i] {
			continue
		}
		blk := q.Block(q.Diag[i])
		for a := 0; a < d; a++ {
			w += blk[a*b+a]
		}
		n++
	}
	if n == 0 {
		return 0
	}
	return w / float64(n)
}
