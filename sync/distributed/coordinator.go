package distributed

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	stdsync "sync"
	"time"

	"github.com/bcmsync/bcmsync/bcm"
	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
	"github.com/bcmsync/bcmsync/rounding"
	bsync "github.com/bcmsync/bcmsync/sync"
)

// Options control the coordinator.
type Options struct {
	// Sync carries the staircase's and the certificate's options (Problem,
	// Rank0, MaxRank, GradTol, GapTol, GapAbs, EigTol, Seed, Threads,
	// TimeLimit, Logger, Progress; LargestComponent is refused, since the
	// partition is of the whole graph). Its GradTol is the relative
	// gradient norm ||grad F|| / ||2 X Q|| down to which a level's rounds
	// are refined before a failed certificate is taken for a saddle. Its
	// BCM and trust-region options do not apply: the rounds take their
	// place, and the report leaves them out.
	Sync bsync.Options
	// Subject prefixes every subject (default "bcmsync"); it must match the
	// agents'.
	Subject string
	// CheckTol is the relative gradient norm at which a level's rounds
	// first stop and the point is certified (default 1e-6): a point that
	// close to critical usually certifies once its translations are made
	// exact, and when it does not, the staircase's proof refinement sends
	// the rounds on to a hundredfold smaller norm, down to Sync.GradTol.
	// DecreaseTol also stops them when a round lowers F by less than this
	// fraction (default 1e-13). MaxRounds bounds the rounds of one
	// optimization (default 5000).
	CheckTol, DecreaseTol float64
	MaxRounds             int
	// NoMomentum turns off the rounds' acceleration. By default each
	// round starts with a momentum step of every agent's block,
	// X <- R(X + beta_t (X - X_prev)) with Nesterov's beta_t = (t-1)/(t+2),
	// restarted (t = 0) whenever the gradient at the end of a round has a
	// positive inner product with the round's motion (O'Donoghue and
	// Candes 2015's gradient test), as in accelerated RBCD (DC2-PGO, which
	// restarts on a rise of F): block Gauss-Seidel between parts is a non-overlapping
	// domain decomposition whose slow modes (smooth motions of parts against
	// each other) decay by a fraction of a percent per round, and momentum
	// turns that rate into about its square root (docs/distributed.md).
	NoMomentum bool
	// Timeout ends the run with an error when an agent has not answered
	// for this long (default 30 s). Requests are retried meanwhile, so an
	// agent that restarts within it rejoins.
	Timeout time.Duration
	// Try is one request's wait before it is sent again (default a third
	// of Timeout). A resent command is safe (every command is a descent
	// step or idempotent) but repeats the work, so Try should exceed one
	// local update's time, and Timeout with it.
	Try time.Duration
	// Key, if set, authenticates every message of the run with
	// HMAC-SHA256, bound to the run, the subject, the sender and a sequence
	// number (auth.go); forged, replayed and foreign messages are
	// rejected, logged and counted in Stats.Rejected. The coordinator and
	// every agent need the same key (ReadKey); nil: messages are only
	// checksummed.
	Key []byte
	// Checkpoint, if set, is handed the run's state after each Optimize
	// (the gathered point of a level, a proof refinement or a rank-d
	// refinement, its translations made exact) and, within one, every
	// CheckpointRounds rounds (default 100), for which the coordinator
	// gathers the point. Its error is logged and the run goes on. With it,
	// a run that fails (an agent gone) returns the better of the level's
	// start and the last point gathered (status sync.Aborted).
	Checkpoint       func(*Checkpoint) error
	CheckpointRounds int
	// Resume, if set, starts the run from a checkpoint of the same problem
	// and partition (its Fingerprint), at its rank and from its point,
	// instead of the agents' aligned chordal estimates (Init reports
	// InitCheckpoint). Sync.Rank0 is then the checkpoint's rank.
	Resume *Checkpoint
	// AgentProgress, if set, receives after each complete round the rank,
	// the round's number in the level's history (Record.Iter) and each
	// agent's gradient norm, ||grad_k F|| over its own poses: which agents
	// hold the gradient, and which stall (docs/distributed.md). It runs on
	// the solve's goroutine; grad is reused.
	AgentProgress func(rank, iter int, grad []float64)
	// Overlap is the number of hops of other parts' poses that each
	// agent's update moves with its own before it keeps only its own
	// (overlap.go: restricted Schwarz; 0: the largest, at least 1 and up
	// to 10 hops, at which no part's halo holds more than 2/3 as many poses
	// as the part; negative: none).
	// The agents must run with the same (AgentOptions.Overlap); one that
	// does not refuses to join.
	Overlap int
	// Central makes the coordinator certify and round the gathered point
	// itself, as before the certificate and the rounding by parts
	// (prove.go, round.go), which are the default: a reference, and a
	// way round a fault in them.
	Central bool
}

// InitCheckpoint names a resumed run's initialization (Options.Resume) in
// Result.Options.Init: the checkpoint's point, read out at rank d.
const InitCheckpoint bsync.Init = "checkpoint"

