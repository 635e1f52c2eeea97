package sparse

import "github.com/bcmsync/bcmsync/posegraph/blockmat"

// The block matrices every solver passes around are public (package
// blockmat): users hand them to bcm, posegraph and rounding. The kernels
// here take them under their old names.
type (
	// Blocks is blockmat.Blocks: the lifted variable X and products X Q.
	Blocks = blockmat.Blocks
	// BlockSym is blockmat.BlockSym: Q, S and the Hessian in blocks.
	BlockSym = blockmat.BlockSym
	// BlockBuilder is blockmat.BlockBuilder.
	BlockBuilder = blockmat.BlockBuilder
)

// NewBlocks is blockmat.NewBlocks.
func NewBlocks(r, b, n int) *Blocks { return blockmat.NewBlocks(r, b, n) }

// NewBlockBuilder is blockmat.NewBlockBuilder.
func NewBlockBuilder(n, b int) *BlockBuilder { return blockmat.NewBlockBuilder(n, b) }

// ScaleCongruent sets m to D m D in place, D = diag(scale) (one entry per
// coordinate, m.Dim() of them): every stored block (i, j) times
// scale_i^T scale_j entrywise. The certificate's Jacobi scaling and the
// covariances' unit diagonal both scale this way; with powers of two in
// scale the result is exact.
func ScaleCongruent(m *BlockSym, scale []float64) {
	b := m.B
	for i := 0; i < m.N; i++ {
		si := scale[i*b : (i+1)*b]
		for k := m.RowPtr[i]; k < m.RowPtr[i+1]; k++ {
			blk := m.Block(k)
			j := m.ColIdx[k]
			sj := scale[j*b : (j+1)*b]
			for a := 0; a < b; a++ {
				for e := 0; e < b; e++ {
					blk[a*b+e] *= si[a] * sj[e]
				}
			}
		}
	}
}
