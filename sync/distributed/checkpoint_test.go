package distributed

import (
	"bytes"
	"context"
	"errors"
	"math"
	"strings"
	stdsync "sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bcmsync/bcmsync/posegraph"
	bsync "github.com/bcmsync/bcmsync/sync"
)

// A checkpoint reads back as written, and a damaged one (bad magic,
// truncated anywhere, a flipped byte, trailing bytes, a non-finite value)
// is refused with an error naming the file.
func TestCheckpointRoundTrip(t *testing.T) {
	ck := &Checkpoint{Fingerprint: "0123456789abcdef", Rank: 3, B: 3, N: 4, Rounds: 77, X: make([]float64, 36)}
	for k := range ck.X {
		ck.X[k] = float64(k)/7 - 2
	}
	var buf bytes.Buffer
	n, err := ck.WriteTo(&buf)
	if err != nil || n != int64(buf.Len()) {
		t.Fatalf("WriteTo: %d bytes, %v (buffer %d)", n, err, buf.Len())
	}
	data := buf.Bytes()
	got, err := ReadCheckpoint(bytes.NewReader(data), "ck.bin")
	if err != nil {
		t.Fatal(err)
	}
	if got.Fingerprint != ck.Fingerprint || got.Rank != 3 || got.B != 3 || got.N != 4 || got.Rounds != 77 {
		t.Errorf("read %+v", got)
	}
	for k := range ck.X {
		if got.X[k] != ck.X[k] {
			t.Fatalf("value %d: %g, wrote %g", k, got.X[k], ck.X[k])
		}
	}
	bad := map[string][]byte{
		"magic":    append([]byte("XXXXXXXX"), data[8:]...),
		"trailing": append(append([]byte(nil), data...), 0),
	}
	for _, cut := range []int{0, 5, 12, 30, len(data) - 30, len(data) - 2} {
		bad["truncated"+string(rune('a'+cut%26))] = data[:cut]
	}
	for _, at := range []int{9, 30, len(data) / 2, len(data) - 1} {
		b := append([]byte(nil), data...)
		b[at] ^= 0x10
		bad["flipped"+string(rune('a'+at%26))] = b
	}
	nan := *ck
	nan.X = append([]float64(nil), ck.X...)
	nan.X[5] = math.NaN()
	var nb bytes.Buffer
	if _, err := nan.WriteTo(&nb); err != nil {
		t.Fatal(err)
	}
	bad["nan"] = nb.Bytes()
	for name, b := range bad {
		if _, err := ReadCheckpoint(bytes.NewReader(b), "ck.bin"); err == nil || !strings.HasPrefix(err.Error(), "ck.bin: ") {
			t.Errorf("%s: error %v", name, err)
		}
	}
	short := *ck
	short.X = short.X[:3]
	if _, err := short.WriteTo(&bytes.Buffer{}); err == nil {
		t.Error("a checkpoint whose values do not fit its shape was written")
	}
}

