package plots_test

import (
	"fmt"
	"log"
	"math"
	"os"
	"path/filepath"

	"github.com/bcmsync/bcmsync/plots"
	"github.com/bcmsync/bcmsync/posegraph"
)

// A square loop driven around twice: the dead-reckoning guess drifts, the
// estimate closes the loop.
func ExampleTrajectories() {
	const n = 80
	g := &posegraph.Graph{D: 2, Source: "square.g2o"}
	guess := make([]posegraph.Pose, n)
	est := make([]posegraph.Pose, n)
	for i := 0; i < n; i++ {
		g.IDs = append(g.IDs, i)
		s := float64(i%40) / 10 // position along the 4 x 4 square's edge
		side := int(s)
		u := s - float64(side)
		corners := [5][2]float64{{0, 0}, {4, 0}, {4, 4}, {0, 4}, {0, 0}}
		x := corners[side][0] + u*(corners[side+1][0]-corners[side][0])
		y := corners[side][1] + u*(corners[side+1][1]-corners[side][1])
		est[i] = posegraph.Identity(2)
		est[i].T = [3]float64{x, y}
		guess[i] = est[i]
		guess[i].T[0] += 0.02 * float64(i) * math.Sin(float64(i)/15)
		guess[i].T[1] += 0.015 * float64(i)
		if i > 0 {
			g.Edges = append(g.Edges, posegraph.Edge{I: i - 1, J: i, Kappa: 1, Tau: 1})
		}
		if i >= 40 {
			g.Edges = append(g.Edges, posegraph.Edge{I: i - 40, J: i, Kappa: 1, Tau: 1})
		}
	}
	dir, err := os.MkdirTemp("", "plots")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "square.png")
	err = plots.Trajectories(path, g, []plots.Trajectory{
		{Label: "initial guess", Poses: guess},
		{Label: "optimized", Poses: est},
	}, plots.TrajectoryOptions{LoopClosures: true})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("wrote", filepath.Base(path))
	// Output: wrote square.png
}

// Two staircase levels: rank 3 stops at a saddle (the check fails), rank 4
// converges and is certified.
func ExampleConvergence() {
	no, yes := false, true
	levels := []plots.Level{
		{Rank: 3, Iter: []float64{0, 1, 2, 3}, Time: []float64{0, 0.01, 0.02, 0.03},
			F: []float64{110, 104, 103, 102.9}, GradNorm: []float64{30, 8, 2, 0.5}, Certified: &no},
		{Rank: 4, Iter: []float64{4, 5, 6, 7}, Time: []float64{0.05, 0.06, 0.07, 0.08},
			F: []float64{101, 100.01, 100.0001, 100}, GradNorm: []float64{9, 0.9, 0.01, 1e-5}, Certified: &yes},
	}
	dir, err := os.MkdirTemp("", "plots")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	// F_final is the certified optimum: the last record sits on the floor.
	err = plots.Convergence(filepath.Join(dir, "convergence.svg"), levels, 100, plots.ConvergenceOptions{})
	fmt.Println(err)
	// Output: <nil>
}

func ExampleStageTimes() {
	dir, err := os.MkdirTemp("", "plots")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	err = plots.StageTimes(filepath.Join(dir, "stages.pdf"),
		[]string{"read", "initialize", "optimize", "certify", "round"},
		[]float64{0.12, 0.05, 1.9, 0.4, 0.01})
	fmt.Println(err)
	// Output: <nil>
}
