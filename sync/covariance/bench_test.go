package covariance_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/g2o"
	"github.com/bcmsync/bcmsync/posegraph"
	bsync "github.com/bcmsync/bcmsync/sync"
	"github.com/bcmsync/bcmsync/sync/covariance"
)

// BenchmarkCovariances times the covariances of benchmark graphs at their
// certified optima against the solve that found them, in wall time and in
// the process's CPU time (cpu-ms/op, user and system, all threads: less
// sensitive than wall time to other jobs on a shared machine);
// docs/covariances.md has the figures:
//
//	go test ./covariance -run '^$' -bench Covariances -benchtime 5x
func BenchmarkCovariances(b *testing.B) {
	dir := datasets.SuiteOrSkip(b)
	for _, name := range []string{"city10000.g2o", "sphere2500.g2o", "torus3D.g2o"} {
		g, err := g2o.ReadFile(filepath.Join(dir, name), g2o.ReadOptions{})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			var res *bsync.Result
			solve := func() {
				if res, err = bsync.Solve(context.Background(), g, bsync.Options{}); err != nil {
					b.Fatal(err)
				}
			}
			b.Run("solve", func(b *testing.B) {
				c0 := cpuTime()
				for b.Loop() {
					solve()
				}
				b.ReportMetric((cpuTime()-c0).Seconds()*1e3/float64(b.N), "cpu-ms/op")
			})
			b.Run("covariances", func(b *testing.B) {
				if res == nil {
					solve()
				}
				if !res.Certified {
					b.Fatalf("%s: %s", name, res.Status)
				}
				benchCompute(b, res.Graph, res.Poses)
			})
		})
	}
}

func benchCompute(b *testing.B, g *posegraph.Graph, x []posegraph.Pose) {
	var c *covariance.Covariances
	var err error
	c0 := cpuTime()
	for b.Loop() {
		if c, err = covariance.Compute(g, x, covariance.Options{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric((cpuTime()-c0).Seconds()*1e3/float64(b.N), "cpu-ms/op")
	b.ReportMetric(float64(c.FactorNNZ), "factor-nnz")
}