// An agent killed mid-run and never restarted: the coordinator gives up
// after its timeout, and instead of no result returns the estimate so far,
// with status Aborted and the error that stopped it: the better of the
// level's start and the last checkpoint's point, rounded. Without
// checkpoints that is the level's start (the aligned chordal estimate).
func TestAgentKilledAborts(t *testing.T) {
	g, central, p := lattice(t, 300, 15, 11, 4)
	for _, every := range []int{0, 20} {
		bus := NewMemBus()
		var wg stdsync.WaitGroup
		cancels := make([]context.CancelFunc, p.K)
		for k := 0; k < p.K; k++ {
			actx, cancel := context.WithCancel(context.Background())
			cancels[k] = cancel
			wg.Add(1)
			go func() {
				defer wg.Done()
				RunAgent(actx, bus, g, p, k, AgentOptions{})
			}()
		}
		var once stdsync.Once
		opts := Options{Timeout: time.Second, Try: 200 * time.Millisecond}
		var checkpoints []*Checkpoint
		if every > 0 {
			opts.CheckpointRounds = every
			opts.Checkpoint = func(ck *Checkpoint) error { checkpoints = append(checkpoints, ck); return nil }
		}
		opts.Sync.Progress = func(r bsync.Record) {
			if r.Iter == 45 {
				once.Do(cancels[2]) // agent 2 dies for good
			}
		}
		res, st, err := Solve(context.Background(), bus, g, p, opts)
		for _, c := range cancels {
			c()
		}
		wg.Wait()
		if err != nil {
			t.Fatalf("checkpoints every %d: an error instead of the estimate so far: %v", every, err)
		}
		t.Logf("every %d: %s (%s) F %.6g, initial %.6g, central %.6g, rounds %d, checkpoints %d",
			every, res.Status, res.Error, res.Objective, res.InitialObjective, central.Objective, st.Rounds, len(checkpoints))
		if res.Status != bsync.Aborted || res.Certified || !strings.Contains(res.Error, "agent 2 did not answer") {
			t.Errorf("status %q, error %q; want %q naming agent 2", res.Status, res.Error, bsync.Aborted)
		}
		if len(res.Poses) != g.N() || math.IsNaN(res.Objective) || res.Objective < central.Objective*(1-1e-9) {
			t.Fatalf("estimate of %d poses, F %g (central %g)", len(res.Poses), res.Objective, central.Objective)
		}
		if res.Objective > res.InitialObjective*(1+1e-9) {
			t.Errorf("the estimate so far, F %g, is worse than the initial %g", res.Objective, res.InitialObjective)
		}
		if every > 0 {
			if len(checkpoints) < 2 {
				t.Fatalf("%d checkpoints", len(checkpoints))
			}
			// The estimate is the last checkpoint's point, rounded: below
			// where the level started.
			last := checkpoints[len(checkpoints)-1]
			if last.Rounds < 40 || res.Objective >= res.InitialObjective {
				t.Errorf("last checkpoint after %d rounds; F %g, initial %g", last.Rounds, res.Objective, res.InitialObjective)
			}
		}
	}
}

