package bcm

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"time"

	"github.com/bcmsync/bcmsync/internal/smalldense"
	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
	"github.com/bcmsync/bcmsync/posegraph/blockmat"
)

// Rule selects which block is updated next.
type Rule int

const (
	// Cyclic updates blocks 0, 1, ..., n-1 in turn.
	Cyclic Rule = iota
	// Uniform samples each block with probability 1/n.
	Uniform
	// Importance samples block i with probability proportional to ||H_i||_*.
	Importance
	// Greedy updates the block whose update decreases F the most.
	Greedy
	// Parallel updates the colour classes of a greedy colouring of the
	// graph one after another, each split over Threads goroutines.
	Parallel
)

var ruleNames = [...]string{"cyclic", "uniform", "importance", "greedy", "parallel"}

func (r Rule) String() string {
	if r >= 0 && int(r) < len(ruleNames) {
		return ruleNames[r]
	}
	return fmt.Sprintf("Rule(%d)", int(r))
}

// ParseRule returns the rule named s (as printed by Rule.String).
func ParseRule(s string) (Rule, error) {
	for k, n := range ruleNames {
		if n == s {
			return Rule(k), nil
		}
	}
	return 0, fmt.Errorf("bcm: unknown rule %q (want cyclic, uniform, importance, greedy or parallel)", s)
}

// Status says why Solve stopped.
type Status int

const (
	// GradientConverged: RelGradNorm <= GradTol.
	GradientConverged Status = iota
	// DecreaseStalled: the relative decrease of F over a sweep fell below DecreaseTol.
	DecreaseStalled
	// SweepLimit: MaxSweeps sweeps were done.
	SweepLimit
	// TimeLimit: MaxTime elapsed.
	TimeLimit
	// Cancelled: the context was cancelled.
	Cancelled
)

var statusNames = [...]string{"gradient converged", "decrease stalled", "sweep limit", "time limit", "cancelled"}

func (s Status) String() string {
	if s >= 0 && int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("Status(%d)", int(s))
}

// Options control Solve. The zero value runs cyclic sweeps until stopped by
// the context; without a cancellable context, set at least one of GradTol,
// DecreaseTol, MaxSweeps, MaxTime (Solve reports an error otherwise).
type Options struct {
	Rule Rule
	// Threads is the number of goroutines of the Parallel rule and of the
	// per-sweep product X Q; 0 means GOMAXPROCS. Results do not depend on it.
	Threads int
	// Seed seeds the samplers (Uniform, Importance).
	Seed uint64
	// GradTol: stop when RelGradNorm <= GradTol.
	GradTol float64
	// DecreaseTol: stop when (F_prev - F) <= DecreaseTol |F_prev| over a
	// sweep (0 = off).
	DecreaseTol float64
	// MaxSweeps bounds the sweeps (0 = no bound). A sweep is n block
	// updates (n samples for the samplers).
	MaxSweeps int
	// MaxTime bounds the wall time (0 = no bound), checked between sweeps.
	MaxTime time.Duration
	// Progress, if not nil, is called with the record of the starting point
	// (Sweep 0) and after each sweep.
	Progress func(Record)
	// SolveTranslations (Poses only) starts every sweep with the exact joint
	// minimization of F over all translations given the Y blocks: one
	// sparse Cholesky factorization of the translation Laplacian per Solver
	// and r triangular solves per sweep. It is a block-coordinate step as
	// well, so F still never increases, and it removes the slow diffusion of
	// translations along long chains.
	SolveTranslations bool
	// Translations, if not nil, solves that step's system instead of a
	// factorization of Solve's own: the caller holds one already (sync's
	// rounding plan factors the same Laplacian for the initialization and
	// the rounding). The graph must then be connected.
	Translations TranslationSolver
}

// TranslationSolver solves the exact translation step's system: the
// tau-weighted graph Laplacian L_tau (the (d, d) entries of Q's blocks)
// with the row and column of one pose, Anchor(), removed, whose translation
// the step then keeps. x and rhs hold the n-1 other poses in pose order
// (pose i at i, or at i-1 after the anchor).
type TranslationSolver interface {
	Anchor() int
	SolveTranslations(x, rhs []float64) error
}

