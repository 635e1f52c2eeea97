package sync

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"time"

	"github.com/bcmsync/bcmsync/bcm"
	"github.com/bcmsync/bcmsync/internal/smalldense"
	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
	"github.com/bcmsync/bcmsync/rounding"
)

// Solve finds a certified globally optimal estimate of g's poses (or
// rotations): initialize, then climb the Riemannian staircase (BCM, a
// trust-region finish, the certificate, a saddle escape when it fails),
// then round and recover translations. When LargestComponent is set and g is
// disconnected, Result.Poses index the largest component: see Result.Graph.
// SolveRobust wraps it to reject outliers.
func Solve(ctx context.Context, g *posegraph.Graph, opts Options) (*Result, error) {
	return SolveWith(ctx, g, opts, nil)
}

// NewBCMRTR returns a new level optimizer of Solve's method (MethodBCMRTR):
// SolveWith(ctx, g, opts, NewBCMRTR()) is Solve(ctx, g, opts). One
// optimizer serves one solve.
func NewBCMRTR() LevelOptimizer { return &central{} }

// central is Solve's level optimizer (MethodBCMRTR): at each rank a few
// sweeps of block-coordinate minimization (package bcm), the core
// algorithm, which makes cheap early progress, then the Riemannian trust
// region (rtr.go), whose Newton steps bring the point to the accuracy a
// certificate needs. It keeps across calls what a solve builds once: the
// lazily made factor of Q + sigma I, the Hessian preconditioner with its
// symbolic analysis and the trust region's translation projection (BCM's
// and the projection's translation system is the staircase's rounding
// plan, Run.plan).
type central struct {
	solver  *bcm.Solver
	qFactor *lazyFactor
	hp      *hessianPrecond
	tp      *translationProjector // nil for rotations
	m       *manifold             // at the rank of the last level
	// radius is the trust region's radius where the last run ended, where
	// the next one starts (0: the first level's default). The escape
	// moves the point by little, and the radius the last level ended with
	// is the scale at which its model held; the default, sized for a
	// point far from any critical point, wasted the first steps of a
	// higher level on steps the model badly mispredicted
	// (docs/tuning.md).
	radius float64
	// radiusRank is the rank of the run that left radius.
	radiusRank int
	// iters counts the level's records so far (BCM sweeps, then
	// trust-region steps), which number them.
	iters int
}

func (c *central) Method(r *Run) MethodInfo {
	return MethodInfo{Name: MethodBCMRTR, FirstTol: r.opts.GradTol, MaxRefinements: maxProofRefinements}
}

// Init runs Options.Init on the solve's ordering and prepares the
// factors the levels share. A Cholesky factor of Q + sigma I
// preconditions the trust region's inner CG where the Hessian does not
// factor; sigma only lifts Q's null space (the common translation), so it
// is tiny next to the weights.
func (c *central) Init(ctx context.Context, r *Run) ([]posegraph.Pose, Init, error) {
	// The staircase makes the analysis before Init unless the optimizer
	// certifies and rounds by parts; one that wraps this one (leveltest's
	// checks) may, and this one needs it, and Q for the whole run.
	q := r.keepQ()
	r.analyse()
	init, err := initialize(r.g, r.opts, r.plan)
	if err != nil {
		return nil, "", err
	}
	d := r.g.D
	c.qFactor = qFactor(q, r.perm, r.sym)
	c.hp = newHessianPrecond(q, d, r.perm, 1e-9*q.MaxDiag())
	c.hp.threads, c.hp.sym = r.opts.Threads, r.sym
	c.solver = bcm.New(q, d, r.opts.Problem)
	if r.opts.Problem == posegraph.Poses && q.N > 1 {
		if c.tp, err = newTranslationProjector(r.plan, q.N); err != nil {
			return nil, "", err
		}
	}
	return init, r.opts.Init, nil
}