// A coordinator that dies (its context ends) after a few checkpoints, and
// a new one resumed from the last: the resumed run certifies at the
// central optimum, counting the rounds from the checkpoint's, in fewer
// rounds of its own than a run from the start. A checkpoint of another
// partition is refused.
func TestResumeFromCheckpoint(t *testing.T) {
	g, central, p := lattice(t, 300, 15, 11, 4)
	full, fst, err := SolveOn(context.Background(), NewMemBus(), g, p, Options{}, AgentOptions{})
	if err != nil || !full.Certified {
		t.Fatalf("full run: %v", err)
	}
	var last *Checkpoint
	ctx, cancel := context.WithCancel(context.Background())
	opts := Options{CheckpointRounds: 10}
	opts.Checkpoint = func(ck *Checkpoint) error {
		last = ck
		if ck.Rounds >= 30 {
			cancel() // the coordinator dies
		}
		return nil
	}
	res, _, err := SolveOn(ctx, NewMemBus(), g, p, opts, AgentOptions{})
	cancel()
	if err == nil && res.Status != bsync.Cancelled {
		t.Fatalf("the first run was not cut short: %v %v", res.Status, err)
	}
	if last == nil || last.Rounds < 30 {
		t.Fatalf("last checkpoint %+v", last)
	}
	// Through the file format, as --checkpoint and --resume do.
	var buf bytes.Buffer
	if _, err := last.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	ck, err := ReadCheckpoint(&buf, "ck")
	if err != nil {
		t.Fatal(err)
	}
	res, st, err := SolveOn(context.Background(), NewMemBus(), g, p, Options{Resume: ck}, AgentOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rel := math.Abs(res.Objective-central.Objective) / central.Objective
	t.Logf("resumed at rank %d after %d rounds: %s, %d rounds in all (a full run: %d), rel %.1e", st.ResumedRank, st.ResumedRounds, res.Status, st.Rounds, fst.Rounds, rel)
	if !res.Certified || rel > 1e-6 {
		t.Errorf("resumed: %s, F %.12g, central %.12g", res.Status, res.Objective, central.Objective)
	}
	if st.ResumedRounds != ck.Rounds || st.ResumedRank != ck.Rank || res.Options.Init != InitCheckpoint {
		t.Errorf("resumed rounds %d, rank %d, init %q; checkpoint %d, %d", st.ResumedRounds, st.ResumedRank, res.Options.Init, ck.Rounds, ck.Rank)
	}
	if st.Rounds-st.ResumedRounds >= fst.Rounds {
		t.Errorf("the resumed run took %d rounds of its own, a run from the start %d", st.Rounds-st.ResumedRounds, fst.Rounds)
	}
	other, err := Contiguous(g.N(), 4)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = SolveOn(context.Background(), NewMemBus(), g, other, Options{Resume: ck}, AgentOptions{})
	if err == nil || !strings.Contains(err.Error(), "another problem or partition") {
		t.Errorf("a checkpoint of another partition: %v", err)
	}
	if errors.Is(err, bsync.ErrAborted) {
		t.Error("a refused checkpoint aborted a run instead of refusing it")
	}
	// The same graph and partition with one measurement edited is another
	// problem too.
	edited := *g
	edited.Edges = append([]posegraph.Edge(nil), g.Edges...)
	edited.Edges[0].T[0] += 5
	_, _, err = SolveOn(context.Background(), NewMemBus(), &edited, p, Options{Resume: ck}, AgentOptions{})
	if err == nil || !strings.Contains(err.Error(), "another problem or partition") {
		t.Errorf("a checkpoint of a graph whose measurement was edited: %v", err)
	}
}

// cutBus is a coordinator's connection that dies when cut is set: its
// requests fail at once, as a killed process's would never arrive.
type cutBus struct {
	Bus
	cut atomic.Bool
}

func (b *cutBus) Request(ctx context.Context, subject string, data []byte) ([]byte, error) {
	if b.cut.Load() {
		return nil, errors.New("the coordinator is dead")
	}
	return b.Bus.Request(ctx, subject, data)
}

// A coordinator killed mid-run leaves its agents serving the old run; a
// new coordinator resumed from its last checkpoint brings the same agents
// into its own run and certifies at the central optimum, with
// authenticated messages too (the agents meet a new run id from the same
// key).
func TestResumeWithTheSameAgents(t *testing.T) {
	for _, key := range [][]byte{nil, testKey} {
		t.Run(map[bool]string{false: "plain", true: "authenticated"}[key != nil], func(t *testing.T) {
			g, central, p := lattice(t, 300, 15, 11, 4)
			bus := NewMemBus()
			actx, stopAgents := context.WithCancel(context.Background())
			defer stopAgents()
			var wg stdsync.WaitGroup
			for k := 0; k < p.K; k++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := RunAgent(actx, bus, g, p, k, AgentOptions{Key: key}); err != nil && !errors.Is(err, context.Canceled) {
						t.Errorf("agent %d: %v", k, err)
					}
				}()
			}
			first := &cutBus{Bus: bus}
			var last *Checkpoint
			ctx, kill := context.WithCancel(context.Background())
			opts := Options{CheckpointRounds: 25, Key: key, Timeout: 5 * time.Second, Try: time.Second}
			opts.Checkpoint = func(ck *Checkpoint) error {
				last = ck
				if ck.Rounds >= 50 {
					first.cut.Store(true) // dies: no stop reaches the agents
					kill()
				}
				return nil
			}
			Solve(ctx, first, g, p, opts)
			kill()
			if last == nil {
				t.Fatal("no checkpoint")
			}
			opts.Checkpoint, opts.Resume = nil, last
			res, st, err := Solve(context.Background(), bus, g, p, opts)
			if err != nil {
				t.Fatal(err)
			}
			rel := math.Abs(res.Objective-central.Objective) / central.Objective
			t.Logf("resumed after %d rounds: %s, %d rounds in all, rel %.1e, rejected %+v", st.ResumedRounds, res.Status, st.Rounds, rel, st.Rejected)
			if !res.Certified || rel > 1e-6 || st.Rejected.Forged != 0 {
				t.Errorf("resumed with the same agents: %s, F %.12g, central %.12g, rejected %+v", res.Status, res.Objective, central.Objective, st.Rejected)
			}
			wg.Wait() // the new coordinator stopped them
		})
	}
}
