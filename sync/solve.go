package sync

import (
	"context"
	"errors"
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
	opts = opts.WithDefaults(d)
	if err := opts.check(d); err != nil {
		return nil, err
	}
	var deadline time.Time
	if opts.TimeLimit > 0 {
		deadline = start.Add(opts.TimeLimit)
	}
	res := &Result{Problem: opts.Problem, Graph: g, Options: opts}
	res.ExpectedObjective, res.ExpectedObjectiveSD = expectedObjective(g, opts.Problem)
	res.WeightSpread = weightSpread(g, opts.Problem)
	st := &stages{res: res, start: start, deadline: deadline}
	log := opts.Logger

	// Initialization. Q's block graph is the pose graph, so its
	// fill-reducing order (counted here) serves the chordal and the
	// translation systems too: at a million poses nested dissection takes
	// seconds per ordering.
	k := st.begin("init", 0)
	if k < 0 {
		return timedOutBeforeInit(res, g, opts, start)
	}
	t0 := time.Now()
	q := g.Laplacian(opts.Problem)
	perm := sparse.BlockOrder(q, 0)
	poseOrder := make([]int, q.N)
	for k := range poseOrder {
		poseOrder[k] = perm[k*q.B] / q.B
	}
	init, err := initialize(g, opts, poseOrder)
	if err != nil {
		return nil, err
	}
	res.InitialPoses = init
	res.InitialObjective = g.Cost(init, opts.Problem)
	res.Timings.Init = time.Since(t0).Seconds()
	st.end(k)
	log.Info("initialized", "init", string(opts.Init), "F", res.InitialObjective, "seconds", res.Timings.Init)

	scale := q.MaxDiag()

	// A Cholesky factor of Q + sigma I preconditions the trust region's
	// inner CG and the eigensolver. sigma only lifts Q's null space (the
	// common translation), so it is tiny next to the weights.
	qFactor := qFactor(q, perm)
	hp := newHessianPrecond(q, d, perm, 1e-9*scale)
	hp.threads = opts.Threads
	cert := newCertifier(q, d, opts.GapTol, opts.GapAbs, opts.EigTol, perm, opts.Seed)
	cert.deadline = deadline
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
	status := NotCertified
	// limit is the limit that stopped the level whose certificate ended
	// the staircase (TimeLimit, IterationLimit, or none): settle reports
	// it when the proof misses the allowance.
	var limit Status
	// radius is the trust region's radius where the last level ended,
	// where the next one starts (0: the first level's default). The escape
	// moves the point by little, and the radius the last level ended with
	// is the scale at which its model held; the default, sized for a
	// point far from any critical point, made M3500b's rank-3 level spend
	// its first three steps (106 tCG iterations) on steps rejected with
	// rho down to -85731.
	var radius float64
	for r := opts.Rank0; ; r++ {
		var lv Level
		var c certificate
		var err error
		var stop Status
		started := false
		if r == d && r == opts.Rank0 && zeroResidual(res.InitialObjective, g, opts.Problem) {
			lv, c, stop, err = initialLevel(res, st, q, cert, x, d, opts)
			started = stop == ""
		}
		if !c.psd && err == nil && stop == "" {
			lv, c, stop, started, err = solveLevel(ctx, res, st, q, solver, cert, qFactor, hp, x, r, d, radius, opts)
			radius = lv.radius
		}
		if !started {
			// The deadline passed before the level began: x is the last
			// level's point, escaped (or the initial point).
			status = TimeLimit
			break
		}
		res.Levels = append(res.Levels, lv)
		if r == d && err == nil && stop == "" {
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
			// the clock or the iteration limit is reported as such if its
			// bound misses the allowance.
			status, limit = Certified, stop
			break
		}
		if c.hasLower && (!hasLower || c.lowerBound > lower) {
			lower, hasLower = c.lowerBound, true
		}
		if stop != "" {
			status = stop
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
		if r == opts.MaxRank || c.vector == nil {
			break
		}
		// Escape the saddle along the negative-curvature direction.
		k := st.begin("escape", r)
		if k < 0 {
			status = TimeLimit
			break
		}
		t0 = time.Now()
		m := newManifold(q, d, r+1, opts.Threads)
		xn, dec := escape(m, x, c.vector)
		res.Levels[len(res.Levels)-1].EscapeDecrease = dec
		res.Timings.Optimize += time.Since(t0).Seconds()
		st.end(k)
		log.Info("saddle escape", "from_rank", r, "decrease", dec)
		if dec == 0 {
			// No descent along the eigenvector to working precision: the
			// next rank would start at the same point and fail the same way.
			break
		}
		x = xn
	}
	res.final = x
	if !math.IsNaN(last.minEig) { // NaN: the check was cut short, or computed no eigenvalue
		res.MinEigenvalue = last.minEig
	}
	res.Eta, res.EtaPoses = last.eta, last.shiftPoses
	res.ShiftFloor = last.floorCost
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
	// rounding, usually goes lower still. Past the deadline the points are
	// only read out (rounded, their translations not re-solved), and
	// nothing is refined.
	t0 = time.Now()
	k = st.begin("round", 0)
	round := func(x *sparse.Blocks) ([]posegraph.Pose, error) {
		if k < 0 {
			return readOut(g, x, d, opts.Problem), nil
		}
		return roundEstimate(g, x, d, opts.Problem, poseOrder)
	}
	poses, err := round(x)
	if err != nil {
		return nil, err
	}
	res.Poses, res.Objective, res.Estimate = poses, g.Cost(poses, opts.Problem), EstimateRounded
	if res.Rank > d && rankD != nil && status != Cancelled {
		p, err := round(rankD)
		if err != nil {
			return nil, err
		}
		if f := g.Cost(p, opts.Problem); f < res.Objective {
			res.Poses, res.Objective, res.Estimate = p, f, EstimateCritical
		}
	}
	st.end(k)
	tightEnough := haveBound && res.Objective-res.DualBound <= gapAllowed(res.Objective, opts.GapTol, opts.GapAbs)
	if res.Rank > d && status != Cancelled && !tightEnough && k >= 0 {
		if kr := st.begin("refine", d); kr >= 0 {
			// Refine the rounding (the critical point is one already).
			xr := g.Lift(centered(poses, d), opts.Problem, d)
			lv, err := refineLevel(ctx, res, q, solver, qFactor, hp, xr, d, deadline, start, opts)
			res.Refine = &lv
			if err == nil || errors.Is(err, context.DeadlineExceeded) {
				p, err := roundEstimate(g, xr, d, opts.Problem, poseOrder)
				if err != nil {
					return nil, err
				}
				if f := g.Cost(p, opts.Problem); f < res.Objective {
					res.Poses, res.Objective, res.Estimate = p, f, EstimateRefined
				}
			}
			st.end(kr)
		}
	}
	res.Timings.Round = time.Since(t0).Seconds()
	if res.Refine != nil {
		res.Timings.Round -= res.Refine.RTRSeconds // counted in Optimize
	}

	if err := settle(res, st, g, q, cert, opts, status, limit, haveBound, hasLower); err != nil {
		return nil, err
	}
	res.Timings.Total = time.Since(start).Seconds()
	return res, nil
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
	res.GapAllowed, res.GapAllowedBy = gapAllowedBy(res.Objective, opts.GapTol, opts.GapAbs)
	res.Status = TimeLimit
	res.Timings.Total = time.Since(start).Seconds()
	return res, nil
}

// roundEstimate rounds x onto SO(d)^n, recovers the translations exactly
// and expresses the poses in g's gauge (docs/design.md section 6).
func roundEstimate(g *posegraph.Graph, x *sparse.Blocks, d int, prob posegraph.Problem, poseOrder []int) ([]posegraph.Pose, error) {
	// The blocks whose Y no cost sees (landmarks) do not enter the rounding.
	poses := rounding.RoundMasked(x, d, g.LandmarkMask())
	if prob == posegraph.Poses {
		if err := rounding.RecoverTranslationsOrdered(g, poses, poseOrder); err != nil {
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
func refineLevel(ctx context.Context, res *Result, q *sparse.BlockSym, solver *bcm.Solver, qFactor *lazyFactor, hp *hessianPrecond,
	x *sparse.Blocks, d int, deadline, start time.Time, opts Options) (Level, error) {
	lv := Level{Rank: d}
	m := newManifold(q, d, d, opts.Threads)
	t0 := time.Now()
	pre := newRowSolver(qFactor, d, q.Dim())
	rr, err := rtr(ctx, m, x, pre, hp, rtrOptions{
		GradTol: opts.GradTol, MaxIter: opts.MaxIterations, Deadline: deadline, Translations: translations(solver, opts.Problem, d, d),
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
// status from the staircase's status (limit, when set, is the limit that
// cut the certified level short, reported if the proof misses the
// allowance). Solve and Certifier.Finish (a solver outside the package)
// end through it, so both mean the same by certified. st (nil: no
// deadline, no records) keeps the deadline: past it, the estimate's own
// certificate is not started.
func settle(res *Result, st *stages, g *posegraph.Graph, q *sparse.BlockSym, cert *certifier, opts Options, status, limit Status, haveBound, hasLower bool) error {
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
	res.GapAllowed, res.GapAllowedBy = gapAllowedBy(res.Objective, opts.GapTol, opts.GapAbs)
	if (status == Certified && res.Objective-res.DualBound > res.GapAllowed) || (!haveBound && status == NotCertified) {
		k := 0
		if st != nil {
			k = st.begin("certify estimate", d)
		}
		if k >= 0 {
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
	if st != nil && st.cut && status != Certified && status != Inconsistent && status != Cancelled && status != IterationLimit {
		// A stage the deadline refused (the refinement, the estimate's
		// own certificate) might have certified: the limit is what
		// stopped the solve.
		status = TimeLimit
	}
	res.Status = status
	res.Certified = status == Certified
	return nil
}

func initialize(g *posegraph.Graph, opts Options, order []int) ([]posegraph.Pose, error) {
	rot := opts.Problem == posegraph.Rotations
	switch opts.Init {
	case InitChordal:
		if rot {
			return rounding.ChordalRotationsOrdered(g, order)
		}
		return rounding.ChordalOrdered(g, order)
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

// maxProofRefinements bounds a level's extra trust-region runs when its
// certificate holds but misses the allowance (see Options.GradTol).
const maxProofRefinements = 3

// solveLevel optimizes at rank r (BCM, then the trust region) and
// certifies; when the proof holds but its bound misses the allowance, and
// the trust region converged rather than stalled, it goes on from the same
// point at a hundredth of the gradient tolerance and certifies again (at
// most maxProofRefinements times). started reports whether the level
// began (its first stage started before the deadline); stop is TimeLimit
// or IterationLimit when a limit cut the level short (a stage refused
// past the deadline, a trust region stopped by the clock or by
// Options.MaxIterations), and "" otherwise.
func solveLevel(ctx context.Context, res *Result, st *stages, q *sparse.BlockSym, solver *bcm.Solver, cert *certifier, qFactor *lazyFactor, hp *hessianPrecond,
	x *sparse.Blocks, r, d int, radius float64, opts Options) (lv Level, c certificate, stop Status, started bool, err error) {
	lv = Level{Rank: r, radius: radius}
	m := newManifold(q, d, r, opts.Threads)
	emit := func(rec Record) {
		res.History = append(res.History, rec)
		if opts.Progress != nil {
			opts.Progress(rec)
		}
	}
	iters := 0
	if opts.BCMMaxSweeps > 0 {
		k := st.begin("bcm", r)
		if k < 0 {
			return lv, c, TimeLimit, false, nil
		}
		started = true
		t0 := time.Now()
		bo := bcm.Options{
			Rule: opts.Rule, Threads: opts.Threads, Seed: opts.Seed,
			GradTol: opts.BCMTol, DecreaseTol: opts.BCMDecreaseTol, MaxSweeps: opts.BCMMaxSweeps,
			// Exact joint translation steps remove BCM's slow diffusion of
			// translations along long chains.
			SolveTranslations: opts.Problem == posegraph.Poses,
			Progress: func(b bcm.Record) {
				iters = b.Sweep
				emit(Record{Rank: r, Phase: "bcm", Iter: b.Sweep, Seconds: time.Since(st.start).Seconds(),
					F: b.F, GradNorm: b.GradNorm, RelGrad: b.RelGradNorm})
			},
		}
		if !st.deadline.IsZero() {
			bo.MaxTime = max(time.Until(st.deadline), time.Nanosecond)
		}
		br, err := solver.Solve(ctx, x, bo)
		lv.BCMSweeps, lv.BCMStop = br.Sweeps, br.Status.String()
		lv.F, lv.GradNorm, lv.RelGrad = br.F, br.GradNorm, br.RelGradNorm
		lv.BCMSeconds = time.Since(t0).Seconds()
		res.Timings.Optimize += lv.BCMSeconds
		st.end(k)
		if err != nil {
			return lv, c, "", true, err
		}
	}

	// run runs the trust region at gradient tolerance tol from x as one
	// stage, adding its steps, time and statistics to the level's.
	run := func(tol float64) (rtrResult, Status, error) {
		k := st.begin("rtr", r)
		if k < 0 {
			return rtrResult{}, TimeLimit, nil
		}
		started = true
		t0 := time.Now()
		pre := newRowSolver(qFactor, r, q.Dim())
		first := iters
		rr, err := rtr(ctx, m, x, pre, hp, rtrOptions{
			GradTol: tol, MaxIter: opts.MaxIterations, Deadline: st.deadline,
			Translations: translations(solver, opts.Problem, r, d), Radius: lv.radius,
			OnRecord: func(it int, rec Record) {
				if it == 0 && (opts.BCMMaxSweeps > 0 || first > 0) {
					return // the same point as the last record
				}
				iters = first + it
				rec.Rank, rec.Phase, rec.Iter, rec.Seconds = r, "rtr", iters, time.Since(st.start).Seconds()
				emit(rec)
			},
		})
		lv.RTRIterations += rr.Iterations
		lv.RTRInner += rr.InnerIterations
		lv.radius = rr.Radius
		lv.RTRStop = rr.Stop
		lv.F, lv.GradNorm, lv.RelGrad = rr.F, rr.GradNorm, rr.RelGrad
		secs := time.Since(t0).Seconds()
		lv.RTRSeconds += secs
		res.Timings.Optimize += secs
		// The Hessian's factor is the largest thing the solve holds (2.4
		// GB at a million poses) and the certificate allocates its own
		// next, so it is let go here and, when large, collected at once:
		// the certificate and the rounding then reuse its pages instead of
		// faulting in new ones, and the peak memory is the trust region's,
		// not the sum of both. At 10^6 poses the collection took 11 ms, the
		// certificate 6.6 s instead of 12.5 to 13.2, the rounding 1.9
		// instead of 4.0 to 4.2, and the peak RSS fell from 12.3 to 9.3 GB.
		if err == nil && hp.release() >= releaseCollect {
			runtime.GC()
		}
		st.end(k)
		switch rr.Stop {
		case "time":
			return rr, TimeLimit, err
		case "iterations":
			return rr, IterationLimit, err
		}
		return rr, "", err
	}
	tol := opts.GradTol
	rr, stop, err := run(tol)
	if err != nil || stop == TimeLimit {
		return lv, c, stop, started, err
	}

	k := st.begin("certificate", r)
	if k < 0 {
		return lv, c, TimeLimit, true, nil
	}
	t0 := time.Now()
	c, err = cert.check(m, x)
	lv, err = recordCheck(res, lv, t0, c, err)
	st.end(k)
	if err != nil {
		return lv, c, stop, true, err
	}
	if c.timedOut {
		stop = TimeLimit
	}
	// Refine until the proof meets the allowance: a bound that misses it
	// at a converged point is, past the shift's rounding floor, what the
	// gradient tolerance left in F - tr(Lambda) and in S's smallest
	// eigenvalue, and both shrink with the gradient. A certificate that
	// failed with a negative curvature smaller (relative to Q's largest
	// diagonal entry) than the relative gradient may be failing for the
	// same reason, and escaping from there climbs ranks for nothing (from
	// GradTol 1e-3 a 200-pose 3-D graph went to rank 6 with no step taken
	// above rank 3). A stalled trust region, a limit, or the floor itself
	// ends it.
	maxDiag := q.MaxDiag()
	refine := func() bool {
		if stop != "" || rr.Stop != "gradient" || lv.ProofRefinements >= maxProofRefinements {
			return false
		}
		if !c.psd {
			return c.minEig < 0 && lv.RelGrad > -c.minEig/maxDiag
		}
		allowed := gapAllowed(lv.F, opts.GapTol, opts.GapAbs)
		return lv.F-c.dualBound > allowed && c.floorCost <= allowed
	}
	for refine() {
		tol /= 100
		lv.ProofRefinements++
		rr, stop, err = run(tol)
		if err != nil || stop == TimeLimit {
			return lv, c, stop, true, err
		}
		if rr.Iterations == 0 {
			continue // the point already met the tighter tolerance: nothing to check again
		}
		k := st.begin("certificate", r)
		if k < 0 {
			return lv, c, TimeLimit, true, nil
		}
		t0 := time.Now()
		// The refined point's own proof. Without one, an earlier proof
		// still bounds F* (a bound on F* holds whatever point it came
		// from); a failed point needs the eigenvector for its escape.
		var c2 certificate
		if c.psd {
			c2, err = cert.checkOnly(m, x)
		} else {
			c2, err = cert.check(m, x)
		}
		lvc, err := recordCheck(res, lv, t0, c2, err)
		st.end(k)
		if err != nil {
			return lv, c, stop, true, err
		}
		if c.psd && !c2.psd {
			lv.CertifySeconds = lvc.CertifySeconds
			break
		}
		lv, c = lvc, c2
		if c.timedOut {
			stop = TimeLimit
		}
	}
	return lv, c, stop, true, nil
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
// level as usual from the same point. stop is TimeLimit when the deadline
// passed before the check could start.
func initialLevel(res *Result, st *stages, q *sparse.BlockSym, cert *certifier, x *sparse.Blocks, d int, opts Options) (Level, certificate, Status, error) {
	k := st.begin("certificate", d)
	if k < 0 {
		return Level{}, certificate{}, TimeLimit, nil
	}
	t0 := time.Now()
	m := newManifold(q, d, d, opts.Threads)
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
// max(GapTol max(1, |F|), GapAbs): see Options.GapTol.
func gapAllowed(f, gapTol, gapAbs float64) float64 {
	a, _ := gapAllowedBy(f, gapTol, gapAbs)
	return a
}

// gapAllowedBy is gapAllowed and the name of the term that set it (see
// Result.GapAllowedBy); GapAbs names it on a tie only when GapTol's term
// is 0.
func gapAllowedBy(f, gapTol, gapAbs float64) (float64, string) {
	rel, by := gapTol*math.Abs(f), "gap_tol*|F|"
	if math.Abs(f) < 1 {
		rel, by = gapTol, "gap_tol*1"
	}
	if gapAbs > rel {
		return gapAbs, "gap_abs"
	}
	return rel, by
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

// translations returns the trust region's exact translation step
// (rtrOptions.Translations) at rank r for the pose problem: at rank d,
// where a solve starts far from any critical point. Above it a level
// starts at the escape from a critical point, whose translations are
// exact, and its difficulty is rotational: on M3500b's rank-3 level the
// step cost 34 factorizations of the Hessian where 22 did without it, for
// as many steps. Nil for rotations.
func translations(solver *bcm.Solver, prob posegraph.Problem, r, d int) func(x, n *sparse.Blocks) (float64, error) {
	if prob != posegraph.Poses || r > d {
		return nil
	}
	return solver.StepTranslations
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
