package sync_test

import (
	"context"
	"fmt"

	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/posegraph"
	"github.com/bcmsync/bcmsync/posegraph/blockmat"
	bsync "github.com/bcmsync/bcmsync/sync"
)

// traced is a level optimizer that delegates to Solve's own and says what
// the staircase asked of it.
type traced struct{ bsync.LevelOptimizer }

func (t traced) Optimize(ctx context.Context, r *bsync.Run, x *blockmat.Blocks, goal bsync.Goal, lv *bsync.Level) (bsync.Outcome, error) {
	out, err := t.LevelOptimizer.Optimize(ctx, r, x, goal, lv)
	fmt.Printf("rank %d, phase %d, tolerance %g: converged %v\n", x.R, goal.Phase, goal.Tol, out.Converged)
	return out, err
}

// Run the staircase with a level optimizer of one's own: here Solve's,
// traced. The certificate, the escapes and the rounding are the
// staircase's whatever optimizes the levels.
func ExampleSolveWith() {
	g, _, err := datasets.Manhattan(150, 8, datasets.Config{Kappa: 3, Tau: 1, LoopProb: 0.5, Seed: 2})
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := bsync.SolveWith(context.Background(), g, bsync.Options{Problem: posegraph.Rotations}, traced{bsync.NewBCMRTR()})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Status, "at rank", res.Rank, "by", res.Method)
	// Output:
	// rank 2, phase 0, tolerance 1e-09: converged true
	// rank 3, phase 0, tolerance 1e-09: converged true
	// rank 4, phase 0, tolerance 1e-09: converged true
	// certified at rank 4 by bcm+rtr
}
