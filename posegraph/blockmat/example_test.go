package blockmat_test

import (
	"fmt"

	"github.com/bcmsync/bcmsync/posegraph/blockmat"
)

// A path of three vertices, each coupled to the next by -I, with 2 I on the
// diagonal: the product of a 1-row Blocks with it is a matrix-vector
// product, block by block.
func Example() {
	b := 2
	bb := blockmat.NewBlockBuilder(3, b)
	two := []float64{2, 0, 0, 2}
	minusI := []float64{-1, 0, 0, -1}
	for i := 0; i < 3; i++ {
		bb.AddDiag(i, two)
	}
	bb.AddOff(0, 1, minusI)
	bb.AddOff(1, 2, minusI)
	q := bb.Build()

	x := blockmat.NewBlocks(1, b, 3)
	copy(x.Data, []float64{1, 0, 1, 0, 1, 0})
	y := blockmat.NewBlocks(1, b, 3)
	q.MulBlocks(y, x)
	fmt.Println(q.NNZBlocks(), "blocks stored")
	fmt.Println(y.Data)
	// Output:
	// 7 blocks stored
	// [1 0 0 0 1 0]
}