// Optimize runs a level's BCM sweeps (PhaseLevel only), then the trust
// region to goal.Tol, each as one stage; PhaseRefine runs the trust region
// alone, inside the staircase's "refine" stage, with its records under
// phase "refine".
func (c *central) Optimize(ctx context.Context, r *Run, x *sparse.Blocks, goal Goal, lv *Level) (Outcome, error) {
	opts, rank, d := r.opts, x.R, r.g.D
	if goal.Phase == PhaseRefine {
		return c.refine(ctx, r, x, goal.Tol, lv)
	}
	var out Outcome
	if c.m == nil || c.m.r != rank {
		c.m = newManifold(r.q, d, rank, opts.Threads)
	}
	if goal.Phase == PhaseLevel {
		c.iters = 0
		if opts.BCMMaxSweeps > 0 {
			k := r.st.begin("bcm", rank)
			if k < 0 {
				out.Limit = TimeLimit
				return out, nil
			}
			out.Started = true
			t0 := time.Now()
			bo := bcm.Options{
				Rule: opts.Rule, Threads: opts.Threads, Seed: opts.Seed,
				GradTol: opts.BCMTol, DecreaseTol: opts.BCMDecreaseTol, MaxSweeps: opts.BCMMaxSweeps,
				// Exact joint translation steps remove BCM's slow diffusion of
				// translations along long chains.
				SolveTranslations: opts.Problem == posegraph.Poses,
				// The translation system is the rounding's: one
				// factorization in Q's order instead of another with its
				// own ordering.
				Translations: r.plan,
				Progress: func(b bcm.Record) {
					c.iters = b.Sweep
					r.Record(Record{Rank: rank, Phase: "bcm", Iter: b.Sweep, Seconds: r.Seconds(),
						F: b.F, GradNorm: b.GradNorm, RelGrad: b.RelGradNorm})
				},
			}
			if !r.deadline.IsZero() {
				bo.MaxTime = max(time.Until(r.deadline), time.Nanosecond)
			}
			br, err := c.solver.Solve(ctx, x, bo)
			lv.BCMSweeps, lv.BCMStop = br.Sweeps, br.Status.String()
			lv.F, lv.GradNorm, lv.RelGrad = br.F, br.GradNorm, br.RelGradNorm
			lv.BCMSeconds = time.Since(t0).Seconds()
			r.st.end(k)
			if err != nil {
				return out, err
			}
		}
	}

	// The trust region at goal.Tol from x, as one stage, its steps, time
	// and statistics added to the level's.
	k := r.st.begin("rtr", rank)
	if k < 0 {
		out.Limit = TimeLimit
		return out, nil
	}
	out.Started = true
	t0 := time.Now()
	pre := newRowSolver(c.qFactor)
	first := c.iters
	radius := c.radius
	if rank > c.radiusRank {
		radius *= escapeRadius
		if c.radiusRank > 0 {
			// A level above the last is entered by a saddle escape, whose
			// point lies beside a saddle where the certificate just found
			// S not positive semidefinite. The split form needs S to
			// factor unshifted at the point, a dual certificate of a
			// point barely below that saddle: it is refused there (two
			// factorizations wasted) and the full Hessian serves the
			// rank, so it serves from the first step.
			c.hp.fullAt = rank
		}
	}
	rr, err := rtr(ctx, c.m, x, pre, c.hp, rtrOptions{
		GradTol: goal.Tol, MaxIter: opts.MaxIterations, Deadline: r.deadline,
		Translations: c.tp, Radius: radius,
		OnRecord: func(it int, rec Record) {
			if it == 0 && (opts.BCMMaxSweeps > 0 || first > 0) {
				return // the same point as the last record
			}
			c.iters = first + it
			rec.Rank, rec.Phase, rec.Iter, rec.Seconds = rank, "rtr", c.iters, r.Seconds()
			r.Record(rec)
		},
	})
	lv.RTRIterations += rr.Iterations
	lv.RTRInner += rr.InnerIterations
	c.radius, c.radiusRank = rr.Radius, rank
	lv.RTRStop = rr.Stop
	lv.F, lv.GradNorm, lv.RelGrad = rr.F, rr.GradNorm, rr.RelGrad
	lv.RTRSeconds += time.Since(t0).Seconds()
	// The Hessian's factor is the largest thing the solve holds (2.4
	// GB at a million poses) and the certificate allocates its own
	// next, so it is let go here and, when large, collected at once:
	// the certificate and the rounding then reuse its pages instead of
	// faulting in new ones, and the peak memory is the trust region's,
	// not the sum of both (docs/tuning.md).
	if err == nil && c.hp.release() >= releaseCollect {
		runtime.GC()
	}
	r.st.end(k)
	return rtrOutcome(rr, true), err
}

