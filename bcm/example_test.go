package bcm_test

import (
	"context"
	"fmt"

	"github.com/bcmsync/bcmsync/bcm"
	"github.com/bcmsync/bcmsync/posegraph"
	"github.com/bcmsync/bcmsync/posegraph/blockmat"
)

// Synchronize a square of four planar poses whose first side was measured
// 20% too long, from a random start at rank 3. Spreading the error over the
// four translations alone would cost 0.2^2 / 4 = 0.01; bending the rotations
// a little costs less.
//
// (A relative gradient norm needs a residual: on noiseless data X Q -> 0 at
// the optimum and the ratio need not become small.)
func Example() {
	g := &posegraph.Graph{D: 2, IDs: []int{0, 1, 2, 3}}
	quarter := [9]float64{0, -1, 1, 0} // rotation by 90 degrees
	for i := 0; i < 4; i++ {
		g.Edges = append(g.Edges, posegraph.Edge{I: i, J: (i + 1) % 4,
			R: quarter, T: [3]float64{1, 0}, Kappa: 1, Tau: 1})
	}
	g.Edges[0].T[0] = 1.2
	q := g.Laplacian(posegraph.Poses)
	x := blockmat.NewBlocks(3, q.B, q.N) // r = 3, blocks [Y_i p_i]
	bcm.RandomStiefel(x, 2, 1)

	s := bcm.New(q, 2, posegraph.Poses)
	res, err := s.Solve(context.Background(), x, bcm.Options{Rule: bcm.Cyclic, GradTol: 1e-10, MaxSweeps: 10000})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Status)
	fmt.Printf("F = %.6f\n", res.F)
	// Output:
	// gradient converged
	// F = 0.008889
}
