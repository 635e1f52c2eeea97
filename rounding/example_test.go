package rounding_test

import (
	"fmt"
	"math"

	"github.com/bcmsync/bcmsync/posegraph"
	"github.com/bcmsync/bcmsync/rounding"
)

// square is a noise-free 2-D pose graph: four poses walking around a unit
// square, turning left by 90 degrees at each corner, with the loop closed.
func square() *posegraph.Graph {
	g := &posegraph.Graph{D: 2, IDs: []int{0, 1, 2, 3}, Source: "square"}
	left := [9]float64{0, -1, 1, 0} // rotation by +90 degrees, row-major
	for i := 0; i < 4; i++ {
		g.Edges = append(g.Edges, posegraph.Edge{
			I: i, J: (i + 1) % 4,
			R: left, T: [3]float64{1, 0},
			Kappa: 1, Tau: 1,
		})
	}
	return g
}

func printPoses(poses []posegraph.Pose) {
	clean := func(v float64) float64 {
		v = math.Round(v*1000) / 1000
		if v == 0 {
			return 0 // no "-0"
		}
		return v
	}
	for i, p := range poses {
		deg := math.Atan2(p.R[2], p.R[0]) * 180 / math.Pi
		fmt.Printf("pose %d: t = (%g, %g), angle %g deg\n", i, clean(p.T[0]), clean(p.T[1]), clean(deg))
	}
}

// The chordal initialization of a noise-free graph is its exact solution,
// here in the gauge of the first pose (identity, as the graph has no
// VERTEX estimates).
func ExampleChordal() {
	g := square()
	poses, err := rounding.Chordal(g)
	if err != nil {
		fmt.Println(err)
		return
	}
	printPoses(poses)
	fmt.Printf("F = %.6f\n", g.Cost(poses, posegraph.Poses))
	// Output:
	// pose 0: t = (0, 0), angle 0 deg
	// pose 1: t = (1, 0), angle 90 deg
	// pose 2: t = (1, 1), angle 180 deg
	// pose 3: t = (0, 1), angle -90 deg
	// F = 0.000000
}

// A solver returns a lifted solution in an arbitrary rotated frame of R^r;
// rounding and translation recovery bring back poses.
func ExampleRound() {
	g := square()
	poses, _ := rounding.Chordal(g)
	// Lift to rank 4 and rotate the lifted frame, as a solver might.
	x := g.Lift(poses, posegraph.Poses, 4)
	for i := 0; i < x.N; i++ {
		blk := x.Block(i) // 4 x 3, row-major
		for c := 0; c < x.B; c++ {
			a, b := blk[0*x.B+c], blk[3*x.B+c]
			blk[0*x.B+c], blk[3*x.B+c] = 0.6*a-0.8*b, 0.8*a+0.6*b
		}
	}
	rounded := rounding.Round(x, g.D)
	if err := rounding.RecoverTranslations(g, rounded); err != nil {
		fmt.Println(err)
		return
	}
	rounding.ToGauge(g, rounded)
	printPoses(rounded)
	// Output:
	// pose 0: t = (0, 0), angle 0 deg
	// pose 1: t = (1, 0), angle 90 deg
	// pose 2: t = (1, 1), angle 180 deg
	// pose 3: t = (0, 1), angle -90 deg
}

// Rounding by parts: two parts, each seeing only its own blocks and edges,
// round the lifted solution as Round and RecoverTranslations do on the
// whole (a distributed run's agents do the same, each in its process).
func ExampleRoundByParts() {
	g := square()
	poses, _ := rounding.Chordal(g)
	x := g.Lift(poses, posegraph.Poses, 3)
	part := []int{0, 0, 1, 1} // poses 0 and 1 in part 0, 2 and 3 in part 1
	rounded, err := rounding.RoundByParts(g, x, part)
	if err != nil {
		fmt.Println(err)
		return
	}
	rounding.ToGauge(g, rounded)
	printPoses(rounded)
	// Output:
	// pose 0: t = (0, 0), angle 0 deg
	// pose 1: t = (1, 0), angle 90 deg
	// pose 2: t = (1, 1), angle 180 deg
	// pose 3: t = (0, 1), angle -90 deg
}