// escapeRadius is the fraction of the last level's final radius that a
// higher level (one entered by a saddle escape) starts from. The escape
// lands beside a saddle of the rank-d problem, in a direction where F is
// nearly flat and strongly curved, so the new level's quadratic model is
// poor at the scale the last level's steps grew to: with the whole radius,
// M3500b's first rank-3 step was a Newton step well inside it that cost
// tens of tCG iterations and raised F where the model promised a small
// decrease, and its retry at a quarter of it failed too. From an eighth,
// tCG stops on the boundary sooner and the level reaches the same point
// with fewer tCG iterations and factorizations, on M3500b and on the
// synthetic not-tight graphs that escape; a quarter and a sixteenth did
// about as well on the synthetic graphs, worse on M3500b (the path above
// rank d is chaotic in the radius; docs/tuning.md, the M3500b
// section). A run at the same rank (a proof refinement) starts from the
// radius as it was.
const escapeRadius = 0.125

// rtrOutcome is the Outcome of a trust-region run that ended as rr.
func rtrOutcome(rr rtrResult, started bool) Outcome {
	out := Outcome{Started: started, Steps: rr.Iterations, Converged: rr.Stop == "gradient"}
	switch rr.Stop {
	case "time":
		out.Limit = TimeLimit
	case "iterations":
		out.Limit = IterationLimit
	}
	return out
}

// refine runs the trust region at rank d from x (a rounded estimate,
// updated in place), as a level's finish does, with its records in the
// history under phase "refine".
func (c *central) refine(ctx context.Context, r *Run, x *sparse.Blocks, tol float64, lv *Level) (Outcome, error) {
	opts, d := r.opts, r.g.D
	m := newManifold(r.q, d, d, opts.Threads)
	t0 := time.Now()
	pre := newRowSolver(c.qFactor)
	rr, err := rtr(ctx, m, x, pre, c.hp, rtrOptions{
		GradTol: tol, MaxIter: opts.MaxIterations, Deadline: r.deadline, Translations: c.tp,
		OnRecord: func(it int, rec Record) {
			rec.Rank, rec.Phase, rec.Iter, rec.Seconds = d, "refine", it, r.Seconds()
			r.Record(rec)
		},
	})
	c.hp.release()
	lv.RTRIterations, lv.RTRInner, lv.RTRStop = rr.Iterations, rr.InnerIterations, rr.Stop
	lv.F, lv.GradNorm, lv.RelGrad = rr.F, rr.GradNorm, rr.RelGrad
	lv.RTRSeconds = time.Since(t0).Seconds()
	return rtrOutcome(rr, true), err
}

// stages records a solve's stages (Result.Stages) and keeps its deadline:
// no stage begins after it.
type stages struct {
	res             *Result
	start, deadline time.Time
	cut             bool // begin refused a stage
}

// begin starts the stage name at rank r and returns its index in
// res.Stages, or -1 when the deadline has passed: the stage must not run.
// The time it checks is the time it records, so a recorded start is never
// past the deadline.
func (s *stages) begin(name string, r int) int {
	now := time.Now()
	if !s.deadline.IsZero() && now.After(s.deadline) {
		s.cut = true
		return -1
	}
	s.res.Stages = append(s.res.Stages, Stage{Name: name, Rank: r, Start: now.Sub(s.start).Seconds()})
	return len(s.res.Stages) - 1
}

