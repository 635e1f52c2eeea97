package distributed

import (
	"context"
	"errors"
	"math"
	"strings"
	stdsync "sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/posegraph"
	bsync "github.com/bcmsync/bcmsync/sync"
)

// lattice is a Manhattan graph of n poses, its central solution and a BFS
// partition into k parts.
func lattice(t *testing.T, n, side int, seed uint64, k int) (*posegraph.Graph, *bsync.Result, *Partition) {
	t.Helper()
	g, _, err := datasets.Manhattan(n, side, datasets.Config{Kappa: 100, Tau: 10, LoopProb: 0.3, Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	central, err := bsync.Solve(context.Background(), g, bsync.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := BFS(g, k)
	if err != nil {
		t.Fatal(err)
	}
	return g, central, p
}

// One agent is killed mid-run and a new one started for its part: the
// coordinator's requests fail over to the new agent, which rejoins from its
// neighbours' public poses, and the run still ends certified at the
// central optimum; with authenticated messages too (the new agent's life
// is challenged and joins again), where nothing is rejected.
// The agents take the partition as given or, as the agent command does,
// from the coordinator's opInit (the restarted one too).
func TestAgentRestart(t *testing.T) {
	for _, c := range []struct {
		name string
		key  []byte
		own  bool
	}{{"plain", nil, true}, {"authenticated", testKey, true}, {"coordinator's partition", testKey, false}} {
		t.Run(c.name, func(t *testing.T) { agentRestart(t, c.key, c.own) })
	}
}

func agentRestart(t *testing.T, key []byte, own bool) {
	g, central, p := lattice(t, 300, 15, 11, 4)
	ap := p
	if !own {
		ap = nil
	}
	bus := NewMemBus()
	ctx := context.Background()
	var wg stdsync.WaitGroup
	cancels := make([]context.CancelFunc, p.K)
	start := func(k int) {
		actx, cancel := context.WithCancel(ctx)
		cancels[k] = cancel
		done := make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(done)
			if err := RunAgent(actx, bus, g, ap, k, AgentOptions{Key: key}); err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("agent %d: %v", k, err)
			}
		}()
	}
	for k := 0; k < p.K; k++ {
		start(k)
	}
	var once stdsync.Once
	restarted := make(chan struct{})
	opts := Options{Timeout: 20 * time.Second, Try: 200 * time.Millisecond, Key: key}
	opts.Sync.Progress = func(r bsync.Record) {
		if r.Iter == 30 {
			once.Do(func() {
				go func() {
					cancels[2]() // the agent dies and loses its state
					time.Sleep(300 * time.Millisecond)
					start(2) // and comes back
					close(restarted)
				}()
			})
		}
	}
	res, st, err := Solve(ctx, bus, g, p, opts)
	<-restarted
	for _, c := range cancels {
		c()
	}
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	rel := math.Abs(res.Objective-central.Objective) / central.Objective
	t.Logf("restarts %d stale %d rounds %d F %.12g central %.12g %s", st.Restarts, st.Stale, st.Rounds, res.Objective, central.Objective, res.Status)
	if st.Restarts != 1 {
		t.Errorf("%d restarts seen, want 1", st.Restarts)
	}
	if rel > 1e-6 || !res.Certified {
		t.Errorf("after a restart: F %.12g (central %.12g), status %q", res.Objective, central.Objective, res.Status)
	}
	if st.Authenticated != (key != nil) || st.Rejected != (Rejections{}) {
		t.Errorf("authenticated %v, rejected %+v; want %v and none", st.Authenticated, st.Rejected, key != nil)
	}
}

// An agent that never answers ends the run with an error naming it once
// the timeout has passed.
func TestAgentGoneTimesOut(t *testing.T) {
	cfg := datasets.Config{Kappa: 100, Tau: 10, LoopProb: 0.3, Seed: 11}
	g, _, err := datasets.Manhattan(60, 8, cfg)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := Contiguous(g.N(), 2)
	bus := NewMemBus()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go RunAgent(ctx, bus, g, p, 0, AgentOptions{}) // agent 1 never starts
	_, _, err = Solve(context.Background(), bus, g, p, Options{Timeout: 500 * time.Millisecond, Try: 100 * time.Millisecond})
	if err == nil {
		t.Fatal("no error with an agent missing")
	}
	t.Log(err)
	if want := "agent 1 did not answer"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
}

// Lost pose messages: every 7th publication is dropped. An agent that
// misses a neighbour's poses answers "stale" and leaves its block alone;
// the coordinator has the neighbour publish again and resends the command,
// and the run still certifies at the central optimum; with authenticated
// messages too, where a gap in the numbers is no reason to reject.
func TestDroppedMessages(t *testing.T) {
	for _, key := range [][]byte{nil, testKey} {
		t.Run(map[bool]string{false: "plain", true: "authenticated"}[key != nil], func(t *testing.T) { droppedMessages(t, key) })
	}
}

func droppedMessages(t *testing.T, key []byte) {
	g, central, p := lattice(t, 200, 10, 13, 4)
	bus := NewMemBus()
	var sent atomic.Int64
	bus.Drop = func(subject string) bool {
		return strings.Contains(subject, ".pose.") && sent.Add(1)%7 == 0
	}
	res, st, err := SolveOn(context.Background(), bus, g, p, Options{Timeout: 20 * time.Second, Key: key}, AgentOptions{Wait: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rel := math.Abs(res.Objective-central.Objective) / central.Objective
	t.Logf("dropped %d of %d publications; republished %d; stale %d; rounds %d; %s; rel %.1e", sent.Load()/7, sent.Load(), st.Republished, st.Stale, st.Rounds, res.Status, rel)
	if st.Republished == 0 {
		t.Error("nothing was published again: the drops were not seen")
	}
	if !res.Certified || rel > 1e-6 {
		t.Errorf("with lost messages: %s, F %.12g, central %.12g", res.Status, res.Objective, central.Objective)
	}
	if st.Rejected != (Rejections{}) {
		t.Errorf("%+v rejected", st.Rejected)
	}
}
