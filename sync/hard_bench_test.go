package sync

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/g2o"
	"github.com/bcmsync/bcmsync/posegraph"
)

// Hard input (issue 18): a relaxation that is not tight, and wrong loop
// closures. Run with
//
//	go test ./sync -run '^$' -bench 'NotTight|Outliers' -benchtime 3x
//
// Each reports the returned F and the staircase's last rank.

// m3500b is an M3500b-like graph: Manhattan(3500, 35) with 0.22 rad of
// rotation noise (kappa 10), where the relaxation is not tight at rank 2.
func m3500b(b *testing.B) *posegraph.Graph {
	g, _, err := datasets.Manhattan(3500, 35, datasets.Config{Kappa: 10, Tau: 100, LoopProb: 0.5, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	return g
}

func BenchmarkNotTightM3500(b *testing.B) {
	benchSolve(b, m3500b(b), Options{})
}

// BenchmarkOutliersIntel solves intel with 125 wrong loop closures (5%),
// without a robust cost: it should stop as Inconsistent.
func BenchmarkOutliersIntel(b *testing.B) {
	dir := datasets.SuiteOrSkip(b)
	g, err := g2o.ReadFile(filepath.Join(dir, "intel.g2o"), g2o.ReadOptions{})
	if err != nil {
		b.Fatal(err)
	}
	g, _, err = datasets.AddOutliers(g, datasets.OutlierConfig{Count: 125, MaxTranslation: 5, Kappa: 5000, Tau: 500, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	benchSolve(b, g, Options{})
}

func benchSolve(b *testing.B, g *posegraph.Graph, opts Options) {
	b.ReportAllocs()
	var res *Result
	for b.Loop() {
		var err error
		res, err = Solve(context.Background(), g, opts)
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(res.Objective, "F")
	b.ReportMetric(float64(res.Rank), "rank")
	b.Logf("%s: F %.10g, estimate %s, bound %.3g, rank %d", res.Status, res.Objective, res.Estimate, res.SuboptimalityBound, res.Rank)
}
