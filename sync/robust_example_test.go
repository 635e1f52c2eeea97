package sync_test

import (
	"context"
	"fmt"

	"github.com/bcmsync/bcmsync/datasets"
	bsync "github.com/bcmsync/bcmsync/sync"
)

// Reject wrong loop closures: corrupt a synthetic graph with 10% random
// ones, solve in robust mode, and compare the rejected edges with the
// ground truth.
func ExampleSolveRobust() {
	g, _, err := datasets.Geometric(2, 150, 2.5, datasets.Config{Kappa: 200, Tau: 100, LoopProb: 0.3, Seed: 7})
	if err != nil {
		fmt.Println(err)
		return
	}
	bad, isOutlier, err := datasets.AddOutliers(g, datasets.OutlierConfig{Fraction: 0.1, Seed: 11})
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := bsync.SolveRobust(context.Background(), bad, bsync.Options{}, bsync.RobustOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	right := 0
	for _, k := range res.Robust.Rejected {
		if isOutlier[k] {
			right++
		}
	}
	fmt.Printf("status: %s (%s)\n", res.Status, res.Robust.Describe())
	fmt.Printf("rejected %d edges, %d of them outliers\n", len(res.Robust.Rejected), right)
	fmt.Printf("threshold c^2 = %.2f (chi-squared, %d dof)\n", res.Robust.Threshold, res.Robust.DOF)
	// Output:
	// status: certified (robust: of the 430 inlier edges; 43 rejected)
	// rejected 43 edges, 43 of them outliers
	// threshold c^2 = 16.27 (chi-squared, 3 dof)
}
