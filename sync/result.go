package sync

import (
	"errors"

	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
)

// Status says how a solve ended.
type Status string

const (
	// Certified: S = Q - Lambda is positive semidefinite (to eta) at the
	// final point and the rounded estimate attains the dual bound: it is a
	// global optimum.
	Certified Status = "certified"
	// CertifiedRelaxation: the relaxation is solved and certified, but its
	// solution has rank > d and no estimate attains its bound: the
	// estimate, the best of the rounding, its refinement at rank d, the
	// staircase's rank-d critical point and the initial estimate
	// (Result.Estimate), is within
	// SuboptimalityBound of the optimum.
	CertifiedRelaxation Status = "relaxation certified, rounding not tight"
	// Bounded: S is proven positive semidefinite up to the certificate's
	// shift, but the resulting bound on F - F* is above the allowance
	// (Result.GapAllowed) although the certificate's rounding floor is
	// below it: the point was not converged enough (the trust region
	// stalled, or its proof refinements ran out). The estimate is within
	// SuboptimalityBound of F*.
	Bounded Status = "certified only to the reported suboptimality bound"
	// BelowPrecision: as Bounded, but the certificate's smallest shift,
	// at the rounding floor Options.EigTol, alone costs more than the
	// allowance (Result.ShiftFloor > Result.GapAllowed), and the proof
	// refinements, which ran until the optimizer stalled or their count
	// ran out, did not lower F - tr(Lambda) enough to make up for it. The
	// tolerance asks for about as many digits as double precision leaves
	// at these weights; the data are legal. The estimate is within
	// SuboptimalityBound of F*, and a GapAbs of at least that bound (or a
	// GapTol that allows it) certifies it.
	BelowPrecision Status = "certified only to the reported suboptimality bound: the tolerance is below the certificate's rounding floor"
	// NotCertified: the certificate still failed at the maximum rank.
	// Result.HasBound may still hold: a failing level can prove a weaker
	// lower bound on F* (Result.DualBound).
	NotCertified Status = "not certified at max rank"
	// Inconsistent: no certificate, and the staircase stopped because a
	// proven lower bound on F* (Result.DualBound) lies more than
	// InconsistentZ standard deviations above ExpectedObjective, what F is
	// at the truth when the measurements have the covariances their
	// weights claim. The measurements contradict their weights (wrong loop
	// closures, usually): the optimum of this objective is not a
	// meaningful estimate, and a robust cost is the remedy. The estimate
	// is the best the solver held, within SuboptimalityBound of F*.
	Inconsistent Status = "not certified: the measurements contradict their weights"
	// TimeLimit: stopped by Options.TimeLimit before a certificate met the
	// allowance; the estimate is the best held then (see
	// Options.TimeLimit), with a bound when one was proven.
	TimeLimit Status = "stopped by time limit"
	// IterationLimit: a trust-region run reached Options.MaxIterations
	// steps before converging, and no certificate met the allowance; the
	// staircase stopped there. The estimate is the best held then, with a
	// bound when one was proven.
	IterationLimit Status = "stopped by the iteration limit"
	// RobustUnsettled: a robust run (SolveRobust) stopped at a cap before
	// its weights settled, GNC's RobustOptions.MaxIterations or the TLS
	// check's (RobustResult.Stop "iterations" or "checks"): the final solve
	// may be certified, but it is the optimum of weights that are not a
	// fixed point of the TLS test, so not the robust estimate.
	RobustUnsettled Status = "not certified: the robust weights did not settle"
	// Cancelled: the context was cancelled.
	Cancelled Status = "cancelled"
	// Aborted: the level optimizer failed with an error the solve
	// survives (one wrapping ErrAborted: a distributed run that lost an
	// agent). The estimate is the last point the optimizer held (the
	// initial estimate, a level's start, or the last point it gathered),
	// rounded, with no certificate (a bound only when an earlier level
	// proved one); Result.Error says what happened.
	Aborted Status = "aborted by an error"
)

