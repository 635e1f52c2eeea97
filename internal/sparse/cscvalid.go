package sparse

import (
	"fmt"
	"math"
)

// Validate checks the storage invariants the ordering and the factorization
// rely on: consistent lengths, column pointers nondecreasing, row indices in
// [j, N) strictly increasing within column j with the diagonal first, and
// finite values.
func (c *CSC) Validate() error {
	if c == nil {
		return fmt.Errorf("sparse: nil CSC matrix")
	}
	if c.N < 0 || len(c.ColPtr) != c.N+1 {
		return fmt.Errorf("sparse: CSC of order %d has %d column pointers, want %d", c.N, len(c.ColPtr), c.N+1)
	}
	if c.ColPtr[0] != 0 {
		return fmt.Errorf("sparse: CSC column pointer 0 is %d, want 0", c.ColPtr[0])
	}
	nnz := c.ColPtr[c.N]
	if len(c.RowIdx) < nnz || len(c.Val) < nnz {
		return fmt.Errorf("sparse: CSC has %d row indices and %d values for %d entries", len(c.RowIdx), len(c.Val), nnz)
	}
	for j := 0; j < c.N; j++ {
		lo, hi := c.ColPtr[j], c.ColPtr[j+1]
		if hi < lo || hi > nnz {
			return fmt.Errorf("sparse: CSC column %d has pointers %d..%d", j, lo, hi)
		}
		if hi == lo || c.RowIdx[lo] != j {
			return fmt.Errorf("sparse: CSC column %d has no diagonal entry first", j)
		}
		for p := lo; p < hi; p++ {
			i := c.RowIdx[p]
			if i < j || i >= c.N || (p > lo && i <= c.RowIdx[p-1]) {
				return fmt.Errorf("sparse: CSC column %d: row index %d out of order or outside the lower triangle", j, i)
			}
			if v := c.Val[p]; math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("sparse: CSC entry (%d,%d) is %v", i, j, v)
			}
		}
	}
	return nil
}
