package distributed

import (
	"context"
	"testing"
	"time"

	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/posegraph"
	bsync "github.com/bcmsync/bcmsync/sync"
)

// On noise-free data every part's chordal estimate is exact in its own
// frame and one shared edge fixes the frame, so the aligned initialization
// must have F = 0 (to rounding) for every number of parts.
func TestAlignedInitNoiseFree(t *testing.T) {
	for _, d := range []int{2, 3} {
		var g *posegraph.Graph
		var err error
		cfg := datasets.Config{Kappa: 50, Tau: 5, LoopProb: 0.3, NoiseFree: true, Seed: 7}
		if d == 2 {
			g, _, err = datasets.Manhattan(300, 15, cfg)
		} else {
			g, _, err = datasets.Cube(5, 5, 4, cfg)
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []int{1, 2, 4, 8} {
			p, err := BFS(g, k)
			if err != nil {
				t.Fatal(err)
			}
			opts := Options{Sync: bsync.Options{MaxRank: d}, MaxRounds: 1, Timeout: 10 * time.Second}
			res, _, err := SolveOn(context.Background(), NewMemBus(), g, p, opts, AgentOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if res.InitialObjective > 1e-8 {
				t.Errorf("d=%d K=%d: aligned initialization has F = %g on noise-free data", d, k, res.InitialObjective)
			}
		}
	}
}
