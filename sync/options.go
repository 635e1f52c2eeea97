package sync

import (
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/bcmsync/bcmsync/bcm"
	"github.com/bcmsync/bcmsync/posegraph"
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
	// InitPartitioned is the distributed solver's (sync/distributed): each
	// part's own chordal estimate, moved by the rigid motion that best fits
	// the parts already placed. It is what Result.Options records for
	// such a run; Solve does not take it.
	InitPartitioned Init = "partitioned chordal"
)

// ParseInit checks an initialization name.
func ParseInit(s string) (Init, error) {
	switch Init(s) {
	case InitChordal, InitOdometry, InitVertices, InitRandom:
		return Init(s), nil
	}
	return "", fmt.Errorf("unknown initialization %q (want chordal, odometry, vertices or random)", s)
}

// Options control Solve. A zero field takes its default, and every default
// is in one place, DefaultOptions (the command line's are the same), so
// the zero value runs the defaults. Result.Options records the options a
// solve ran with, defaults filled in.
//
// The fields come in groups: what is solved and from where; the
// staircase; the level optimizer (BCM's warm start, then the trust
// region); the certificate; resources and reporting.
type Options struct {
	// Problem: posegraph.Poses (SE(d), the default) or posegraph.Rotations.
	Problem posegraph.Problem
	// Init is the initialization (default InitChordal, or InitGiven when
	// InitialPoses is set). InitialPoses, indexed like the graph, is the
	// starting estimate for InitGiven; only the rotations count for
	// Rotations.
	Init         Init
	InitialPoses []posegraph.Pose
	// LargestComponent solves the largest connected component of a
	// disconnected graph instead of failing.
	LargestComponent bool

	// Rank0 is the first rank of the staircase (0: d, so a graph whose
	// relaxation is exact, the common case, never pays for a larger rank);
	// MaxRank the last (default 10).
	Rank0, MaxRank int

	// Rule selects BCM's blocks (default bcm.Cyclic). BCMTol is the
	// relative gradient norm at which BCM hands over to the trust region
	// (default 1e-3), BCMDecreaseTol the fraction by which a sweep must
	// lower F for BCM to go on (default 1e-5), BCMMaxSweeps the sweeps at
	// most (default 5; negative: no BCM). BCM makes cheap early progress,
	// but its progress per sweep only shrinks, while the trust region's
	// steps are Newton steps (the exact Hessian preconditions them), which
	// need only a few more steps from an earlier point: a few sweeps are
	// best (docs/performance.md, "History", and docs/tuning.md have the measurements).
	Rule           bcm.Rule
	BCMTol         float64
	BCMDecreaseTol float64
	BCMMaxSweeps   int
	// GradTol is the relative gradient norm ||grad F|| / ||2XQ|| of the
	// final point at each rank (default 1e-9). When the certificate holds
	// there but its bound misses the allowance (see GapTol), the level
	// goes on from that point at a hundredth of the tolerance, up to
	// maxProofRefinements times, while the trust region still makes
	// progress.
	GradTol float64
	// MaxIterations bounds the trust region's steps in each of its runs
	// (each staircase level, each of a level's proof refinements, the
	// rank-d refinement of a rounding; default 500). A level that reaches
	// it before converging ends the staircase with status IterationLimit,
	// unless its certificate already proves the estimate to the allowance.
	MaxIterations int

	// GapTol and GapAbs say what the certificate must prove. Certified
	// means
	//
	//	bound <= max(GapTol * max(unit, |F|), GapAbs)
	//
	// where F is the returned estimate's objective and bound is the proven
	// suboptimality bound F - (a lower bound on F*), so that F - F* is at
	// most that allowance (Result.GapAllowed; Result.GapAllowedBy says
	// which term set it). GapTol is relative (default 1e-6) to |F|, and
	// to the unit of F (Result.FUnit) when |F| is below it: 1e7 times the
	// certificate's rounding floor at this graph's Q, a quantity
	// proportional to the weights, so that scaling every weight by the
	// same factor changes no status (an absolute 1 there certified a saddle
	// of intel with its weights times 1e-12). Data whose measurements agree
	// exactly (F* = 0: noise-free data, trees), for which no relative
	// tolerance of F can be proven in floating point, certify: the default
	// GapTol allows them ten times the rounding floor. GapAbs (default 0) is an
	// absolute allowance in the units of F. The certificate's first shift
	// costs at most half the allowance (a larger retry proves a looser
	// bound, and the status then says so); the proof holds without any
	// further slack.
	GapTol float64
	GapAbs float64
	// EigTol is the smallest certificate shift, relative to each
	// coordinate's own scale (default 1e-13): the certificate factors
	// D S D, D the power-of-two Jacobi scaling that brings Q's diagonal to
	// about 1, plus a shift of at least EigTol on rotation coordinates;
	// below it a Cholesky factor proves nothing beyond rounding. In S's
	// own coordinates the floor is EigTol times each coordinate's diagonal
	// entry of Q, so light poses are not charged for the heaviest weight
	// (the benchmark files' weights span six decades).
	EigTol float64

	// Threads goes to BCM, the products with Q and the trust region's
	// per-pose loops (0: all cores; the sparse factorizations and their
	// solves use GOMAXPROCS). Seed seeds everything random: BCM's
	// samplers, the random initialization, the perturbation of a start
	// above rank d and the eigensolver (default 1, the command line's;
	// any other value is a seed of its own). Same seed and options give
	// the same bits, whatever the number of threads.
	Threads int
	Seed    uint64
	// TimeLimit bounds the whole solve (0: none): no stage (initialization,
	// a level's BCM, trust region or certificate, a saddle escape, the
	// rounding, the rank-d refinement, the estimate's own certificate)
	// starts after it (a factorization already running finishes), and
	// the estimate held then is returned with status TimeLimit (the
	// initial estimate, or the file's VERTEX poses if the limit passed
	// before the initialization, when nothing better exists). Result.Stages
	// records when each stage started.
	TimeLimit time.Duration
	// Progress, if set, receives every history record as it is made.
	Progress func(Record)
	// Logger receives one line per stage and level (nil: silent).
	Logger *slog.Logger

	// warmStep marks a solve that Incremental warm-started from its last
	// certified estimate: the certificate's inverse iteration starts from
	// the point itself (certifier.nullStart).
	warmStep bool
	// order, when not nil, gives the solve its fill-reducing order
	// (Incremental's kept order: stepOrder) instead of a fresh BlockOrder
	// and is told the analysis made with it.
	order *stepOrder
}

