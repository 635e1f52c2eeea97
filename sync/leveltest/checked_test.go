package leveltest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/bcmsync/bcmsync/posegraph"
	"github.com/bcmsync/bcmsync/posegraph/blockmat"
	bsync "github.com/bcmsync/bcmsync/sync"
)

// broken is Solve's optimizer with one breach of the contract after each
// call.
type broken struct {
	bsync.LevelOptimizer
	breach func(x *blockmat.Blocks, lv *bsync.Level, out *bsync.Outcome)
}

func (b broken) Optimize(ctx context.Context, r *bsync.Run, x *blockmat.Blocks, goal bsync.Goal, lv *bsync.Level) (bsync.Outcome, error) {
	out, err := b.LevelOptimizer.Optimize(ctx, r, x, goal, lv)
	b.breach(x, lv, &out)
	return out, err
}

// The suite catches each breach it checks for.
func TestCheckedCatchesBreaches(t *testing.T) {
	g, err := Cases[0].Graph()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, want string
		breach     func(x *blockmat.Blocks, lv *bsync.Level, out *bsync.Outcome)
	}{
		{"F rises", "raised F", func(x *blockmat.Blocks, lv *bsync.Level, _ *bsync.Outcome) {
			x.Block(5)[2] += 1 // a translation
		}},
		{"lv.F wrong", "lv.F", func(_ *blockmat.Blocks, lv *bsync.Level, _ *bsync.Outcome) { lv.F *= 0.9 }},
		{"off the manifold", "off St(d, r)", func(x *blockmat.Blocks, _ *bsync.Level, _ *bsync.Outcome) {
			x.Block(3)[0] *= 1 - 1e-3 // Y's first column no longer unit, F lower or higher
		}},
		{"converged too early", "converged at relative gradient", func(_ *blockmat.Blocks, lv *bsync.Level, out *bsync.Outcome) {
			out.Converged, lv.RelGrad = true, 1
		}},
	} {
		var msgs []string
		m := &checked{errorf: func(format string, args ...any) { msgs = append(msgs, fmt.Sprintf(format, args...)) },
			inner: broken{bsync.NewBCMRTR(), c.breach}}
		if _, err := bsync.SolveWith(context.Background(), g, bsync.Options{Problem: posegraph.Poses}, m); err != nil {
			t.Fatal(err)
		}
		found := false
		for _, s := range msgs {
			found = found || strings.Contains(s, c.want)
		}
		if !found {
			t.Errorf("%s: no %q among %q", c.name, c.want, msgs)
		}
	}
}