func (o *Options) defaults() {
	if o.Subject == "" {
		o.Subject = "bcmsync"
	}
	if o.DecreaseTol == 0 {
		o.DecreaseTol = 1e-13
	}
	if o.CheckTol == 0 {
		o.CheckTol = 1e-6
	}
	if o.MaxRounds == 0 {
		o.MaxRounds = 5000
	}
	if o.Timeout == 0 {
		o.Timeout = 30 * time.Second
	}
	if o.Try == 0 {
		o.Try = o.Timeout / 3
	}
	if o.CheckpointRounds == 0 {
		o.CheckpointRounds = 100
	}
}

// Stats counts a distributed solve's work and traffic. Messages and bytes
// are the coordinator's requests and replies plus the agents' public-pose
// publications (as sent once; a server fans them out to each subscriber),
// counted as their records: with a key each message carries an
// authentication trailer of about 100 bytes more (auth.go).
type Stats struct {
	Agents, Colors int
	// Rounds is the total number of rounds (every colour class updated
	// once, then the statistics gathered), over all levels; with
	// Options.Resume it includes the checkpoint's (ResumedRounds).
	Rounds int
	// Stale counts updates an agent skipped because the public poses it
	// needed had not arrived even after their senders published them again
	// (Republished counts those requests: each is a message that was lost
	// or late); Restarts counts agents that rejoined.
	Stale, Republished, Restarts int
	// Requests and RequestBytes count the coordinator's requests and their
	// replies (resent ones included); Publications and PublicationBytes
	// the agents' pose messages, as their replies report them (one per
	// accepted update, momentum step and initialization, and per
	// republication).
	Requests, RequestBytes         int64
	Publications, PublicationBytes int64
	// TransferBytes is the part of RequestBytes that moved whole blocks
	// between the coordinator and the agents (gathers of the point and
	// sets of a new one: O(n) each, Gathers and Sets of them) rather than
	// a round's O(boundary) traffic.
	TransferBytes int64
	Gathers, Sets int
	// BoundaryPoses counts the poses with an edge to another part (the
	// public poses, whose blocks the publications carry), BoundaryEdges
	// the edges between parts.
	BoundaryPoses, BoundaryEdges int
	// AgentRSS is each agent's peak resident set in bytes, the largest it
	// reported (0: it measures none; AgentOptions.PeakRSS).
	AgentRSS []int64
	// Checkpoints counts the checkpoints written (Options.Checkpoint);
	// ResumedRounds is the rounds a resumed run's checkpoint had done
	// before (Options.Resume), ResumedRank its rank.
	Checkpoints                int
	ResumedRounds, ResumedRank int
	// Authenticated is true when the run's messages carried a MAC
	// (Options.Key); Rejected then counts the messages that failed
	// authentication at the coordinator and, as their replies report
	// them, at the agents.
	Authenticated bool
	Rejected      Rejections
	// Certificate is "parts" when the agents made the certificate's test
	// (prove.go) and "central" when the coordinator made it on the
	// gathered point; ProofBoundaryPoses is the size of the boundary
	// system it factored, ProofFactorizations the factorizations by
	// parts, ProofBytes their traffic (in RequestBytes), ProofFallbacks
	// the tests by parts that failed for want of an agent and were made
	// on the gathered point.
	Certificate                             string
	ProofBoundaryPoses, ProofFactorizations int
	ProofBytes                              int64
	ProofFallbacks                          int
	// Roundings counts the roundings made by parts (round.go), whose
	// traffic RoundingBytes is (in RequestBytes).
	Roundings     int
	RoundingBytes int64
	// Escapes counts the saddle escapes made by parts (parteig.go:
	// the eigenvector by inverse iteration through the parts' factors,
	// the lift by the agents), EscapeFactorizations the factorizations of
	// S + tau I by parts that found their shifts, EscapeBytes the traffic
	// of both (in RequestBytes).
	Escapes, EscapeFactorizations int
	EscapeBytes                   int64
}

// RoundBytes is the traffic of the rounds per round: every message but
// the gathers and sets, over Rounds (0 without rounds).
func (s *Stats) RoundBytes() float64 {
	if s.Rounds == 0 {
		return 0
	}
	return float64(s.RequestBytes-s.TransferBytes+s.PublicationBytes) / float64(s.Rounds)
}