// end records the duration of stage k (a no-op for -1).
func (s *stages) end(k int) {
	if k >= 0 {
		st := &s.res.Stages[k]
		st.Seconds = time.Since(s.start).Seconds() - st.Start
	}
}

// timedOutBeforeInit ends a solve whose time limit passed before its
// initialization could start: the estimate is the file's own (its VERTEX
// poses, the identity where it gives none), with no bound and status
// TimeLimit.
func timedOutBeforeInit(res *Result, g *posegraph.Graph, opts Options, start time.Time) (*Result, error) {
	poses := make([]posegraph.Pose, g.N())
	for i := range poses {
		poses[i] = posegraph.Identity(g.D)
		if i < len(g.HasInitial) && i < len(g.Initial) && g.HasInitial[i] {
			poses[i] = g.Initial[i]
			if opts.Problem == posegraph.Rotations {
				poses[i].T = [3]float64{}
			}
		}
	}
	res.Poses, res.InitialPoses = poses, poses
	res.Objective = g.Cost(poses, opts.Problem)
	res.InitialObjective, res.RelaxationObjective = res.Objective, res.Objective
	res.Rank, res.Estimate = g.D, EstimateRounded
	// No Q was built, so no unit: the allowance is relative to |F|.
	res.GapAllowed, res.GapAllowedBy = gapAllowedBy(res.Objective, 0, opts.GapTol, opts.GapAbs)
	res.Status = TimeLimit
	res.Timings.Total = time.Since(start).Seconds()
	return res, nil
}

// roundEstimate rounds x onto SO(d)^n, recovers the translations exactly
// and expresses the poses in g's gauge (docs/design.md section 6).
func roundEstimate(g *posegraph.Graph, x *sparse.Blocks, d int, prob posegraph.Problem, plan *rounding.Plan) ([]posegraph.Pose, error) {
	// The blocks whose Y no cost sees (landmarks) do not enter the rounding.
	poses := rounding.RoundMasked(x, d, g.LandmarkMask())
	if prob == posegraph.Poses {
		if err := plan.RecoverTranslations(poses); err != nil {
			return nil, err
		}
	}
	// A world vertex (priors) may come out reflected: see SettleWorld.
	if err := plan.SettleWorld(poses, prob == posegraph.Rotations); err != nil {
		return nil, err
	}
	return inGaugeRounded(g, poses, prob), nil
}

// inGaugeRounded fixes the gauge of a rounding (rounding.ToGauge).
func inGaugeRounded(g *posegraph.Graph, poses []posegraph.Pose, prob posegraph.Problem) []posegraph.Pose {
	rounding.ToGauge(g, poses)
	if prob == posegraph.Rotations {
		for i := range poses {
			poses[i].T = [3]float64{} // the gauge moved them; rotations carry none
		}
	}
	return poses
}

