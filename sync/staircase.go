package sync

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
	"github.com/bcmsync/bcmsync/posegraph/blockmat"
	"github.com/bcmsync/bcmsync/rounding"
)

// The one Riemannian staircase. SolveWith owns everything a certified
// solve does around the optimization of a level: the levels and their
// records, the certificate and the proof refinements, the inconsistency
// test, the saddle escape, the rounding with its rank-d fallback, and the
// final status (settle). What lowers F at a rank is a LevelOptimizer, as
// gonum/optimize's one Minimize driver runs pluggable methods: Solve's own
// (BCM's warm start, then the trust region: central, in solve.go) and the
// distributed one (sync/distributed: rounds of agent updates) are two of
// them, and an incremental solver can be a third.
//
// The driver keeps the problem a solve builds once (Q, its fill-reducing
// order, the block analysis of its pattern that every factorization
// shares, the rounding's plan with the translation factor, the
// certifier's symbolic factorization) in Run, and the optimizer keeps its
// own (central: the Hessian's analysis and factor, Q's factor), so a
// solver that keeps both across calls reuses them. A run whose optimizer
// certifies and rounds by parts holds none of them (analyse, letQGo): it
// makes Q when it needs it, and lets it go. The certificate, the escape and the rounding go through Run's own
// methods (certify, escape, round), the place where an optimizer that
// does not gather the point would take them over.

// A LevelOptimizer lowers F(X) = tr(X Q X^T) at one rank of the staircase.
// SolveWith calls Init once, then Optimize: at each rank from the point the
// staircase holds (the initial estimate lifted, or the last level's point
// after a saddle escape), again at the same rank for each proof refinement
// from where it stopped, and at rank d from a rounding (the rank-d
// fallback above rank d). Its methods run on the solve's goroutine.
type LevelOptimizer interface {
	// Method describes the optimizer for the report and gives its
	// gradient tolerances; it is called once, before Init.
	Method(r *Run) MethodInfo
	// Init returns the initial estimate (indexed like r.Graph(); for
	// Rotations only the rotations count) and names the initialization it
	// ran (Result.Options.Init). It runs inside the solve's "init" stage.
	Init(ctx context.Context, r *Run) ([]posegraph.Pose, Init, error)
	// Optimize lowers F from x, in place (x.R is the rank; its Stiefel
	// parts lie on St(d, x.R)), until the relative gradient norm
	// ||grad F|| / ||2 X Q|| reaches goal.Tol or a limit stops it. It
	// records its work in lv (F, GradNorm and RelGrad at the point it
	// returns, and its own counters and seconds) and its records through
	// r.Record, opens its stages with r.Stage, and starts none after
	// r.Deadline(). An error ends the solve, except the context's, which
	// the staircase reports as TimeLimit or Cancelled, and one that wraps
	// ErrAborted (Abort), which it reports as Aborted with x, as Optimize left it,
	// rounded: an optimizer that loses its means to go on (a distributed
	// run's agent) leaves in x the best point it holds.
	Optimize(ctx context.Context, r *Run, x *blockmat.Blocks, goal Goal, lv *Level) (Outcome, error)
}

// MethodInfo describes a LevelOptimizer.
type MethodInfo struct {
	// Name names the method in Result.Method and the report.
	Name string
	// Options are the method's own options as they run, for the report
	// (JSON-encodable; nil: none beyond Options').
	Options any
	// FirstTol is the relative gradient norm of a level's first Optimize.
	// Each proof refinement divides it by 100, down to MinTol (0: no
	// floor), at most MaxRefinements times.
	FirstTol, MinTol float64
	MaxRefinements   int
}

// MethodBCMRTR names Solve's level optimizer: BCM's warm start, then the
// Riemannian trust region.
const MethodBCMRTR = "bcm+rtr"

// Phase says what an Optimize call is for.
type Phase int

