//go:build unix

package sync_test

import (
	"fmt"
	"testing"

	"github.com/bcmsync/bcmsync/datasets"
)

// corridorConfig is the corridor family of the benchmark: rotation noise
// of about 1.3 degrees per step (kappa 1000) and translation noise of 1 cm
// per unit step (tau 10^4), every candidate closure kept.
var corridorConfig = datasets.Config{Kappa: 1000, Tau: 1e4, LoopProb: 1}

// BenchmarkCorridor solves long corridors walked out and back
// (datasets.Corridor: segments of 300 poses, a closure every 10 poses of
// the way back) of 5,000 and 15,000 poses, three seeds each, from the
// chordal initialization to a certificate, and logs the trust region's
// steps: graphs of this shape took the trust region hundreds of steps
// before it re-optimized the translations of its trial points
// (varpro.go).
//
//	go test ./sync -run '^$' -bench Corridor -benchtime 1x -v
func BenchmarkCorridor(b *testing.B) {
	for _, n := range []int{5000, 15000} {
		for seed := uint64(1); seed <= 3; seed++ {
			b.Run(fmt.Sprintf("n=%d/seed=%d", n, seed), func(b *testing.B) {
				cfg := corridorConfig
				cfg.Seed = seed
				g, _, err := datasets.Corridor(n, 300, 10, cfg)
				if err != nil {
					b.Fatal(err)
				}
				res := benchSolve(b, g)
				steps, inner, factors := 0, 0, 0
				for _, h := range res.History {
					if h.Phase == "rtr" {
						steps++
						inner += h.Inner
						factors += h.Factorizations
					}
				}
				b.ReportMetric(float64(steps), "steps")
				b.ReportMetric(float64(inner), "inner")
				b.ReportMetric(float64(factors), "factorizations")
				b.Logf("n=%d m=%d: %s at rank %d, F %.12g, timings %+v", g.N(), g.M(), res.Status, res.Rank, res.Objective, res.Timings)
			})
		}
	}
}
