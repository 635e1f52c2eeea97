package distributed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	stdsync "sync"
	"time"

	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
	bsync "github.com/bcmsync/bcmsync/sync"
)

// Options control the coordinator.
type Options struct {
	// Sync carries the certificate's and the staircase's settings
	// (Problem, GapTol, EigTol, MaxRank, Seed, Threads, TimeLimit,
	// Logger, Progress); its BCM and trust-region settings are not used.
	Sync bsync.Options
	// Subject prefixes every subject (default "bcmsync"); it must match the
	// agents'.
	Subject string
	// GradTol is the relative gradient norm ||grad F|| / ||2 X Q|| at which
	// the rounds of a level stop and the point is certified (default 1e-9,
	// Solve's). DecreaseTol also stops them when a round lowers F by less
	// than this fraction (default 1e-13). MaxRounds bounds the rounds of
	// one level (default 5000).
	GradTol, DecreaseTol float64
	MaxRounds            int
	// CheckTol is the relative gradient norm at which the certificate is
	// first tried (default 1e-6): a point that close to critical usually
	// certifies once its translations are made exact, and when it does
	// not, the rounds go on to a hundredfold smaller norm, down to
	// GradTol, before a failure is taken for a saddle.
	CheckTol float64
	// NoMomentum turns off the rounds' acceleration. By default each
	// round starts with a momentum step of every agent's block,
	// X <- R(X + beta_t (X - X_prev)) with Nesterov's beta_t = (t-1)/(t+2),
	// restarted (t = 0) whenever a round raises F, as in accelerated RBCD
	// (DC2-PGO): block Gauss-Seidel between parts is a non-overlapping
	// domain decomposition whose slow modes (smooth motions of parts against
	// each other) decay by a fraction of a percent per round, and momentum
	// turns that rate into about its square root. On a 400-pose 2-D graph
	// in 2, 4 and 8 parts, the rounds to the first certificate check fell
	// from 1933, 2800 and 4140 to 55, 102 and 145.
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
}