const (
	// PhaseLevel is a level's first optimization, at a new rank.
	PhaseLevel Phase = iota
	// PhaseProof is a proof refinement: the same level goes on from where
	// it stopped at a tighter tolerance.
	PhaseProof
	// PhaseRefine is the rank-d refinement of a rounding (Result.Refine).
	PhaseRefine
)

// Goal is what an Optimize call is asked for.
type Goal struct {
	// Tol is the relative gradient norm to reach.
	Tol   float64
	Phase Phase
}

// Outcome is how an Optimize call ended.
type Outcome struct {
	// Started: a stage of it began (false when the deadline had passed
	// before any could).
	Started bool
	// Converged: it reached the tolerance.
	Converged bool
	// Steps counts its steps (0: x met the tolerance as it came).
	Steps int
	// Limit is TimeLimit or IterationLimit when a limit stopped it, ""
	// otherwise.
	Limit Status
}

// Run is a solve in progress as a LevelOptimizer sees it: the graph, Q,
// the options (defaults filled in), and where the optimizer reports.
type Run struct {
	g    *posegraph.Graph
	opts Options
	// q is Q, or nil when the run holds none: from before Init on when
	// the optimizer works by parts (PartsProviders) and its parts certify
	// (letQGo). Q() makes it again then.
	q *sparse.BlockSym
	// qKept: an optimizer works on Q itself (keepQ), so the run holds it.
	qKept bool
	perm  []int // Q's fill-reducing block order
	// sym is the block analysis of Q's pattern in perm's order (nil when
	// it failed: each factorization then analyses alone), which every
	// matrix of that pattern a solve factors shares (symbolic.go); plan is
	// the rounding's linear algebra in that order, whose translation
	// factor the initialization, every rounding and an optimizer's
	// translation steps share.
	sym             *sparse.BlockSymbolic
	plan            *rounding.Plan
	res             *Result
	st              *stages
	start, deadline time.Time
	cert            *certifier
	method          MethodInfo
	rounder         PartsRounder // nil: the driver rounds (PartsProviders)
}

// Graph returns the graph being solved (the input, or its largest
// component with Options.LargestComponent).
func (r *Run) Graph() *posegraph.Graph { return r.g }

// Q returns the graph's connection Laplacian. A run whose optimizer
// certifies and rounds by parts (PartsProviders, PartsProver) does not hold
// it: Q then makes it from the graph, the same bits each time, and the
// caller should let it go when done, as the run does, so that it is not
// live beside the proof's boundary system.
func (r *Run) Q() *blockmat.BlockSym {
	if r.q != nil {
		return r.q
	}
	return r.g.Laplacian(r.opts.Problem)
}

// HoldsQ reports whether the run holds Q. It does not while an optimizer
// that works by parts (PartsProviders) initializes, nor after, when its
// PartsProver certifies by parts; each call of Q then makes Q anew.
func (r *Run) HoldsQ() bool { return r.q != nil }

// mulQByRows sets dst = X Q with Q's rows made a chunk at a time
// (posegraph.LaplacianRows): Q's product to the bit, without Q.
func (r *Run) mulQByRows(dst, x *sparse.Blocks) {
	r.g.NewLaplacianRows(r.opts.Problem).MulBlocks(dst, x)
}

// keepQ returns Q and keeps it for the rest of the run, for an optimizer
// that works on Q itself (Solve's, also when a wrapper that works by parts,
// such as sync/leveltest's checks, hides it: the run let Q go before Init).
func (r *Run) keepQ() *sparse.BlockSym {
	if r.q == nil {
		r.q = r.g.Laplacian(r.opts.Problem)
	}
	r.qKept = true
	return r.q
}