// Record is the state after a sweep.
type Record struct {
	Sweep                    int
	Updates                  int64
	F, GradNorm, RelGradNorm float64
	Elapsed                  time.Duration
}

// Result is the outcome of Solve. History holds one Record per sweep,
// starting with Sweep 0, the starting point.
type Result struct {
	F, GradNorm, RelGradNorm float64
	Sweeps                   int
	Updates                  int64
	Status                   Status
	History                  []Record
	Elapsed                  time.Duration
}

// Solver minimizes F(X) = tr(X Q X^T) block by block. A Solver holds scratch
// space and is not safe for concurrent use; use one per goroutine.
type Solver struct {
	q    *sparse.BlockSym
	d, b int
	pose bool
	err  error

	classes [][]int        // colour classes for Parallel, built on first use
	nq      *sparse.Blocks // N = X Q, reused across calls
	trans   *transSolver   // for SolveTranslations, built on first use

	// onStep, if set (by tests), is called after every block update with
	// the block and the decrease the descent identity predicts.
	onStep func(i int, dec float64)
}

// New returns a solver for the Laplacian q of a problem of the given kind in
// dimension d (q = g.Laplacian(kind)). Inconsistent arguments are reported by
// Solve.
func New(q *blockmat.BlockSym, d int, kind posegraph.Problem) *Solver {
	s := &Solver{q: q, d: d, pose: kind == posegraph.Poses}
	switch {
	case q == nil:
		s.err = errors.New("bcm: nil matrix Q")
	case d < 1 || d > 3:
		s.err = fmt.Errorf("bcm: dimension d = %d, want 2 or 3", d)
	case q.B != kind.BlockSize(d):
		s.err = fmt.Errorf("bcm: Q has %d x %d blocks, want %d for %v in dimension %d", q.B, q.B, kind.BlockSize(d), kind, d)
	}
	s.b = kind.BlockSize(d)
	return s
}

func (s *Solver) check(x *sparse.Blocks) error {
	if s.err != nil {
		return s.err
	}
	switch {
	case x == nil:
		return errors.New("bcm: nil X")
	case x.N != s.q.N || x.B != s.b:
		return fmt.Errorf("bcm: X has %d blocks of width %d, Q has %d of width %d", x.N, x.B, s.q.N, s.b)
	case x.R < s.d:
		return fmt.Errorf("bcm: rank r = %d below dimension d = %d", x.R, s.d)
	case len(x.Data) != x.R*x.B*x.N:
		return fmt.Errorf("bcm: X holds %d values, want %d x %d x %d", len(x.Data), x.R, x.B, x.N)
	}
	for k, v := range x.Data {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("bcm: X block %d holds %v", k/(x.R*x.B), v)
		}
	}
	return nil
}

func (s *Solver) scratchN(x *sparse.Blocks) *sparse.Blocks {
	if s.nq == nil || s.nq.R != x.R || s.nq.N != x.N || s.nq.B != x.B {
		s.nq = sparse.NewBlocks(x.R, x.B, x.N)
	}
	return s.nq
}

// keepScratchMax is the size from which Solve lets its X Q go when it
// returns, instead of keeping it for the next call: at a million poses
// and rank 3 it is 96 MB, held through the trust region and the
// certificate that follow BCM in a staircase level, while making it again
// costs one pass over memory that the next call's solve dwarfs.
const keepScratchMax = 8 << 20

// dropScratch lets go, at the end of Solve, of what the next call would
// make again or can cheaply: a large X Q (keepScratchMax), and a
// translation solver on the caller's factor (Options.Translations), which
// every call that passes one builds again anyway.
func (s *Solver) dropScratch() {
	if s.nq != nil && 8*len(s.nq.Data) >= keepScratchMax {
		s.nq = nil
	}
	if s.trans != nil && s.trans.ext != nil {
		s.trans = nil
	}
}

// Cost returns F(X) = tr(X Q X^T).
func (s *Solver) Cost(x *blockmat.Blocks) float64 {
	return posegraph.TraceCost(s.q, x, s.scratchN(x))
}