// ErrAborted marks a LevelOptimizer's error that ends the solve with
// status Aborted and the estimate so far, rather than with no result:
// the optimizer's point is intact, only the optimizer cannot go on (see
// LevelOptimizer.Optimize).
var ErrAborted = errors.New("the level optimizer stopped")

// Abort marks err as an error that aborts the solve with the estimate so
// far: errors.Is(Abort(err), ErrAborted) holds, errors.Is and errors.As
// find err, and the message is err's.
func Abort(err error) error { return abortError{err} }

type abortError struct{ err error }

func (e abortError) Error() string   { return e.err.Error() }
func (e abortError) Unwrap() []error { return []error{ErrAborted, e.err} }

// Estimate names where a Result's poses came from.
type Estimate string

const (
	// EstimateRounded: the staircase's final point, rounded onto SO(d)^n
	// with exactly optimal translations (at rank d, the point itself).
	EstimateRounded Estimate = "rounded"
	// EstimateRefined: the rounded final point, refined by the trust
	// region at rank d (a local solve), which lowered F.
	EstimateRefined Estimate = "refined at rank d"
	// EstimateCritical: the rank-d critical point the staircase left
	// before climbing, lower than the rounded and the refined estimates.
	EstimateCritical Estimate = "rank-d critical point"
	// EstimateInitial: the initial estimate (in the graph's gauge), lower
	// than every point the staircase made from it: the solve never returns
	// an estimate worse than the one it started from.
	EstimateInitial Estimate = "initial estimate"
)

// Record is one point of the convergence history.
type Record struct {
	Rank     int     `json:"rank"`
	Phase    string  `json:"phase"` // "bcm" (one sweep) or "rtr" (one trust-region step)
	Iter     int     `json:"iter"`  // within the level, counting BCM sweeps then RTR steps
	Seconds  float64 `json:"seconds"`
	F        float64 `json:"f"`
	GradNorm float64 `json:"grad_norm"`
	RelGrad  float64 `json:"rel_grad_norm"`
	// The trust-region step that led to this point (rtr records after a
	// level's first; a record without a step has them zero, and in JSON
	// a zero or false field is left out): Inner is its tCG iterations,
	// Factorizations the numeric Cholesky factorizations it attempted, of
	// the Hessian (failed rungs of the shift ladder included, and S's in
	// the split form above rank d) or of Q + sigma I, 0 when the factor in
	// use was kept from an earlier step. FactorSeconds is the time of the
	// preconditioner's update: the factorizations with the Hessian's
	// assembly and, after a rank change, its symbolic analysis. Precond
	// names the preconditioner tCG used: "hessian", "q" (Q + sigma I, when
	// the Hessian, or S, did not factor) or "none" (Q did not factor
	// either). When the step made the Hessian factor it used, Shift is that
	// factor's diagonal shift relative to the Hessian's largest diagonal
	// entry and Raised the pivots the modified factorization raised.
	// Accepted reports whether the step was taken. A factorization made
	// at the last point, when tCG found no step to take there, is in no
	// record.
	Inner          int     `json:"inner,omitempty"`
	Factorizations int     `json:"factorizations,omitempty"`
	FactorSeconds  float64 `json:"factor_seconds,omitempty"`
	Shift          float64 `json:"shift,omitempty"`
	Raised         int     `json:"raised,omitempty"`
	Precond        string  `json:"precond,omitempty"`
	Accepted       bool    `json:"accepted,omitempty"`
}

