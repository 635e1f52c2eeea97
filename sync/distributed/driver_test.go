package distributed

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/posegraph"
	bsync "github.com/bcmsync/bcmsync/sync"
	"github.com/bcmsync/bcmsync/sync/leveltest"
)

// outlierGraph is a 2-D Manhattan world of n poses with count wrong loop
// closures, far heavier than the rest.
func outlierGraph(t *testing.T, n, count int) *posegraph.Graph {
	t.Helper()
	g, _, err := datasets.Manhattan(n, 10, datasets.Config{Kappa: 100, Tau: 10, LoopProb: 0.3, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	bad, _, err := datasets.AddOutliers(g, datasets.OutlierConfig{Count: count, MaxTranslation: 5, Kappa: 5000, Tau: 500, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	return bad
}

// solveBoth solves g centrally and with k agents.
func solveBoth(t *testing.T, g *posegraph.Graph, k int) (central, dist *bsync.Result) {
	t.Helper()
	central, err := bsync.Solve(context.Background(), g, bsync.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := BFS(g, k)
	if err != nil {
		t.Fatal(err)
	}
	dist, _, err = SolveOn(context.Background(), NewMemBus(), g, p, Options{Timeout: 20 * time.Second}, AgentOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("central: %s, rank %d, F %.10g (%s); distributed: %s, rank %d, F %.10g (%s)",
		central.Status, central.Rank, central.Objective, central.Estimate, dist.Status, dist.Rank, dist.Objective, dist.Estimate)
	return central, dist
}

// The distributed run goes through the one staircase, so it has what the
// central one has: the expectation of F, and the inconsistent-data status
// when a proven bound on F* lies far above it (20 wrong closures among
// 200 poses).
func TestDistributedInconsistent(t *testing.T) {
	central, dist := solveBoth(t, outlierGraph(t, 200, 20), 2)
	if central.Status != bsync.Inconsistent {
		t.Fatalf("the instance should be inconsistent centrally, not %s", central.Status)
	}
	if dist.Status != bsync.Inconsistent || !dist.HasBound {
		t.Errorf("distributed: status %s (bound %v), want %s", dist.Status, dist.HasBound, bsync.Inconsistent)
	}
	if dist.ExpectedObjective != central.ExpectedObjective || dist.ExpectedObjective == 0 {
		t.Errorf("expected objective %g, central %g", dist.ExpectedObjective, central.ExpectedObjective)
	}
}

// Above rank d the distributed run gets the rank-d fallback: the rounding
// refined by rounds at rank d, or the rank-d critical point, whichever is
// lower (5 wrong closures among 400 poses: the relaxation is certified at
// rank 4 but its rounding is not tight).
func TestDistributedRankDFallback(t *testing.T) {
	central, dist := solveBoth(t, outlierGraph(t, 400, 5), 2)
	if central.Status != bsync.CertifiedRelaxation {
		t.Fatalf("the instance should not be tight centrally: %s", central.Status)
	}
	if dist.Status != central.Status || dist.Rank <= dist.Graph.D {
		t.Fatalf("distributed: %s at rank %d, want %s above rank d", dist.Status, dist.Rank, central.Status)
	}
	if dist.Refine == nil || dist.Refine.Rounds == 0 {
		t.Errorf("no rounds refined the rounding at rank d: %+v", dist.Refine)
	}
	if dist.Estimate == bsync.EstimateRounded {
		t.Errorf("the estimate is the rounding, though the fallback is lower centrally (%s)", central.Estimate)
	}
	if rel := (dist.Objective - central.Objective) / central.Objective; math.Abs(rel) > 1e-6 {
		t.Errorf("F %.10g, central %.10g", dist.Objective, central.Objective)
	}
}

// The report records what ran: the rounds in levels[].rounds (not BCM's
// sweeps), the partitioned initialization, the method and its options,
// and none of the BCM and trust-region options, which did not run.
func TestDistributedReport(t *testing.T) {
	g, _, err := datasets.Manhattan(150, 10, datasets.Config{Kappa: 100, Tau: 10, LoopProb: 0.3, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := BFS(g, 3)
	res, _, err := SolveOn(context.Background(), NewMemBus(), g, p, Options{Timeout: 20 * time.Second, MaxRounds: 4000}, AgentOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := bsync.NewReport("g.g2o", res).WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var rep map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	opts := rep["options"].(map[string]any)
	if opts["method"] != MethodRBCD || rep["init"] != string(bsync.InitPartitioned) {
		t.Errorf("method %v, init %v", opts["method"], rep["init"])
	}
	for _, k := range []string{"rule", "bcm_tol", "bcm_sweeps", "bcm_decrease_tol", "max_iterations"} {
		if v, ok := opts[k]; ok {
			t.Errorf("options record %s = %v, which a distributed run does not use", k, v)
		}
	}
	mo, _ := opts["method_options"].(map[string]any)
	if mo["agents"] != 3.0 || mo["max_rounds"] != 4000.0 || mo["check_tol"] != 1e-6 {
		t.Errorf("method options %v", mo)
	}
	for _, lv := range res.Levels {
		if lv.Rounds == 0 || lv.BCMSweeps != 0 || lv.RTRIterations != 0 {
			t.Errorf("level at rank %d: %d rounds, %d sweeps, %d trust-region steps", lv.Rank, lv.Rounds, lv.BCMSweeps, lv.RTRIterations)
		}
	}
	if res.ExpectedObjective == 0 {
		t.Error("no expected objective")
	}
}

// The coordinator keeps the level optimizer's contract (the conformance
// suite of sync.LevelOptimizer), with three agents in this process.
func TestCoordinatorConformance(t *testing.T) {
	leveltest.Check(t, func(t *testing.T, g *posegraph.Graph, prob posegraph.Problem) bsync.LevelOptimizer {
		p, err := BFS(g, 3)
		if err != nil {
			t.Fatal(err)
		}
		bus := NewMemBus()
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		for k := 0; k < p.K; k++ {
			go RunAgent(ctx, bus, g, p, k, AgentOptions{Problem: prob})
		}
		c, err := newCoordinator(bus, g, p, Options{Sync: bsync.Options{Problem: prob}, Timeout: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return c
	})
}
