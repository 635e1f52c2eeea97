package sync_test

import (
	"context"
	"errors"
	"testing"

	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/posegraph"
	"github.com/bcmsync/bcmsync/posegraph/blockmat"
	bsync "github.com/bcmsync/bcmsync/sync"
)

// failing is Solve's level optimizer until the staircase reaches rank
// fail, where it fails with err, x untouched.
type failing struct {
	bsync.LevelOptimizer
	fail int
	err  error
}

func (f failing) Optimize(ctx context.Context, r *bsync.Run, x *blockmat.Blocks, goal bsync.Goal, lv *bsync.Level) (bsync.Outcome, error) {
	if x.R == f.fail {
		return bsync.Outcome{Started: true}, f.err
	}
	return f.LevelOptimizer.Optimize(ctx, r, x, goal, lv)
}

// An optimizer's error marked by Abort ends the solve with status Aborted,
// the error's message in Result.Error, and the estimate so far: here the
// escaped point at rank 3 rounded, or the rank-2 critical point the
// staircase held, whichever is lower. Any other error is no result.
func TestAbortKeepsEstimate(t *testing.T) {
	g, _, err := datasets.Manhattan(150, 8, datasets.Config{Kappa: 3, Tau: 1, LoopProb: 0.5, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	opts := bsync.Options{Problem: posegraph.Rotations}
	central, err := bsync.Solve(context.Background(), g, opts)
	if err != nil {
		t.Fatal(err)
	}
	lost := errors.New("agent 2 did not answer")
	res, err := bsync.SolveWith(context.Background(), g, opts, failing{bsync.NewBCMRTR(), 3, bsync.Abort(lost)})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s (%s): F %.6g from %s, central %.6g, levels %d", res.Status, res.Error, res.Objective, res.Estimate, central.Objective, len(res.Levels))
	if res.Status != bsync.Aborted || res.Certified || res.Error != lost.Error() || res.Rank != 3 {
		t.Errorf("status %q, error %q, rank %d", res.Status, res.Error, res.Rank)
	}
	if len(res.Poses) != g.N() || res.Objective < central.Objective*(1-1e-12) || res.Objective > res.InitialObjective {
		t.Errorf("estimate of %d poses, F %g (central %g, initial %g)", len(res.Poses), res.Objective, central.Objective, res.InitialObjective)
	}
	if res.Refine != nil {
		t.Error("an aborted solve refined its rounding with the optimizer that failed")
	}
	rep := bsync.NewReport("g", res)
	if rep.Error != lost.Error() || rep.Status != string(bsync.Aborted) {
		t.Errorf("report: status %q, error %q", rep.Status, rep.Error)
	}
	if !errors.Is(bsync.Abort(lost), bsync.ErrAborted) || !errors.Is(bsync.Abort(lost), lost) {
		t.Error("Abort's error is not both ErrAborted and its cause")
	}

	other := errors.New("broken")
	if res, err := bsync.SolveWith(context.Background(), g, opts, failing{bsync.NewBCMRTR(), 3, other}); !errors.Is(err, other) || res != nil {
		t.Errorf("an unmarked error: %v, result %v", err, res != nil)
	}
}
