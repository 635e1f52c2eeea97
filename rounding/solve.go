package rounding

import (
	"github.com/bcmsync/bcmsync/internal/sparse"
)

// solveSPD solves A X = B for the symmetric positive definite matrix whose
// lower triangle a holds, with nrhs right-hand sides stored column-major
// (a.N x nrhs) in b; the solution goes to x. One sparse Cholesky
// factorization (AMD-ordered) serves all right-hand sides: the chordal
// system has d of them, the translation system d too. A singular system
// (which the callers rule out by checking connectivity first) is reported as
// a *sparse.NotPositiveDefiniteError.
//
// perm, if not nil, is the fill-reducing order to use (see
// sparse.BlockOrder: ordering the n pose blocks instead of the dn scalars is
// several times cheaper and no worse); nil means the factorization's own
// scalar AMD.
func solveSPD(a *sparse.CSC, perm []int, x, b []float64, nrhs int) error {
	var c *sparse.Cholesky
	var err error
	if perm != nil {
		c, err = sparse.NewCholeskyPerm(a, perm)
	} else {
		c, err = sparse.NewCholesky(a)
	}
	if err != nil {
		return err
	}
	c.SolveMany(x, b, nrhs)
	return nil
}
