package sync

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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

// Init names an initialization.
type Init string

const (
	InitChordal  Init = "chordal"  // relax rotations to R^{dxd}, solve, project (the default)
	InitOdometry Init = "odometry" // compose measurements along a spanning tree
	InitVertices Init = "vertices" // the file's VERTEX estimates
	InitRandom   Init = "random"   // random rotations (tests, stress)
	// InitGiven starts from Options.InitialPoses: a warm start, as the
	// robust mode's weighted solves use (not a command-line name).
	InitGiven Init = "given"
)

// ParseInit checks an initialization name.
func ParseInit(s string) (Init, error) {
	switch Init(s) {
	case InitChordal, InitOdometry, InitVertices, InitRandom:
		return Init(s), nil
	}
	return "", fmt.Errorf("unknown initialization %q (want chordal, odometry, vertices or random)", s)
}

// Options control Solve. The zero value is a good default.
type Options struct {
	// Problem: posegraph.Poses (SE(d), the default) or posegraph.Rotations.
	Problem posegraph.Problem
	Init    Init
	// InitialPoses, indexed like the graph, is the starting estimate for
	// Init InitGiven (which an empty Init with InitialPoses set means).
	// Only the rotations count for Rotations.
	InitialPoses []posegraph.Pose
	// Robust selects outlier rejection (the zero value: none, plain least
	// squares); see SolveRobust.
	Robust RobustOptions
	// Rank0 is the first rank of the staircase (0: d, so a graph whose
	// relaxation is exact, the common case, never pays for a larger rank);
	// MaxRank the last (0: 10).
	Rank0, MaxRank int
	// Rule, Threads and Seed go to the BCM phase; Threads also to the
	// products with Q and the trust region's per-pose loops (the sparse
	// factorizations and their solves use GOMAXPROCS). Same seed and
	// options give the same bits, whatever the number of threads.
	Rule    bcm.Rule
	Threads int
	Seed    uint64
	// BCMTol is the relative gradient norm at which BCM hands over to the
	// trust-region finish (0: 1e-3); BCMMaxSweeps bounds its sweeps
	// (0: 5). Negative BCMMaxSweeps skips BCM.
	//
	// BCM makes cheap early progress, but its progress per sweep only
	// shrinks, while the trust region, whose steps are Newton steps (the
	// exact Hessian preconditions them), needs only a few more steps from
	// an earlier point. Over the 13 benchmark graphs (chordal start,
	// `bcmsync bench --raw-quaternions --repeat 5`, geometric mean of the
	// time ratio to the C++ peer) 50 sweeps gave 0.545, 20 0.476, 10
	// 0.453-0.498, 5 0.423-0.444, 2 0.445 and none 0.438; from random
	// starts 5 sweeps certified the same graphs as 50, mostly faster. On
	// the 10^5-pose grid the total did not change (14.4 s with 50, 14.5 s
	// with none).
	BCMTol       float64
	BCMMaxSweeps int
	// BCMDecreaseTol hands over to the trust region when a BCM sweep
	// lowers F by less than this fraction (0: 1e-5): BCM's progress per
	// sweep only shrinks, and the trust region's Newton steps take over
	// from there.
	BCMDecreaseTol float64
	// GradTol is the relative gradient norm ||grad F|| / ||2XQ|| of the
	// final point at each rank (0: 1e-9).
	GradTol float64
	// GapTol and GapAbs say what the certificate must prove. Certified
	// means bound <= max(GapTol*|F|, GapAbs), where F is the returned
	// estimate's objective and bound is the proven suboptimality bound
	// F - (a lower bound on F*), so that F - F* <= max(GapTol|F|, GapAbs)
	// (Result.GapAllowed). GapTol is relative (0: 1e-6); GapAbs absolute,
	// in the units of F (default 0: purely relative). F is a sum of
	// weighted squared residuals, a chi-squared statistic, so an absolute
	// tolerance has a meaning of its own; a graph whose measurements agree
	// exactly (F* = 0: noise-free data, trees) needs one, because a
	// relative tolerance of 0 cannot be proven in floating point. The
	// certificate's first shift costs at most half the allowance (a larger
	// retry proves a looser bound, and the status then says so); the proof
	// holds without any further slack.
	GapTol float64
	GapAbs float64
	// EigTol is the smallest certificate shift eta, relative to the largest
	// diagonal entry of Q (0: 1e-13): below it, a Cholesky factor proves
	// nothing beyond rounding. Weights in the benchmark files span six
	// orders of magnitude, so it scales with Q.
	EigTol float64
	// TimeLimit bounds the whole solve (0: none).
	TimeLimit time.Duration
	// LargestComponent solves the largest connected component of a
	// disconnected graph instead of failing.
	LargestComponent bool
	// Progress, if set, receives every history record as it is made.
	Progress func(Record)
	// Logger receives one line per stage and level (nil: silent).
	Logger *slog.Logger
}

