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
// orthonormal tangent basis (hessian_precond.go; exact at rank d, split above), and
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
	// Translations, if not nil, replaces the translations of every trial
	// point by their exact minimizer given its rotations (varpro.go).
	Translations *translationProjector
	// Radius is the first trust-region radius (0: a default from the size
	// of x); rtrResult.Radius is the last, which the next rank starts from.
	Radius float64
	// noReplay makes a rejected step's retry recompute its tCG run in
	// full (tests of tcgQuarter).
	noReplay bool
	// share makes tCG's direction use the point's gradient and X Q
	// storage at any size (tests of shareMinBytes).
	share bool
	// buffers, if set, keeps the run's vectors for the next run at the
	// same size (rtrBuffers).
	buffers *rtrBuffers
}

// rtrBuffers keeps a trust region's vectors from one run of rtr to the
// next, for a caller that runs it again and again on one problem (a
// distributed agent's BlockProblem, a few steps per update): made anew,
// they were most of the memory an agent allocated per update, 13 MB at
// the 10^5 lattice's parts, and the collections and page faults to
// recycle them were a third of its time under a tight heap goal. The
// bits are the same as with fresh vectors because every vector is written
// before it is read (tCG zeroes its own); a kept vector is cleared before
// it is used again all the same, as a guard against a change that reads
// one first, at the cost of a memset of each.
type rtrBuffers struct {
	r, b, n int
	blocks  []*sparse.Blocks // in the order newTrustRegion takes them
	lam     []float64
}

// vector returns the k-th vector of a run on m: kept from a run at the
// same size and cleared, or made (and kept).
func (bs *rtrBuffers) vector(m *manifold, k int) *sparse.Blocks {
	if bs == nil {
		return m.newBlocks()
	}
	if bs.r != m.r || bs.b != m.b || bs.n != m.n {
		*bs = rtrBuffers{r: m.r, b: m.b, n: m.n}
	}
	if k < len(bs.blocks) {
		v := bs.blocks[k]
		clear(v.Data)
		return v
	}
	v := m.newBlocks()
	bs.blocks = append(bs.blocks, v)
	return v
}

// multipliers returns the run's Lambda blocks, zero (after vector, which
// sets the size).
func (bs *rtrBuffers) multipliers(m *manifold) []float64 {
	if bs == nil {
		return make([]float64, m.n*m.d*m.d)
	}
	if len(bs.lam) != m.n*m.d*m.d {
		bs.lam = make([]float64, m.n*m.d*m.d)
	}
	clear(bs.lam)
	return bs.lam
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
	return rn <= r0*math.Min(math.Pow(r0/enorm, tcgTheta), tcgKappa) || rn <= 0.1*gradTol*enorm
}

// tcgTheta and tcgKappa: see tcgConverged.
const tcgTheta, tcgKappa = 1.0, 0.1

// tcgShrink is the factor by which tcgConverged asks truncated CG to
// shrink the residual at a point whose relative gradient is rel.
func tcgShrink(rel, gradTol float64) float64 {
	return math.Max(math.Min(math.Pow(rel, tcgTheta), tcgKappa), 0.1*gradTol/rel)
}

// keepForLastStep reports whether the step from a point with relative
// gradient rel keeps the Hessian's factor that the staleness rule
// (staleFactor) would replace. The rule refactors well before break-even
// because a stale factor degrades from step to step; the last step has no
// step after it. A step is taken as the last when rel^2 <= gradTol: the
// trust region converges quadratically there, and on the benchmark graphs
// the last step took rel to between 0.06 and 1.75 times rel^2. The kept
// factor's inner iterations are predicted from its last run of tCG, which
// shrank the residual by rate per iteration (0: unknown, the run ended on
// the boundary or was not preconditioned by the Hessian's factor), as
// those that shrink it by tcgShrink(rel); a fresh factor is counted at
// freshInner, and a factorization at factorIters() inner iterations
// (hessianPrecond.factorIterations, asked only when the rest allows a
// keep: it sums over the factor's columns). A kept factor predicted to
// need more than budget iterations (restartAfter's, after which the step
// would refactor anyway) is not kept. A misjudged kept factor is still
// replaced mid-step by restartAfter's rule.
//
// The rule holds only for tight tolerances (gradTol at most
// lastStepMaxTol), the ones it was measured at: at a loose one, such as
// the robust solver's inner solves, rel^2 <= gradTol holds far from
// quadratic convergence, where the step taken as the last is not.
func keepForLastStep(rel, gradTol, rate float64, budget int, factorIters func() float64) bool {
	if !(rate > 0 && rate < 1) || !(rel > 0) || rel*rel > gradTol || gradTol > lastStepMaxTol {
		return false
	}
	kept := math.Ceil(math.Log(tcgShrink(rel, gradTol)) / math.Log(rate))
	return kept <= float64(budget) && kept-freshInner <= factorIters()
}

