package sparse_test

import (
	"fmt"
	"math"

	"github.com/bcmsync/bcmsync/internal/sparse"
)

// pathLaplacian returns the block matrix of the path graph 0-1-...-(n-1)
// with 1 x 1 blocks: the graph Laplacian, singular with the constant
// vector in its null space.
func pathLaplacian(n int) *sparse.BlockSym {
	bb := sparse.NewBlockBuilder(n, 1)
	for i := 0; i+1 < n; i++ {
		bb.AddDiag(i, []float64{1})
		bb.AddDiag(i+1, []float64{1})
		bb.AddOff(i, i+1, []float64{-1})
	}
	return bb.Build()
}

func ExampleNewCholesky() {
	q := pathLaplacian(5)
	// Q is singular: its factorization fails with a typed error.
	if _, err := sparse.NewCholesky(sparse.LowerCSC(q, 0, 0)); sparse.IsNotPositiveDefinite(err) {
		fmt.Println("Q is not positive definite")
	}
	// Anchoring the first node (dropping its row and column) fixes that.
	a := sparse.LowerCSC(q, 0, 1)
	ch, err := sparse.NewCholeskyPerm(a, sparse.BlockAMD(q, 1))
	if err != nil {
		fmt.Println(err)
		return
	}
	x := make([]float64, a.N)
	ch.Solve(x, []float64{0, 0, 0, 1})
	fmt.Printf("%.3g\n", x)
	// Output:
	// Q is not positive definite
	// [1 2 3 4]
}

func ExamplePCG() {
	q := pathLaplacian(100)
	a := sparse.LowerCSC(q, 1e-2, 0) // Q + 0.01 I
	b := make([]float64, a.N)
	b[0] = 1
	x := make([]float64, a.N) // initial guess 0
	jac, _ := sparse.NewBlockJacobi(q, 1e-2)
	res, err := sparse.PCG(a, x, b, jac, sparse.PCGOptions{Tol: 1e-10}, nil)
	fmt.Println(res.Converged, err, res.Residual <= 1e-10)
	// Output:
	// true <nil> true
}

func ExampleSmallestEig() {
	q := pathLaplacian(50)
	// The smallest eigenvalue of a connected graph's Laplacian is 0, with
	// the constant vector; preconditioning with (Q + sigma I)^{-1}.
	pre, _ := sparse.NewCholesky(sparse.LowerCSC(q, 1e-3, 0))
	res, err := sparse.SmallestEig(q, sparse.EigOptions{Tol: 1e-10, Precond: pre})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("|lambda| < 1e-12: %v, converged %v, v[0] = v[49]: %v\n", math.Abs(res.Value) < 1e-12, res.Converged,
		math.Abs(res.Vector[0]-res.Vector[49]) < 1e-9)
	big, _ := sparse.LargestEig(q, sparse.EigOptions{})
	fmt.Printf("largest %.4f\n", big.Value) // 2 - 2 cos(49 pi / 50)
	// Output:
	// |lambda| < 1e-12: true, converged true, v[0] = v[49]: true
	// largest 3.9961
}