// Report is the distributed section of the run's report (Report.Distributed
// of package sync), with coordinatorRSS, the coordinator's peak resident
// set in bytes (0: not measured).
func (s *Stats) Report(coordinatorRSS int64) *bsync.DistributedReport {
	r := &bsync.DistributedReport{
		Agents: s.Agents, ColourClasses: s.Colors, Rounds: s.Rounds,
		Messages: s.Requests + s.Publications, Bytes: s.RequestBytes + s.PublicationBytes,
		CoordinatorMessages: s.Requests, CoordinatorBytes: s.RequestBytes,
		Publications: s.Publications, PublicationBytes: s.PublicationBytes,
		TransferBytes: s.TransferBytes, Gathers: s.Gathers, Sets: s.Sets,
		BoundaryPoses: s.BoundaryPoses, BoundaryEdges: s.BoundaryEdges, BytesPerRound: s.RoundBytes(),
		Resends: s.Republished, Stale: s.Stale, Restarts: s.Restarts,
		AgentPeakRSS: append([]int64{}, s.AgentRSS...), CoordinatorPeakRSS: coordinatorRSS,
		Checkpoints: s.Checkpoints, ResumedRounds: s.ResumedRounds, ResumedRank: s.ResumedRank,
		Authenticated: s.Authenticated,
		Rejected:      bsync.AuthRejections{Forged: s.Rejected.Forged, Replayed: s.Rejected.Replayed, Foreign: s.Rejected.Foreign},
		Certificate:   s.Certificate, CertificateBoundaryPoses: s.ProofBoundaryPoses,
		CertificateFactorizations: s.ProofFactorizations, CertificateBytes: s.ProofBytes, CertificateFallbacks: s.ProofFallbacks,
		Roundings: s.Roundings, RoundingBytes: s.RoundingBytes,
		EscapesByParts: s.Escapes, EscapeFactorizations: s.EscapeFactorizations, EscapeBytes: s.EscapeBytes,
	}
	if s.BoundaryPoses > 0 {
		r.BytesPerRoundPerBoundaryPose = r.BytesPerRound / float64(s.BoundaryPoses)
	}
	return r
}

// coordinator drives the rounds.
type coordinator struct {
	opts    Options
	bus     Bus
	g       *posegraph.Graph
	p       *Partition
	nb      [][]int
	seq     []uint64 // the latest sequence number each part reported
	run     uint64
	rank    int
	b       int
	stats   Stats
	mu      stdsync.Mutex
	classes [][]int // the agent graph's colour classes
	mopts   *methodOptions
	auth    *authBus // nil without a key; its rejections go to stats at the end

	// held marks the point the agents hold, as last set or gathered (nil:
	// their initial estimates).
	held *heldMark
	last *sparse.Blocks // the last point gathered within this Optimize (checkpoints)
	// resume is the checkpoint to start from, until the first Optimize
	// has taken its point.
	resume *Checkpoint

	// fingerprint identifies the problem, partition and overlap; an agent
	// holding another refuses to join. ckPrint, of the problem and
	// partition alone, marks the checkpoints (the overlap may change
	// between a run and its resumption).
	fingerprint, ckPrint string
	// partInts is the partition as opInit sends it to every agent, which
	// computes none itself (partitionInts).
	partInts []uint32
	// overlap is the agents' overlap (Options.Overlap), reads[k] the poses
	// of other parts that agent k reads (overlapReads).
	overlap int
	reads   [][]int
	// ctx is the solve's context, for the certificate and the rounding
	// by parts, which the staircase calls without one.
	ctx context.Context
	// roundBT is the rounding's boundary system, made on first use, and
	// roundBnd each agent's boundary poses in it.
	roundBT  *rounding.BoundaryTranslations
	roundBnd [][]int
}

// MethodRBCD names the distributed level optimizer (Result.Method): rounds
// of agent-level Riemannian block-coordinate descent.
const MethodRBCD = "rbcd"

// Solve coordinates K agents (RunAgent, one per part of p, on the same
// bus) to a certified solution of g through sync's one staircase
// (bsync.SolveWith), whose levels the agents optimize: a distributed
// initialization (each agent's chordal estimate, aligned through the
// shared edges along a breadth-first order of the agent graph), then at
// each rank rounds of agent-level block-coordinate descent, the agents of
// one colour class of the agent graph updating at the same time, until
// the relative gradient norm reaches CheckTol (the staircase's proof
// refinements go on down to Sync.GradTol). The certificate, the saddle
// escape, the rounding with its rank-d fallback (rounds at rank d from the
// rounding) and the status are the staircase's, from the point gathered
// (see doc.go for why these are central), so the Result means what
// sync.Solve's means. An agent that stops answering once the agents have
// joined (or any other failure of the rounds) ends the solve with status
// sync.Aborted and the estimate so far, not an error (Result.Error says
// what happened); a failure before, when there is no estimate yet, is an
// error.
func Solve(ctx context.Context, bus Bus, g *posegraph.Graph, p *Partition, opts Options) (*bsync.Result, *Stats, error) {
	c, err := newCoordinator(bus, g, p, opts)
	if err != nil {
		return nil, nil, err
	}
	defer c.auth.report(&c.stats)
	c.ctx = ctx
	c.stats.Certificate = "central"
	res, err := bsync.SolveWith(ctx, g, c.opts.Sync, c)
	if err != nil {
		return nil, &c.stats, err
	}
	c.stopAll()
	return res, &c.stats, nil
}