// settle ends a solve whose estimate res.Poses, res.Objective, res.Rank
// and bound res.DualBound (proven when haveBound, or a weaker lower bound
// when hasLower) are set: it certifies the estimate itself where that can
// help, applies F* >= 0, and sets the suboptimality bound and the final
// status from the staircase's status (limit, when set, is the limit that
// cut the certified level short, reported if the proof misses the
// allowance). Every staircase ends through it (SolveWith, whatever its
// level optimizer), so all mean the same by certified. st (nil: no
// deadline, no records) keeps the deadline: past it, the estimate's own
// certificate is not started.
func settle(res *Result, st *stages, g *posegraph.Graph, cert *certifier, opts Options, status, limit Status, haveBound, hasLower bool) error {
	// Certify the estimate itself when the relaxation's bound is not tight
	// enough. The estimate's translations are exactly optimal, so
	// tr(Lambda) at the rounded point equals F there up to rounding, and a
	// PSD S proves the estimate optimal directly, where the relaxation's
	// bound also pays for translations only as accurate as the trust
	// region's last step (a trust region stopped early, or stalled). The
	// second test can only raise the dual bound, so when the first already
	// meets the tolerance the status cannot change, and the second
	// factorization of S, as costly as the first, is skipped
	// (docs/tuning.md). The reported bound is then the
	// relaxation's, which can be the looser of the two.
	// Without a certificate at all (the staircase ended on a saddle), a
	// rank-d estimate is checked too: it is a different point, and may be
	// a global minimum the relaxation's last level did not reach. The check
	// does not compute an eigenvector when it fails: nothing would use it.
	d := g.D
	res.FUnit = cert.fUnit()
	res.GapAllowed, res.GapAllowedBy = gapAllowedBy(res.Objective, res.FUnit, opts.GapTol, opts.GapAbs)
	// Above rank d, an estimate more than the allowance above the
	// relaxation's objective cannot certify: any dual bound its check
	// proves is at most the relaxation's optimum, which is at most that
	// objective (the value of a feasible point). The check could then only
	// raise the bound by less than the relaxation's own F - dual (M3500b,
	// 0.145 above the relaxation: the check failed, six factorizations
	// of S for nothing), so it is skipped and the status is the
	// relaxation's.
	cannot := res.Rank > d && res.Objective-res.RelaxationObjective > res.GapAllowed*(1+1e-9)
	if (status == Certified && res.Objective-res.DualBound > res.GapAllowed && !cannot) || (!haveBound && status == NotCertified) {
		k := 0
		if st != nil {
			k = st.begin("certify estimate", d)
		}
		if k >= 0 {
			t0 := time.Now()
			xr := g.Lift(centered(res.Poses, d), opts.Problem, d)
			c, err := cert.checkOnly(cert.manifold(d, opts.Threads), xr)
			if err != nil {
				return err
			}
			// Both bounds are rigorous; the better one counts.
			if c.psd {
				if (!haveBound && !hasLower) || c.dualBound > res.DualBound {
					res.DualBound, res.Eta, res.EtaPoses = c.dualBound, c.eta, c.shiftPoses
					if !math.IsNaN(c.minEig) { // NaN: a proof by parts estimates none
						res.MinEigenvalue = c.minEig
					}
					res.ShiftFloor = c.floorCost
				}
				if !haveBound {
					haveBound, status = true, Certified
				}
			}
			res.Timings.Certify += time.Since(t0).Seconds()
			if st != nil {
				st.end(k)
			}
		}
	}
	res.HasBound = haveBound || hasLower
	if res.HasBound && res.DualBound < 0 && !g.RawRotations {
		// F is a sum of squares: F* >= 0 is proven too, and better.
		res.DualBound = 0
	}
	if res.HasBound {
		res.SuboptimalityBound = res.Objective - res.DualBound
	}
	if status == Certified && !(res.SuboptimalityBound <= res.GapAllowed) { // NaN demotes too
		switch {
		case limit != "":
			status = limit
		case res.Rank > d:
			status = CertifiedRelaxation
		case res.ShiftFloor > res.GapAllowed:
			status = BelowPrecision
		default:
			status = Bounded
		}
	}
	if st != nil && st.cut && status != Certified && status != Inconsistent && status != Cancelled && status != IterationLimit && status != Aborted {
		// A stage the deadline refused (the refinement, the estimate's
		// own certificate) might have certified: the limit is what
		// stopped the solve.
		status = TimeLimit
	}
	res.Status = status
	res.Certified = status == Certified
	return nil
}

func initialize(g *posegraph.Graph, opts Options, plan *rounding.Plan) ([]posegraph.Pose, error) {
	rot := opts.Problem == posegraph.Rotations
	switch opts.Init {
	case InitChordal:
		if rot {
			return plan.ChordalRotations()
		}
		return plan.Chordal()
	case InitOdometry:
		if rot {
			return rounding.OdometryRotations(g)
		}
		return rounding.Odometry(g)
	case InitVertices:
		return rounding.FromVertices(g)
	case InitRandom:
		return rounding.Random(g, opts.Seed), nil
	case InitGiven:
		return givenPoses(g, opts.InitialPoses)
	}
	return nil, fmt.Errorf("unknown initialization %q", opts.Init)
}

