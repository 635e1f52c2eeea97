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
	// A rigorous bound on F(estimate) - F*.
	fmt.Println("proven within 1e-6 of the optimum:", res.SuboptimalityBound <= 1e-6*res.Objective)
	fmt.Println("poses:", len(res.Poses))
	// Output:
	// status: certified
	// rank: 2
	// F = 375.280420
	// proven within 1e-6 of the optimum: true
	// poses: 250
}
