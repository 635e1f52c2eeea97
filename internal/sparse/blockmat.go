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
