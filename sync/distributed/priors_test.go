package distributed_test

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/posegraph"
	bsync "github.com/bcmsync/bcmsync/sync"
	"github.com/bcmsync/bcmsync/sync/distributed"
)

// Agents solve a graph with GPS-like priors to the central solve's
// certified optimum, in the priors' world frame: the world vertex is one
// more vertex an agent owns, and the anchor.
func TestDistributedPriors(t *testing.T) {
	g, truth, err := datasets.Manhattan(150, 8, datasets.Config{Kappa: 100, Tau: 10, LoopProb: 0.3, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	g, _, err = datasets.AddPriors(g, truth, datasets.PriorConfig{N: 10, Tau: 4, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	p, err := distributed.BFS(g, 3)
	if err != nil {
		t.Fatal(err)
	}
	res, _, err := distributed.SolveOn(context.Background(), distributed.NewMemBus(), g, p, distributed.Options{}, distributed.AgentOptions{})
	if err != nil {
		t.Fatal(err)
	}
	central, err := bsync.Solve(context.Background(), g, bsync.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Certified || !central.Certified {
		t.Fatalf("distributed %s, central %s", res.Status, central.Status)
	}
	if math.Abs(res.Objective-central.Objective) > 1e-6*central.Objective {
		t.Fatalf("distributed F = %.12g, central %.12g", res.Objective, central.Objective)
	}
	w := g.World()
	if x := res.Poses[w]; math.Abs(x.R[0]-1)+math.Abs(x.R[2])+math.Abs(x.T[0])+math.Abs(x.T[1]) > 1e-9 {
		t.Fatalf("world vertex at %v, not the identity", x)
	}
	for i := range res.Poses {
		for a := 0; a < 2; a++ {
			if d := math.Abs(res.Poses[i].T[a] - central.Poses[i].T[a]); d > 1e-4 {
				t.Fatalf("pose %d: t differs from the central solve's by %g", i, d)
			}
		}
	}
}

// Rotation synchronization has no use for position priors: the
// distributed solver refuses them with a clear error (sync.Solve leaves
// them out, which the partition could not follow).
func TestDistributedPriorsRotations(t *testing.T) {
	g, truth, err := datasets.Manhattan(60, 6, datasets.Config{Kappa: 100, Tau: 10, LoopProb: 0.3, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	g, _, err = datasets.AddPriors(g, truth, datasets.PriorConfig{N: 5, Tau: 4, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	p, err := distributed.BFS(g, 2)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = distributed.SolveOn(context.Background(), distributed.NewMemBus(), g, p,
		distributed.Options{Sync: bsync.Options{Problem: posegraph.Rotations}}, distributed.AgentOptions{})
	if err == nil || !strings.Contains(err.Error(), "does not take position priors") {
		t.Fatalf("error %v, want the refusal of position priors", err)
	}
}
