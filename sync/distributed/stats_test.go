package distributed

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	gosync "sync"
	"sync/atomic"
	"testing"
	"time"

	bsync "github.com/bcmsync/bcmsync/sync"
)

// The run's account: the traffic the Counter bus sees is the traffic the
// stats count (records as sent, no key), each agent's peak RSS as it
// measures it, the boundary as counted from the edges, and the agents'
// options as they ran, in the report's distributed section and
// method_options.
func TestStatsReport(t *testing.T) {
	g, _, p := lattice(t, 200, 10, 13, 4)
	counter := &Counter{Bus: NewMemBus()}
	var rss [4]int64
	for k := range rss {
		rss[k] = int64(1000 * (k + 1))
	}
	// Each agent reports its own measure; in one process they tell
	// themselves apart by part.
	aopts := func(k int) AgentOptions {
		return AgentOptions{PeakRSS: func() int64 { return rss[k] }, Sweeps: 2}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for k := 0; k < p.K; k++ {
		go RunAgent(ctx, counter, g, p, k, aopts(k))
	}
	res, st, err := Solve(ctx, counter, g, p, Options{})
	if err != nil || !res.Certified {
		t.Fatalf("%v", err)
	}
	// stopAll's requests go through the bus after the stats closed.
	stop := int64(2 * p.K)
	if got, want := st.Requests+st.Publications, counter.Messages.Load()-stop; got != want {
		t.Errorf("stats count %d messages, the bus saw %d", got, want)
	}
	if st.Publications == 0 || st.PublicationBytes == 0 || st.TransferBytes == 0 || st.TransferBytes >= st.RequestBytes || st.Gathers == 0 || st.Sets == 0 {
		t.Errorf("traffic %+v", st)
	}
	var poses, edges int
	public := map[int]bool{}
	for _, e := range g.Edges {
		if p.Part[e.I] != p.Part[e.J] {
			edges++
			public[e.I], public[e.J] = true, true
		}
	}
	poses = len(public)
	if st.BoundaryPoses != poses || st.BoundaryEdges != edges || poses == 0 {
		t.Errorf("boundary %d poses, %d edges; want %d, %d", st.BoundaryPoses, st.BoundaryEdges, poses, edges)
	}
	for k, v := range st.AgentRSS {
		if v != rss[k] {
			t.Errorf("agent %d: peak RSS %d, it measured %d", k, v, rss[k])
		}
	}
	rep := bsync.NewReport("lattice", res)
	rep.Distributed = st.Report(12345)
	data, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Distributed map[string]any `json:"distributed"`
		Options     struct {
			MethodOptions struct {
				Agents       int           `json:"agents"`
				AgentOptions []agentRecord `json:"agent_options"`
			} `json:"method_options"`
		} `json:"options"`
	}
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	d := back.Distributed
	t.Logf("%s", data[len(data)-min(len(data), 1500):])
	for key, want := range map[string]float64{"agents": 4, "rounds": float64(st.Rounds), "boundary_poses": float64(poses),
		"coordinator_peak_rss_bytes": 12345, "bytes": float64(st.RequestBytes + st.PublicationBytes),
		"bytes_per_round": st.RoundBytes(), "bytes_per_round_per_boundary_pose": st.RoundBytes() / float64(poses)} {
		if got, ok := d[key].(float64); !ok || got != want {
			t.Errorf("distributed.%s = %v, want %g", key, d[key], want)
		}
	}
	if l, ok := d["agent_peak_rss_bytes"].([]any); !ok || len(l) != 4 || l[3].(float64) != 4000 {
		t.Errorf("agent_peak_rss_bytes %v", d["agent_peak_rss_bytes"])
	}
	mo := back.Options.MethodOptions
	if mo.Agents != 4 || len(mo.AgentOptions) != 4 {
		t.Fatalf("method_options %+v", mo)
	}
	for k, a := range mo.AgentOptions {
		if a != (agentRecord{Sweeps: 2, NewtonSteps: 1, MaxInner: 2, Wait: 2}) {
			t.Errorf("agent %d reported options %+v", k, a)
		}
	}
}

