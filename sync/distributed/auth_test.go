package distributed

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	stdsync "sync"
	"testing"
	"time"
)

var (
	testKey  = []byte("0123456789abcdef0123456789abcdef-test-key")
	otherKey = []byte("fedcba9876543210fedcba9876543210-other-key")
)

// A sealed message opens on its subject with its key and yields its
// trailer and record; with another key, on another subject, altered,
// truncated or without a trailer it does not.
func TestAuthTrailer(t *testing.T) {
	_, b := secure(NewMemBus(), testKey, "t", 2, testLogger(t))
	_, other := secure(NewMemBus(), otherKey, "t", 2, testLogger(t))
	payload := encode(nil, &message{Kind: kindPoses, Part: 2, Run: 7, Seq: 3, Rank: 2, B: 3, Index: []uint32{4}, Values: []float64{1, 0, 0, 0, 1, 0}})
	for _, in := range []*trailer{
		{kind: authData, sender: 2, run: 11, seq: 12},
		{kind: authJoin, sender: coordinatorPart, run: 11, seq: 13, life: 99, floors: []need{{0, 5}, {3, 1 << 40}}},
		{kind: authReply, sender: 2, run: 11, seq: 14, life: 98, ref: 13, counts: Rejections{1, 2, 3}},
		{kind: authChallenge, sender: 2, run: 11, life: 98, ref: 13},
	} {
		msg := b.seal("t.pose.2", payload, in)
		out, rec, err := b.open("t.pose.2", msg)
		if err != nil {
			t.Fatalf("kind %d: %v", in.kind, err)
		}
		if !bytes.Equal(rec, payload) || out.kind != in.kind || out.sender != in.sender || out.run != in.run || out.seq != in.seq ||
			out.life != in.life || out.ref != in.ref || out.counts != in.counts || len(out.floors) != len(in.floors) {
			t.Errorf("kind %d: opened %+v, sealed %+v", in.kind, out, in)
		}
		for k := range in.floors {
			if out.floors[k] != in.floors[k] {
				t.Errorf("floor %d: %+v, want %+v", k, out.floors[k], in.floors[k])
			}
		}
		flipped := append([]byte(nil), msg...)
		flipped[len(payload)/2] ^= 1
		for name, c := range map[string]struct {
			b       *authBus
			subject string
			data    []byte
		}{
			"other key":     {other, "t.pose.2", msg},
			"other subject": {b, "t.pose.3", msg},
			"altered":       {b, "t.pose.2", flipped},
			"truncated":     {b, "t.pose.2", msg[:len(msg)-1]},
			"no trailer":    {b, "t.pose.2", payload},
			"empty":         {b, "t.pose.2", nil},
		} {
			if _, _, err := c.b.open(c.subject, c.data); err == nil {
				t.Errorf("kind %d, %s: opened", in.kind, name)
			}
		}
	}
}

// The window accepts each number once, late ones within its width, and
// nothing below its floor or its width.
func TestAuthWindow(t *testing.T) {
	w := newWindow(100)
	for _, c := range []struct {
		s  uint64
		ok bool
	}{
		{99, false}, {100, true}, {100, false}, {105, true}, {103, true}, {103, false}, {104, true},
		{105 + authWindow - 1, true}, {105, false}, {106, true}, {104 + authWindow, false}, {1 << 50, true}, {106, false},
	} {
		if got := w.accept(c.s); got != c.ok {
			t.Errorf("accept(%d) = %v, want %v", c.s, got, c.ok)
		}
	}
}

// tap records the requests it passes on.
type tap struct {
	Bus
	mu       stdsync.Mutex
	reqs     [][]byte
	subjects []string
}

func (t *tap) Request(ctx context.Context, subject string, data []byte) ([]byte, error) {
	t.mu.Lock()
	t.reqs = append(t.reqs, append([]byte(nil), data...))
	t.subjects = append(t.subjects, subject)
	t.mu.Unlock()
	return t.Bus.Request(ctx, subject, data)
}

