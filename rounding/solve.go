package rounding

import (
	"fmt"
	"math"

	"github.com/bcmsync/bcmsync/internal/sparse"
)

// solveSPD solves A X = B for the symmetric positive definite matrix whose
// lower triangle a holds, with nrhs right-hand sides stored column-major
// (a.N x nrhs) in b; the solution goes to x. It is a variable so the
// factorization can be swapped while internal/sparse grows its Cholesky.
var solveSPD = solvePCG

// solvePCG is a Jacobi-preconditioned conjugate-gradient solve, one
// right-hand side at a time. It needs only products with a, so it scales to
// any graph, but it converges slowly on long chains.
func solvePCG(a *sparse.CSC, x, b []float64, nrhs int) error {
	n := a.N
	diag := make([]float64, n)
	for j := 0; j < n; j++ {
		k := a.ColPtr[j]
		if k == a.ColPtr[j+1] || a.RowIdx[k] != j || !(a.Val[k] > 0) {
			return fmt.Errorf("rounding: linear system is not positive definite (diagonal %d)", j)
		}
		diag[j] = a.Val[k]
	}
	r := make([]float64, n)
	z := make([]float64, n)
	p := make([]float64, n)
	q := make([]float64, n)
	for c := 0; c < nrhs; c++ {
		bc, xc := b[c*n:(c+1)*n], x[c*n:(c+1)*n]
		bnorm := 0.0
		for i := range xc {
			xc[i] = 0
			r[i] = bc[i]
			bnorm += bc[i] * bc[i]
		}
		bnorm = math.Sqrt(bnorm)
		if bnorm == 0 {
			continue
		}
		rz := 0.0
		for i := range r {
			z[i] = r[i] / diag[i]
			p[i] = z[i]
			rz += r[i] * z[i]
		}
		converged := false
		for it := 0; it < 20*n+100; it++ {
			a.MulVec(q, p)
			pq := 0.0
			for i := range p {
				pq += p[i] * q[i]
			}
			if !(pq > 0) {
				return fmt.Errorf("rounding: linear system is not positive definite")
			}
			alpha := rz / pq
			rr := 0.0
			for i := range r {
				xc[i] += alpha * p[i]
				r[i] -= alpha * q[i]
				rr += r[i] * r[i]
			}
			if math.Sqrt(rr) <= 1e-13*bnorm {
				converged = true
				break
			}
			rzNew := 0.0
			for i := range r {
				z[i] = r[i] / diag[i]
				rzNew += r[i] * z[i]
			}
			beta := rzNew / rz
			rz = rzNew
			for i := range p {
				p[i] = z[i] + beta*p[i]
			}
		}
		if !converged {
			return fmt.Errorf("rounding: conjugate gradients did not converge on a system of order %d", n)
		}
	}
	return nil
}
