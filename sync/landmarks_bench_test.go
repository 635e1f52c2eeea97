//go:build unix

package sync_test

import (
	"fmt"
	"testing"

	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/posegraph"
)

// landmarkWorld returns the benchmark world of dimension d, about 5,000
// poses (a 2-D Manhattan walk in a 40 x 40 square, or a 17^3 lattice
// snake), with 1,000 landmarks when observers > 0: points around the
// trajectory, each seen by the (at most observers) nearest poses within
// range 3 (2-D) or 2.5 (3-D), observation noise 0.1 per axis. The pose
// graph is the same with or without them.
func landmarkWorld(b *testing.B, d, observers int) *posegraph.Graph {
	cfg := datasets.Config{Kappa: 200, Tau: 100, LoopProb: 0.05, Seed: 1}
	var g *posegraph.Graph
	var truth []posegraph.Pose
	var err error
	rng := 3.0
	if d == 2 {
		g, truth, err = datasets.Manhattan(5000, 40, cfg)
	} else {
		g, truth, err = datasets.Cube(17, 17, 17, cfg)
		rng = 2.5
	}
	if err != nil {
		b.Fatal(err)
	}
	if observers > 0 {
		g, _, err = datasets.AddLandmarks(g, truth, datasets.LandmarkConfig{N: 1000, Range: rng, MaxObservers: observers, Tau: 100, Seed: 2})
		if err != nil {
			b.Fatal(err)
		}
	}
	return g
}

// BenchmarkLandmarks certifies the landmark worlds of landmarkWorld, with
// landmarks seen by at most 3 or 10 poses, each against the same pose
// graph without its landmarks, one sync.Solve per
// iteration from the chordal initialization. It reports s-to-cert, n
// (poses), landmarks, m (edges, observations included), certified,
// heap-MB (peak live heap during the solves), maxRSS-MB and the fill of
// Q's Cholesky factor per vertex (L-nnz/vertex), as BenchmarkScalingGrid3D
// does:
//
//	go test ./sync -run '^$' -bench Landmarks -benchtime 3x
func BenchmarkLandmarks(b *testing.B) {
	for _, d := range []int{2, 3} {
		for _, obs := range []int{0, 3, 10} {
			name := fmt.Sprintf("d=%d/poses", d)
			if obs > 0 {
				name = fmt.Sprintf("d=%d/landmarks-obs=%d", d, obs)
			}
			b.Run(name, func(b *testing.B) {
				g := landmarkWorld(b, d, obs)
				res := benchSolve(b, g)
				b.ReportMetric(float64(g.NumPoses()), "n")
				b.ReportMetric(float64(g.NumLandmarks()), "landmarks")
				b.ReportMetric(float64(factorNNZ(g))/float64(g.N()), "L-nnz/vertex")
				b.Logf("%s: %s at rank %d, F %.12g, timings %+v", name, res.Status, res.Rank, res.Objective, res.Timings)
				logSteps(b, res)
			})
		}
	}
}
