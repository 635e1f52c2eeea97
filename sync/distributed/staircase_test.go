package distributed

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/posegraph"
	bsync "github.com/bcmsync/bcmsync/sync"
)

// A noisy rotation graph (kappa 3) on which the central solver climbs the
// staircase: the distributed solve reaches the same certified optimum, and
// where it climbs, every escape lowers F and ranks go up one at a time.
func TestDistributedStaircase(t *testing.T) {
	g := climbingGraph(t)
	kind := posegraph.Rotations
	central, err := bsync.Solve(context.Background(), g, bsync.Options{Problem: kind})
	if err != nil {
		t.Fatal(err)
	}
	if len(central.Levels) < 2 || !central.Certified {
		t.Fatalf("the instance should make the central solver climb and certify: %d levels, %s", len(central.Levels), central.Status)
	}
	climbed := false
	for _, k := range []int{2, 4} {
		p, _ := BFS(g, k)
		res, _, err := SolveOn(context.Background(), NewMemBus(), g, p, Options{Sync: bsync.Options{Problem: kind}, Timeout: 20 * time.Second}, AgentOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rel := math.Abs(res.Objective-central.Objective) / central.Objective
		t.Logf("K=%d: %d levels, rank %d, %s, F %.12g (central %.12g)", k, len(res.Levels), res.Rank, res.Status, res.Objective, central.Objective)
		if !res.Certified || rel > 1e-6 {
			t.Errorf("K=%d: %s, F %.12g, central %.12g", k, res.Status, res.Objective, central.Objective)
		}
		for l := 1; l < len(res.Levels); l++ {
			climbed = true
			prev, cur := res.Levels[l-1], res.Levels[l]
			if cur.Rank != prev.Rank+1 || prev.Certified || prev.EscapeDecrease <= 0 {
				t.Errorf("K=%d: level %d (rank %d, certified %v, escape %g) -> rank %d", k, l-1, prev.Rank, prev.Certified, prev.EscapeDecrease, cur.Rank)
			}
		}
	}
	if !climbed {
		t.Error("no distributed run climbed the staircase: the escape path went untested")
	}
}

// climbingGraph is the noisy rotation graph of TestDistributedStaircase,
// on which the central staircase climbs from rank 2 to rank 4.
func climbingGraph(t *testing.T) *posegraph.Graph {
	g, _, err := datasets.Manhattan(150, 8, datasets.Config{Kappa: 3, Tau: 1, LoopProb: 0.5, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	return g
}