// last is the last request sent to subject.
func (t *tap) last(subject string) []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k := len(t.reqs) - 1; k >= 0; k-- {
		if t.subjects[k] == subject {
			return t.reqs[k]
		}
	}
	return nil
}

// testAgent is one authenticated agent endpoint that counts what reaches
// its handlers.
type testAgent struct {
	b                *authBus
	stop, unsub      func()
	commands, poses  int
	mu               stdsync.Mutex
	lastCmd, lastPos []byte
}

func newTestAgent(t *testing.T, bus Bus, part int, from []int) *testAgent {
	t.Helper()
	_, b := secure(bus, testKey, "t", part, testLogger(t))
	a := &testAgent{b: b}
	var err error
	a.stop, err = b.Serve(agentSubject("t", part), func(req []byte) []byte {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.commands++
		a.lastCmd = req
		if string(req) == "publish" {
			if err := b.Publish(poseSubject("t", part), []byte("poses")); err != nil {
				t.Error(err)
			}
		}
		return append([]byte("ok:"), req...)
	})
	if err != nil {
		t.Fatal(err)
	}
	var unsubs []func()
	for _, q := range from {
		u, err := b.Subscribe(poseSubject("t", q), func(data []byte) {
			a.mu.Lock()
			defer a.mu.Unlock()
			a.poses++
			a.lastPos = data
		})
		if err != nil {
			t.Fatal(err)
		}
		unsubs = append(unsubs, u)
	}
	a.unsub = func() {
		for _, u := range unsubs {
			u()
		}
	}
	return a
}

func (a *testAgent) counts() (int, int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.commands, a.poses
}

func (a *testAgent) rejected() Rejections {
	a.b.mu.Lock()
	defer a.b.mu.Unlock()
	return a.b.counts
}

// eventually waits until cond holds: the in-process bus delivers
// publications on goroutines of their own.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
	}
}

func (a *testAgent) posesAre(n int) func() bool {
	return func() bool { _, p := a.counts(); return p == n }
}

