package distributed

import (
	"context"
	"fmt"
	"slices"
	"strings"
	stdsync "sync"
	"testing"
	"time"

	"github.com/bcmsync/bcmsync/posegraph"
	bsync "github.com/bcmsync/bcmsync/sync"
)

// An agent applies a neighbour's public poses only when the message is well
// formed and current; every other message is counted as rejected and
// leaves its copy of the public poses as it was.
func TestAgentRejectsBadPoseMessages(t *testing.T) {
	g := testGraph(t, 2)
	p, _ := Contiguous(g.N(), 2)
	opts := AgentOptions{}
	opts.defaults()
	a, err := newAgent(NewMemBus(), g, p, 1, opts)
	if err != nil {
		t.Fatal(err)
	}
	const run = 42
	rep, err := decode(a.onCommand(encode(nil, &message{Kind: kindCmd, Op: opInit, Part: coordinatorPart, Run: run, Rank: 2, Text: a.fingerprint})))
	if err != nil || rep.Status != statusOK {
		t.Fatalf("init: %v %+v", err, rep)
	}
	// Part 0's public poses that agent 1 borders.
	l := a.l
	var idx []uint32
	for _, gi := range l.pub {
		idx = append(idx, uint32(gi))
	}
	poses := func(seq uint64, v float64) *message {
		m := &message{Kind: kindPoses, Part: 0, Run: run, Seq: seq, Rank: 2, B: 3, Index: append([]uint32(nil), idx...)}
		for range idx {
			m.Values = append(m.Values, v, 0, v, 0, 1, v)
		}
		return m
	}
	first := l.x.Block(len(l.own))
	a.onPoses(0, encode(nil, poses(1, 0.5)))
	if a.rejected != 0 || first[0] != 0.5 || a.have[0] != 1 {
		t.Fatalf("a current message was not applied: rejected %d, value %g, seq %d", a.rejected, first[0], a.have[0])
	}
	own := uint32(l.own[0])
	bad := []struct {
		name string
		data []byte
	}{
		{"stale sequence", encode(nil, poses(1, 0.9))},
		{"other run", func() []byte { m := poses(2, 0.9); m.Run = run + 1; return encode(nil, m) }()},
		{"other rank", func() []byte {
			m := poses(2, 0.9)
			m.Rank = 3
			m.Values = append(m.Values, m.Values[:len(idx)*3]...)
			return encode(nil, m)
		}()},
		{"pose not the sender's", func() []byte { m := poses(2, 0.9); m.Index[0] = own; return encode(nil, m) }()},
		{"sender is not the subject's part", func() []byte { m := poses(2, 0.9); m.Part = 1; return encode(nil, m) }()},
		{"corrupted", func() []byte { d := encode(nil, poses(2, 0.9)); d[len(d)/2] ^= 1; return d }()},
		{"truncated", encode(nil, poses(2, 0.9))[:40]},
	}
	for n, c := range bad {
		a.onPoses(0, c.data)
		if a.rejected != n+1 {
			t.Errorf("%s: not rejected (rejected count %d)", c.name, a.rejected)
		}
		if first[0] != 0.5 || a.have[0] != 1 {
			t.Fatalf("%s: applied (value %g, seq %d)", c.name, first[0], a.have[0])
		}
	}
	// A command from another run is refused as "not in this run".
	rep, err = decode(a.onCommand(encode(nil, &message{Kind: kindCmd, Op: opUpdate, Part: coordinatorPart, Run: run + 1, Rank: 2})))
	if err != nil || rep.Status != statusNoRun {
		t.Errorf("command of another run: %v %+v", err, rep)
	}
	// An agent built from another partition refuses to join.
	other, _ := Contiguous(g.N(), 3)
	rep, _ = decode(a.onCommand(encode(nil, &message{Kind: kindCmd, Op: opInit, Part: coordinatorPart, Run: run, Rank: 2, Text: fingerprint(g, other, posegraph.Poses)})))
	if rep.Status != statusError {
		t.Errorf("mismatched fingerprint accepted: %+v", rep)
	}
}