// recordCheck records the certificate check begun at t0 in lv (its seconds
// and, when it ran, the dual bound, the smallest eigenvalue, the method
// and the verdict) and adds its seconds to res's timings; solveLevel and
// initialLevel end with it. A check without an eigenvalue (a failed
// checkOnly, or one the deadline cut short) leaves MinEigenvalue alone.
func recordCheck(res *Result, lv Level, t0 time.Time, c certificate, err error) (Level, error) {
	secs := time.Since(t0).Seconds()
	lv.CertifySeconds += secs
	res.Timings.Certify += secs
	if err != nil {
		return lv, err
	}
	if !math.IsNaN(c.minEig) {
		lv.MinEigenvalue = c.minEig
	}
	lv.EigMethod, lv.Certified = c.method, c.psd
	lv.DualBound = nil
	if c.hasLower {
		b := c.lowerBound
		lv.DualBound = &b
	}
	return lv, nil
}

// solvable validates g and, when it is only disconnected and
// opts.LargestComponent is set, returns its largest component (validated
// in turn) instead; Solve and SolveRobust both start here.
func solvable(g *posegraph.Graph, opts Options) (*posegraph.Graph, error) {
	err := g.ValidateFor(opts.Problem)
	if err == nil {
		return g, nil
	}
	if !opts.LargestComponent || !posegraph.IsDisconnected(err) {
		return nil, err
	}
	g = g.Subgraph(g.Components()[0])
	if err := g.ValidateFor(opts.Problem); err != nil {
		return nil, err
	}
	return g, nil
}

// zeroResidual reports whether F at the initial estimate is at the
// rounding level of the weights: below 1e-20 of sum_e (d kappa_e + tau_e),
// every weighted residual is about 1e-10 of its weight's scale or less.
// The measurements then agree with each other exactly (noise-free data, a
// tree, closures that are exactly consistent), the chordal estimate solves
// the problem, and a relative gradient, the ratio of two rounding errors,
// cannot say so: BCM and the trust region would stall on noise.
func zeroResidual(f float64, g *posegraph.Graph, prob posegraph.Problem) bool {
	if g.RawRotations {
		return false // F carries SE-Sync's constant: 0 is not its floor
	}
	w := 0.0
	for _, e := range g.Edges {
		w += float64(g.D) * e.Kappa
		if prob == posegraph.Poses {
			w += e.Tau
		}
	}
	return f <= 1e-20*w
}

// initialLevel certifies the initial point at rank d as it is, without BCM
// or the trust region (see zeroResidual). The level is recorded with no
// sweeps and no steps; when the certificate fails, the caller solves the
// level as usual from the same point. stop is TimeLimit when the deadline
// passed before the check could start.
func initialLevel(res *Result, st *stages, cert *certifier, x *sparse.Blocks, d int, opts Options) (Level, certificate, Status, error) {
	k := st.begin("certificate", d)
	if k < 0 {
		return Level{}, certificate{}, TimeLimit, nil
	}
	t0 := time.Now()
	m := cert.manifold(d, opts.Threads)
	c, err := cert.checkOnly(m, x)
	lv := Level{Rank: d, F: res.InitialObjective, BCMStop: "initial point", RTRStop: "initial point"}
	lv, err = recordCheck(res, lv, t0, c, err)
	st.end(k)
	return lv, c, "", err
}

// releaseCollect is the size of the released trust-region buffers (bytes)
// from which solveLevel collects them before the certificate. Below it the
// memory saved is small next to the rest of the heap, and a forced
// collection on every level of a small solve would cost more than it
// saves.
const releaseCollect = 256 << 20