func (o *Options) defaults() {
	if o.Subject == "" {
		o.Subject = "bcmsync"
	}
	if o.GradTol == 0 {
		o.GradTol = 1e-9
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
	if o.Sync.GapTol == 0 {
		o.Sync.GapTol = 1e-6
	}
	if o.Sync.MaxRank == 0 {
		o.Sync.MaxRank = 10
	}
	if o.Sync.Logger == nil {
		o.Sync.Logger = slog.New(slog.DiscardHandler)
	}
}

// Stats counts a distributed solve's work and traffic. Messages and bytes
// are the coordinator's requests and replies plus the agents' public-pose
// publications (as sent once; a server fans them out to each subscriber).
type Stats struct {
	Agents, Colors int
	// Rounds is the total number of rounds (every colour class updated
	// once, then the statistics gathered), over all levels.
	Rounds int
	// Stale counts updates an agent skipped because the public poses it
	// needed had not arrived even after their senders published them again
	// (Republished counts those requests: each is a message that was lost
	// or late); Restarts counts agents that rejoined.
	Stale, Republished, Restarts int
	// Requests and RequestBytes count the coordinator's requests and their
	// replies; Publications counts the agents' pose messages (one per
	// accepted update and initialization, as the sequence numbers show).
	Requests, RequestBytes int64
	Publications           int64
	// Authenticated is true when the run's messages carried a MAC
	// (Options.Key); Rejected then counts the messages that failed
	// authentication at the coordinator and, as their replies report
	// them, at the agents.
	Authenticated bool
	Rejected      Rejections
}

// coordinator drives the rounds.
type coordinator struct {
	opts  Options
	bus   Bus
	g     *posegraph.Graph
	p     *Partition
	nb    [][]int
	seq   []uint64 // the latest sequence number each part reported
	run   uint64
	rank  int
	b     int
	stats Stats
	mu    stdsync.Mutex
	whole *local // all poses as one part, for exactTranslations

	// fingerprint identifies the problem and partition; an agent holding
	// another refuses to join.
	fingerprint string
}

// Solve coordinates K agents (RunAgent, one per part of p, on the same
// bus) to a certified solution of g: a distributed initialization (each
// agent's chordal estimate, aligned through the shared edges along a
// breadth-first order of the agent graph), then at each rank of the
// staircase rounds of agent-level block-coordinate descent, the agents of
// one colour class of the agent graph updating at the same time, until
// the relative gradient norm reaches GradTol; then the certificate, a
// saddle escape when it fails, and rounding with exact translation
// recovery, all by the coordinator from the gathered point (see doc.go for
// why these are central). The Result is filled like sync.Solve's.
func Solve(ctx context.Context, bus Bus, g *posegraph.Graph, p *Partition, opts Options) (*bsync.Result, *Stats, error) {
	start := time.Now()
	opts.defaults()
	if err := g.Validate(); err != nil {
		return nil, nil, err
	}
	if err := p.Validate(g.N()); err != nil {
		return nil, nil, err
	}
	if opts.Sync.TimeLimit > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opts.Sync.TimeLimit)
		defer cancel()
	}
	kind := opts.Sync.Problem
	bus, auth := secure(bus, opts.Key, opts.Subject, coordinatorPart, opts.Sync.Logger)
	c := &coordinator{opts: opts, bus: bus, g: g, p: p, nb: p.AgentGraph(g), seq: make([]uint64, p.K),
		run: rand.Uint64() | 1, rank: g.D, b: kind.BlockSize(g.D)}
	c.fingerprint = fingerprint(g, p, kind)
	defer auth.report(&c.stats)

	classes := Colors(c.nb)
	c.stats.Agents, c.stats.Colors = p.K, len(classes)
	log := opts.Sync.Logger
	res := &bsync.Result{}

	t0 := time.Now()
	if err := c.initialize(ctx); err != nil {
		return nil, nil, err
	}
	x, err := c.gather(ctx)
	if err != nil {
		return nil, nil, err
	}
	res.InitialPoses = make([]posegraph.Pose, g.N())
	for i := range res.InitialPoses {
		res.InitialPoses[i] = poseOf(x.Block(i), g.D, c.b)
	}
	res.InitialObjective = g.Cost(res.InitialPoses, kind)
	res.Timings.Init = time.Since(t0).Seconds()
	log.Info("initialized", "agents", p.K, "colors", len(classes), "F", res.InitialObjective)

	cert := bsync.NewCertifier(g, opts.Sync)
	var last bsync.Check
	var stopped bsync.Status
	tol := max(opts.CheckTol, opts.GradTol)
	var carry bsync.Level // rounds and time of a check that sent the rounds on
	for {
		lv := bsync.Level{Rank: c.rank}
		t0 = time.Now()
		rounds, stop, f, rel, err := c.level(ctx, classes, res, start, tol)
		lv.BCMSweeps, lv.BCMStop, lv.F, lv.RelGrad = rounds+carry.BCMSweeps, stop, f, rel
		lv.BCMSeconds = time.Since(t0).Seconds()
		res.Timings.Optimize += lv.BCMSeconds
		lv.BCMSeconds += carry.BCMSeconds
		lv.CertifySeconds = carry.CertifySeconds
		carry = bsync.Level{}
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
				stopped = bsync.TimeLimit
			} else if errors.Is(err, context.Canceled) {
				stopped = bsync.Cancelled
			} else {
				return nil, &c.stats, err
			}
		}
		if stopped == "" {
			x, err = c.gather(ctx)
			if err != nil {
				return nil, &c.stats, err
			}
		}
		t0 = time.Now()
		if err := c.exactTranslations(x); err != nil {
			return nil, &c.stats, err
		}
		last, err = cert.Check(x)
		if err != nil {
			return nil, &c.stats, err
		}
		res.Timings.Certify += time.Since(t0).Seconds()
		lv.CertifySeconds += time.Since(t0).Seconds()
		lv.MinEigenvalue, lv.EigMethod, lv.Certified = last.MinEigenvalue, last.Method, last.PSD
		if last.PSD {
			b := last.DualBound
			lv.DualBound = &b
		}
		res.Levels = append(res.Levels, lv)
		res.RelaxationObjective = f
		log.Info("level", "rank", c.rank, "rounds", rounds, "stop", stop, "F", f, "rel_grad", rel, "certified", last.PSD, "min_eig", last.MinEigenvalue)
		if stopped != "" {
			break
		}
		// A failed test at a loosely converged point may be the point's
		// inaccuracy, not a saddle, and a passed one may leave a gap above
		// the tolerance: converge further at the same rank first, down to
		// GradTol.
		loose := !last.PSD
		if last.PSD {
			fx := posegraph.TraceCost(cert.Q(), x, sparse.NewBlocks(x.R, x.B, x.N))
			loose = fx-last.DualBound > opts.Sync.GapTol*math.Abs(fx)
		}
		if loose && stop == "gradient" && tol > opts.GradTol {
			// One Level per rank: the next check's entry absorbs this one.
			tol = max(tol/100, opts.GradTol)
			carry = res.Levels[len(res.Levels)-1]
			res.Levels = res.Levels[:len(res.Levels)-1]
			continue
		}
		if last.PSD {
			break
		}
		if c.rank >= opts.Sync.MaxRank || last.Vector == nil {
			break
		}
		xn, dec := cert.Escape(x, last.Vector)
		res.Levels[len(res.Levels)-1].EscapeDecrease = dec
		if dec == 0 {
			break
		}
		x = xn
		c.rank++
		tol = max(opts.CheckTol, opts.GradTol)
		if err := c.set(ctx, x); err != nil {
			return nil, &c.stats, err
		}
	}
	if err := cert.Finish(res, x, last, stopped); err != nil {
		return nil, &c.stats, err
	}
	c.stopAll()
	res.Timings.Total = time.Since(start).Seconds()
	return res, &c.stats, nil
}

