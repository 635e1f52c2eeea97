package sparse

// CSC is a sparse symmetric matrix of order N given by its lower triangle
// (row >= column) in compressed-column form; row indices are sorted within
// each column and the diagonal entry of every column is present (it may be
// zero). It is the input of the ordering and the Cholesky factorization.
type CSC struct {
	N      int
	ColPtr []int
	RowIdx []int
	Val    []float64
}

// LowerCSC returns the scalar lower triangle of Q + shift*I with the first
// drop block rows and columns removed; every entry of every stored block is
// kept, so the pattern is that of the block structure (drop > 0 anchors those blocks, as
// the chordal initialization and translation recovery do).
func LowerCSC(m *BlockSym, shift float64, drop int) *CSC {
	b := m.B
	n := (m.N - drop) * b
	// Sized exactly first: at a million poses the Hessian's CSC has 10^8
	// entries, and growing it by appends cost more than the symbolic
	// factorization that reads it.
	nnz := lowerCSCEntries(m, drop)
	c := &CSC{N: n, ColPtr: make([]int, n+1), RowIdx: make([]int, 0, nnz), Val: make([]float64, 0, nnz)}
	// Column j*b+cc of the lower triangle is row j*b+cc of the upper one:
	// by symmetry it holds blocks (j, i) with i >= j, read from row j.
	for j := drop; j < m.N; j++ {
		for cc := 0; cc < b; cc++ {
			col := (j-drop)*b + cc
			for k := m.RowPtr[j]; k < m.RowPtr[j+1]; k++ {
				i := m.ColIdx[k]
				if i < j {
					continue
				}
				blk := m.Block(k) // Q_ji; entry (cc, a) is Q(j*b+cc, i*b+a) = Q(i*b+a, j*b+cc)
				a0 := 0
				if i == j {
					a0 = cc
				}
				for a := a0; a < b; a++ {
					v := blk[cc*b+a]
					// Every entry of a stored block is kept, zeros too, so
					// the pattern depends on the block structure only:
					// matrices built on one structure (Q, S = Q - Lambda,
					// the Hessian) share one symbolic factorization.
					if i == j && a == cc {
						v += shift
					}
					c.RowIdx = append(c.RowIdx, (i-drop)*b+a)
					c.Val = append(c.Val, v)
				}
			}
			c.ColPtr[col+1] = len(c.RowIdx)
		}
	}
	return c
}

// MulVec sets dst = A*x for the symmetric matrix whose lower triangle c holds.
func (c *CSC) MulVec(dst, x []float64) {
	for i := range dst[:c.N] {
		dst[i] = 0
	}
	for j := 0; j < c.N; j++ {
		xj := x[j]
		s := 0.0
		for k := c.ColPtr[j]; k < c.ColPtr[j+1]; k++ {
			i := c.RowIdx[k]
			v := c.Val[k]
			dst[i] += v * xj
			if i != j {
				s += v * x[i]
			}
		}
		dst[j] += s
	}
}
