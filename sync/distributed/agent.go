package distributed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	stdsync "sync"
	"time"

	"github.com/bcmsync/bcmsync/posegraph"
	bsync "github.com/bcmsync/bcmsync/sync"
)

// AgentOptions control one agent.
type AgentOptions struct {
	// Problem: posegraph.Poses (the default) or posegraph.Rotations; it
	// must match the coordinator's.
	Problem posegraph.Problem
	// Subject prefixes every subject of the run (default "bcmsync"):
	// several runs can share a server under different prefixes.
	Subject string
	// Sweeps is the number of single-pose passes per update (default 1;
	// negative: none), NewtonSteps the number of trust-region steps after
	// them (default 1; negative: none). Pose passes make cheap progress
	// far from the optimum; the Newton steps, preconditioned by a factor
	// of the agent's block of Q, converge where pose passes only diffuse
	// (long chains, intel.g2o).
	Sweeps, NewtonSteps int
	// MaxInner bounds the truncated-CG iterations of one trust-region
	// step (default 2). Light local steps do better with the rounds'
	// momentum than near-exact ones: a round changes the neighbours'
	// poses, and so the agent's problem, before a precise step pays off,
	// and a step of 20 iterations took about as many rounds at several
	// times the cost (docs/tuning.md).
	MaxInner int
	// Wait bounds how long an agent waits for the public poses a command
	// needs before it answers "stale" and leaves its block unchanged
	// (default 2 s).
	Wait time.Duration
	// Logger receives rejected messages and lifecycle events (nil: silent).
	Logger *slog.Logger
	// Key authenticates every message, as Options.Key; it must be the
	// coordinator's.
	Key []byte
	// Overlap is the number of hops of other parts' poses that each
	// update moves with the agent's own before it keeps only its own
	// (overlap.go; 0: the default, negative: none). It must be the
	// coordinator's (Options.Overlap): the agent reads and publishes the
	// poses within Overlap+1 hops of the cut.
	Overlap int
	// PeakRSS, if set, measures the agent's peak resident set in bytes;
	// the agent sends it with every reply, and the run's report lists the
	// largest it received per agent (Stats.AgentRSS).
	// The bcmsync agent command sets it to the process's VmHWM; agents
	// sharing a process (SolveOn) leave it nil: they could only report
	// the process's.
	PeakRSS func() int64
}