// Agents given no partition take the coordinator's and run exactly as
// agents given it: the same rounds and the same estimate, bit for bit. An
// agent whose graph differs from the coordinator's is still refused by the
// fingerprint, and one whose part the partition does not have says so.
func TestAgentTakesCoordinatorsPartition(t *testing.T) {
	g, _, p := lattice(t, 200, 10, 5, 3)
	run := func(ag *posegraph.Graph, ap *Partition, k int) (*bsync.Result, *Stats, error) {
		t.Helper()
		bus := NewMemBus()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var wg stdsync.WaitGroup
		defer wg.Wait()
		defer cancel()
		for q := 0; q < k; q++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				gq := g
				if q == k-1 {
					gq = ag
				}
				_ = RunAgent(ctx, bus, gq, ap, q, AgentOptions{})
			}()
		}
		return Solve(ctx, bus, g, p, Options{Timeout: 5 * time.Second, Try: time.Second})
	}
	given, gst, err := run(g, p, p.K)
	if err != nil {
		t.Fatal(err)
	}
	taken, tst, err := run(g, nil, p.K)
	if err != nil {
		t.Fatal(err)
	}
	if gst.Rounds != tst.Rounds || given.Objective != taken.Objective || !given.Certified || !taken.Certified {
		t.Errorf("partition given: %d rounds, F %.17g, %s; taken from the coordinator: %d rounds, F %.17g, %s",
			gst.Rounds, given.Objective, given.Status, tst.Rounds, taken.Objective, taken.Status)
	}
	for i := range given.Poses {
		if given.Poses[i] != taken.Poses[i] {
			t.Fatalf("pose %d differs: %v against %v", i, given.Poses[i], taken.Poses[i])
		}
	}

	// The last agent reads a graph with one measurement edited.
	edited := *g
	edited.Edges = append([]posegraph.Edge(nil), g.Edges...)
	edited.Edges[len(edited.Edges)/2].T[0] += 1e-3
	if _, _, err := run(&edited, nil, p.K); err == nil || !strings.Contains(err.Error(), "holds a different problem") {
		t.Errorf("an agent reading another graph: %v; want its refusal", err)
	}
	// An agent for part K of a K-part partition (the coordinator never
	// asks it: the command's --agents bounds --part), or sent a partition
	// of another graph, or none, refuses to join.
	for _, c := range []struct {
		k    int
		ints []uint32
		want string
	}{
		{p.K, partitionInts(p), fmt.Sprintf("agent %d: the partition has parts 0..%d", p.K, p.K-1)},
		{0, partitionInts(p)[:g.N()], fmt.Sprintf("agent 0: the coordinator's partition: %d entries for %d poses", g.N()-1, g.N())},
		{0, nil, "the coordinator sent no partition"},
		// A part count from the wire is checked before it sizes anything.
		{0, append([]uint32{1<<32 - 1}, partitionInts(p)[1:]...), fmt.Sprintf("%d parts for %d poses", uint32(1<<32-1), g.N())},
	} {
		opts := AgentOptions{}
		opts.defaults()
		a, err := newAgent(NewMemBus(), g, nil, c.k, opts)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := decode(a.onCommand(encode(nil, &message{Kind: kindCmd, Op: opInit, Part: coordinatorPart, Run: 7, Rank: 2, Ints: c.ints})))
		if err != nil || rep.Status != statusError || !strings.Contains(rep.Text, c.want) || a.l != nil {
			t.Errorf("agent %d sent %d ints: %v %q; want the error %q and no part built", c.k, len(c.ints), err, rep.Text, c.want)
		}
	}

	// An opInit refused for its fingerprint leaves the agent free: the
	// coordinator's next, right opInit is taken.
	opts := AgentOptions{}
	opts.defaults()
	ref, err := newAgent(NewMemBus(), g, p, 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	other := &Partition{K: p.K, Part: make([]int, len(p.Part))}
	for i, q := range p.Part {
		other.Part[i] = p.K - 1 - q
	}
	a, err := newAgent(NewMemBus(), g, nil, 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range []struct {
		p    *Partition
		text string
		ok   bool
	}{{other, "another problem's fingerprint", false}, {p, ref.fingerprint, true}} {
		rep, err := decode(a.onCommand(encode(nil, &message{Kind: kindCmd, Op: opInit, Part: coordinatorPart, Run: 7, Rank: 2, Seq: uint64(i), Ints: partitionInts(c.p), Text: c.text})))
		if err != nil || (rep.Status == statusOK) != c.ok || (a.l != nil) != c.ok {
			t.Errorf("opInit %d: %v, status %d %q, part built %v; want accepted %v", i, err, rep.Status, rep.Text, a.l != nil, c.ok)
		}
	}
}

// failingSubscribe is a bus whose next Subscribe calls fail.
type failingSubscribe struct {
	Bus
	fail int
}

func (b *failingSubscribe) Subscribe(subject string, h func([]byte)) (func(), error) {
	if b.fail > 0 {
		b.fail--
		return nil, fmt.Errorf("no subscription to %s", subject)
	}
	return b.Bus.Subscribe(subject, h)
}

// An agent lets the graph go before it builds its rows (partGraph), after
// everything that may fail for want of something else than its data: a
// failed subscription leaves it with the graph, and the next opInit
// builds its part; a part whose rows cannot be made (here its overlap's
// translation system, made indefinite) leaves it without the graph, and
// every later opInit says so instead of building from nothing.
func TestAgentBuildFailures(t *testing.T) {
	g := testGraph(t, 2)
	p, _ := Contiguous(g.N(), 2)
	opts := AgentOptions{Overlap: 1}
	opts.defaults()
	init := func(a *agent, g *posegraph.Graph) *message {
		t.Helper()
		fp := fingerprint(g, p, opts.Problem) + overlapTag(opts.Overlap)
		rep, err := decode(a.onCommand(encode(nil, &message{Kind: kindCmd, Op: opInit, Part: coordinatorPart, Run: 7, Rank: 2, Ints: partitionInts(p), Text: fp})))
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	bus := &failingSubscribe{Bus: NewMemBus(), fail: 1}
	a, err := newAgent(bus, g, nil, 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	if rep := init(a, g); rep.Status != statusError || !strings.Contains(rep.Text, "no subscription") || a.l != nil || a.g == nil {
		t.Fatalf("a failed subscription: status %d %q, part built %v, graph held %v", rep.Status, rep.Text, a.l != nil, a.g != nil)
	}
	if rep := init(a, g); rep.Status != statusOK || a.l == nil || a.g != nil {
		t.Fatalf("the opInit after a failed subscription: status %d %q, part built %v, graph held %v", rep.Status, rep.Text, a.l != nil, a.g != nil)
	}

	bad := *g
	bad.Edges = slices.Clone(g.Edges)
	for i, e := range bad.Edges {
		if p.Part[e.I] != 0 && p.Part[e.J] != 0 {
			bad.Edges[i].Tau = -1e3 // the halo's and ring's edges: part 1's own chordal estimate never sees them
		}
	}
	b, err := newAgent(NewMemBus(), &bad, nil, 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	first := init(b, &bad)
	if first.Status != statusError || !strings.Contains(first.Text, "translation") || b.l != nil || b.g != nil {
		t.Fatalf("rows that cannot be made: status %d %q, part built %v, graph held %v", first.Status, first.Text, b.l != nil, b.g != nil)
	}
	if rep := init(b, &bad); rep.Status != statusError || !strings.Contains(rep.Text, "restart it") || !strings.Contains(rep.Text, first.Text) {
		t.Fatalf("the opInit after a failed build: status %d %q", rep.Status, rep.Text)
	}
}
