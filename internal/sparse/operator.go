package sparse

// Operator is a symmetric linear operator of order Dim(): MulVec sets
// dst = A*x. dst and x do not alias. *BlockSym and *CSC are Operators.
type Operator interface {
	Dim() int
	MulVec(dst, x []float64)
}

// Preconditioner applies an approximation of A^{-1}: dst ~ A^{-1} r. It must
// be symmetric positive definite for PCG and LOBPCG. dst and r may alias only
// if the implementation says so (*Cholesky allows it).
type Preconditioner interface {
	Precondition(dst, r []float64)
}

// Dim is the order N of the symmetric matrix.
func (c *CSC) Dim() int { return c.N }

// NNZ is the number of stored entries of the lower triangle.
func (c *CSC) NNZ() int { return c.ColPtr[c.N] }

var (
	_ Operator       = (*BlockSym)(nil)
	_ Operator       = (*CSC)(nil)
	_ Preconditioner = (*Cholesky)(nil)
	_ Preconditioner = (*BlockJacobi)(nil)
)