// letQGo drops the run's Q once the certifier has taken what its tests by
// parts need from it (certifier.letGo): on a distributed coordinator Q was
// the largest thing it held (41 MB of 156 at 10^5 poses), live through
// the certificate by parts, whose boundary system and factor set the
// peak. Later products with Q (the check of the parts' tr(Lambda), F at an
// escaped point, an optimizer's exact translations) take its rows a chunk
// at a time from the graph (posegraph.LaplacianRows); the gathered
// fallbacks (the central test, the escape along a central eigenvector)
// make Q whole for as long as they run (Q, certifier.manifold).
func (r *Run) letQGo() {
	if r.qKept {
		return
	}
	if r.cert.letGo(r.Q, r.mulQByRows) {
		r.q = nil
		return
	}
	if r.q == nil { // the certifier could not analyse without it: keep it
		r.q = r.g.Laplacian(r.opts.Problem)
		r.cert.q = r.q
	}
}

// Options returns the options the solve runs with, defaults filled in.
func (r *Run) Options() Options { return r.opts }

// Deadline returns when Options.TimeLimit passes (zero: no limit): no
// stage may start after it.
func (r *Run) Deadline() time.Time { return r.deadline }

// Seconds returns the seconds since the solve began, the time of a
// Record.
func (r *Run) Seconds() float64 { return time.Since(r.start).Seconds() }

// Record appends rec to the history and hands it to Options.Progress.
func (r *Run) Record(rec Record) {
	r.res.History = append(r.res.History, rec)
	if r.opts.Progress != nil {
		r.opts.Progress(rec)
	}
}

// Stage opens the stage name at rank rank (Result.Stages) and returns the
// function that closes it, or ok false when the deadline has passed: the
// stage must not run.
func (r *Run) Stage(name string, rank int) (end func(), ok bool) {
	k := r.st.begin(name, rank)
	if k < 0 {
		return func() {}, false
	}
	return func() { r.st.end(k) }, true
}

