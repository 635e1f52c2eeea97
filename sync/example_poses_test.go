package sync_test

import (
	"context"
	"fmt"
	"io"
	"log"

	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/g2o"
	bsync "github.com/bcmsync/bcmsync/sync"
)

// Solve a graph and read the certified poses under the file's vertex ids.
// With LargestComponent a disconnected graph is solved on its largest
// component, so the poses index res.Graph, the graph that was solved, not
// necessarily g: res.Graph.IDs[i] is pose i's vertex id.
func ExampleSolve_poses() {
	g, err := datasets.Demo() // or g2o.ReadFile("intel.g2o", g2o.ReadOptions{})
	if err != nil {
		log.Fatal(err)
	}
	res, err := bsync.Solve(context.Background(), g, bsync.Options{LargestComponent: true})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s at rank %d: F = %.6f, %d of %d poses\n", res.Status, res.Rank, res.Objective, res.Graph.N(), g.N())
	fmt.Println("proven within 1e-6 of the optimum:", res.SuboptimalityBound <= 1e-6*res.Objective)
	for i, p := range res.Poses[:3] {
		fmt.Printf("vertex %d: %.3f\n", res.Graph.IDs[i], p) // R is d x d, t has d entries
	}
	R := res.Poses[2].Rotation()    // a d x d *mat.Dense
	t := res.Poses[2].Translation() // a []float64 of d entries
	fmt.Printf("vertex %d: R(1,0) = %.3f, t = %.3f\n", res.Graph.IDs[2], R.At(1, 0), t)
	// Write the estimate as g2o under the original ids (to a file, say).
	if err := g2o.Write(io.Discard, res.Graph, res.Poses); err != nil {
		log.Fatal(err)
	}
	// Output:
	// certified at rank 2: F = 375.280420, 250 of 250 poses
	// proven within 1e-6 of the optimum: true
	// vertex 0: R=[[0.000 -1.000] [1.000 0.000]] t=[5.000 5.000]
	// vertex 1: R=[[0.002 -1.000] [1.000 0.002]] t=[5.089 5.990]
	// vertex 2: R=[[0.013 -1.000] [1.000 0.013]] t=[5.135 7.014]
	// vertex 2: R(1,0) = 1.000, t = [5.135 7.014]
}