// escape lifts x (rank r) to rank r+1 along the eigenvector v of S with
// negative eigenvalue: X+ = [X; alpha v^T], each Stiefel part retracted by
// its polar factor, alpha halved until F decreases. Along that curve F
// changes by alpha^2 v^T S v < 0 to second order (docs/design.md section 5).
func escape(m *manifold, x *sparse.Blocks, v []float64) (*sparse.Blocks, float64) {
	xn := sparse.NewBlocks(x.R+1, x.B, x.N)
	nq := m.newBlocks()
	_, dec, _ := escapeSearch(x.N, func(alpha float64) (float64, error) {
		liftBlocks(xn, x, v, alpha, m.d, x.N, m.h, m.y)
		m.mulQ(nq, xn)
		return inner(xn, nq), nil
	})
	if dec == 0 {
		// No decrease found (v was not a descent direction to working
		// precision): continue from X embedded at the higher rank.
		liftBlocks(xn, x, v, 0, m.d, x.N, m.h, m.y)
	}
	// Otherwise xn is the lift at alpha, the search's last.
	return xn, dec
}

// escapeSearch is the escape's line search along the lift by alpha of
// f(alpha), F at the point lifted with alpha times the eigenvector: from
// alpha = sqrt(n), halved until F falls below F(0) by more than its
// rounding, at most 60 times. It returns that alpha and F's decrease (0:
// none found).
func escapeSearch(n int, f func(alpha float64) (float64, error)) (alpha, dec float64, err error) {
	f0, err := f(0)
	if err != nil {
		return 0, 0, err
	}
	alpha = math.Sqrt(float64(n))
	for k := 0; k < 60; k++ {
		fa, err := f(alpha)
		if err != nil {
			return 0, 0, err
		}
		if fa < f0-1e-12*math.Abs(f0) {
			return alpha, f0 - fa, nil
		}
		alpha /= 2
	}
	return 0, 0, nil
}

// liftBlocks sets the first n blocks of xn (rank x.R+1) to x's with a new
// row alpha times v's block, each Stiefel part retracted by the polar
// factor; h and y are scratch of (x.R+1)*d values.
func liftBlocks(xn, x *sparse.Blocks, v []float64, alpha float64, d, n int, h, y []float64) {
	r, b := x.R, x.B
	for i := 0; i < n; i++ {
		src, dst := x.Block(i), xn.Block(i)
		copy(dst[:r*b], src)
		for c := 0; c < b; c++ {
			dst[r*b+c] = alpha * v[i*b+c]
		}
		for k := 0; k <= r; k++ {
			copy(h[k*d:(k+1)*d], dst[k*b:k*b+d])
		}
		smalldense.Polar(y, h, r+1, d)
		for k := 0; k <= r; k++ {
			copy(dst[k*b:k*b+d], y[k*d:(k+1)*d])
		}
	}
}

// centered returns the poses shifted so their translations average zero. F
// is invariant under a common shift, and the smaller ||X|| makes X Q and the
// gradient more accurate (less cancellation in tau t t^T terms).
func centered(poses []posegraph.Pose, d int) []posegraph.Pose {
	out := append([]posegraph.Pose(nil), poses...)
	var mean [3]float64
	for _, p := range out {
		for a := 0; a < d; a++ {
			mean[a] += p.T[a] / float64(len(out))
		}
	}
	for i := range out {
		for a := 0; a < d; a++ {
			out[i].T[a] -= mean[a]
		}
	}
	return out
}

// perturbRows fills rows d.. of every block with small seeded noise and
// retracts the Stiefel parts.
func perturbRows(x *sparse.Blocks, d int, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	r, b := x.R, x.B
	h, y := make([]float64, r*d), make([]float64, r*d)
	for i := 0; i < x.N; i++ {
		blk := x.Block(i)
		for k := d; k < r; k++ {
			for c := 0; c < d; c++ {
				blk[k*b+c] = 1e-2 * rng.NormFloat64()
			}
		}
		for k := 0; k < r; k++ {
			copy(h[k*d:(k+1)*d], blk[k*b:k*b+d])
		}
		smalldense.Polar(y, h, r, d)
		for k := 0; k < r; k++ {
			copy(blk[k*b:k*b+d], y[k*d:(k+1)*d])
		}
	}
}