// lastStepMaxTol is the loosest gradient tolerance at which
// keepForLastStep may keep a factor: the suite's solves run at 1e-9
// (docs/tuning.md, "Trust-region work, issue 27").
const lastStepMaxTol = 1e-6

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

func newRowSolver(factor *lazyFactor) *rowSolver {
	return &rowSolver{factor: factor}
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
	if len(s.in) != r*dim {
		// Made when first used: the Hessian's factor preconditions almost
		// every step, and at a million poses these are large
		// (docs/tuning.md, "Tuning figures": rowSolver).
		s.rhs, s.in = make([]float64, r*dim), make([]float64, r*dim)
	}
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

// rtr runs the trust region from x (updated in place): from the start
// (trustRegion.start), each iteration records the point, stops when a
// rule says so, solves the model by truncated CG (tcg), makes the trial
// point (trial) and judges it (judge).
func rtr(ctx context.Context, m *manifold, x *sparse.Blocks, pre *rowSolver, hp *hessianPrecond, opts rtrOptions) (rtrResult, error) {
	t := newTrustRegion(m, x, pre, hp, opts)
	// Accepted steps swap x with a scratch buffer; the caller's storage
	// receives the final point.
	defer func() {
		if t.x != x {
			copyBlocks(x, t.x)
		}
	}()
	t.start()
	for it := 0; ; it++ {
		t.record(it)
		if stop, err := t.stopped(ctx, it); stop {
			return t.out, err
		}
		ePe, hitBoundary, ok := t.tcg()
		if !ok {
			// The preconditioned gradient vanished (all gauge, or a
			// failed preconditioner): there is no step to take.
			t.out.Stop = "stalled"
			return t.out, nil
		}
		decrease, err := t.trial()
		if err != nil {
			return t.out, err
		}
		t.judge(decrease, ePe, hitBoundary)
	}
}

// trustRegion is the state of one run of rtr: the point, its products and
// gradient, the model's step and its scratch, the radius, and the
// preconditioners' bookkeeping.
type trustRegion struct {
	m    *manifold
	opts rtrOptions
	pre  *rowSolver
	hp   *hessianPrecond
	gg   *gauge

	x, nq, grad        *sparse.Blocks // the point, X Q there, the gradient
	eta, heta          *sparse.Blocks // the step and its Hessian product
	res, delta, hdelta *sparse.Blocks // tCG's residual, direction and its product
	xnew, nqNew        *sparse.Blocks // the trial point and X Q there
	lam                []float64      // Lambda at the point
	f, gnorm, enorm    float64        // F, ||grad F|| and ||2 X Q|| at the point
	radius, maxRadius  float64
	// fFloor stands for F where F is near 0: below it a change of F is
	// judged against the problem's own scale, not against |F| (see
	// weightUnit).
	fFloor      float64
	stall       int // steps in a row that made no progress
	out         rtrResult
	step        Record // the statistics of the step being taken
	lastFactors int    // factorTotals at the last record
	lastSeconds float64

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
	useHessian, refactor, pending bool
	stale                         staleFactor
	// rate is the residual's shrink per iteration in the last run of tCG
	// with the Hessian's factor, or 0 (see keepForLastStep).
	rate float64
	// fresh says the Hessian's factor in use was made at the current
	// point: tCG then never restarts with a new one, which would be the
	// same factor (after a rejected step the point has not moved).
	fresh bool
	// quarter is tCG's state where its last run first crossed a quarter
	// of its radius (see tcgQuarter); nil at rank d.
	quarter *tcgQuarter
	// share: tCG's direction and its Hessian product live in grad's and
	// nq's storage (delta and hdelta are nil), and restore makes those
	// again after tCG (see shareMinBytes).
	share bool
}

// tcgQuarter is truncated CG's state at the iteration where a run with a
// quarter of its radius would have stopped on the boundary: the iterate
// and its Hessian product before that iteration's update, the direction
// and its product, and the scalars of the boundary step. A step the
// trust region rejects on the boundary is retried at the same point, with
// the same preconditioner, at a quarter of the radius (nextRadius), and
// that run repeats the rejected one's iterations bit for bit up to that
// iteration: from the kept state the retry takes its boundary step at
// once. Above rank d, where a level entered by an escape starts on a
// landscape its model fits poorly, such retries come after runs of tens
// of iterations (M3500b's first rank-3 step); at rank d the benchmark
// graphs reject no step. So it is kept only above rank d, and only while
// its four vectors take at most quarterMaxBytes.
type tcgQuarter struct {
	ok                       bool
	radius                   float64 // the quarter radius the state is for
	eta, heta, delta, hdelta *sparse.Blocks
	ePe, ePd, dPd            float64
	iters                    int    // the iterations a retry would repeat, the boundary's included
	precond                  string // the run's preconditioner (Record.Precond)
}

// quarterMaxBytes bounds tcgQuarter's vectors: at a million poses they
// would add hundreds of megabytes to the trust region's peak memory for
// tens of iterations saved.
const quarterMaxBytes = 64 << 20

// shareMinBytes is the size of a vector from which tCG's direction and its
// Hessian product are kept in the storage of the point's gradient and of
// X Q, which tCG does not read after its start; restore makes those two
// again from the point once tCG is done. Both are functions of the point
// alone (X Q the same product the trial point's was made by, the gradient
// its projection), so they come out bit for bit as they were. The step's
// Hessian product, which only the model's value needs, is not summed
// along tCG either but made from the step after it, in the residual's
// storage: the same vector to rounding, so the same steps are accepted
// and the radius follows the same rule. For two products with Q per tCG
// run, three vectors fewer through the whole trust region, 288 MB at a
// million poses. Smaller solves keep them, where the products are a
// larger share of a step; there tcgQuarter may also keep tCG's state,
// whose replay needs the summed product.
const shareMinBytes = 16 << 20

// newTrustRegion makes the state of a run from x, with its buffers.
func newTrustRegion(m *manifold, x *sparse.Blocks, pre *rowSolver, hp *hessianPrecond, opts rtrOptions) *trustRegion {
	t := &trustRegion{m: m, opts: opts, pre: pre, hp: hp, x: x, refactor: true}
	k := 0
	vec := func() *sparse.Blocks {
		k++
		return opts.buffers.vector(m, k-1)
	}
	t.nq = vec()
	t.grad = vec()
	t.eta = vec()
	t.res = vec()
	t.share = opts.share || 8*len(x.Data) >= shareMinBytes
	if t.share {
		t.heta = t.res // made after tCG, from eta (restore)
	} else {
		t.heta = vec()
		t.delta, t.hdelta = vec(), vec()
	}
	// xnew and nqNew hold nothing while tCG runs (the trial point is made
	// after it): they are the preconditioned residual and the Hessian
	// product's scratch there, two vectors less (docs/tuning.md,
	// "Tuning figures": rowSolver; at a million poses a vector is 96 MB).
	t.xnew, t.nqNew = vec(), vec()
	t.lam = opts.buffers.multipliers(m)
	if m.r > m.d && 4*8*len(x.Data) <= quarterMaxBytes && !opts.noReplay && !t.share {
		t.quarter = &tcgQuarter{eta: vec(), heta: vec(), delta: vec(), hdelta: vec()}
	}
	t.gg = newGauge(m.r)
	t.gg.threads = m.threads
	if t.opts.MaxInner <= 0 {
		t.opts.MaxInner = 1000
	}
	if t.opts.MaxIter <= 0 {
		t.opts.MaxIter = 500
	}
	return t
}

// start prepares the first point: its translations centred (F is
// invariant; the gauge projection is orthogonal to the common shift only
// when they sum to zero, and BCM's translation solve, which pins pose 0,
// moves the centroid), its F, gradient and multipliers, and the radius.
func (t *trustRegion) start() {
	m, x := t.m, t.x
	m.removeShift(x)
	m.mulQ(t.nq, x)
	t.f = inner(x, t.nq)
	t.gnorm, t.enorm = m.gradient(t.grad, x, t.nq)
	t.setPoint()

	// fFloor stands for F where F is near 0: below it a change of F is
	// judged against the problem's own scale, not against |F| (see
	// weightUnit).
	t.fFloor = rtrFloor * weightUnit(m.q, m.d, m.free)
	dim := float64(len(x.Data))
	t.maxRadius = math.Sqrt(dim) * math.Max(1, math.Sqrt(inner(x, x)/dim)) * 10
	t.radius = t.maxRadius / 80
	// tCG measures steps in the preconditioner's metric, the Hessian's or
	// Q's, whose scale is the weights': a step of a given length in X is
	// sqrt(weight) times longer there. The cap is raised accordingly (the
	// first radius is not: at the benchmark graphs' weights it is tuned),
	// so that the radius can grow to what heavy weights need: with every
	// weight of intel times 1e12 it stayed a millionth of the step and the
	// trust region spent its 500 steps crawling.
	t.maxRadius *= math.Max(1, math.Sqrt(t.fFloor/rtrFloor))
	if t.opts.Radius > 0 {
		t.radius = math.Min(t.opts.Radius, t.maxRadius)
	}
	t.lastFactors, t.lastSeconds = t.factorTotals()
}

// setPoint computes what the point's steps need (Lambda and the gauge)
// and whether its first preconditioning must factor the Hessian.
func (t *trustRegion) setPoint() {
	t.m.lambda(t.lam, t.x, t.nq)
	t.gg.setPoint(t.m.gaugePoint(t.x))
	if t.refactor && t.useHessian && !t.hp.resume && keepForLastStep(t.rel(), t.opts.GradTol, t.rate, restartAfter(t.hp), t.hp.factorIterations) {
		t.refactor = false
	}
	t.pending = t.hp != nil && (t.refactor || !t.useHessian)
	t.fresh = false
	if t.quarter != nil {
		t.quarter.ok = false
	}
}

// rel is the relative gradient norm at the point.
func (t *trustRegion) rel() float64 {
	if t.enorm == 0 {
		return 0
	}
	return t.gnorm / t.enorm
}

// horizontal removes the gauge directions (Omega X and the common
// translation): tCG works on their orthogonal complement, where the
// Hessian is nonsingular at a strict minimum. Away from a critical point
// the Hessian maps gauge directions to non-gauge ones and back, so both
// its output and the preconditioner's are projected.
func (t *trustRegion) horizontal(v *sparse.Blocks) {
	t.m.removeShift(v)
	t.gg.remove(v)
	t.m.maskFree(v) // landmark Y coordinates are not variables
}

// factorTotals counts the factorizations made so far (the Hessian's and
// Q's) and their seconds; a record's share is the difference from the
// last record's totals.
func (t *trustRegion) factorTotals() (n int, secs float64) {
	if t.hp != nil {
		n, secs = t.hp.factorizations, t.hp.updateSeconds
	}
	if t.pre != nil {
		n, secs = n+t.pre.factor.attempts, secs+t.pre.factor.seconds
	}
	return n, secs
}

// precond sets dst to the preconditioned v, factoring the Hessian first
// when the point asks for it (pending).
func (t *trustRegion) precond(dst, v *sparse.Blocks) {
	hp := t.hp
	if t.pending {
		t.useHessian, t.pending = hp.update(t.x, t.lam), false
		t.fresh = true
		t.stale.factored()
		if t.useHessian {
			t.step.Shift, t.step.Raised = shiftLadder[hp.rung], hp.raised
		}
	}
	switch {
	case t.useHessian:
		t.step.Precond = "hessian"
		hp.apply(dst, v)
	case t.pre != nil:
		t.step.Precond = "q"
		if !t.pre.apply(dst, v) {
			t.step.Precond = "none"
			return
		}
	default:
		t.step.Precond = "none"
		copyBlocks(dst, v)
		return
	}
	t.m.proj(dst, t.x, dst)
	t.horizontal(dst)
}

// record sets the run's result to iteration it's point and hands the
// point, with the statistics of the step that led to it, to OnRecord.
func (t *trustRegion) record(it int) {
	t.out = rtrResult{F: t.f, GradNorm: t.gnorm, RelGrad: t.rel(), Iterations: it, InnerIterations: t.out.InnerIterations, Radius: t.radius}
	if t.opts.OnRecord != nil {
		t.step.F, t.step.GradNorm, t.step.RelGrad = t.f, t.gnorm, t.rel()
		n, secs := t.factorTotals()
		t.step.Factorizations, t.step.FactorSeconds = n-t.lastFactors, secs-t.lastSeconds
		t.lastFactors, t.lastSeconds = n, secs
		t.opts.OnRecord(it, t.step)
	}
	t.step = Record{}
}

// stopped reports whether the run ends before iteration it's step, with
// the reason in out.Stop (and the context's error when it was cancelled).
func (t *trustRegion) stopped(ctx context.Context, it int) (bool, error) {
	opts := t.opts
	switch {
	case t.rel() <= opts.GradTol:
		t.out.Stop = "gradient"
		return true, nil
	case it >= opts.MaxIter:
		t.out.Stop = "iterations"
		return true, nil
	case !opts.Deadline.IsZero() && time.Now().After(opts.Deadline):
		t.out.Stop = "time"
		return true, nil
	case t.stall >= 12, t.stall >= 2 && t.rel() <= 100*opts.GradTol:
		// Near the tolerance, steps that make no progress mean the
		// gradient has reached its rounding floor: more iterations
		// only refactor the Hessian to no effect.
		t.out.Stop = "stalled"
		return true, nil
	}
	if err := ctx.Err(); err != nil {
		t.out.Stop = "cancelled"
		return true, err
	}
	return false, nil
}

// tcg solves the model m(eta) = <grad, eta> + <eta, H eta>/2 inside
// ||eta||_P <= radius by truncated CG into eta (heta = H eta), and
// returns ||eta||_P^2 and whether it stopped on the boundary; ok is false
// when the preconditioned gradient vanished. A factor kept from an earlier
// point that has used up its budget of inner iterations (restartAfter) is
// replaced by a fresh one and tCG starts over, once. It then decides
// whether the next point refactors the Hessian.
func (t *trustRegion) tcg() (ePe float64, hitBoundary, ok bool) {
	m, x, hp, opts := t.m, t.x, t.hp, t.opts
	eta, heta, res, z, delta, hdelta := t.eta, t.heta, t.res, t.xnew, t.delta, t.hdelta
	radius := t.radius
	if q := t.quarter; q != nil && q.ok && q.radius == radius {
		return t.replayQuarter()
	}
	if t.share {
		delta, hdelta, heta = t.grad, t.nq, nil
		defer t.restore()
	}
	inner1 := 0
	for pass := 0; ; pass++ {
		if t.quarter != nil {
			t.quarter.ok = false // a new run, or a restart with a new factor
		}
		if t.share && pass > 0 {
			t.restorePoint() // the last pass's direction took their storage
		}
		zeroBlocks(eta)
		if heta != nil {
			zeroBlocks(heta)
		}
		// The gradient is orthogonal to the gauge in exact arithmetic;
		// its rounding-level gauge part would sit in the residual forever.
		copyBlocks(res, t.grad)
		t.horizontal(res)
		t.precond(z, res) // sets t.fresh when it factored (a new point, or a retry)
		zr := inner(z, res)
		if !(zr > 0) {
			return 0, false, false
		}
		var dPd, ePd float64
		dPd, ePe, ePd = zr, 0.0, 0.0
		for k := range delta.Data {
			delta.Data[k] = -z.Data[k]
		}
		r0 := t.gnorm
		hitBoundary = false
		limit, kept := opts.MaxInner, t.useHessian && !t.fresh
		if kept {
			limit = min(limit, restartAfter(hp))
		}
		finished := false
		var rn float64 // the last residual's norm
		passInner := 0
		for j := 0; j < limit; j++ {
			inner1++
			passInner++
			m.hess(hdelta, x, delta, t.lam, t.nqNew)
			t.horizontal(hdelta)
			dHd := inner(delta, hdelta)
			alpha := zr / dHd
			ePeNew := ePe + 2*alpha*ePd + alpha*alpha*dPd
			if q := t.quarter; q != nil && !q.ok && (dHd <= 0 || ePeNew >= (radius/4)*(radius/4)) {
				q.keep(radius/4, eta, heta, delta, hdelta, ePe, ePd, dPd, j+1, t.step.Precond)
			}
			if dHd <= 0 || ePeNew >= radius*radius {
				tau := (-ePd + math.Sqrt(ePd*ePd+dPd*(radius*radius-ePe))) / dPd
				axpy(tau, delta, eta)
				if heta != nil {
					axpy(tau, hdelta, heta)
				}
				hitBoundary, finished = true, true
				break
			}
			ePe = ePeNew
			axpy(alpha, delta, eta)
			if heta != nil {
				axpy(alpha, hdelta, heta)
			}
			axpy(alpha, hdelta, res)
			m.proj(res, x, res)
			rn = math.Sqrt(inner(res, res))
			if tcgConverged(rn, r0, t.enorm, opts.GradTol) {
				finished = true
				break
			}
			t.precond(z, res)
			zrOld := zr
			zr = inner(z, res)
			beta := zr / zrOld
			for k := range delta.Data {
				delta.Data[k] = -z.Data[k] + beta*delta.Data[k]
			}
			ePd = beta * (ePd + alpha*dPd)
			dPd = zr + beta*beta*dPd
		}
		t.rate = 0
		if finished && !hitBoundary && t.useHessian && r0 > 0 {
			t.rate = math.Pow(rn/r0, 1/float64(passInner))
		}
		if !kept || finished {
			break
		}
		// The stale factor ran out of its budget: factor at this point
		// and start tCG again (the iterations spent are counted).
		t.pending = true
	}
	t.out.InnerIterations += inner1
	t.step.Inner = inner1
	t.afterTCG(inner1)
	return ePe, hitBoundary, true
}

// restore makes the point's X Q and gradient again after tCG used their
// storage (share), and the step's Hessian product in the residual's.
func (t *trustRegion) restore() {
	t.restorePoint()
	t.m.hess(t.heta, t.x, t.eta, t.lam, t.nqNew)
	t.horizontal(t.heta)
}

// restorePoint makes the point's X Q and gradient again, for a restart of
// tCG, which starts from the gradient and has no step yet.
func (t *trustRegion) restorePoint() {
	t.m.mulQ(t.nq, t.x)
	t.m.gradient(t.grad, t.x, t.nq)
}

// afterTCG decides whether the next point refactors the Hessian, after a
// run of tCG that took (or, replayed, stands for) iters iterations.
func (t *trustRegion) afterTCG(iters int) {
	hp := t.hp
	t.refactor = hp == nil || t.stale.step(iters, hp.refactorAfter())
	if t.useHessian {
		if from := resumeFrom(hp.rung, hp.resumed, hp.replaced); from >= 0 {
			t.refactor, hp.resume, hp.resumeAt = true, true, from
		}
	}
}

// keep stores the state of tCG at iteration iters (counted from 1) of its
// run with radius 4 quarter: see tcgQuarter.
func (q *tcgQuarter) keep(quarter float64, eta, heta, delta, hdelta *sparse.Blocks, ePe, ePd, dPd float64, iters int, precond string) {
	copyBlocks(q.eta, eta)
	copyBlocks(q.heta, heta)
	copyBlocks(q.delta, delta)
	copyBlocks(q.hdelta, hdelta)
	q.ok, q.radius = true, quarter
	q.ePe, q.ePd, q.dPd = ePe, ePd, dPd
	q.iters, q.precond = iters, precond
}

// replayQuarter is tcg's run at the radius of the kept state (the point
// and the preconditioner unchanged since it was kept): its boundary step,
// computed as the run would, with no Hessian product or solve. The
// staleness rule counts the iterations the run would have taken, so that
// the trust region's path is the one it takes without the replay; the
// step's record counts none.
func (t *trustRegion) replayQuarter() (ePe float64, hitBoundary, ok bool) {
	q := t.quarter
	q.ok = false
	radius := q.radius
	ePe, ePd, dPd := q.ePe, q.ePd, q.dPd
	copyBlocks(t.eta, q.eta)
	copyBlocks(t.heta, q.heta)
	tau := (-ePd + math.Sqrt(ePd*ePd+dPd*(radius*radius-ePe))) / dPd
	axpy(tau, q.delta, t.eta)
	axpy(tau, q.hdelta, t.heta)
	t.step.Precond = q.precond
	t.step.Inner = 0
	t.rate = 0
	t.afterTCG(q.iters)
	return ePe, true, true
}

// trial makes the trial point xnew = R_x(eta), with its exactly optimal
// translations when opts.Translations is set, and nqNew = xnew Q, and
// returns F's decrease from x to it.
func (t *trustRegion) trial() (float64, error) {
	m, x, xnew, nqNew := t.m, t.x, t.xnew, t.nqNew
	m.retract(xnew, x, t.eta)
	if t.opts.Translations != nil {
		if err := t.opts.Translations.project(m, xnew, nqNew); err != nil {
			return 0, err
		}
	} else {
		m.mulQ(nqNew, xnew)
	}
	// F is a sum of terms far larger than F itself near an optimum
	// (tau t^2 against small residuals), so F(new) - F(old) formed by
	// subtraction is mostly rounding. The exact identity
	// F(new) - F(old) = <X_new - X, (X_new + X) Q> uses the two products
	// at hand and loses nothing to cancellation.
	decrease := 0.0
	for k, v := range xnew.Data {
		decrease -= (v - x.Data[k]) * (nqNew.Data[k] + t.nq.Data[k])
	}
	return decrease, nil
}

// judge compares the trial point's decrease with the model's, sets the
// next radius, and moves to the trial point when the step is accepted.
func (t *trustRegion) judge(decrease, ePe float64, hitBoundary bool) {
	f := t.f
	model := inner(t.grad, t.eta) + inner(t.eta, t.heta)/2
	// Regularize rho so that steps whose decrease is at the level of
	// rounding are not judged by noise.
	reg := math.Max(t.fFloor, math.Abs(f)) * 1e-15
	rho := (decrease + reg) / (-model + reg)
	stepNorm := math.Sqrt(ePe) // eta's norm in the preconditioner's metric
	if hitBoundary {
		stepNorm = t.radius
	}
	t.radius = nextRadius(t.radius, t.maxRadius, stepNorm, rho, hitBoundary)
	if rho > 0.1 && decrease >= -reg {
		if decrease/math.Max(t.fFloor, math.Abs(f)) < 1e-16 {
			t.stall++
		} else {
			t.stall = 0
		}
		t.step.Accepted = true
		t.x, t.xnew = t.xnew, t.x
		t.nq, t.nqNew = t.nqNew, t.nq
		// Track F through the accurate decrease: re-evaluating
		// tr(XQX^T) would add rounding noise of relative size ~1e-10.
		t.f -= decrease
		t.gnorm, t.enorm = t.m.gradient(t.grad, t.x, t.nq)
		t.setPoint()
	} else {
		t.stall++
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
