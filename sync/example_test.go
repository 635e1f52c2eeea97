package sync_test

import (
	"context"
	"fmt"

	"github.com/bcmsync/bcmsync/datasets"
	bsync "github.com/bcmsync/bcmsync/sync"
)

// Solve a pose graph and check its certificate.
func ExampleSolve() {
	g, err := datasets.Demo() // a synthetic 2-D Manhattan world
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := bsync.Solve(context.Background(), g, bsync.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("status:", res.Status)
	fmt.Println("rank:", res.Rank)
	fmt.Printf("F = %.6f\n", res.Objective)
	// F(estimate) - tr(Lambda): how far above the optimum it can be.
	fmt.Println("suboptimality bound below 1e-7 F:", res.SuboptimalityBound <= 1e-7*res.Objective)
	fmt.Println("poses:", len(res.Poses))
	// Output:
	// status: certified
	// rank: 2
	// F = 375.280420
	// suboptimality bound below 1e-7 F: true
	// poses: 250
}