// The handshake and every rejection, endpoint by endpoint: a coordinator
// joins an agent through a challenge; a replayed, forged or unauthenticated
// request is refused; a second coordinator's run retires the first's; a
// restarted agent is challenged again and refuses its neighbour's
// publications from before its join; publications that are replayed, of
// another run, from another sender or moved to another subject are
// refused; replies that are forged or answer another request are refused.
func TestAuthHandshakeAndRejects(t *testing.T) {
	mem := NewMemBus()
	ctx := context.Background()
	short := func() context.Context {
		c, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		t.Cleanup(cancel)
		return c
	}
	a0 := newTestAgent(t, mem, 0, nil)
	a1 := newTestAgent(t, mem, 1, []int{0, 3})

	tapA := &tap{Bus: mem}
	_, ca := secure(tapA, testKey, "t", coordinatorPart, testLogger(t))
	out, err := ca.Request(ctx, agentSubject("t", 1), []byte("hello"))
	if err != nil || string(out) != "ok:hello" {
		t.Fatalf("first request: %q %v", out, err)
	}
	if n, _ := a1.counts(); n != 1 || a1.b.run != ca.run {
		t.Fatalf("after the join: %d commands, run %d (coordinator's %d)", n, a1.b.run, ca.run)
	}
	if len(tapA.reqs) != 2 {
		t.Errorf("%d messages for the first request, want 2 (challenged, then the join)", len(tapA.reqs))
	}

	// A replayed request: no answer, not applied.
	if _, err := mem.Request(short(), agentSubject("t", 1), tapA.last(agentSubject("t", 1))); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("replayed request answered: %v", err)
	}
	// A forged and an unauthenticated request: refused, not applied.
	_, forger := secure(mem, otherKey, "t", coordinatorPart, testLogger(t))
	forged := forger.seal(agentSubject("t", 1), encode(nil, &message{Kind: kindCmd, Op: opStop}), &trailer{kind: authData, sender: coordinatorPart, run: ca.run, seq: 1 << 62, life: a1.b.life})
	for _, data := range [][]byte{forged, encode(nil, &message{Kind: kindCmd, Op: opStop})} {
		rep, err := mem.Request(ctx, agentSubject("t", 1), data)
		m, derr := decode(rep)
		if err != nil || derr != nil || m.Status != statusError || !strings.Contains(m.Text, "failed authentication") {
			t.Errorf("forged request: reply %+v %v %v", m, err, derr)
		}
	}
	if n, _ := a1.counts(); n != 1 {
		t.Fatalf("%d commands applied, want 1", n)
	}
	if r := a1.rejected(); r != (Rejections{Forged: 2, Replayed: 1}) {
		t.Errorf("agent 1 rejected %+v, want 2 forged, 1 replayed", r)
	}

	// A second coordinator with the same key starts a run: the agents join
	// it and leave the first one's, whose messages are then foreign.
	tapB := &tap{Bus: mem}
	_, cb := secure(tapB, testKey, "t", coordinatorPart, testLogger(t))
	for _, k := range []int{1, 0} {
		if _, err := cb.Request(ctx, agentSubject("t", k), []byte("publish")); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "agent 0's publication in the new run", a1.posesAre(1))
	if _, err := ca.Request(short(), agentSubject("t", 1), []byte("old run")); err == nil {
		t.Error("a request of the retired run was answered")
	}
	if _, err := mem.Request(short(), agentSubject("t", 1), tapA.reqs[1]); err == nil {
		t.Error("a replayed join of the retired run was answered")
	}
	if r := a1.rejected(); r.Foreign != 2 {
		t.Errorf("agent 1 rejected %+v, want 2 foreign", r)
	}

	// Publications: replayed, of another run, under another sender, on
	// another subject.
	a1.mu.Lock()
	captured := a1.lastPos
	a1.mu.Unlock()
	_, cap0 := secure(mem, testKey, "t", 0, testLogger(t))
	recorded := make(chan []byte, 1)
	unsub, _ := mem.Subscribe(poseSubject("t", 0), func(d []byte) { recorded <- d })
	if _, err := cb.Request(ctx, agentSubject("t", 0), []byte("publish")); err != nil {
		t.Fatal(err)
	}
	raw := <-recorded
	unsub()
	eventually(t, "agent 0's second publication", a1.posesAre(2))
	if string(captured) != "poses" {
		t.Fatalf("agent 1 received %q", captured)
	}
	before := a1.rejected()
	foreign := cap0.seal(poseSubject("t", 0), []byte("poses"), &trailer{kind: authData, sender: 0, run: ca.run, seq: 1 << 62})
	_, imp := secure(mem, testKey, "t", 2, testLogger(t))
	imp.run = cb.run
	impostor := imp.seal(poseSubject("t", 0), []byte("poses"), &trailer{kind: authData, sender: 2, run: cb.run, seq: 1 << 62})
	for _, data := range [][]byte{raw, foreign, impostor} {
		if err := mem.Publish(poseSubject("t", 0), data); err != nil {
			t.Fatal(err)
		}
	}
	if err := mem.Publish(poseSubject("t", 3), raw); err != nil {
		t.Fatal(err)
	}
	eventually(t, "2 more forged, 1 replayed and 1 foreign publication rejected", func() bool {
		return a1.rejected() == before.add(Rejections{Forged: 2, Replayed: 1, Foreign: 1})
	})
	if _, poses := a1.counts(); poses != 2 {
		t.Errorf("agent 1 applied %d publications, want 2", poses)
	}

	// A restarted agent 1: the coordinator's request for its old life is
	// challenged, the join names agent 0's floor (the number of its latest
	// publication, which the reply reports), and agent 0's publications
	// from before it are refused.
	if _, err := cb.Request(ctx, agentSubject("t", 0), []byte("publish")); err != nil {
		t.Fatal(err)
	}
	a1.stop()
	a1.unsub()
	b1 := newTestAgent(t, mem, 1, []int{0})
	if _, err := mem.Request(short(), agentSubject("t", 1), tapB.last(agentSubject("t", 1))); err != nil {
		t.Fatal(err) // the challenge
	}
	if n, _ := b1.counts(); n != 0 {
		t.Fatal("a request for the previous life was applied")
	}
	if out, err := cb.Request(ctx, agentSubject("t", 1), []byte("again")); err != nil || string(out) != "ok:again" {
		t.Fatalf("restarted agent: %q %v", out, err)
	}
	if err := mem.Publish(poseSubject("t", 0), raw); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the restarted agent refusing an old publication", func() bool { return b1.rejected().Replayed == 1 })
	if _, poses := b1.counts(); poses != 0 {
		t.Errorf("restarted agent: applied %d old publications", poses)
	}

	// Replies: forged, and one that answers another request.
	stop, _ := mem.Serve(agentSubject("t", 5), func([]byte) []byte { return []byte("a forged reply, longer than any trailer would be") })
	before = cb.counts
	if _, err := cb.Request(ctx, agentSubject("t", 5), []byte("x")); err == nil || !strings.Contains(err.Error(), "failed authentication") {
		t.Errorf("forged reply: %v", err)
	}
	stop()
	if cb.counts != before.add(Rejections{Forged: 1}) {
		t.Errorf("coordinator rejected %+v after %+v; want one more forged", cb.counts, before)
	}
	a0.stop()
	var lastReply []byte
	_, cc := secure(&replySpy{Bus: mem, seen: &lastReply}, testKey, "t", coordinatorPart, testLogger(t))
	c0 := newTestAgent(t, mem, 0, nil)
	if _, err := cc.Request(ctx, agentSubject("t", 0), []byte("one")); err != nil {
		t.Fatal(err)
	}
	c0.stop()
	stop, _ = mem.Serve(agentSubject("t", 0), func([]byte) []byte { return lastReply })
	if _, err := cc.Request(ctx, agentSubject("t", 0), []byte("two")); err == nil || !strings.Contains(err.Error(), "another request") {
		t.Errorf("replayed reply: %v", err)
	}
	stop()
	if cc.counts != (Rejections{Replayed: 1}) {
		t.Errorf("coordinator rejected %+v, want 1 replayed reply", cc.counts)
	}
}

