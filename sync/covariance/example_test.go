package covariance_test

import (
	"context"
	"fmt"
	"math"

	"github.com/bcmsync/bcmsync/datasets"
	bsync "github.com/bcmsync/bcmsync/sync"
	"github.com/bcmsync/bcmsync/sync/covariance"
)

// The covariances of a certified optimum: solve, then Compute on the
// solved graph and its estimate. Standard deviations are the square roots
// of the diagonal; the last pose of a walk is the least certain.
func ExampleCompute() {
	// Noise of 0.02 rad and 0.05 m per axis: kappa = 1/(2 sigma^2), tau = 1/sigma^2.
	g, _, err := datasets.Manhattan(100, 6, datasets.Config{Kappa: 1250, Tau: 400, LoopProb: 1, Seed: 1})
	if err != nil {
		panic(err)
	}
	res, err := bsync.Solve(context.Background(), g, bsync.Options{})
	if err != nil {
		panic(err)
	}
	last := res.Graph.N() - 1
	cov, err := covariance.Compute(res.Graph, res.Poses, covariance.Options{Pairs: [][2]int{{last - 1, last}}})
	if err != nil {
		panic(err)
	}
	fmt.Println("certified:", res.Certified, "gauge: pose", res.Graph.IDs[cov.Gauge])
	for _, i := range []int{1, last} {
		c := cov.Marginal(i)
		fmt.Printf("pose %d: sd x %.3f m, y %.3f m, theta %.4f rad\n", res.Graph.IDs[i], math.Sqrt(c[0]), math.Sqrt(c[4]), math.Sqrt(c[8]))
	}
	j := cov.Joints[0].Cov // 6 x 6: [[C_aa, C_ab], [C_ba, C_bb]]
	fmt.Printf("correlation of the last two headings: %.3f\n", j[2*6+5]/math.Sqrt(j[2*6+2]*j[5*6+5]))
	// Output:
	// certified: true gauge: pose 0
	// pose 1: sd x 0.050 m, y 0.050 m, theta 0.0189 rad
	// pose 99: sd x 0.087 m, y 0.089 m, theta 0.0301 rad
	// correlation of the last two headings: 0.878
}
