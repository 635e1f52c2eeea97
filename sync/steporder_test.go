package sync

import (
	"context"
	"testing"

	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/posegraph"
)

// TestIncrementalKeepsOrder replays growing graphs (poses only, and with
// landmarks, whose numbering shifts as poses arrive before them) and
// checks that the steps after the first use the kept order
// (sparse.ReorderBlocks) and reorder only part of the graph, with a fresh
// order only at the growth checks, and that every step certifies. That
// each step's optimum is a cold solve's is TestIncrementalStepsMatchColdSolves'.
func TestIncrementalKeepsOrder(t *testing.T) {
	cfg := datasets.Config{Kappa: 100, Tau: 25, LoopProb: 0.3, Seed: 9}
	g, truth, err := datasets.Manhattan(400, 8, cfg)
	if err != nil {
		t.Fatal(err)
	}
	gl, _, err := datasets.AddLandmarks(g, truth, datasets.LandmarkConfig{N: 30, Range: 2, MaxObservers: 4, Tau: 50, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		g    *posegraph.Graph
	}{{"poses", g}, {"landmarks", gl}} {
		t.Run(tc.name, func(t *testing.T) {
			batches, err := Replay(tc.g, 20)
			if err != nil {
				t.Fatal(err)
			}
			inc, err := NewIncremental(tc.g.D, Options{})
			if err != nil {
				t.Fatal(err)
			}
			kept, reordered, blocks := 0, 0, 0
			for k := range batches {
				if err := batches[k].Add(inc); err != nil {
					t.Fatal(err)
				}
				res, err := inc.Solve(context.Background())
				if err != nil {
					t.Fatalf("step %d: %v", k, err)
				}
				if !res.Certified {
					t.Fatalf("step %d: %s", k, res.Status)
				}
				if res.Options.order != nil || res.Options.warmStep {
					t.Fatalf("step %d: the result's Options carry the Incremental's state (a solve with them would share its order)", k)
				}
				o := &inc.order
				if k == 0 && !o.fresh {
					t.Fatalf("step 0: no fresh order")
				}
				if k > 0 && !o.fresh {
					kept++
					reordered += o.reordered
					blocks += res.Graph.N()
				}
			}
			if kept < len(batches)/2 {
				t.Fatalf("%d of %d steps kept the order", kept, len(batches))
			}
			if reordered >= blocks {
				t.Fatalf("the kept steps reordered %d of %d blocks", reordered, blocks)
			}
			t.Logf("%d of %d steps kept the order, reordering %d of their %d blocks", kept, len(batches), reordered, blocks)
		})
	}
}
