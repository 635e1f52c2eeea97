package sparse_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/bcmsync/bcmsync/internal/sparse"
)

// randBlockSym returns a random symmetric block-sparse matrix of nb blocks
// of size b. Each off-diagonal block pair is present with probability dens
// (blocks never cross between the ncomp groups, so ncomp > 1 gives a
// disconnected pattern); about a fifth of the entries of each block are zero.
func randBlockSym(rng *rand.Rand, nb, b int, dens float64, ncomp int) *sparse.BlockSym {
	bb := sparse.NewBlockBuilder(nb, b)
	blk := make([]float64, b*b)
	fill := func() {
		for k := range blk {
			blk[k] = 0
			if rng.Float64() < 0.8 {
				blk[k] = rng.NormFloat64()
			}
		}
	}
	for i := 0; i < nb; i++ {
		fill()
		for r := 0; r < b; r++ {
			for c := 0; c < r; c++ {
				blk[c*b+r] = blk[r*b+c]
			}
		}
		bb.AddDiag(i, blk)
		for j := i + 1; j < nb; j++ {
			if i%ncomp == j%ncomp && rng.Float64() < dens {
				fill()
				bb.AddOff(i, j, blk)
			}
		}
	}
	return bb.Build()
}

func denseOf(op sparse.Operator) *mat.SymDense {
	n := op.Dim()
	d := mat.NewSymDense(n, nil)
	e := make([]float64, n)
	col := make([]float64, n)
	for j := 0; j < n; j++ {
		for i := range e {
			e[i] = 0
		}
		e[j] = 1
		op.MulVec(col, e)
		for i := 0; i <= j; i++ {
			d.SetSym(i, j, col[i])
		}
	}
	return d
}

// eigenvalues returns the ascending eigenvalues of the dense symmetric a.
func eigenvalues(t testing.TB, a *mat.SymDense, vectors bool) ([]float64, *mat.Dense) {
	t.Helper()
	var es mat.EigenSym
	if !es.Factorize(a, vectors) {
		t.Fatal("EigenSym failed")
	}
	var v *mat.Dense
	if vectors {
		v = new(mat.Dense)
		es.VectorsTo(v)
	}
	return es.Values(nil), v
}

func normInf(a *mat.SymDense) float64 {
	n := a.SymmetricDim()
	m := 0.0
	for i := 0; i < n; i++ {
		s := 0.0
		for j := 0; j < n; j++ {
			s += math.Abs(a.At(i, j))
		}
		m = max(m, s)
	}
	return m
}

func randVec(rng *rand.Rand, n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = rng.NormFloat64()
	}
	return v
}

func vnorm(x []float64) float64 {
	s := 0.0
	for _, v := range x {
		s += v * v
	}
	return math.Sqrt(s)
}

// residual returns ||A x - b|| / (||A|| ||x|| + ||b||).
func residual(a sparse.Operator, anorm float64, x, b []float64) float64 {
	r := make([]float64, len(b))
	a.MulVec(r, x)
	for i := range r {
		r[i] -= b[i]
	}
	return vnorm(r) / (anorm*vnorm(x) + vnorm(b))
}

// gridCSC is the 5-point (dim 2) or 7-point (dim 3) Laplacian plus I on a
// k^dim grid, in natural order.
func gridCSC(k, dim int) *sparse.CSC {
	n := 1
	for i := 0; i < dim; i++ {
		n *= k
	}
	c := &sparse.CSC{N: n, ColPtr: make([]int, n+1)}
	strides := []int{1, k, k * k}
	for j := 0; j < n; j++ {
		c.RowIdx = append(c.RowIdx, j)
		c.Val = append(c.Val, float64(2*dim)+1)
		for d := 0; d < dim; d++ {
			coord := (j / strides[d]) % k
			if coord+1 < k {
				c.RowIdx = append(c.RowIdx, j+strides[d])
				c.Val = append(c.Val, -1)
			}
		}
		// Rows must be increasing within a column.
		lo := c.ColPtr[j]
		rows, vals := c.RowIdx[lo:], c.Val[lo:]
		for a := 1; a < len(rows); a++ {
			for b := a; b > 0 && rows[b] < rows[b-1]; b-- {
				rows[b], rows[b-1] = rows[b-1], rows[b]
				vals[b], vals[b-1] = vals[b-1], vals[b]
			}
		}
		c.ColPtr[j+1] = len(c.RowIdx)
	}
	return c
}
