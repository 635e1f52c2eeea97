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
func solveSPD(a *sparse.CSC, x, b []float64, nrhs int) error {
	c, err := sparse.NewCholesky(a)
	if err != nil {
		return err
	}
	c.SolveMany(x, b, nrhs)
	return nil
}