// Gradient sets grad (same shape as x) to the Riemannian gradient of F at X,
// blockwise 2 [N_Y - Y sym(Y^T N_Y), N_p] with N = X Q, and returns its
// Frobenius norm. The Y blocks of x are assumed to lie on St(d, r).
func (s *Solver) Gradient(grad, x *blockmat.Blocks) (norm float64) {
	s.q.MulBlocks(grad, x)
	var sym [9]float64
	ss := 0.0
	for i := 0; i < x.N; i++ {
		xi, ni := x.Block(i), grad.Block(i)
		s.symYtN(&sym, xi, ni, x.R)
		for a := 0; a < x.R; a++ {
			for c := 0; c < x.B; c++ {
				v := ni[a*x.B+c]
				if c < s.d {
					for t := 0; t < s.d; t++ {
						v -= xi[a*x.B+t] * sym[t*s.d+c]
					}
				}
				v *= 2
				ni[a*x.B+c] = v
				ss += v * v
			}
		}
	}
	return math.Sqrt(ss)
}

// symYtN sets sym = sym(Y^T N_Y) for the Y columns of the blocks xi, ni.
func (s *Solver) symYtN(sym *[9]float64, xi, ni []float64, r int) {
	smalldense.SymAtB(sym[:], xi, ni, r, s.b, s.d)
}

// gradNorms returns ||grad F(X)||_F and ||N||_F for N = X Q already in n.
func (s *Solver) gradNorms(x, n *sparse.Blocks) (grad, nn float64) {
	d, b, r := s.d, s.b, x.R
	var sym [9]float64
	gs, ns := 0.0, 0.0
	for i := 0; i < x.N; i++ {
		xi, ni := x.Block(i), n.Block(i)
		s.symYtN(&sym, xi, ni, r)
		for a := 0; a < r; a++ {
			for c := 0; c < b; c++ {
				v := ni[a*b+c]
				ns += v * v
				if c < d {
					for t := 0; t < d; t++ {
						v -= xi[a*b+t] * sym[t*d+c]
					}
				}
				gs += v * v
			}
		}
	}
	return 2 * math.Sqrt(gs), math.Sqrt(ns)
}

// RelGradNorm returns ||grad F(X)||_F / ||2 X Q||_F, or 0 if X Q = 0. The
// ratio is invariant under scaling Q and under X -> O X, so one tolerance
// fits every problem.
func (s *Solver) RelGradNorm(x *blockmat.Blocks) float64 {
	n := s.scratchN(x)
	s.q.MulBlocks(n, x)
	g, nn := s.gradNorms(x, n)
	if nn == 0 {
		return 0
	}
	return g / (2 * nn)
}

// record evaluates F and the gradient at x, leaving N = X Q in s.nq.
func (s *Solver) record(x *sparse.Blocks, threads int) Record {
	n := s.scratchN(x)
	s.q.MulBlocksParallel(n, x, threads)
	f := 0.0
	for k, v := range x.Data {
		f += v * n.Data[k]
	}
	g, nn := s.gradNorms(x, n)
	rel := 0.0
	if nn > 0 {
		rel = g / (2 * nn)
	}
	return Record{F: f, GradNorm: g, RelGradNorm: rel}
}

// RandomStiefel fills x with a random point: each Y block (the first d
// columns) is the polar factor of a Gaussian r x d matrix, hence uniformly
// distributed on St(d, r); translation columns, if any, are standard normal.
func RandomStiefel(x *blockmat.Blocks, d int, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	r, b := x.R, x.B
	h := make([]float64, r*d)
	y := make([]float64, r*d)
	for i := 0; i < x.N; i++ {
		for k := range h {
			h[k] = rng.NormFloat64()
		}
		smalldense.Polar(y, h, r, d)
		xi := x.Block(i)
		for a := 0; a < r; a++ {
			for c := 0; c < b; c++ {
				if c < d {
					xi[a*b+c] = y[a*d+c]
				} else {
					xi[a*b+c] = rng.NormFloat64()
				}
			}
		}
	}
}