func (o *Options) setDefaults(d int) {
	if o.Init == "" {
		o.Init = InitChordal
		if o.InitialPoses != nil {
			o.Init = InitGiven
		}
	}
	if o.Rank0 == 0 {
		o.Rank0 = d
	}
	if o.MaxRank == 0 {
		o.MaxRank = 10
	}
	if o.BCMTol == 0 {
		o.BCMTol = 1e-3
	}
	if o.BCMDecreaseTol == 0 {
		o.BCMDecreaseTol = 1e-5
	}
	if o.BCMMaxSweeps == 0 {
		o.BCMMaxSweeps = 5
	}
	if o.GradTol == 0 {
		o.GradTol = 1e-9
	}
	if o.EigTol == 0 {
		o.EigTol = 1e-13
	}
	if o.GapTol == 0 {
		o.GapTol = 1e-6
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Solve finds a certified globally optimal estimate of g's poses (or
// rotations): initialize, then climb the Riemannian staircase (BCM, a
// trust-region finish, the certificate, a saddle escape when it fails),
// then round and recover translations. When LargestComponent is set and g is
// disconnected, Result.Poses index the largest component: see Result.Graph.
// With Options.Robust set it is SolveRobust.
func Solve(ctx context.Context, g *posegraph.Graph, opts Options) (*Result, error) {
	if opts.Robust.Loss != RobustNone {
		return SolveRobust(ctx, g, opts)
	}
	start := time.Now()
	g, err := solvable(g, opts)
	if err != nil {
		return nil, err
	}
	if g.HasLandmarks() && opts.Problem == posegraph.Rotations {
		return nil, fmt.Errorf("%s: rotation synchronization has no use for its %d landmarks, which carry no rotation; "+
			"solve the pose problem, or drop the landmark records", g.Source, g.NumLandmarks())
	}
	d := g.D
	opts.setDefaults(d)
	for _, v := range []struct {
		name string
		val  float64
	}{{"GapTol", opts.GapTol}, {"GapAbs", opts.GapAbs}} {
		if !(v.val >= 0) || math.IsInf(v.val, 0) {
			return nil, fmt.Errorf("sync: %s = %g must be a finite number >= 0", v.name, v.val)
		}
	}
	if opts.Rank0 < d || opts.MaxRank < opts.Rank0 {
		return nil, fmt.Errorf("ranks must satisfy d = %d <= rank0 = %d <= max rank = %d", d, opts.Rank0, opts.MaxRank)
	}
	var deadline time.Time
	if opts.TimeLimit > 0 {
		deadline = start.Add(opts.TimeLimit)
	}
	res := &Result{Problem: opts.Problem, Graph: g}
	log := opts.Logger

	// Initialization. Q's block graph is the pose graph, so its
	// fill-reducing order (counted here) serves the chordal and the
	// translation systems too: at a million poses nested dissection takes
	// seconds per ordering.
	t0 := time.Now()
	q := g.Laplacian(opts.Problem)
	perm := sparse.BlockOrder(q, 0)
	poseOrder := make([]int, q.N)
	for k := range poseOrder {
		poseOrder[k] = perm[k*q.B] / q.B
	}
	// One block analysis of the pose graph in that order, and one plan of
	// the translation system, serve every factorization of the solve
	// (symbolic.go).
	sym, _ := sparse.AnalyzeBlockPattern(q, perm) // nil: each analyses alone
	plan := rounding.NewPlan(g, poseOrder, sym)
	init, err := initialize(g, opts, plan)
	if err != nil {
		return nil, err
	}
	res.InitialPoses = init
	res.InitialObjective = g.Cost(init, opts.Problem)
	res.Timings.Init = time.Since(t0).Seconds()
	log.Info("initialized", "init", string(opts.Init), "F", res.InitialObjective, "seconds", res.Timings.Init)

	scale := q.MaxDiag()
	etaFloor := opts.EigTol * scale

	// A Cholesky factor of Q + sigma I preconditions the trust region's
	// inner CG and the eigensolver. sigma only lifts Q's null space (the
	// common translation), so it is tiny next to the weights.
	qFactor := &lazyFactor{build: func() (*sparse.Cholesky, error) {
		c, err := analyzeWith(sym, q, perm)
		if err == nil {
			err = c.FactorizeBlocks(q, 1e-9*scale)
		}
		if err != nil {
			return nil, fmt.Errorf("factoring the preconditioner Q + sigma I: %w", err)
		}
		return c, nil
	}}
	hp := newHessianPrecond(q, d, perm, 1e-9*scale)
	hp.threads, hp.sym = opts.Threads, sym
	cert := newCertifier(q, d, opts.GapTol, opts.GapAbs, etaFloor, perm, opts.Seed)
	cert.sym = sym
	solver := bcm.New(q, d, opts.Problem)

	x := g.Lift(centered(init, d), opts.Problem, opts.Rank0)
	if opts.Rank0 > d {
		// A lifted rank-d point with zero extra rows keeps BCM and the
		// trust region in its rank-d subspace; a small seeded perturbation
		// of the extra rows lets the higher rank be used.
		perturbRows(x, d, opts.Seed)
	}
	var last certificate
	var rankD *sparse.Blocks // the rank-d critical point, if the staircase made one
	// The best proven lower bound on F* from levels that failed the
	// certificate (see certifier.weakBound), and what consistent data
	// would make F.
	lower, hasLower := 0.0, false
	res.ExpectedObjective, res.ExpectedObjectiveSD = expectedObjective(g, opts.Problem)
	status := NotCertified
	for r := opts.Rank0; ; r++ {
		var lv Level
		var c certificate
		var err error
		if r == d && r == opts.Rank0 && zeroResidual(res.InitialObjective, g, opts.Problem) {
			lv, c, err = initialLevel(res, q, cert, x, d, opts)
		}
		if !c.psd && err == nil {
			lv, c, err = solveLevel(ctx, res, q, solver, cert, qFactor, hp, plan, x, r, d, deadline, start, opts)
		}
		res.Levels = append(res.Levels, lv)
		if r == d && err == nil {
			rankD = x // an escape makes a new x; this one is kept as it is
		}
		res.Rank = r
		res.RelaxationObjective = lv.F
		if err != nil {
			switch {
			case errors.Is(err, context.DeadlineExceeded):
				status = TimeLimit
			case errors.Is(err, context.Canceled):
				status = Cancelled
			default:
				return nil, err
			}
			break
		}
		last = c
		log.Info("level", "rank", r, "F", lv.F, "rel_grad", lv.RelGrad, "min_eig", lv.MinEigenvalue, "certified", lv.Certified)
		if c.psd {
			// A proof needs a converged point only for the bound to be
			// tight; its validity does not depend on it. A level stopped by
			// the clock or the iteration limit is reported as such.
			status = Certified
			if lv.RTRStop == "time" || lv.RTRStop == "iterations" {
				status = TimeLimit
			}
			break
		}
		if c.hasLower && (!hasLower || c.lowerBound > lower) {
			lower, hasLower = c.lowerBound, true
		}
		if !deadline.IsZero() && time.Now().After(deadline) {
			status = TimeLimit
			break
		}
		if hasLower && lower > res.ExpectedObjective+InconsistentZ*res.ExpectedObjectiveSD {
			// F* itself is proven far above what measurements with the
			// claimed covariances give: the data contradict their weights
			// (wrong loop closures), the optimum of this objective is not
			// a meaningful estimate, and certifying it would climb the
			// staircase for minutes (intel with 5% wrong closures: to
			// rank 10, 73 s with the full Hessian above rank d, 664 s
			// without). Stop, return the best estimate at hand, and say so.
			status = Inconsistent
			log.Info("inconsistent data", "rank", r, "lower_bound", lower, "expected", res.ExpectedObjective, "sd", res.ExpectedObjectiveSD)
			break
		}
		if r == opts.MaxRank {
			break
		}
		// Escape the saddle along the negative-curvature direction.
		t0 = time.Now()
		m := newManifold(q, d, r+1, opts.Threads)
		if c.vector == nil {
			break
		}
		xn, dec := escape(m, x, c.vector)
		res.Levels[len(res.Levels)-1].EscapeDecrease = dec
		res.Timings.Optimize += time.Since(t0).Seconds()
		log.Info("saddle escape", "from_rank", r, "decrease", dec)
		if dec == 0 {
			// No descent along the eigenvector to working precision: the
			// next rank would start at the same point and fail the same way.
			break
		}
		x = xn
	}
	res.final = x
	res.MinEigenvalue = last.minEig
	res.Eta, res.EtaPoses = last.eta, last.shiftPoses
	haveBound := last.psd
	if haveBound {
		res.DualBound = last.dualBound
	} else if hasLower {
		res.DualBound = lower
	}

	// The estimate: x rounded, or, when the final rank is above d (the
	// relaxation is not tight there, or the staircase ended without a
	// certificate), the best of that rounding refined by the trust region
	// at rank d and the rank-d critical point the staircase left. Rounding
	// a rank-r solution can land far above a rank-d critical point the
	// solver already held (M3500b-like graphs: 3686.69 rounded against
	// 3675.92 at rank 2), and the refinement, a local solve from the
	// rounding, usually goes lower still.
	t0 = time.Now()
	poses, err := roundEstimate(g, x, d, opts.Problem, plan)
	if err != nil {
		return nil, err
	}
	res.Poses, res.Objective, res.Estimate = poses, g.Cost(poses, opts.Problem), EstimateRounded
	res.GapAllowed = gapAllowed(res.Objective, opts.GapTol, opts.GapAbs)
	tightEnough := haveBound && res.Objective-res.DualBound <= res.GapAllowed
	if res.Rank > d && status != Cancelled {
		if rankD != nil {
			p, err := roundEstimate(g, rankD, d, opts.Problem, plan)
			if err != nil {
				return nil, err
			}
			if f := g.Cost(p, opts.Problem); f < res.Objective {
				res.Poses, res.Objective, res.Estimate = p, f, EstimateCritical
			}
		}
		if !tightEnough {
			// Refine the rounding (the critical point is one already).
			xr := g.Lift(centered(poses, d), opts.Problem, d)
			lv, err := refineLevel(ctx, res, q, qFactor, hp, xr, d, deadline, start, opts)
			res.Refine = &lv
			if err == nil || errors.Is(err, context.DeadlineExceeded) {
				p, err := roundEstimate(g, xr, d, opts.Problem, plan)
				if err != nil {
					return nil, err
				}
				if f := g.Cost(p, opts.Problem); f < res.Objective {
					res.Poses, res.Objective, res.Estimate = p, f, EstimateRefined
				}
			}
		}
	}
	res.Timings.Round = time.Since(t0).Seconds()
	if res.Refine != nil {
		res.Timings.Round -= res.Refine.RTRSeconds // counted in Optimize
	}

	if err := settle(res, g, q, cert, opts, status, haveBound, hasLower); err != nil {
		return nil, err
	}
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
	rounding.ToGauge(g, poses)
	if prob == posegraph.Rotations {
		for i := range poses {
			poses[i].T = [3]float64{} // the gauge moved them; rotations carry none
		}
	}
	return poses, nil
}

// refineLevel runs the trust region at rank d from x (a rounded estimate,
// updated in place), as a level's finish does, with its records in the
// history under phase "refine".
func refineLevel(ctx context.Context, res *Result, q *sparse.BlockSym, qFactor *lazyFactor, hp *hessianPrecond,
	x *sparse.Blocks, d int, deadline, start time.Time, opts Options) (Level, error) {
	lv := Level{Rank: d}
	m := newManifold(q, d, d, opts.Threads)
	t0 := time.Now()
	pre := newRowSolver(qFactor)
	rr, err := rtr(ctx, m, x, pre, hp, rtrOptions{
		GradTol: opts.GradTol, Deadline: deadline,
		OnRecord: func(it int, rec Record) {
			rec.Rank, rec.Phase, rec.Iter, rec.Seconds = d, "refine", it, time.Since(start).Seconds()
			res.History = append(res.History, rec)
			if opts.Progress != nil {
				opts.Progress(rec)
			}
		},
	})
	hp.release()
	lv.RTRIterations, lv.RTRInner, lv.RTRStop = rr.Iterations, rr.InnerIterations, rr.Stop
	lv.F, lv.GradNorm, lv.RelGrad = rr.F, rr.GradNorm, rr.RelGrad
	lv.RTRSeconds = time.Since(t0).Seconds()
	res.Timings.Optimize += lv.RTRSeconds
	return lv, err
}

// settle ends a solve whose estimate res.Poses, res.Objective, res.Rank
// and bound res.DualBound (proven when haveBound, or a weaker lower bound
// when hasLower) are set: it certifies the estimate itself where that can
// help, applies F* >= 0, and sets the suboptimality bound and the final
// status from the staircase's status. Solve and Certifier.Finish (a solver
// outside the package) end through it, so both mean the same by certified.
func settle(res *Result, g *posegraph.Graph, q *sparse.BlockSym, cert *certifier, opts Options, status Status, haveBound, hasLower bool) error {
	// Certify the estimate itself when the relaxation's bound is not tight
	// enough. The estimate's translations are exactly optimal, so
	// tr(Lambda) at the rounded point equals F there up to rounding, and a
	// PSD S proves the estimate optimal directly, where the relaxation's
	// bound also pays for translations only as accurate as the trust
	// region's last step (a trust region stopped early, or stalled). The
	// second test can only raise the dual bound, so when the first already
	// meets the tolerance the status cannot change, and the second
	// factorization of S, as costly as the first, is skipped: that took the
	// 10^6-pose grid's certify stage from 23-25 s to 17.5 s. The reported
	// bound is then the relaxation's, which can be the looser of the two.
	// Without a certificate at all (the staircase ended on a saddle), a
	// rank-d estimate is checked too: it is a different point, and may be
	// a global minimum the relaxation's last level did not reach. The check
	// does not compute an eigenvector when it fails: nothing would use it.
	d := g.D
	res.GapAllowed = gapAllowed(res.Objective, opts.GapTol, opts.GapAbs)
	if (status == Certified && res.Objective-res.DualBound > res.GapAllowed) || (!haveBound && status == NotCertified) {
		t0 := time.Now()
		xr := g.Lift(centered(res.Poses, d), opts.Problem, d)
		c, err := cert.checkOnly(newManifold(q, d, d, opts.Threads), xr)
		if err != nil {
			return err
		}
		// Both bounds are rigorous; the better one counts.
		if c.psd {
			if (!haveBound && !hasLower) || c.dualBound > res.DualBound {
				res.DualBound, res.MinEigenvalue, res.Eta, res.EtaPoses = c.dualBound, c.minEig, c.eta, c.shiftPoses
			}
			if !haveBound {
				haveBound, status = true, Certified
			}
		}
		res.Timings.Certify += time.Since(t0).Seconds()
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
		if res.Rank > d {
			status = CertifiedRelaxation
		} else {
			status = Bounded
		}
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

// solveLevel optimizes at rank r (BCM, then the trust region) and certifies.
func solveLevel(ctx context.Context, res *Result, q *sparse.BlockSym, solver *bcm.Solver, cert *certifier, qFactor *lazyFactor, hp *hessianPrecond,
	plan *rounding.Plan, x *sparse.Blocks, r, d int, deadline, start time.Time, opts Options) (Level, certificate, error) {
	lv := Level{Rank: r}
	m := newManifold(q, d, r, opts.Threads)
	emit := func(rec Record) {
		res.History = append(res.History, rec)
		if opts.Progress != nil {
			opts.Progress(rec)
		}
	}
	t0 := time.Now()
	iters := 0
	if opts.BCMMaxSweeps > 0 {
		bo := bcm.Options{
			Rule: opts.Rule, Threads: opts.Threads, Seed: opts.Seed,
			GradTol: opts.BCMTol, DecreaseTol: opts.BCMDecreaseTol, MaxSweeps: opts.BCMMaxSweeps,
			// Exact joint translation steps remove BCM's slow diffusion of
			// translations along long chains.
			SolveTranslations: opts.Problem == posegraph.Poses,
			// The translation system is the rounding's: one factorization
			// in Q's order instead of another with its own ordering.
			Translations: plan,
			Progress: func(b bcm.Record) {
				iters = b.Sweep
				emit(Record{Rank: r, Phase: "bcm", Iter: b.Sweep, Seconds: time.Since(start).Seconds(),
					F: b.F, GradNorm: b.GradNorm, RelGrad: b.RelGradNorm})
			},
		}
		if !deadline.IsZero() {
			bo.MaxTime = time.Until(deadline)
			if bo.MaxTime <= 0 {
				bo.MaxTime = time.Nanosecond
			}
		}
		br, err := solver.Solve(ctx, x, bo)
		lv.BCMSweeps, lv.BCMStop = br.Sweeps, br.Status.String()
		lv.F, lv.GradNorm, lv.RelGrad = br.F, br.GradNorm, br.RelGradNorm
		if err != nil {
			return lv, certificate{}, err
		}
	}
	lv.BCMSeconds = time.Since(t0).Seconds()

	t0 = time.Now()
	pre := newRowSolver(qFactor)
	var tp *translationProjector
	if opts.Problem == posegraph.Poses && q.N > 1 {
		var err error
		if tp, err = newTranslationProjector(plan, q.N); err != nil {
			return lv, certificate{}, err
		}
	}
	rr, err := rtr(ctx, m, x, pre, hp, rtrOptions{
		GradTol: opts.GradTol, Deadline: deadline, Translations: tp,
		OnRecord: func(it int, rec Record) {
			if it == 0 && opts.BCMMaxSweeps > 0 {
				return // the same point as BCM's last record
			}
			rec.Rank, rec.Phase, rec.Iter, rec.Seconds = r, "rtr", iters+it, time.Since(start).Seconds()
			emit(rec)
		},
	})
	lv.RTRIterations, lv.RTRInner, lv.RTRStop = rr.Iterations, rr.InnerIterations, rr.Stop
	lv.F, lv.GradNorm, lv.RelGrad = rr.F, rr.GradNorm, rr.RelGrad
	lv.RTRSeconds = time.Since(t0).Seconds()
	res.Timings.Optimize += lv.BCMSeconds + lv.RTRSeconds
	if err != nil {
		return lv, certificate{}, err
	}

	// The Hessian's factor is the largest thing the solve holds (2.4 GB
	// at a million poses) and the certificate allocates its own next, so
	// it is let go here and, when large, collected at once: the
	// certificate and the rounding then reuse its pages instead of
	// faulting in new ones, and the peak memory is the trust region's, not
	// the sum of both. At 10^6 poses the collection took 11 ms, the
	// certificate 6.6 s instead of 12.5 to 13.2, the rounding 1.9 instead
	// of 4.0 to 4.2, and the peak RSS fell from 12.3 to 9.3 GB.
	if hp.release() >= releaseCollect {
		runtime.GC()
	}

	t0 = time.Now()
	c, err := cert.check(m, x)
	return recordCheck(res, lv, t0, c, err)
}

// recordCheck records the certificate check begun at t0 in lv (its seconds
// and, when it ran, the dual bound, the smallest eigenvalue, the method
// and the verdict) and adds its seconds to res's timings; solveLevel and
// initialLevel end with it.
func recordCheck(res *Result, lv Level, t0 time.Time, c certificate, err error) (Level, certificate, error) {
	lv.CertifySeconds = time.Since(t0).Seconds()
	res.Timings.Certify += lv.CertifySeconds
	if err != nil {
		return lv, c, err
	}
	lv.MinEigenvalue, lv.EigMethod, lv.Certified = c.minEig, c.method, c.psd
	if c.hasLower {
		b := c.lowerBound
		lv.DualBound = &b
	}
	return lv, c, nil
}

// solvable validates g and, when it is only disconnected and
// opts.LargestComponent is set, returns its largest component (validated
// in turn) instead; Solve and SolveRobust both start here.
func solvable(g *posegraph.Graph, opts Options) (*posegraph.Graph, error) {
	err := g.Validate()
	if err == nil {
		return g, nil
	}
	if !opts.LargestComponent || !posegraph.IsDisconnected(err) {
		return nil, err
	}
	g = g.Subgraph(g.Components()[0])
	if err := g.Validate(); err != nil {
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
// level as usual from the same point.
func initialLevel(res *Result, q *sparse.BlockSym, cert *certifier, x *sparse.Blocks, d int, opts Options) (Level, certificate, error) {
	t0 := time.Now()
	m := newManifold(q, d, d, opts.Threads)
	c, err := cert.checkOnly(m, x)
	lv := Level{Rank: d, F: res.InitialObjective, BCMStop: "initial point", RTRStop: "initial point"}
	return recordCheck(res, lv, t0, c, err)
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
	r, b, d := x.R, x.B, m.d
	xn := sparse.NewBlocks(r+1, b, x.N)
	nq := m.newBlocks()
	f0 := -1.0
	// F at X itself (embedded with a zero row).
	embed := func(alpha float64) {
		for i := 0; i < x.N; i++ {
			src, dst := x.Block(i), xn.Block(i)
			copy(dst[:r*b], src)
			for c := 0; c < b; c++ {
				dst[r*b+c] = alpha * v[i*b+c]
			}
			// Retract the Stiefel part.
			h := m.h
			for k := 0; k <= r; k++ {
				for c := 0; c < d; c++ {
					h[k*d+c] = dst[k*b+c]
				}
			}
			smalldense.Polar(m.y, h, r+1, d)
			for k := 0; k <= r; k++ {
				copy(dst[k*b:k*b+d], m.y[k*d:(k+1)*d])
			}
		}
	}
	embed(0)
	m.mulQ(nq, xn)
	f0 = inner(xn, nq)
	alpha := math.Sqrt(float64(x.N))
	for k := 0; k < 60; k++ {
		embed(alpha)
		m.mulQ(nq, xn)
		f := inner(xn, nq)
		if f < f0-1e-12*math.Abs(f0) {
			return xn, f0 - f
		}
		alpha /= 2
	}
	// No decrease found (v was not a descent direction to working
	// precision): continue from X embedded at the higher rank.
	embed(0)
	return xn, 0
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
	// A landmark observation has only its translation's d degrees of
	// freedom (no rotation is measured).
	obs := 0
	if g.HasLandmarks() {
		for k := range g.Edges {
			if g.IsObservation(&g.Edges[k]) {
				obs++
			}
		}
	}
	k := float64((g.M()-obs)*dof + obs*d)
	return k, math.Sqrt(2 * k)
}

// gapAllowed is the suboptimality a certificate may leave,
// max(GapTol |F|, GapAbs): see Options.GapTol.
func gapAllowed(f, gapTol, gapAbs float64) float64 {
	return math.Max(gapTol*math.Abs(f), gapAbs)
}