// newCoordinator checks g, p and opts and returns the coordinator of a
// run on bus: the staircase's level optimizer (bsync.LevelOptimizer).
func newCoordinator(bus Bus, g *posegraph.Graph, p *Partition, opts Options) (*coordinator, error) {
	opts.defaults()
	if err := g.Validate(); err != nil {
		return nil, err
	}
	if err := p.Validate(g.N()); err != nil {
		return nil, err
	}
	if opts.Sync.LargestComponent {
		return nil, errors.New("distributed: LargestComponent is not supported: the partition is of the whole graph (solve the component's file)")
	}
	opts.Sync = opts.Sync.WithDefaults(g.D)
	kind := opts.Sync.Problem
	if kind == posegraph.Rotations && g.WithoutPositionPriors() != g {
		// sync.SolveWith drops them, and the world vertex with them,
		// which the partition and the agents' copies of g would not.
		return nil, fmt.Errorf("%s: distributed rotation synchronization does not take position priors, which measure no rotation: "+
			"solve the pose problem, or use solve --rotations, which leaves them out", g.Source)
	}
	bus, auth := secure(bus, opts.Key, opts.Subject, coordinatorPart, opts.Sync.Logger)
	adj := poseAdjacency(g)
	h := overlapOf(opts.Overlap, adj, p)
	if h > maxOverlap {
		return nil, fmt.Errorf("distributed: overlap %d above %d", h, maxOverlap)
	}
	reads := overlapReads(adj, p, h)
	c := &coordinator{opts: opts, bus: bus, g: g, p: p, nb: p.readGraph(g, h, reads), reads: reads, seq: make([]uint64, p.K),
		run: rand.Uint64() | 1, rank: g.D, b: kind.BlockSize(g.D), overlap: h}
	c.ckPrint = fingerprint(g, p, kind)
	c.fingerprint = c.ckPrint + overlapTag(h)
	c.partInts = partitionInts(p)
	c.auth = auth
	c.classes = Colors(c.nb)
	c.stats.Agents, c.stats.Colors = p.K, len(c.classes)
	c.stats.AgentRSS = make([]int64, p.K)
	c.stats.BoundaryPoses, c.stats.BoundaryEdges = p.Boundary(g)
	if ck := opts.Resume; ck != nil {
		if ck.Fingerprint != c.ckPrint {
			return nil, fmt.Errorf("distributed: the checkpoint is of another problem or partition (fingerprint %s, this run's %s): resume with the same file, partition and problem flags", ck.Fingerprint, c.ckPrint)
		}
		if ck.N != g.N() || ck.B != c.b || ck.Rank < g.D || len(ck.X) != ck.N*ck.Rank*ck.B {
			return nil, fmt.Errorf("distributed: the checkpoint holds %d blocks of %d x %d, this run needs %d of rank >= %d x %d", ck.N, ck.Rank, ck.B, g.N(), g.D, c.b)
		}
		if ck.Rank > opts.Sync.MaxRank {
			return nil, fmt.Errorf("distributed: the checkpoint is at rank %d, above the maximum rank %d", ck.Rank, opts.Sync.MaxRank)
		}
		c.opts.Sync.Rank0 = ck.Rank
		c.resume = ck
		c.stats.Rounds, c.stats.ResumedRounds, c.stats.ResumedRank = ck.Rounds, ck.Rounds, ck.Rank
	}
	return c, nil
}

// methodOptions are the coordinator's options as the report records them
// (Result.MethodOptions), and the agents' as they report them when they
// join (filled in by initialize, after Method returned the pointer).
type methodOptions struct {
	Agents           int           `json:"agents"`
	Colours          int           `json:"colours"`
	CheckTol         float64       `json:"check_tol"`
	DecreaseTol      float64       `json:"decrease_tol"`
	MaxRounds        int           `json:"max_rounds"`
	Momentum         bool          `json:"momentum"`
	Timeout          float64       `json:"timeout_seconds"`
	Try              float64       `json:"try_seconds"`
	CheckpointRounds int           `json:"checkpoint_rounds,omitempty"`
	Overlap          int           `json:"overlap"`
	Authenticated    bool          `json:"authenticated"`
	AgentOptions     []agentRecord `json:"agent_options"`
}

// agentRecord is an agent's options as it runs them, sent in its reply to
// opInit (as JSON in the text).
type agentRecord struct {
	Sweeps      int     `json:"sweeps"`
	NewtonSteps int     `json:"newton_steps"`
	MaxInner    int     `json:"max_inner"`
	Wait        float64 `json:"wait_seconds"`
}

// Method is the coordinator's description as the staircase's level
// optimizer: a level's rounds first stop at CheckTol, and proof
// refinements go down to Sync.GradTol.
func (c *coordinator) Method(r *bsync.Run) bsync.MethodInfo {
	o := c.opts
	gradTol := r.Options().GradTol
	first := max(o.CheckTol, gradTol)
	n := 0
	for t := first; t > gradTol; t /= 100 {
		n++
	}
	c.mopts = &methodOptions{Agents: c.p.K, Colours: len(c.classes), CheckTol: o.CheckTol, DecreaseTol: o.DecreaseTol,
		MaxRounds: o.MaxRounds, Momentum: !o.NoMomentum, Overlap: c.overlap, Timeout: o.Timeout.Seconds(), Try: o.Try.Seconds(),
		Authenticated: len(o.Key) > 0, AgentOptions: make([]agentRecord, c.p.K)}
	if o.Checkpoint != nil {
		c.mopts.CheckpointRounds = o.CheckpointRounds
	}
	return bsync.MethodInfo{Name: MethodRBCD, FirstTol: first, MinTol: gradTol, MaxRefinements: n, Options: c.mopts}
}

