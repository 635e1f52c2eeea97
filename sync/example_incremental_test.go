package sync_test

import (
	"context"
	"fmt"
	"math"

	"github.com/bcmsync/bcmsync/posegraph"
	bsync "github.com/bcmsync/bcmsync/sync"
)

// A robot drives around a square, a pose at each corner, and recognizes
// its start at the end: the incremental solver certifies the map after
// each batch, the second solve starting from the first's estimate.
func ExampleIncremental() {
	// step returns the edge from id i to id j: one unit forward, then a
	// quarter turn left, with a small error in the turn.
	step := func(i, j int, turn float64) posegraph.Edge {
		c, s := math.Cos(turn), math.Sin(turn)
		return posegraph.Edge{I: i, J: j, R: [9]float64{c, -s, s, c}, T: [3]float64{1, 0}, Kappa: 100, Tau: 100}
	}
	inc, err := bsync.NewIncremental(2, bsync.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	inc.Source = "square"
	ctx := context.Background()

	// The first batch: three poses and their odometry.
	inc.AddPoses(0, 1, 2)
	inc.AddEdges(step(0, 1, math.Pi/2+0.01), step(1, 2, math.Pi/2+0.01))
	res, err := inc.Solve(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Graph.N(), "poses:", res.Status, "from", res.Options.Init)

	// The second: the last corner, its odometry and the loop closure.
	inc.AddPoses(3)
	inc.AddEdges(step(2, 3, math.Pi/2+0.01), step(3, 0, math.Pi/2+0.01))
	res, err = inc.Solve(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Graph.N(), "poses:", res.Status, "from", res.Options.Init)
	fmt.Printf("F = %.4f\n", res.Objective)
	// Output:
	// 3 poses: certified from chordal
	// 4 poses: certified from given
	// F = 0.0800
}