// replySpy records the last reply.
type replySpy struct {
	Bus
	seen *[]byte
}

func (s *replySpy) Request(ctx context.Context, subject string, data []byte) ([]byte, error) {
	out, err := s.Bus.Request(ctx, subject, data)
	*s.seen = out
	return out, err
}

// ReadKey takes a file's bytes less surrounding white space, and refuses
// a missing file and a short key with errors naming the file.
func TestReadKey(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.key")
	if err := os.WriteFile(good, []byte("  "+string(testKey)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if k, err := ReadKey(good); err != nil || !bytes.Equal(k, testKey) {
		t.Errorf("ReadKey: %q %v", k, err)
	}
	short := filepath.Join(dir, "short.key")
	if err := os.WriteFile(short, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{short, filepath.Join(dir, "missing.key")} {
		if _, err := ReadKey(f); err == nil || !strings.Contains(err.Error(), f) {
			t.Errorf("ReadKey(%s): %v", f, err)
		}
	}
}

// BenchmarkAuthSealOpen: the cost authentication adds to a message of each
// size, once sealed by its sender and opened by one receiver.
func BenchmarkAuthSealOpen(b *testing.B) {
	_, a := secure(NewMemBus(), testKey, "t", 0, nil)
	for _, size := range []int{100, 10 << 10, 1 << 20} {
		payload := make([]byte, size)
		b.Run(strconv.Itoa(size), func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				msg := a.seal("t.pose.0", payload, &trailer{kind: authData, sender: 0, run: 1, seq: 2})
				if _, _, err := a.open("t.pose.0", msg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