// joined records agent k's options from its reply to opInit.
func (c *coordinator) joined(k int, rep *message) {
	var a agentRecord
	if json.Unmarshal([]byte(rep.Text), &a) != nil || c.mopts == nil {
		return // an agent that sends none keeps zeros
	}
	c.mu.Lock()
	c.mopts.AgentOptions[k] = a
	c.mu.Unlock()
}

// Init starts the agents and aligns their chordal estimates
// (initialize), and returns the gathered estimate.
func (c *coordinator) Init(ctx context.Context, r *bsync.Run) ([]posegraph.Pose, bsync.Init, error) {
	ctx, cancel := withDeadline(ctx, r)
	defer cancel()
	g := c.g
	if ck := c.resume; ck != nil {
		// The agents join; the first Optimize sets the checkpoint's point.
		if err := c.join(ctx); err != nil {
			return nil, "", err
		}
		x := &sparse.Blocks{R: ck.Rank, B: ck.B, N: ck.N, Data: ck.X}
		r.Options().Logger.Info("agents joined; resuming", "rank", ck.Rank, "rounds", ck.Rounds)
		return rounding.ReadOut(x, g.D, nil), InitCheckpoint, nil
	}
	if err := c.initialize(ctx); err != nil {
		return nil, "", err
	}
	x, err := c.gather(ctx)
	if err != nil {
		return nil, "", err
	}
	poses := make([]posegraph.Pose, g.N())
	for i := range poses {
		poses[i] = poseOf(x.Block(i), g.D, c.b)
	}
	r.Options().Logger.Info("agents initialized", "agents", c.p.K, "colors", len(c.classes))
	return poses, bsync.InitPartitioned, nil
}

// Optimize runs rounds from x until the relative gradient norm reaches
// goal.Tol (or a round barely lowers F, or MaxRounds pass), as one stage
// "rounds", and gathers the point into x with exactly optimal
// translations. x goes to the agents first unless they hold it already
// (a new rank after an escape, a rounding to refine, a point whose
// translations were made exact).
func (c *coordinator) Optimize(ctx context.Context, r *bsync.Run, x *sparse.Blocks, goal bsync.Goal, lv *bsync.Level) (bsync.Outcome, error) {
	var out bsync.Outcome
	end, ok := r.Stage("rounds", x.R)
	if !ok {
		out.Limit = bsync.TimeLimit
		return out, nil
	}
	defer end()
	out.Started = true
	t0 := time.Now()
	defer func() { lv.RoundSeconds += time.Since(t0).Seconds() }()
	runCtx, cancel := withDeadline(ctx, r)
	defer cancel()
	// stopped maps an error to the outcome: the run's own deadline is a
	// time limit; the caller's context is the caller's; anything else is
	// a failure of the run (an agent gone, or refusing), which aborts the
	// solve with the best point at hand in x (sync.ErrAborted).
	stopped := func(err error) (bsync.Outcome, error) {
		if ctx.Err() == nil && runCtx.Err() != nil {
			out.Limit = bsync.TimeLimit
			return out, nil
		}
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		if c.last != nil && c.last.R == x.R && cost(r, c.last) < cost(r, x) {
			copy(x.Data, c.last.Data)
		}
		return out, bsync.Abort(err)
	}
	c.last = nil
	if ck := c.resume; ck != nil && ck.Rank == x.R {
		// A resumed run's first level starts from the checkpoint's point.
		copy(x.Data, ck.X)
		c.resume = nil
	}
	if !c.held.is(x) {
		c.rank = x.R
		if err := c.set(runCtx, x); err != nil {
			return stopped(err)
		}
	}
	phase := "rbcd"
	if goal.Phase == bsync.PhaseRefine {
		phase = "refine"
	}
	rounds, stop, f, rel, gnorm, err := c.level(runCtx, r, phase, lv.Rounds, goal.Tol)
	lv.Rounds += rounds
	lv.RoundStop = stop
	lv.F, lv.GradNorm, lv.RelGrad = f, gnorm, rel
	out.Steps, out.Converged = rounds, stop == "gradient"
	if err != nil {
		return stopped(err)
	}
	y, err := c.gather(runCtx)
	if err != nil {
		return stopped(err)
	}
	copy(x.Data, y.Data)
	c.held = markOf(y)
	// The last checkpoint's point was the fallback of a failed round; the
	// gathered point replaces it, and held it would sit under the
	// certificate (a copy of X).
	c.last = nil
	dec, err := c.exactTranslations(r, x)
	if err != nil {
		return out, err
	}
	lv.F -= dec
	c.checkpoint(x)
	r.Options().Logger.Info("rounds", "rank", x.R, "rounds", rounds, "stop", stop, "F", lv.F, "rel_grad", rel)
	return out, nil
}

