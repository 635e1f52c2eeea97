package sync

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/g2o"
)

// BenchmarkRobustIntel solves intel.g2o with 125 wrong loop closures (about
// 5% of its edges) added by datasets.AddOutliers, in robust mode, and
// reports the outer iterations (weighted solves after the first, the final
// one with the caller's options included), the
// precision (rejected edges that are outliers) and the recall (outliers
// rejected).
func BenchmarkRobustIntel(b *testing.B) {
	dir := datasets.SuiteOrSkip(b)
	g, err := g2o.ReadFile(filepath.Join(dir, "intel.g2o"), g2o.ReadOptions{})
	if err != nil {
		b.Fatal(err)
	}
	bad, mask, err := datasets.AddOutliers(g, datasets.OutlierConfig{Count: 125, MaxTranslation: 5, Kappa: 5000, Tau: 500, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	var res *Result
	b.ResetTimer()
	for range b.N {
		res, err = Solve(context.Background(), bad, Options{Robust: RobustOptions{Loss: RobustGNCTLS}})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	rr := res.Robust
	if !rr.Converged || !res.Certified {
		b.Errorf("status %q", res.Status)
	}
	tp, outliers := 0, 0
	for _, m := range mask {
		if m {
			outliers++
		}
	}
	for _, k := range rr.Rejected {
		if mask[k] {
			tp++
		}
	}
	precision := 1.0
	if len(rr.Rejected) > 0 {
		precision = float64(tp) / float64(len(rr.Rejected))
	}
	b.ReportMetric(float64(len(rr.Iterations)-1), "outer-iters")
	b.ReportMetric(precision, "precision")
	b.ReportMetric(float64(tp)/float64(outliers), "recall")
	b.ReportMetric(float64(len(rr.Rejected)), "rejected")
}