// DefaultOptions returns the options a zero field stands for: every
// default of Solve, and of the command line's flags, is set here.
// Problem, Rank0 (d, known only with the graph) and the fields without a
// default (InitialPoses, LargestComponent, GapAbs, Threads, TimeLimit,
// Progress) are left zero.
func DefaultOptions() Options {
	return Options{
		Init:           InitChordal,
		MaxRank:        10,
		Rule:           bcm.Cyclic,
		BCMTol:         1e-3,
		BCMDecreaseTol: 1e-5,
		BCMMaxSweeps:   5,
		GradTol:        1e-9,
		MaxIterations:  500,
		GapTol:         1e-6,
		EigTol:         1e-13,
		Seed:           1,
		Logger:         slog.New(slog.DiscardHandler),
	}
}

// WithDefaults returns o with every zero field set to its default
// (DefaultOptions) for a graph of dimension d: the options a solve runs.
func (o Options) WithDefaults(d int) Options {
	def := DefaultOptions()
	if o.Init == "" {
		o.Init = def.Init
		if o.InitialPoses != nil {
			o.Init = InitGiven
		}
	}
	if o.Rank0 == 0 {
		o.Rank0 = d
	}
	if o.MaxRank == 0 {
		o.MaxRank = def.MaxRank
	}
	if o.BCMTol == 0 {
		o.BCMTol = def.BCMTol
	}
	if o.BCMDecreaseTol == 0 {
		o.BCMDecreaseTol = def.BCMDecreaseTol
	}
	if o.BCMMaxSweeps == 0 {
		o.BCMMaxSweeps = def.BCMMaxSweeps
	}
	if o.GradTol == 0 {
		o.GradTol = def.GradTol
	}
	if o.MaxIterations == 0 {
		o.MaxIterations = def.MaxIterations
	}
	if o.GapTol == 0 {
		o.GapTol = def.GapTol
	}
	if o.EigTol == 0 {
		o.EigTol = def.EigTol
	}
	if o.Seed == 0 {
		o.Seed = def.Seed
	}
	if o.Logger == nil {
		o.Logger = def.Logger
	}
	return o
}

// check reports options no solve can run with, for a graph of dimension
// d (after WithDefaults).
func (o *Options) check(d int) error {
	for _, v := range []struct {
		name string
		val  float64
	}{{"GapTol", o.GapTol}, {"GapAbs", o.GapAbs}, {"GradTol", o.GradTol}, {"EigTol", o.EigTol},
		{"BCMTol", o.BCMTol}, {"BCMDecreaseTol", o.BCMDecreaseTol}} {
		if !(v.val >= 0) || math.IsInf(v.val, 0) {
			return fmt.Errorf("sync: %s = %g must be a finite number >= 0", v.name, v.val)
		}
	}
	if o.MaxIterations < 0 {
		return fmt.Errorf("sync: MaxIterations = %d must be >= 0", o.MaxIterations)
	}
	if o.Threads < 0 {
		return fmt.Errorf("sync: Threads = %d must be >= 0", o.Threads)
	}
	if o.Rank0 < d || o.MaxRank < o.Rank0 {
		return fmt.Errorf("ranks must satisfy d = %d <= rank0 = %d <= max rank = %d", d, o.Rank0, o.MaxRank)
	}
	return nil
}