// SolveWith is Solve with the level optimizer m (nil: Solve's own, BCM
// and the trust region): initialize with m, then climb the staircase,
// each level optimized by m and certified here, then round, with the
// rank-d fallback, and settle the status. The Result means what Solve's
// means whatever m is.
func SolveWith(ctx context.Context, g *posegraph.Graph, opts Options, m LevelOptimizer) (*Result, error) {
	start := time.Now()
	g, err := solvable(g, opts)
	if err != nil {
		return nil, err
	}
	if opts.Problem == posegraph.Rotations && g.HasPriors() {
		// Position priors measure no rotation (kappa 0): rotation
		// synchronization keeps the pose priors only, and the world
		// vertex only with them (posegraph's priors.go).
		g = g.WithoutPositionPriors()
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
	if m == nil {
		m = &central{}
	}
	r := &Run{g: g, opts: opts, start: start}
	if opts.TimeLimit > 0 {
		r.deadline = start.Add(opts.TimeLimit)
	}
	r.res = &Result{Problem: opts.Problem, Graph: g, Options: opts}
	// The Incremental's own state is not an option the caller gave: a
	// solve with the result's Options must neither share the kept order
	// (it would overwrite it) nor take the warm step's shortcuts.
	r.res.Options.order, r.res.Options.warmStep = nil, false
	r.res.ExpectedObjective, r.res.ExpectedObjectiveSD = expectedObjective(g, opts.Problem)
	r.res.WeightSpread = weightSpread(g, opts.Problem)
	r.st = &stages{res: r.res, start: start, deadline: r.deadline}
	res, err := r.staircase(ctx, m)
	r.release(m)
	return res, err
}

// analyse makes, once, Q's fill-reducing block order, the block analysis
// of its pattern in that order and the rounding's plan. Solve's optimizer
// (whose Init calls it too, for optimizers that wrap it) and the central
// certificate need them from the start. An optimizer
// whose parts certify and round the point (PartsProviders) may never
// need them: they are made only when the parts leave a test or a
// rounding to the driver (no PartsProver, a rounding the parts could
// not make, a graph with landmarks or priors), so that a distributed
// coordinator does not hold an analysis of the whole graph (10 MB at
// 10^5 poses, with the ordering's transient) that its run never uses.
// Made later, they are the same: the order depends on Q alone.
func (r *Run) analyse() {
	if r.plan != nil {
		return
	}
	q, opts := r.Q(), r.opts
	if opts.order != nil {
		r.perm = opts.order.perm(q)
	} else {
		r.perm = sparse.BlockOrder(q, 0)
	}
	r.sym, _ = sparse.AnalyzeBlockPattern(q, r.perm)
	if opts.order != nil {
		// An incremental step: its certificate's anchor goes last in the
		// one analysis every factorization shares (anchorLast).
		r.perm, r.sym = anchorLast(q, r.g.D, r.perm, r.sym)
		opts.order.keep(r.sym)
	}
	poseOrder := make([]int, q.N)
	for k := range poseOrder {
		poseOrder[k] = r.perm[k*q.B] / q.B
	}
	r.plan = rounding.NewPlan(r.g, poseOrder, r.sym)
	if opts.order != nil {
		opts.order.refactorFrom(r.plan, r.g.N())
	}
}

// release gives the factors the run made back for reuse
// (sparse.Cholesky.Release): the next solve, of a graph of about the same
// size (Incremental's next step), factors into their storage instead of
// allocating and zeroing new. Nothing uses them after the run.
func (r *Run) release(m LevelOptimizer) {
	if r.cert != nil && r.cert.chol != nil {
		r.cert.chol.Release()
	}
	if r.opts.order != nil {
		r.opts.order.keepPlan(r.plan) // the next step's translation factor copies from it
	} else {
		r.plan.Release()
	}
	if c, ok := m.(*central); ok {
		if c.hp != nil {
			c.hp.release()
		}
		if c.qFactor != nil {
			c.qFactor.chol.Release()
		}
	}
}

// staircase is SolveWith after its checks.
func (r *Run) staircase(ctx context.Context, m LevelOptimizer) (*Result, error) {
	g, opts, res, st, d := r.g, r.opts, r.res, r.st, r.g.D
	log := opts.Logger
	r.method = m.Method(r)
	res.Method, res.MethodOptions = r.method.Name, r.method.Options

	// Initialization. Q's block graph is the pose graph, so its
	// fill-reducing order (counted here) serves the chordal and the
	// translation systems too: at a million poses nested dissection takes
	// seconds per ordering.
	k := st.begin("init", 0)
	if k < 0 {
		return timedOutBeforeInit(res, g, opts, r.start)
	}
	t0 := time.Now()
	r.q = g.Laplacian(opts.Problem)
	pp, byParts := m.(PartsProviders)
	var facts qFacts
	haveFacts := false
	if byParts && opts.order == nil {
		// An optimizer that works by parts may certify by parts too: what
		// its tests take from Q is taken now, while little else is live,
		// and Q is let go before its Init, which gathers the point (Q
		// made after it set a distributed coordinator's peak). The run
		// makes Q again if the certificate is left to it (no prover).
		facts, haveFacts = qFactsOf(r.q, d), true
		r.q = nil
	}
	if opts.order != nil {
		// An incremental step's order and analysis are kept for the next
		// step (steporder.go) whoever uses them; otherwise each user
		// makes them when it first needs them (analyse).
		r.analyse()
	}
	init, name, err := m.Init(ctx, r)
	if err != nil {
		return nil, err
	}
	if len(init) != g.N() {
		return nil, fmt.Errorf("sync: level optimizer %s: an initial estimate of %d poses for a graph of %d", r.method.Name, len(init), g.N())
	}
	res.Options.Init = name
	res.InitialPoses = init
	res.InitialObjective = g.Cost(init, opts.Problem)
	res.Timings.Init = time.Since(t0).Seconds()
	st.end(k)
	log.Info("initialized", "init", string(name), "F", res.InitialObjective, "seconds", res.Timings.Init)

	var prover PartsProver
	if byParts {
		prover, r.rounder = pp.PartsProver(r), pp.PartsRounder(r)
	}
	if prover == nil && r.q == nil {
		r.q = g.Laplacian(opts.Problem)
	}
	if prover == nil {
		r.analyse() // the certificate factors S in Q's order
	}
	if !haveFacts { // Q is held: not let go before Init, or made again for a run with no prover
		facts = qFactsOf(r.q, d)
	}
	r.cert = newCertifierOf(facts, r.q, d, opts.GapTol, opts.GapAbs, opts.EigTol, r.perm, opts.Seed)
	r.cert.deadline = r.deadline
	r.cert.sym = r.sym
	r.cert.nullStart = opts.warmStep
	if prover != nil {
		r.cert.usePartsProver(prover)
		r.letQGo()
	}

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
	for rank := opts.Rank0; ; rank++ {
		var lv Level
		var c certificate
		var err error
		var stop Status
		started := false
		if rank == d && rank == opts.Rank0 && zeroResidual(res.InitialObjective, g, opts.Problem) {
			lv, c, stop, err = initialLevel(res, st, r.cert, x, d, opts)
			started = stop == ""
		}
		if !c.psd && err == nil && stop == "" {
			lv, c, stop, started, err = r.level(ctx, m, x, rank)
		}
		if !started {
			// The deadline passed before the level began: x is the last
			// level's point, escaped (or the initial point).
			status = TimeLimit
			break
		}
		res.Levels = append(res.Levels, lv)
		if rank == d && err == nil && stop == "" {
			rankD = x // an escape makes a new x; this one is kept as it is
		}
		res.Rank = rank
		res.RelaxationObjective = lv.F
		if err != nil {
			switch {
			case errors.Is(err, context.DeadlineExceeded):
				status = TimeLimit
			case errors.Is(err, context.Canceled):
				status = Cancelled
			case errors.Is(err, ErrAborted):
				status, res.Error = Aborted, err.Error()
				log.Warn("aborted", "rank", rank, "err", err)
			default:
				return nil, err
			}
			break
		}
		last = c
		log.Info("level", "rank", rank, "F", lv.F, "rel_grad", lv.RelGrad, "min_eig", lv.MinEigenvalue, "certified", lv.Certified)
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
			// staircase for minutes (docs/tuning.md). Stop, return
			// the best estimate at hand, and say so.
			status = Inconsistent
			log.Info("inconsistent data", "rank", rank, "lower_bound", lower, "expected", res.ExpectedObjective, "sd", res.ExpectedObjectiveSD)
			break
		}
		if rank == opts.MaxRank || (c.vector == nil && !c.partsVector) {
			break
		}
		// Escape the saddle along the negative-curvature direction.
		k := st.begin("escape", rank)
		if k < 0 {
			status = TimeLimit
			break
		}
		t0 = time.Now()
		xn, dec := r.escape(x, c, rank)
		res.Levels[len(res.Levels)-1].EscapeDecrease = dec
		res.Timings.Optimize += time.Since(t0).Seconds()
		st.end(k)
		log.Info("saddle escape", "from_rank", rank, "decrease", dec)
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
	// certificate), the best of that rounding refined at rank d by the
	// level optimizer and the rank-d critical point the staircase left.
	// Rounding a rank-r solution can land far above a rank-d critical
	// point the solver already held (M3500b-like graphs: 3686.69 rounded
	// against 3675.92 at rank 2), and the refinement, a local solve from
	// the rounding, usually goes lower still. Past the deadline the points
	// are only read out (rounded, their translations not re-solved), and
	// nothing is refined.
	t0 = time.Now()
	k = st.begin("round", 0)
	round := func(x *sparse.Blocks) ([]posegraph.Pose, error) {
		if k < 0 {
			return readOut(g, x, d, opts.Problem), nil
		}
		return r.roundEstimate(x)
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
	var refined float64 // seconds of the rank-d refinement, counted in Optimize
	tightEnough := haveBound && res.Objective-res.DualBound <= gapAllowed(res.Objective, r.cert.fUnit(), opts.GapTol, opts.GapAbs)
	if res.Rank > d && status != Cancelled && status != Aborted && !tightEnough && k >= 0 {
		if kr := st.begin("refine", d); kr >= 0 {
			// Refine the rounding (the critical point is one already).
			xr := g.Lift(centered(poses, d), opts.Problem, d)
			lv := Level{Rank: d}
			t1 := time.Now()
			_, err := m.Optimize(ctx, r, xr, Goal{Tol: r.method.FirstTol, Phase: PhaseRefine}, &lv)
			refined = time.Since(t1).Seconds()
			res.Timings.Optimize += refined
			res.Refine = &lv
			if err == nil || errors.Is(err, context.DeadlineExceeded) {
				p, err := r.roundEstimate(xr)
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
	// The initial estimate is a candidate too: every point the staircase
	// made came from it, but a rounding from above rank d (or a level
	// stopped early) can land above it, and a solve must never return an
	// estimate worse than the one it was given (a warm start at an
	// optimum came back higher by rounding).
	if status != Cancelled && len(res.InitialPoses) == g.N() {
		p := inGauge(g, res.InitialPoses, opts.Problem)
		if f := g.Cost(p, opts.Problem); f < res.Objective {
			res.Poses, res.Objective, res.Estimate = p, f, EstimateInitial
		}
	}
	res.Timings.Round = time.Since(t0).Seconds() - refined

	if err := settle(res, st, g, r.cert, opts, status, limit, haveBound, hasLower); err != nil {
		return nil, err
	}
	res.Timings.Total = time.Since(r.start).Seconds()
	return res, nil
}

// maxProofRefinements bounds a level's extra trust-region runs when its
// certificate holds but misses the allowance (see Options.GradTol).
const maxProofRefinements = 3

// level optimizes at rank rank with m and certifies; when the proof holds
// but its bound misses the allowance, and the optimizer converged rather
// than stalled, it goes on from the same point at a hundredth of the
// gradient tolerance and certifies again (MethodInfo's refinements).
// started reports whether the level began (its first stage started before
// the deadline); stop is TimeLimit or IterationLimit when a limit cut the
// level short (a stage refused past the deadline, an optimizer stopped by
// the clock or by its iteration limit), and "" otherwise.
func (r *Run) level(ctx context.Context, m LevelOptimizer, x *sparse.Blocks, rank int) (lv Level, c certificate, stop Status, started bool, err error) {
	lv = Level{Rank: rank}
	res, st, info := r.res, r.st, r.method
	optimize := func(tol float64, phase Phase) (Outcome, error) {
		t0 := time.Now()
		out, err := m.Optimize(ctx, r, x, Goal{Tol: tol, Phase: phase}, &lv)
		res.Timings.Optimize += time.Since(t0).Seconds()
		return out, err
	}
	tol := info.FirstTol
	out, err := optimize(tol, PhaseLevel)
	started, stop = out.Started, out.Limit
	if err != nil || stop == TimeLimit {
		return lv, c, stop, started, err
	}
	man := r.cert.manifold(rank, r.opts.Threads)
	k := st.begin("certificate", rank)
	if k < 0 {
		return lv, c, TimeLimit, true, nil
	}
	t0 := time.Now()
	c, err = r.cert.check(man, x)
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
	// above rank 3). A stalled optimizer, a limit or the refinements'
	// count ends it, and not the shift's rounding floor: the bound is
	// F - tr(Lambda) plus the shift's cost, and F - tr(Lambda) can be
	// negative, so a floor above the allowance does not prove by itself
	// that no refined point can meet it (BelowPrecision is decided after
	// the refinements, in settle).
	maxDiag := r.cert.maxDiag
	refine := func() bool {
		if stop != "" || !out.Converged || lv.ProofRefinements >= info.MaxRefinements || tol <= info.MinTol {
			return false
		}
		if !c.psd {
			return c.minEig < 0 && lv.RelGrad > -c.minEig/maxDiag
		}
		allowed := gapAllowed(lv.F, r.cert.fUnit(), r.opts.GapTol, r.opts.GapAbs)
		return lv.F-c.dualBound > allowed
	}
	for refine() {
		tol = max(tol/100, info.MinTol)
		lv.ProofRefinements++
		out, err = optimize(tol, PhaseProof)
		stop = out.Limit
		if err != nil || stop == TimeLimit {
			return lv, c, stop, true, err
		}
		if out.Steps == 0 {
			continue // the point already met the tighter tolerance: nothing to check again
		}
		k := st.begin("certificate", rank)
		if k < 0 {
			return lv, c, TimeLimit, true, nil
		}
		t0 := time.Now()
		// The refined point's own proof. Without one, an earlier proof
		// still bounds F* (a bound on F* holds whatever point it came
		// from); a failed point needs the eigenvector for its escape.
		var c2 certificate
		if c.psd {
			c2, err = r.cert.checkOnly(man, x)
		} else {
			c2, err = r.cert.check(man, x)
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

// PartsRounder rounds a point by a level optimizer's parts, without
// gathering it (rounding.RoundByParts: each part
// its share of Y Y^T, its projections and reflection votes, its interior
// translation factor; the optimizer the sums and the boundary system).
// RoundByParts returns x rounded with its translations recovered, before
// the gauge is fixed; an error leaves the rounding to the driver. The
// driver uses it for graphs without landmarks and priors, which it
// rounds itself.
type PartsRounder interface {
	RoundByParts(x *blockmat.Blocks) ([]posegraph.Pose, error)
}

// roundEstimate is the package's roundEstimate, by the level optimizer's
// parts when it offered a PartsRounder and the graph lets it.
func (r *Run) roundEstimate(x *sparse.Blocks) ([]posegraph.Pose, error) {
	g, prob := r.g, r.opts.Problem
	if pr := r.rounder; pr != nil && !g.HasLandmarks() && g.World() < 0 {
		poses, err := pr.RoundByParts(x)
		if err == nil {
			err = checkRounded(poses, g.N(), g.D)
		}
		if err == nil {
			return inGaugeRounded(g, poses, prob), nil
		}
		r.opts.Logger.Warn("rounding by parts failed; rounding the gathered point", "err", err)
	}
	r.analyse()
	return roundEstimate(g, x, g.D, prob, r.plan)
}

// checkRounded tests what a PartsRounder returned before the staircase
// evaluates F at it: n poses, each rotation in SO(d) to rounding and each
// translation finite. The parts' replies are authenticated but not
// otherwise checked, and a pose no part returned, or a rotation off the
// group, would make F, and so the bound, meaningless.
func checkRounded(poses []posegraph.Pose, n, d int) error {
	if len(poses) != n {
		return fmt.Errorf("%d poses rounded, want %d", len(poses), n)
	}
	for i := range poses {
		p := &poses[i]
		for a := 0; a < d; a++ {
			if math.IsNaN(p.T[a]) || math.IsInf(p.T[a], 0) {
				return fmt.Errorf("pose %d: translation not finite", i)
			}
			for b := 0; b < d; b++ {
				dot := 0.0
				for c := 0; c < d; c++ {
					dot += p.R[c*d+a] * p.R[c*d+b]
				}
				if a == b {
					dot--
				}
				if !(math.Abs(dot) <= 1e-9) {
					return fmt.Errorf("pose %d: rotation off SO(%d) (R^T R - I has %.3g)", i, d, dot)
				}
			}
		}
		if !(posegraph.Det(p.R[:], d) > 0) {
			return fmt.Errorf("pose %d: rotation with determinant %.3g", i, posegraph.Det(p.R[:], d))
		}
	}
	return nil
}