// InconsistentZ is how many standard deviations above ExpectedObjective a
// proven lower bound on F* must lie for Solve to stop with status
// Inconsistent. At 5 a consistent graph is flagged with probability below
// 3e-7 (chi-squared with thousands of degrees of freedom is close to
// normal), and the optimum lies below F at the truth, which is what the
// expectation describes, so the test errs on the side of consistency.
// Every benchmark graph's optimum lies below its expectation.
const InconsistentZ = 5

// expectedObjective returns the mean and standard deviation of F at the
// true poses when every measurement's error has the covariance its
// weights claim: each edge's rotation term is then close to chi-squared
// with d(d-1)/2 degrees of freedom (kappa ||I - E||_F^2 = 4 kappa
// (1 - cos theta), theta of variance 1/(2 kappa) per axis) and its
// translation term chi-squared with d, so F is chi-squared with
// K = m (d(d-1)/2 + d) degrees of freedom (m d(d-1)/2 for rotations):
// mean K, variance 2K.
func expectedObjective(g *posegraph.Graph, prob posegraph.Problem) (mean, sd float64) {
	d := g.D
	dof := d * (d - 1) / 2
	if prob == posegraph.Poses {
		dof += d
	}
	// A landmark observation or a position prior has only its
	// translation's d degrees of freedom (no rotation is measured).
	obs := 0
	if g.HasLandmarks() || g.HasPriors() {
		for k := range g.Edges {
			if !g.MeasuresRotation(&g.Edges[k]) {
				obs++
			}
		}
	}
	k := float64((g.M()-obs)*dof + obs*d)
	return k, math.Sqrt(2 * k)
}

// gapAllowed is the suboptimality a certificate may leave,
// max(GapTol max(unit, |F|), GapAbs), unit the certificate's unit of F
// (certifier.fUnit, Result.FUnit): see Options.GapTol.
func gapAllowed(f, unit, gapTol, gapAbs float64) float64 {
	a, _ := gapAllowedBy(f, unit, gapTol, gapAbs)
	return a
}

// gapAllowedBy is gapAllowed and the name of the term that set it (see
// Result.GapAllowedBy); GapAbs names it on a tie only when GapTol's term
// is 0.
func gapAllowedBy(f, unit, gapTol, gapAbs float64) (float64, string) {
	rel, by := gapTol*math.Abs(f), "gap_tol*|F|"
	if math.Abs(f) < unit {
		rel, by = gapTol*unit, "gap_tol*unit"
	}
	if gapAbs > rel {
		return gapAbs, "gap_abs"
	}
	return rel, by
}

// inGauge returns a copy of poses in g's gauge (rounding.ToGauge), with
// no translations for Rotations: an estimate as Solve returns one.
func inGauge(g *posegraph.Graph, poses []posegraph.Pose, prob posegraph.Problem) []posegraph.Pose {
	p := append([]posegraph.Pose(nil), poses...)
	rounding.ToGauge(g, p)
	if prob == posegraph.Rotations {
		for i := range p {
			p[i].T = [3]float64{}
		}
	}
	return p
}

// readOut is roundEstimate without the translation solve (rounding.ReadOut):
// the estimate a solve returns when its deadline has passed.
func readOut(g *posegraph.Graph, x *sparse.Blocks, d int, prob posegraph.Problem) []posegraph.Pose {
	poses := rounding.ReadOut(x, d, g.LandmarkMask())
	rounding.ToGauge(g, poses)
	if prob == posegraph.Rotations {
		for i := range poses {
			poses[i].T = [3]float64{}
		}
	}
	return poses
}

// weightSpread returns Result.WeightSpread for g.
func weightSpread(g *posegraph.Graph, prob posegraph.Problem) float64 {
	lo, hi := math.Inf(1), 0.0
	for _, e := range g.Edges {
		for k, w := range []float64{e.Kappa, e.Tau} {
			if w > 0 && (k == 0 || prob == posegraph.Poses) {
				lo, hi = math.Min(lo, w), math.Max(hi, w)
			}
		}
	}
	if hi == 0 {
		return 1
	}
	return hi / lo
}