func (o *AgentOptions) defaults() {
	if o.Subject == "" {
		o.Subject = "bcmsync"
	}
	if o.Sweeps == 0 {
		o.Sweeps = 1
	}
	if o.NewtonSteps == 0 {
		o.NewtonSteps = 1
	}
	if o.MaxInner == 0 {
		o.MaxInner = 2
	}
	if o.Wait == 0 {
		o.Wait = 2 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// agent serves one part. Its mutex guards the local state, which the
// pose subscriptions (one goroutine each) and the command server share.
type agent struct {
	opts AgentOptions
	// g is the graph as read, until build has taken what the part needs;
	// edges are those at the own poses, in g's order, without the
	// records as read (align, the rounding's translation system).
	g       *posegraph.Graph
	edges   []posegraph.Edge
	k       int        // the part served
	p       *Partition // nil until the coordinator's first opInit brings it
	l       *local     // nil until built (build)
	bus     Bus
	unsubs  []func()         // the subscriptions to the neighbours' poses
	chordal []posegraph.Pose // the own poses' chordal estimate, own frame
	comp    []int            // component of each own pose in the own subgraph
	ncomp   int

	mu   stdsync.Mutex
	cond *stdsync.Cond
	run  uint64
	seq  uint64
	have map[int]uint64 // neighbour part -> sequence number of its poses held
	buf  []byte
	sent uint64 // bytes published while serving the current command

	rejected    int
	stopped     chan struct{}
	fingerprint string
	lost        error                // why a build that had let the graph go failed
	proof       *bsync.PartCertifier // the certificate by parts (prove.go), made on first use
	lifted      *message             // the reply to the last committed escape (escape.go), for a resent commit
	round       roundState           // the rounding by parts (round.go)
}

// RunAgent runs agent k of partition p on bus until the coordinator stops
// it or ctx ends. It holds only part k's rows of the problem: its poses,
// the edges at them, and the public poses of its neighbours as they are
// published. With p nil the agent takes the coordinator's partition, which
// comes with the command that makes it join a run (opInit): it computes
// no split of its own, and builds its part (its rows of Q, its chordal
// estimate) on that command. With p given it builds them before it starts
// serving, and joins only a coordinator whose partition is p.
func RunAgent(ctx context.Context, bus Bus, g *posegraph.Graph, p *Partition, k int, opts AgentOptions) error {
	opts.defaults()
	if k < 0 {
		return fmt.Errorf("agent %d: parts are numbered from 0", k)
	}
	bus, _ = secure(bus, opts.Key, opts.Subject, k, opts.Logger)
	a, err := newAgent(bus, g, p, k, opts)
	defer func() {
		for _, u := range a.unsubs {
			u()
		}
	}()
	if err != nil {
		return err
	}
	stop, err := bus.Serve(agentSubject(opts.Subject, k), a.onCommand)
	if err != nil {
		return fmt.Errorf("agent %d: serving commands: %w", k, err)
	}
	defer stop()
	select {
	case <-a.stopped:
		return nil
	case <-ctx.Done():
		a.mu.Lock()
		a.cond.Broadcast()
		a.mu.Unlock()
		return ctx.Err()
	}
}

// newAgent returns agent k, built for p unless p is nil (RunAgent).
func newAgent(bus Bus, g *posegraph.Graph, p *Partition, k int, opts AgentOptions) (*agent, error) {
	a := &agent{opts: opts, g: g, k: k, bus: bus, have: map[int]uint64{}, stopped: make(chan struct{})}
	a.cond = stdsync.NewCond(&a.mu)
	if p != nil {
		return a, a.build(p, "")
	}
	return a, nil
}

// build makes the agent's state for partition p (before serving, or with
// mu held): its rows of Q, its overlap, its fingerprint and its chordal
// estimate, and subscribes to its neighbours' poses. With want set (the
// fingerprint of the coordinator's opInit), a part whose fingerprint
// differs is refused before anything is kept, so that a refused opInit
// leaves the agent free to take the next one. The graph goes once the
// part's edges are taken (partGraph), before its chordal estimate and rows
// are made: a part that cannot be made from them leaves the agent unable
// to build another (it must be restarted).
func (a *agent) build(p *Partition, want string) error {
	g, k, opts := a.g, a.k, a.opts
	if g == nil {
		return fmt.Errorf("agent %d: its part could not be built (%w), and it let the graph go: restart it", k, a.lost)
	}
	if err := p.Validate(g.N()); err != nil {
		return fmt.Errorf("agent %d: the coordinator's %w", k, err)
	}
	if k >= p.K {
		return fmt.Errorf("agent %d: the partition has parts 0..%d", k, p.K-1)
	}
	adj := poseAdjacency(g)
	h := overlapOf(opts.Overlap, adj, p)
	if h > maxOverlap {
		return fmt.Errorf("agent %d: overlap %d above %d", k, h, maxOverlap)
	}
	fp := fingerprint(g, p, opts.Problem) + overlapTag(h)
	if want != "" && fp != want {
		return differentProblem(k, fp, want)
	}
	// The overlap's plan is all the adjacency is for.
	var plan overlapPlan
	if h > 0 {
		plan = planOverlap(adj, p, k, h)
	}
	adj = nil
	// All the part needs of the graph: the edges at its poses and at its
	// halo's, and the subgraph of its poses. The graph as read (at 10^5
	// poses 35 MB, a third of an agent's peak) goes before the chordal
	// estimate, the rows and their factors are made, instead of lying
	// under them.
	sub, own := partGraph(g, p, k, plan.halo), ownGraph(g, p.Owned(k))
	// Subscribed while the graph is held: a failed subscription leaves
	// the agent as it was, without the ones made, free to take the next
	// opInit.
	var unsubs []func()
	for _, q := range readParts(sub, p, k) {
		unsub, err := a.bus.Subscribe(poseSubject(opts.Subject, q), func(data []byte) { a.onPoses(q, data) })
		if err != nil {
			for _, u := range unsubs {
				u()
			}
			return fmt.Errorf("agent %d: subscribing to part %d: %w", k, q, err)
		}
		unsubs = append(unsubs, unsub)
	}
	a.g = nil
	fail := func(err error) error {
		// The graph is gone: this agent cannot build a part again.
		for _, u := range unsubs {
			u()
		}
		a.lost = err
		return err
	}
	// The chordal estimate before the rows: its factors and subgraphs are
	// let go before the rows of Q and their factors are made, instead of
	// stacking on them.
	chordal, comp, ncomp, err := localChordal(own, opts.Problem)
	if err != nil {
		return fail(fmt.Errorf("agent %d: %w", k, err))
	}
	l, err := a.buildRows(sub, p, h, plan)
	if err != nil {
		return fail(err)
	}
	var edges []posegraph.Edge
	for _, e := range sub.Edges {
		if p.Part[e.I] == k || p.Part[e.J] == k {
			edges = append(edges, e)
		}
	}
	a.unsubs = append(a.unsubs, unsubs...)
	a.p, a.l, a.fingerprint, a.edges = p, l, fp, slices.Clip(edges)
	a.chordal, a.comp, a.ncomp = chordal, comp, ncomp
	halo, ring := 0, len(l.pub)
	if l.ov != nil {
		halo, ring = len(l.ov.halo), len(l.ov.ext.pub)
	}
	opts.Logger.Info("agent ready", "part", k, "poses", len(l.own), "public", len(l.shared), "neighbour_poses", len(l.pub),
		"halo_poses", halo, "ring_poses", ring, "outside_mb", float64(l.outsideBytes())/1e6)
	return nil
}

// buildRows makes part k's rows of Q from its graph sub (partGraph) and,
// at overlap h > 0, its overlapping subproblem, whose updates replace the
// part's own (local.improve): the part then has no translation factor of
// its own, which would never be used.
func (a *agent) buildRows(sub *posegraph.Graph, p *Partition, h int, plan overlapPlan) (*local, error) {
	k := a.k
	l, err := newLocal(sub, p, k, a.opts.Problem, sub.D, h == 0)
	if err != nil {
		return nil, err
	}
	if h > 0 {
		if l.ov, l.shared, err = newOverlapOf(sub, p, l, plan); err != nil {
			return nil, fmt.Errorf("agent %d: %w", k, err)
		}
	}
	return l, nil
}

// partGraph returns the edges of g that part k's rows and its overlap's
// need, those with an end at its poses or in its halo (sorted), in g's
// order and without the records as read (Meas, Info), as a graph of g's
// dimension: newLocalOf makes the same rows from it as from g.
func partGraph(g *posegraph.Graph, p *Partition, k int, halo []int) *posegraph.Graph {
	in := make([]bool, g.N())
	for i, q := range p.Part {
		in[i] = q == k
	}
	for _, i := range halo {
		in[i] = true
	}
	n := 0
	for _, e := range g.Edges {
		if in[e.I] || in[e.J] {
			n++
		}
	}
	sub := &posegraph.Graph{D: g.D, Edges: make([]posegraph.Edge, 0, n)}
	for _, e := range g.Edges {
		if in[e.I] || in[e.J] {
			e.Meas, e.Info = nil, nil
			sub.Edges = append(sub.Edges, e)
		}
	}
	return sub
}

// readParts returns the parts other than k whose poses part k's agent
// reads, sorted: the parts of the ends of sub's edges (partGraph) outside
// part k: its neighbours' public poses, its halo and its ring, the parts
// the rows made from sub read (TestAgentRowsFromPartGraph).
func readParts(sub *posegraph.Graph, p *Partition, k int) []int {
	seen := map[int]bool{}
	for _, e := range sub.Edges {
		for _, i := range [2]int{e.I, e.J} {
			if q := p.Part[i]; q != k {
				seen[q] = true
			}
		}
	}
	parts := make([]int, 0, len(seen))
	for q := range seen {
		parts = append(parts, q)
	}
	slices.Sort(parts)
	return parts
}

// partitionOfInts decodes the coordinator's partition from an opInit's Ints:
// the number of parts, then each pose's part.
func partitionOfInts(ints []uint32) (*Partition, error) {
	if len(ints) < 1 {
		return nil, errors.New("the coordinator sent no partition")
	}
	p := &Partition{K: int(ints[0]), Part: make([]int, len(ints)-1)}
	for i, q := range ints[1:] {
		p.Part[i] = int(q)
	}
	return p, nil
}

// partitionInts is p as an opInit carries it (partitionOfInts).
func partitionInts(p *Partition) []uint32 {
	ints := make([]uint32, 1+len(p.Part))
	ints[0] = uint32(p.K)
	for i, q := range p.Part {
		ints[1+i] = uint32(q)
	}
	return ints
}

// reject logs a message that is not applied.
func (a *agent) reject(why string, args ...any) {
	a.rejected++
	a.opts.Logger.Warn("message rejected: "+why, append([]any{"part", a.k}, args...)...)
}

// onPoses applies part q's public poses if the message is well formed and
// current: this run, this rank, a newer sequence number, poses q owns.
func (a *agent) onPoses(q int, data []byte) {
	m, err := decode(data)
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case err != nil:
		a.reject("malformed", "from", q, "err", err)
		return
	case m.Kind != kindPoses || m.Part != q:
		a.reject("not poses of the subject's part", "from", q, "kind", m.Kind, "part", m.Part)
		return
	case a.run == 0 || m.Run != a.run:
		a.reject("other run", "from", q, "run", m.Run)
		return
	case m.Rank != a.l.x.R || m.B != a.l.b:
		a.reject("stale rank", "from", q, "rank", m.Rank, "want", a.l.x.R)
		return
	case m.Seq <= a.have[q]:
		a.reject("stale sequence", "from", q, "seq", m.Seq, "have", a.have[q])
		return
	}
	for _, gi := range m.Index {
		if int(gi) >= len(a.p.Part) || a.p.Part[gi] != q {
			a.reject("pose not owned by the sender", "from", q, "pose", gi)
			return
		}
	}
	sz := m.Rank * m.B
	for k, gi := range m.Index {
		blk := m.Values[k*sz : (k+1)*sz]
		if a.l.ov != nil {
			a.l.ov.store(int(gi), blk)
		}
		li, ok := a.l.globalToLocal[int(gi)]
		if !ok || li < len(a.l.own) {
			continue // a public pose of q that this agent does not border
		}
		copy(a.l.x.Block(li), blk)
	}
	a.have[q] = m.Seq
	a.cond.Broadcast()
}

// unmet lists the needs not met (mu held).
func (a *agent) unmet(needs []need) []need {
	var out []need
	for _, n := range needs {
		if a.have[n.Part] < n.Seq {
			out = append(out, need{Part: n.Part, Seq: a.have[n.Part]})
		}
	}
	return out
}

// waitNeeds waits (mu held) until every need is met, up to the agent's
// Wait; it reports whether they were.
func (a *agent) waitNeeds(needs []need) bool {
	deadline := time.Now().Add(a.opts.Wait)
	timer := time.AfterFunc(a.opts.Wait, func() {
		a.mu.Lock()
		a.cond.Broadcast()
		a.mu.Unlock()
	})
	defer timer.Stop()
	for {
		met := true
		for _, n := range needs {
			if a.have[n.Part] < n.Seq {
				met = false
				break
			}
		}
		if met {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		a.cond.Wait()
	}
}

// publish sends the own public poses (mu held), under a new sequence number.
func (a *agent) publish() error {
	a.seq++
	l := a.l
	m := &message{Kind: kindPoses, Part: l.part, Run: a.run, Seq: a.seq, Rank: l.x.R, B: l.b,
		Index: make([]uint32, len(l.shared)), Values: make([]float64, 0, len(l.shared)*l.x.R*l.b)}
	for k, li := range l.shared {
		m.Index[k] = uint32(l.own[li])
		m.Values = append(m.Values, l.x.Block(li)...)
	}
	a.buf = encode(a.buf, m)
	a.sent += uint64(len(a.buf))
	return a.bus.Publish(poseSubject(a.opts.Subject, l.part), a.buf)
}

// peakRSS is the agent's own measure of its peak resident set, 0 when it
// has none.
func (a *agent) peakRSS() uint64 {
	if a.opts.PeakRSS == nil {
		return 0
	}
	return uint64(max(a.opts.PeakRSS(), 0))
}

// onCommand serves one coordinator request.
func (a *agent) onCommand(data []byte) []byte {
	m, err := decode(data)
	if err != nil {
		a.mu.Lock()
		a.reject("malformed command", "err", err)
		a.mu.Unlock()
		return encode(nil, &message{Kind: kindReply, Part: a.k, Status: statusError, Text: "malformed command: " + err.Error()})
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sent = 0
	rep := &message{Kind: kindReply, Part: a.k, Run: m.Run, Op: m.Op, Round: m.Round, Status: statusOK}
	fail := func(err error) []byte {
		rep.Status, rep.Text = statusError, err.Error()
		return encode(nil, rep)
	}
	if m.Kind != kindCmd {
		a.reject("not a command", "kind", m.Kind)
		return fail(errors.New("not a command"))
	}
	if m.Op != opInit && m.Op != opStop && m.Run != a.run {
		a.reject("command of another run", "run", m.Run)
		rep.Status, rep.Text = statusNoRun, fmt.Sprintf("agent %d is not in run %d", a.k, m.Run)
		return encode(nil, rep)
	}
	if m.Op == opInit && a.l == nil {
		// The first run this agent joins: its part comes with the
		// coordinator's partition.
		p, err := partitionOfInts(m.Ints)
		if err == nil {
			err = a.build(p, m.Text)
		}
		if err != nil {
			return fail(err)
		}
	}
	l := a.l
	if l == nil && m.Op != opStop {
		// Only a run's opInit builds the part (a command of no run was
		// answered statusNoRun above).
		return fail(fmt.Errorf("agent %d has not joined a run", a.k))
	}
	switch m.Op {
	case opInit:
		// A new run: reset to the chordal estimate.
		if m.Rank < l.d || m.Rank > maxRank {
			return fail(fmt.Errorf("init at rank %d", m.Rank))
		}
		if m.Text != a.fingerprint {
			return fail(differentProblem(l.part, a.fingerprint, m.Text))
		}
		// Seq continues the numbering of a previous life of this part, so
		// that neighbours accept what it publishes next.
		a.run, a.seq, a.have = m.Run, m.Seq, map[int]uint64{}
		if l.x.R != m.Rank {
			l.setRank(m.Rank)
		}
		for li, p := range a.chordal {
			l.setPose(li, p)
		}
		o := a.opts
		rec, _ := json.Marshal(agentRecord{Sweeps: max(o.Sweeps, 0), NewtonSteps: max(o.NewtonSteps, 0), MaxInner: o.MaxInner, Wait: o.Wait.Seconds()})
		rep.Text = string(rec)
	case opAlign:
		// Wait for the aligned neighbours, align to them, publish.
		if !a.waitNeeds(m.Needs) {
			rep.Status = statusStale
			return encode(nil, rep)
		}
		a.align(m.Needs)
		if err := a.publish(); err != nil {
			return fail(err)
		}
	case opUpdate:
		if m.Rank != l.x.R {
			return fail(fmt.Errorf("update at rank %d, agent at %d", m.Rank, l.x.R))
		}
		if a.proof != nil {
			// The rounds make the Newton steps' factor again (prove
			// let it go); the certificate's factor and the inverse
			// iteration's vectors wait for the next test instead of
			// stacking on it.
			a.proof.Release()
		}
		if !a.waitNeeds(m.Needs) {
			rep.Status, rep.Needs = statusStale, a.unmet(m.Needs)
			break
		}
		l.maxInner = a.opts.MaxInner
		if err := l.improve(a.opts.Sweeps, a.opts.NewtonSteps); err != nil {
			return fail(err)
		}
		if err := a.publish(); err != nil {
			return fail(err)
		}
	case opStats:
		if !a.waitNeeds(m.Needs) {
			rep.Status, rep.Needs = statusStale, a.unmet(m.Needs)
			break
		}
		rep.F, rep.Grad2, rep.Norm2 = l.stats()
		rep.Dot = l.block.MomentumInner(l.x)
	case opGather:
		rep.Rank, rep.B = l.x.R, l.b
		rep.Index = make([]uint32, len(l.own))
		for li, gi := range l.own {
			rep.Index[li] = uint32(gi)
		}
		rep.Values = append([]float64(nil), l.x.Data[:len(l.own)*l.x.R*l.b]...)
	case opSet:
		// The coordinator's point at a new rank, own and public poses.
		if m.B != l.b || len(m.Values) != len(m.Index)*m.Rank*m.B {
			return fail(errors.New("set: inconsistent blocks"))
		}
		if err := a.set(m); err != nil {
			return fail(err)
		}
	case opExtrapolate:
		if m.Rank != l.x.R {
			return fail(fmt.Errorf("extrapolate at rank %d, agent at %d", m.Rank, l.x.R))
		}
		if !(m.F >= 0 && m.F < 1) {
			return fail(fmt.Errorf("extrapolation factor %g outside [0, 1)", m.F))
		}
		l.extrapolate(m.F)
		if err := a.publish(); err != nil {
			return fail(err)
		}
	case opPublish:
		if err := a.publish(); err != nil {
			return fail(err)
		}
	case opProveSetup, opProveLambda, opProveFactor:
		if err := a.prove(m, rep); err != nil {
			return fail(err)
		}
	case opEigReduce, opEigBack, opEigScale, opEigLift:
		if err := a.eigCmd(m, rep); err != nil {
			return fail(err)
		}
	case opRoundSetup, opRoundGram, opRoundProject, opRoundReduce, opRoundBack:
		if err := a.roundCmd(m, rep); err != nil {
			return fail(err)
		}
	case opStop:
		select {
		case <-a.stopped:
		default:
			close(a.stopped)
		}
	default:
		return fail(fmt.Errorf("unknown command %d", m.Op))
	}
	if l != nil && !finite(l.x.Data) {
		// Never publish or report a broken estimate.
		return fail(fmt.Errorf("agent %d: non-finite estimate after command %d", l.part, m.Op))
	}
	// Every reply carries the peak so far: the certificate, the escape
	// and the rounding by parts come after the last gather, and their
	// factors and Schur complements set an agent's peak.
	rep.Seq, rep.Sent, rep.Mem = a.seq, a.sent, a.peakRSS()
	return encode(nil, rep)
}

// set installs the coordinator's blocks (mu held): every own pose must be
// given, and public poses of neighbours may be.
func (a *agent) set(m *message) error {
	l := a.l
	seen := 0
	for _, gi := range m.Index {
		li, ok := l.globalToLocal[int(gi)]
		if !ok && (l.ov == nil || !l.ov.knows(int(gi))) {
			return fmt.Errorf("set: pose %d unknown to part %d", gi, l.part)
		}
		if ok && li < len(l.own) {
			seen++
		}
	}
	if seen != len(l.own) {
		return fmt.Errorf("set: %d of part %d's %d poses given", seen, l.part, len(l.own))
	}
	l.setRank(m.Rank)
	sz := m.Rank * m.B
	for k, gi := range m.Index {
		blk := m.Values[k*sz : (k+1)*sz]
		if l.ov != nil {
			l.ov.store(int(gi), blk)
		}
		if li, ok := l.globalToLocal[int(gi)]; ok {
			copy(l.x.Block(li), blk)
		}
	}
	for _, n := range m.Needs {
		a.have[n.Part] = max(a.have[n.Part], n.Seq)
	}
	return nil
}

// differentProblem is the refusal of a coordinator whose problem differs
// from the agent's.
func differentProblem(k int, have, want string) error {
	return fmt.Errorf("agent %d holds a different problem or overlap than the coordinator (fingerprint %s, coordinator %s): run every process on the same file with the same overlap, or restart the agent if it joined another coordinator's run", k, have, want)
}