// checkpoint hands x to Options.Checkpoint, if set.
func (c *coordinator) checkpoint(x *sparse.Blocks) {
	if c.opts.Checkpoint == nil {
		return
	}
	ck := &Checkpoint{Fingerprint: c.ckPrint, Rank: x.R, B: x.B, N: x.N, Rounds: c.stats.Rounds, X: slices.Clone(x.Data)}
	if err := c.opts.Checkpoint(ck); err != nil {
		c.opts.Sync.Logger.Warn("checkpoint not written", "err", err)
		return
	}
	c.stats.Checkpoints++
}

// cost is F(x) = tr(X Q X^T), with Q's rows made a chunk at a time
// (posegraph.LaplacianRows: Q's bits), so that the coordinator makes no
// Q of its own.
func cost(r *bsync.Run, x *sparse.Blocks) float64 {
	return r.Graph().NewLaplacianRows(r.Options().Problem).TraceCost(x, sparse.NewBlocks(x.R, x.B, x.N))
}

// withDeadline returns ctx bounded by the run's deadline, if it has one.
func withDeadline(ctx context.Context, r *bsync.Run) (context.Context, context.CancelFunc) {
	if d := r.Deadline(); !d.IsZero() {
		return context.WithDeadline(ctx, d)
	}
	return context.WithCancel(ctx)
}

// exactTranslations replaces the translations of x by their exact
// minimizer given its Stiefel parts (bcm's translation step: one sparse
// Cholesky solve of the tau-Laplacian per row of X) and returns F's
// decrease. Block-coordinate rounds leave the translations, the slow
// diffusive modes, least converged, and the certificate's shift acts on
// the rotation coordinates only: with exact translations the test sees
// the rotations' accuracy alone, as sync.Solve's test of its rounded
// estimate does. It is a block step, so F does not increase.
func (c *coordinator) exactTranslations(r *bsync.Run, x *sparse.Blocks) (float64, error) {
	if c.b == c.g.D {
		return 0, nil
	}
	// Q X and a solver of this call's own, from Q's rows made a chunk at
	// a time: Q X (9 MB at 10^5 poses and rank 3) and the factor of the
	// whole graph's tau-Laplacian (30 MB) are garbage before the
	// certificate and the rounding, which peak on their own boundary
	// systems, and Q itself (41 MB, and 28 MB more to assemble it) is
	// never made. Once per level, the factorization is cheap against the
	// level's rounds, and it gives Solver.StepTranslations's translations
	// to the bit (bcm.TestTranslations).
	g := r.Graph()
	rows := g.NewLaplacianRows(r.Options().Problem)
	n := sparse.NewBlocks(x.R, x.B, x.N)
	rows.MulBlocks(n, x)
	ts, err := bcm.NewTranslationsByRows(g.N(), g.D, rows.Chunks)
	if err != nil {
		return 0, err
	}
	return ts.Step(x, n)
}

// heldMark identifies the point the agents hold by its rank and a SHA-256
// of its blocks: the coordinator compares the staircase's point with it to
// skip a set that would change nothing, without a copy of X for that.
type heldMark struct {
	r   int
	sum [sha256.Size]byte
}

func markOf(x *sparse.Blocks) *heldMark {
	return &heldMark{r: x.R, sum: blocksSum(x)}
}

// is reports whether x is the marked point (false for a nil mark).
func (h *heldMark) is(x *sparse.Blocks) bool {
	return h != nil && h.r == x.R && h.sum == blocksSum(x)
}