// Level summarizes one rung of the Riemannian staircase.
type Level struct {
	Rank          int     `json:"rank"`
	BCMSweeps     int     `json:"bcm_sweeps"`
	BCMStop       string  `json:"bcm_stop"`
	BCMSeconds    float64 `json:"bcm_seconds"`
	RTRIterations int     `json:"rtr_iterations"`
	RTRInner      int     `json:"rtr_inner_iterations"`
	RTRStop       string  `json:"rtr_stop"`
	RTRSeconds    float64 `json:"rtr_seconds"`
	F             float64 `json:"f"`
	GradNorm      float64 `json:"grad_norm"`
	RelGrad       float64 `json:"rel_grad_norm"`
	// DualBound is the lower bound on F* this level proved (the
	// certificate's, or a failing level's weak bound), nil when it proved
	// none: tr(Lambda) of a failing level bounds nothing.
	DualBound     *float64 `json:"dual_bound"`
	MinEigenvalue float64  `json:"min_eigenvalue"`
	EigMethod     string   `json:"min_eigenvalue_method"`
	Certified     bool     `json:"certified"`
	// EscapeDecrease is F's decrease along the negative-curvature
	// direction into the next rank (0 when the level certified).
	EscapeDecrease float64 `json:"escape_decrease,omitempty"`
	CertifySeconds float64 `json:"certify_seconds"`
	// ProofRefinements counts the extra trust-region runs the level made,
	// each at a hundredth of the previous gradient tolerance, because its
	// certificate held but its bound missed the allowance (see
	// Options.GradTol); their steps are in the history with phase "rtr",
	// their time in RTRSeconds and CertifySeconds.
	ProofRefinements int `json:"proof_refinements,omitempty"`
	// Rounds, RoundStop and RoundSeconds are a distributed level's rounds
	// of agent updates (sync/distributed), which take the place of BCM's
	// sweeps and the trust region's steps there; RoundStop says why they
	// stopped ("gradient", "decrease" or "rounds").
	Rounds       int     `json:"rounds,omitempty"`
	RoundStop    string  `json:"round_stop,omitempty"`
	RoundSeconds float64 `json:"round_seconds,omitempty"`
}

// Stage is one stage of a solve, recorded when it starts: Name is
// "init", "bcm", "rtr", "certificate", "escape", "round", "refine" (the
// rank-d trust region from a rounding) or "certify estimate" (the
// estimate's own certificate), Rank the staircase's rank (0 for init and
// round), Start the seconds since Solve began, Seconds its duration. No
// stage starts after Options.TimeLimit: a stage whose Start would be
// later is not run, and not recorded.
type Stage struct {
	Name    string  `json:"name"`
	Rank    int     `json:"rank,omitempty"`
	Start   float64 `json:"start"`
	Seconds float64 `json:"seconds"`
}

// Timings are wall-clock seconds per stage. Init includes building Q and
// its fill-reducing order, which the chordal initialization and every
// later factorization share.
type Timings struct {
	Parse    float64 `json:"parse"`
	Init     float64 `json:"init"`
	Optimize float64 `json:"optimize"`
	Certify  float64 `json:"certify"`
	Round    float64 `json:"round"`
	Total    float64 `json:"total"`
}