// Solve runs block-coordinate minimization from x, updating it in place,
// until a stopping rule of opts fires. It returns an error only for
// inconsistent input; stopping by context or time is reported in Status.
func (s *Solver) Solve(ctx context.Context, x *blockmat.Blocks, opts Options) (Result, error) {
	if err := s.check(x); err != nil {
		return Result{}, err
	}
	if opts.Rule < Cyclic || opts.Rule > Parallel {
		return Result{}, fmt.Errorf("bcm: unknown rule %d", int(opts.Rule))
	}
	if opts.Threads < 0 || opts.GradTol < 0 || opts.DecreaseTol < 0 || opts.MaxSweeps < 0 || opts.MaxTime < 0 {
		return Result{}, errors.New("bcm: negative option")
	}
	if opts.GradTol == 0 && opts.DecreaseTol == 0 && opts.MaxSweeps == 0 && opts.MaxTime == 0 && ctx.Done() == nil {
		return Result{}, errors.New("bcm: nothing would stop Solve: set GradTol, DecreaseTol, MaxSweeps or MaxTime, or pass a cancellable context")
	}
	threads := opts.Threads
	if threads == 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	start := time.Now()
	if opts.SolveTranslations && s.pose && (s.trans == nil || s.trans.ext != nil || opts.Translations != nil) {
		var ts *transSolver
		var err error
		if opts.Translations != nil {
			ts, err = extTransSolver(s.q.N, opts.Translations)
		} else {
			ts, err = newTransSolver(s.q, s.d)
		}
		if err != nil {
			return Result{}, err
		}
		s.trans = ts
	}
	rng := rand.New(rand.NewPCG(opts.Seed, 0x5851f42d4c957f2d))
	sw := newSweeper(s, x, threads)
	sw.onStep = s.onStep

	rec := s.record(x, threads)
	rec.Elapsed = time.Since(start)
	res := Result{History: []Record{rec}}
	if opts.Progress != nil {
		opts.Progress(rec)
	}
	finish := func(st Status) (Result, error) {
		last := res.History[len(res.History)-1]
		res.F, res.GradNorm, res.RelGradNorm = last.F, last.GradNorm, last.RelGradNorm
		res.Sweeps, res.Updates = last.Sweep, last.Updates
		res.Status = st
		res.Elapsed = time.Since(start)
		s.dropScratch()
		return res, nil
	}
	var updates int64
	for sweep := 1; ; sweep++ {
		if rec.RelGradNorm <= opts.GradTol {
			return finish(GradientConverged)
		}
		if ctx.Err() != nil {
			return finish(Cancelled)
		}
		if opts.MaxTime > 0 && time.Since(start) >= opts.MaxTime {
			return finish(TimeLimit)
		}
		if opts.MaxSweeps > 0 && sweep > opts.MaxSweeps {
			return finish(SweepLimit)
		}
		if opts.SolveTranslations && s.pose {
			// First, so the block updates see good translations. s.nq
			// holds X Q from the last record; the samplers need it current.
			if _, err := s.trans.step(x, s.nq, s.d); err != nil {
				return Result{}, err
			}
			if opts.Rule == Importance || opts.Rule == Greedy {
				s.q.MulBlocksParallel(s.nq, x, threads)
			}
		}
		switch opts.Rule {
		case Cyclic:
			updates += sw.cyclic()
		case Uniform:
			updates += sw.uniform(rng)
		case Importance:
			updates += sw.importance(rng)
		case Greedy:
			updates += sw.greedy()
		case Parallel:
			updates += sw.parallel()
		}
		prev := rec.F
		rec = s.record(x, threads)
		rec.Sweep, rec.Updates, rec.Elapsed = sweep, updates, time.Since(start)
		res.History = append(res.History, rec)
		if opts.Progress != nil {
			opts.Progress(rec)
		}
		if rec.RelGradNorm <= opts.GradTol {
			return finish(GradientConverged)
		}
		if opts.DecreaseTol > 0 && prev-rec.F <= opts.DecreaseTol*math.Abs(prev) {
			return finish(DecreaseStalled)
		}
	}
}

// StepTranslations minimizes F exactly over all translation columns of x
// with its Y blocks fixed (see Options.SolveTranslations), given
// n = X Q at x, and returns F's decrease. n is not updated.
func (s *Solver) StepTranslations(x, n *blockmat.Blocks) (float64, error) {
	if !s.pose {
		return 0, nil
	}
	if s.trans == nil {
		ts, err := newTransSolver(s.q, s.d)
		if err != nil {
			return 0, err
		}
		s.trans = ts
	}
	return s.trans.step(x, n, s.d)
}