func blocksSum(x *sparse.Blocks) [sha256.Size]byte {
	h := sha256.New()
	var buf [8 << 10]byte
	b := buf[:0]
	for _, v := range x.Data {
		if len(b) == len(buf) {
			h.Write(b)
			b = b[:0]
		}
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	h.Write(b)
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

// poseOf reads the top d rows of a rank-r block as a pose.
func poseOf(blk []float64, d, b int) posegraph.Pose {
	var p posegraph.Pose
	for r := 0; r < d; r++ {
		for c := 0; c < d; c++ {
			p.R[r*d+c] = blk[r*b+c]
		}
		if b > d {
			p.T[r] = blk[r*b+d]
		}
	}
	return p
}

// needsOf lists part k's neighbours at their latest reported sequence numbers.
func (c *coordinator) needsOf(k int, among map[int]bool) []need {
	var n []need
	for _, q := range c.nb[k] {
		if among == nil || among[q] {
			n = append(n, need{Part: q, Seq: c.seq[q]})
		}
	}
	return n
}

// initialize aligns the agents' chordal estimates along a breadth-first
// order of the agent graph: each agent aligns to its neighbours already
// aligned. Unreached parts (the agent graph is connected when g is) would
// keep their own frames.
func (c *coordinator) initialize(ctx context.Context) error {
	done := map[int]bool{}
	order := []int{0}
	seen := map[int]bool{0: true}
	for h := 0; h < len(order); h++ {
		for _, q := range c.nb[order[h]] {
			if !seen[q] {
				seen[q] = true
				order = append(order, q)
			}
		}
	}
	for k := 0; k < c.p.K; k++ {
		if !seen[k] {
			order = append(order, k)
		}
	}
	if err := c.join(ctx); err != nil {
		return err
	}
	for _, k := range order {
		rep, err := c.request(ctx, k, &message{Op: opAlign, Rank: c.rank, Needs: c.needsOf(k, done)})
		if err != nil {
			return fmt.Errorf("initializing agent %d: %w", k, err)
		}
		if rep.Status != statusOK {
			return fmt.Errorf("initializing agent %d: the aligned neighbours' poses did not arrive", k)
		}
		c.seq[k] = rep.Seq
		done[k] = true
	}
	return nil
}

// join brings every agent into the run, at its chordal estimate.
func (c *coordinator) join(ctx context.Context) error {
	all := make([]int, c.p.K)
	for k := range all {
		all[k] = k
	}
	err := parallel(all, func(k int) error {
		rep, err := c.request(ctx, k, &message{Op: opInit, Rank: c.rank, Text: c.fingerprint, Ints: c.partInts})
		if err == nil {
			c.joined(k, rep)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("starting the agents: %w", err)
	}
	return nil
}

// level runs rounds at the current rank until the relative gradient norm
// reaches tol or another stopping rule fires, with their records (phase
// phase, numbered from first+1) in r's history. It returns the rounds, the
// rule, and F, the relative and the absolute gradient norm at the last
// complete statistics.
func (c *coordinator) level(ctx context.Context, r *bsync.Run, phase string, first int, tol float64) (rounds int, stop string, f, rel, gnorm float64, err error) {
	all := make([]int, c.p.K)
	for k := range all {
		all[k] = k
	}
	fPrev := math.Inf(1)
	f, rel, gnorm = math.NaN(), math.NaN(), math.NaN()
	agentGrad := make([]float64, c.p.K)
	shares := make([][4]float64, c.p.K) // each part's F, ||grad||^2, ||2XQ||^2 and momentum test of a round
	since := 0                          // rounds since the momentum's last restart
	for round := 1; ; round++ {
		if round > c.opts.MaxRounds {
			return round - 1, "rounds", f, rel, gnorm, nil
		}
		beta := 0.0
		if !c.opts.NoMomentum {
			beta = float64(since-1) / float64(since+2)
			if since < 1 {
				beta = 0
			}
			since++
			err := parallel(all, func(k int) error {
				rep, err := c.request(ctx, k, &message{Op: opExtrapolate, Round: uint32(round), Rank: c.rank, F: beta})
				if errors.Is(err, errRestarted) {
					return c.rejoin(ctx, k)
				}
				if err != nil {
					return err
				}
				c.mu.Lock()
				c.seq[k] = rep.Seq
				c.mu.Unlock()
				return nil
			})
			if err != nil {
				return round, "error", f, rel, gnorm, err
			}
		}
		staleRound := false
		for _, cls := range c.classes {
			err := parallel(cls, func(k int) error {
				rep, err := c.requestHealed(ctx, k, func() *message {
					return &message{Op: opUpdate, Round: uint32(round), Rank: c.rank, Needs: c.needsOf(k, nil)}
				})
				if errors.Is(err, errRestarted) {
					return c.rejoin(ctx, k)
				}
				if err != nil {
					return err
				}
				c.mu.Lock()
				defer c.mu.Unlock()
				if rep.Status == statusStale {
					c.stats.Stale++
					staleRound = true
					return nil
				}
				c.seq[k] = rep.Seq
				return nil
			})
			if err != nil {
				return round, "error", f, rel, gnorm, err
			}
		}
		c.stats.Rounds++
		complete := true
		err := parallel(all, func(k int) error {
			rep, err := c.requestHealed(ctx, k, func() *message {
				return &message{Op: opStats, Round: uint32(round), Rank: c.rank, Needs: c.needsOf(k, nil)}
			})
			if errors.Is(err, errRestarted) {
				c.mu.Lock()
				complete = false
				c.mu.Unlock()
				return c.rejoin(ctx, k)
			}
			if err != nil {
				return err
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			if rep.Status != statusOK {
				complete = false
				return nil
			}
			shares[k] = [4]float64{rep.F, rep.Grad2, rep.Norm2, rep.Dot}
			agentGrad[k] = math.Sqrt(rep.Grad2)
			return nil
		})
		if err != nil {
			return round, "error", f, rel, gnorm, err
		}
		if !complete {
			continue
		}
		// Summed in the parts' order, not the replies': the same run
		// gives the same F and gradient to the bit, and so takes the
		// same decisions (restart, stop) on them.
		var sf, sg, sn, sd float64
		for _, sh := range shares {
			sf += sh[0]
			sg += sh[1]
			sn += sh[2]
			sd += sh[3]
		}
		if sd > 0 && beta > 0 {
			// Adaptive restart, by the gradient test: the round's motion
			// points uphill at its end. Only a round that took a momentum
			// step has one to undo: with overlapping parts (overlap.go) a
			// round without momentum can end uphill too (each agent moved
			// its poses for a halo that it then let go), and restarting
			// there could hold the momentum at zero for good
			// (docs/distributed.md, "Overlapping parts"). A rise of F, the
			// other classic test, fires on F's rounding error near the optimum, where
			// F's change is below it: on intel it restarted every second
			// or third round there and the rounds stalled
			// (docs/distributed.md, "Why the rounds are many").
			since = 0
		}
		f = sf
		rel = 0
		if sn > 0 {
			rel = math.Sqrt(sg / sn)
		}
		gnorm = math.Sqrt(sg)
		r.Record(bsync.Record{Rank: c.rank, Phase: phase, Iter: first + round, Seconds: r.Seconds(), F: f, GradNorm: gnorm, RelGrad: rel})
		if c.opts.AgentProgress != nil {
			c.opts.AgentProgress(c.rank, first+round, agentGrad)
		}
		if c.opts.Checkpoint != nil && round%c.opts.CheckpointRounds == 0 && rel > tol {
			y, err := c.gather(ctx)
			if err != nil {
				return round, "error", f, rel, gnorm, err
			}
			c.last = y
			c.checkpoint(y)
		}
		if rel <= tol {
			return round, "gradient", f, rel, gnorm, nil
		}
		// Only a small decrease is a stall; a rise is the momentum's
		// overshoot, which the restart test answers.
		if dec := fPrev - f; !staleRound && !math.IsInf(fPrev, 1) && dec >= 0 && dec <= c.opts.DecreaseTol*math.Abs(fPrev) {
			return round, "decrease", f, rel, gnorm, nil
		}
		fPrev = f
	}
}

// gather collects every agent's blocks into X.
func (c *coordinator) gather(ctx context.Context) (*sparse.Blocks, error) {
	x := sparse.NewBlocks(c.rank, c.b, c.g.N())
	all := make([]int, c.p.K)
	for k := range all {
		all[k] = k
	}
	sz := c.rank * c.b
	c.stats.Gathers++
	err := oneByOne(all, func(k int) error {
		rep, err := c.request(ctx, k, &message{Op: opGather, Rank: c.rank})
		if errors.Is(err, errRestarted) {
			// Its blocks are gone: rejoin it and take its fresh estimate.
			if err = c.rejoin(ctx, k); err == nil {
				rep, err = c.request(ctx, k, &message{Op: opGather, Rank: c.rank})
			}
		}
		if err != nil {
			return fmt.Errorf("gathering agent %d: %w", k, err)
		}
		if rep.Rank != c.rank || rep.B != c.b {
			return fmt.Errorf("gathering agent %d: blocks %d x %d, want %d x %d", k, rep.Rank, rep.B, c.rank, c.b)
		}
		for n, gi := range rep.Index {
			if int(gi) >= c.g.N() || c.p.Part[gi] != k {
				return fmt.Errorf("gathering agent %d: pose %d is not its own", k, gi)
			}
			copy(x.Block(int(gi)), rep.Values[n*sz:(n+1)*sz])
		}
		return nil
	})
	return x, err
}

// set sends every agent its blocks of x (own and public) at x's rank.
func (c *coordinator) set(ctx context.Context, x *sparse.Blocks) error {
	all := make([]int, c.p.K)
	for k := range all {
		all[k] = k
	}
	c.stats.Sets++
	return oneByOne(all, func(k int) error { return c.setOne(ctx, k, x) })
}

// oneByOne calls f for each part in turn, joining the errors: the
// transfers of whole blocks (gather, set) go one agent at a time, so that
// the coordinator's process (with the embedded NATS server) holds one
// agent's message and its copies at a time, not all K at once. A
// transfer is bandwidth-bound, so this costs the run little time.
func oneByOne(ks []int, f func(k int) error) error {
	var errs []error
	for _, k := range ks {
		errs = append(errs, f(k))
	}
	return errors.Join(errs...)
}

// setOne sends agent k its own poses of x and those of other parts that it
// reads (its halo and ring, overlap.go).
func (c *coordinator) setOne(ctx context.Context, k int, x *sparse.Blocks) error {
	m := &message{Op: opSet, Rank: x.R, B: x.B, Needs: c.needsOf(k, nil)}
	known := make(map[int]bool, len(c.reads[k]))
	for _, i := range c.reads[k] {
		known[i] = true
	}
	n := 0
	for i := 0; i < c.g.N(); i++ {
		if c.p.Part[i] == k || known[i] {
			n++
		}
	}
	m.Index, m.Values = make([]uint32, 0, n), make([]float64, 0, n*x.R*x.B)
	for i := 0; i < c.g.N(); i++ {
		if c.p.Part[i] == k || known[i] {
			m.Index = append(m.Index, uint32(i))
			m.Values = append(m.Values, x.Block(i)...)
		}
	}
	_, err := c.request(ctx, k, m)
	if err != nil {
		return fmt.Errorf("setting agent %d: %w", k, err)
	}
	return nil
}