// exactTranslations replaces the translations of x by their exact
// minimizer given its Stiefel parts (one sparse Cholesky solve of the
// tau-Laplacian, per row of X). Block-coordinate rounds leave the
// translations, the slow diffusive modes, least converged, and the
// certificate's shift acts on the rotation coordinates only: with exact
// translations the test sees the rotations' accuracy alone, as
// sync.Solve's test of its rounded estimate does. It is a block step, so
// F does not increase.
func (c *coordinator) exactTranslations(x *sparse.Blocks) error {
	if c.b == c.g.D {
		return nil
	}
	if c.whole == nil {
		one, _ := Contiguous(c.g.N(), 1)
		l, err := newLocal(c.g, one, 0, c.opts.Sync.Problem, x.R)
		if err != nil {
			return err
		}
		c.whole = l
	}
	if c.whole.x.R != x.R {
		c.whole.setRank(x.R)
	}
	copy(c.whole.x.Data, x.Data)
	c.whole.solveTranslations()
	copy(x.Data, c.whole.x.Data)
	return nil
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
	all := make([]int, c.p.K)
	for k := range all {
		all[k] = k
	}
	err := parallel(all, func(k int) error {
		_, err := c.request(ctx, k, &message{Op: opInit, Rank: c.rank, Text: c.fingerprint})
		return err
	})
	if err != nil {
		return fmt.Errorf("starting the agents: %w", err)
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

// level runs rounds at the current rank until a stopping rule fires. It
// returns the rounds, the rule, and F and the relative gradient norm at
// the last complete statistics.
func (c *coordinator) level(ctx context.Context, classes [][]int, res *bsync.Result, start time.Time, tol float64) (int, string, float64, float64, error) {
	all := make([]int, c.p.K)
	for k := range all {
		all[k] = k
	}
	fPrev := math.Inf(1)
	f, rel := math.NaN(), math.NaN()
	since := 0 // rounds since the momentum's last restart
	for round := 1; ; round++ {
		if round > c.opts.MaxRounds {
			return round - 1, "rounds", f, rel, nil
		}
		if !c.opts.NoMomentum {
			beta := float64(since-1) / float64(since+2)
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
				c.stats.Publications++
				c.mu.Unlock()
				return nil
			})
			if err != nil {
				return round, "error", f, rel, err
			}
		}
		staleRound := false
		for _, cls := range classes {
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
				c.stats.Publications++
				return nil
			})
			if err != nil {
				return round, "error", f, rel, err
			}
		}
		c.stats.Rounds++
		var sf, sg, sn float64
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
			sf += rep.F
			sg += rep.Grad2
			sn += rep.Norm2
			return nil
		})
		if err != nil {
			return round, "error", f, rel, err
		}
		if !complete {
			continue
		}
		if !c.opts.NoMomentum && sf > f {
			since = 0 // adaptive restart: F went up
		}
		f = sf
		rel = 0
		if sn > 0 {
			rel = math.Sqrt(sg / sn)
		}
		rec := bsync.Record{Rank: c.rank, Phase: "rbcd", Iter: round, Seconds: time.Since(start).Seconds(), F: f, GradNorm: math.Sqrt(sg), RelGrad: rel}
		res.History = append(res.History, rec)
		if c.opts.Sync.Progress != nil {
			c.opts.Sync.Progress(rec)
		}
		if rel <= tol {
			return round, "gradient", f, rel, nil
		}
		// A round that raised F restarted the momentum; only a small
		// decrease is a stall.
		if dec := fPrev - f; !staleRound && !math.IsInf(fPrev, 1) && dec >= 0 && dec <= c.opts.DecreaseTol*math.Abs(fPrev) {
			return round, "decrease", f, rel, nil
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
	err := parallel(all, func(k int) error {
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
	return parallel(all, func(k int) error { return c.setOne(ctx, k, x) })
}

// setOne sends agent k its own poses and its neighbours' public poses of x.
func (c *coordinator) setOne(ctx context.Context, k int, x *sparse.Blocks) error {
	m := &message{Op: opSet, Rank: x.R, B: x.B, Needs: c.needsOf(k, nil)}
	known := map[int]bool{}
	for _, e := range c.g.Edges {
		pi, pj := c.p.Part[e.I], c.p.Part[e.J]
		if pi == k || pj == k {
			known[e.I], known[e.J] = true, true
		}
	}
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
