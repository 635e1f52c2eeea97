package sync_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/g2o"
	bsync "github.com/bcmsync/bcmsync/sync"
)

// BenchmarkReplay replays a benchmark graph in 50 steps through an
// Incremental, as `bcmsync replay FILE --steps 50` does, and reports the
// per-step latency distribution (median, 90th percentile, max) and the
// whole replay against one batch solve of the full file (replay/batch).
// Every step must certify and the last must reach the batch optimum to
// 1e-6 relative. The target is replay/batch <= 8 (docs/online.md).
func BenchmarkReplay(b *testing.B) {
	dir := datasets.SuiteOrSkip(b)
	for _, name := range []string{"intel", "city10000"} {
		b.Run(name, func(b *testing.B) {
			g, err := g2o.ReadFile(filepath.Join(dir, name+".g2o"), g2o.ReadOptions{})
			if err != nil {
				b.Fatal(err)
			}
			batches, err := bsync.Replay(g, 50)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			for b.Loop() {
				t0 := time.Now()
				batch, err := bsync.Solve(ctx, g, bsync.Options{})
				if err != nil || !batch.Certified {
					b.Fatalf("batch solve: %v %v", err, batch.Status)
				}
				tBatch := time.Since(t0).Seconds()
				inc, err := bsync.NewIncremental(g.D, bsync.Options{})
				if err != nil {
					b.Fatal(err)
				}
				t0 = time.Now()
				var steps []float64
				var last *bsync.Result
				for k := range batches {
					t1 := time.Now()
					if err := batches[k].Add(inc); err != nil {
						b.Fatal(err)
					}
					res, err := inc.Solve(ctx)
					if err != nil {
						b.Fatal(err)
					}
					if !res.Certified {
						b.Fatalf("step %d: %s", k, res.Status)
					}
					steps = append(steps, time.Since(t1).Seconds())
					last = res
				}
				tReplay := time.Since(t0).Seconds()
				if rel := (last.Objective - batch.Objective) / batch.Objective; rel > 1e-6 || rel < -1e-6 {
					b.Fatalf("last step F = %.12g, batch F = %.12g", last.Objective, batch.Objective)
				}
				slices.Sort(steps)
				b.ReportMetric(tReplay/tBatch, "replay/batch")
				b.ReportMetric(tBatch, "batch_s")
				b.ReportMetric(tReplay, "replay_s")
				b.ReportMetric(steps[len(steps)/2], "step_p50_s")
				b.ReportMetric(steps[len(steps)*9/10], "step_p90_s")
				b.ReportMetric(steps[len(steps)-1], "step_max_s")
			}
		})
	}
}