// Every reply carries the agent's peak so far, the last ones of a run (the
// certificate and the rounding by parts) included: an agent whose measure
// rises with each reply is reported at the value of its last reply before
// the run's stop, the one reply the statistics do not see.
func TestEveryReplyCarriesPeak(t *testing.T) {
	g, _, p := lattice(t, 200, 10, 13, 4)
	bus := NewMemBus()
	calls := make([]atomic.Int64, p.K)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg gosync.WaitGroup
	for k := 0; k < p.K; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			RunAgent(ctx, bus, g, p, k, AgentOptions{PeakRSS: func() int64 { return calls[k].Add(1) }})
		}()
	}
	res, st, err := Solve(ctx, bus, g, p, Options{})
	if err != nil || !res.Certified {
		t.Fatalf("%v", err)
	}
	wg.Wait() // the agents have answered their stop
	for k := range calls {
		if got, want := st.AgentRSS[k], calls[k].Load()-1; got != want || want < 2 {
			t.Errorf("agent %d: reported %d, want %d: the measure of its last reply before the stop (one measure per reply)", k, got, want)
		}
	}
}

// jitterBus delays each reply by a random few hundred microseconds, so
// that the agents' replies to a command come back in another order in
// every run.
type jitterBus struct {
	Bus
	mu  gosync.Mutex
	rng *rand.Rand
}

func (b *jitterBus) Request(ctx context.Context, subject string, data []byte) ([]byte, error) {
	rep, err := b.Bus.Request(ctx, subject, data)
	b.mu.Lock()
	d := time.Duration(b.rng.IntN(300)) * time.Microsecond
	b.mu.Unlock()
	time.Sleep(d)
	return rep, err
}

// The coordinator sums the parts' shares of F, of the gradient and of
// tr(Lambda) in the parts' order, so that a run gives the same figures,
// and takes the same decisions on them, whatever order the replies come
// in: two runs whose replies come back in different orders record the
// same rounds to the bit. (Summed as the replies came, the last bits of F
// and of the relative gradient changed from run to run.)
func TestSharesSummedInPartOrder(t *testing.T) {
	g, _, p := lattice(t, 200, 10, 13, 4)
	run := func(seed uint64) *bsync.Result {
		bus := &jitterBus{Bus: NewMemBus(), rng: rand.New(rand.NewPCG(seed, 1))}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		for k := 0; k < p.K; k++ {
			go RunAgent(ctx, bus, g, p, k, AgentOptions{})
		}
		res, _, err := Solve(ctx, bus, g, p, Options{})
		if err != nil || !res.Certified {
			t.Fatalf("%v", err)
		}
		return res
	}
	a, b := run(1), run(2)
	if len(a.History) != len(b.History) || len(a.History) == 0 {
		t.Fatalf("%d and %d records", len(a.History), len(b.History))
	}
	for i, ra := range a.History {
		rb := b.History[i]
		if math.Float64bits(ra.F) != math.Float64bits(rb.F) || math.Float64bits(ra.RelGrad) != math.Float64bits(rb.RelGrad) {
			t.Fatalf("record %d: F %v and %v, relative gradient %v and %v", i, ra.F, rb.F, ra.RelGrad, rb.RelGrad)
		}
	}
	for _, v := range [][2]float64{{a.Objective, b.Objective}, {a.RelaxationObjective, b.RelaxationObjective}, {a.DualBound, b.DualBound}} {
		if math.Float64bits(v[0]) != math.Float64bits(v[1]) {
			t.Errorf("objective, relaxation objective and bound: %v and %v", []float64{a.Objective, a.RelaxationObjective, a.DualBound}, []float64{b.Objective, b.RelaxationObjective, b.DualBound})
			break
		}
	}
}