// Result is a solve's answer and everything needed to trust it.
type Result struct {
	// Poses is the estimate in the input's gauge (the anchor keeps its
	// input pose), indexed like the graph; for Rotations T is zero.
	Poses []posegraph.Pose
	// Graph is the graph that was solved: the input, or its largest
	// component with Options.LargestComponent.
	Graph   *posegraph.Graph
	Problem posegraph.Problem
	Status  Status
	// Certified is true when Status is Certified.
	Certified bool
	// Objective is F of the rounded estimate (docs/design.md section 1), as
	// Graph.Cost evaluates it: with Graph.RawRotations (SE-Sync's reading of
	// 3-D files) that is SE-Sync's tr(XQX^T), F plus a constant.
	Objective float64
	// RelaxationObjective is F at the final rank-r point.
	RelaxationObjective float64
	// HasBound reports whether a lower bound on F* was proven: only then
	// are DualBound and SuboptimalityBound set. A certificate gives one;
	// a level that failed it may still give a weaker one (NotCertified,
	// Inconsistent, TimeLimit).
	HasBound bool
	// DualBound is tr(Lambda) - Eta d EtaPoses, a rigorous lower bound on
	// the optimum: S + E was proven positive semidefinite, E a diagonal
	// shift on the rotation coordinates of EtaPoses poses whose trace is
	// Eta d EtaPoses (or, from a level that failed the certificate, a
	// weaker bound of the same form). It is the bound of
	// the certified relaxation (or of the estimate itself, when that is
	// higher), and bounds every estimate, whatever its rank.
	DualBound float64
	// SuboptimalityBound is Objective - DualBound >= Objective - F*.
	SuboptimalityBound float64
	// GapAllowed is what Certified allows of SuboptimalityBound:
	// max(Options.GapTol max(FUnit, |Objective|), Options.GapAbs), nothing
	// more. GapAllowedBy names the term that set it: "gap_tol*|F|",
	// "gap_tol*unit" (|F| < FUnit) or "gap_abs".
	GapAllowed   float64
	GapAllowedBy string
	// FUnit is the unit of F the relative tolerance falls back to when
	// |F| is below it: 1e7 times the certificate's rounding floor at this
	// graph's Q (the least shift at Options.EigTol), so proportional to
	// the weights: a uniform scaling of every weight scales it, F and
	// every bound alike, and changes no status (see Options.GapTol).
	FUnit float64
	// ShiftFloor is the least the certificate's shift could cost the bound
	// at the point whose proof is reported, at the rounding floor
	// Options.EigTol (0 when no proof was attempted): no bound below it can
	// be proven there in double precision (see BelowPrecision).
	ShiftFloor float64
	// MinEigenvalue estimates lambda_min(S) at the certified point (an
	// upper estimate from inverse iteration), or at the last point tried.
	MinEigenvalue float64
	// Eta is the certificate's shift on the rotation coordinates of
	// EtaPoses poses, 1 (the anchor pose the factor eliminates last) or
	// all n, as its mean over those coordinates: the shift is sigma/D_c^2
	// at coordinate c, D the certificate's power-of-two Jacobi scaling
	// (docs/certificate.md), so each coordinate pays in its own scale. The
	// dual bound pays Eta d EtaPoses for it.
	Eta      float64
	EtaPoses int
	// Estimate says where Poses came from (see the Estimate constants):
	// the final point rounded, or, above rank d, the better of that
	// rounding refined at rank d and the staircase's rank-d critical point.
	Estimate Estimate
	// Refine is the rank-d trust region run from the rounded estimate when
	// the final rank is above d and the rounding did not meet the gap
	// (nil otherwise); its steps are in History with phase "refine".
	Refine *Level
	Rank   int
	// WeightSpread is the ratio of the largest to the smallest edge weight
	// (kappa, and tau for poses; a landmark observation's kappa 0 left
	// out). Rounding in double precision is about 1.1e-16 of the heaviest
	// terms, so a spread above GradTol / 1.1e-16 (1e7 at the default)
	// leaves the light edges' gradient below the rounding of the heavy
	// ones: such a solve may not converge, or certify, however long it
	// runs.
	WeightSpread float64
	// ExpectedObjective and ExpectedObjectiveSD are the mean and standard
	// deviation of F at the true poses for measurements whose errors have
	// the covariances their weights claim: F is then a chi-squared sum
	// with m (d(d-1)/2 + d) degrees of freedom (m d(d-1)/2 for rotations).
	// F* lies below F at the truth, so a proven lower bound on F* many
	// standard deviations above the mean says the data contradict their
	// weights (see Inconsistent).
	ExpectedObjective, ExpectedObjectiveSD float64
	// Initial is the initialization's objective and poses (before any
	// optimization), for plots.
	InitialObjective float64
	InitialPoses     []posegraph.Pose
	Levels           []Level
	History          []Record
	// Stages lists the stages that ran, in order, with their start times
	// (see Stage and Options.TimeLimit).
	Stages  []Stage
	Timings Timings
	// Options are the options the solve ran with, defaults filled in
	// (Init, for a solve that did not run Solve's initializations, names
	// the one it ran). Method names the level optimizer (MethodBCMRTR for
	// Solve; see SolveWith), MethodOptions its own options as they ran.
	Options       Options
	Method        string
	MethodOptions any

	final *sparse.Blocks // the staircase's last point (tests check its certificate)
	// Robust is the outlier rejection's account (SolveRobust's; nil for
	// a plain solve): each edge's weight, the rejected edges, the outer
	// iterations. With it, Graph is the final weighted graph, the one the
	// certificate is of.
	Robust *RobustResult
	// Error is the error that aborted the solve (status Aborted), "" otherwise.
	Error string
}
