package sync

import (
	"errors"
	"fmt"
	"math"

	"github.com/bcmsync/bcmsync/internal/sparse"
)

// certificate is the outcome of checking a critical point X (DESIGN.md
// section 5): the multipliers Lambda_i = sym(Y_i^T (XQ)_Y,i), the dual bound
// tr(Lambda), the smallest eigenvalue of S = Q - Lambda and, when it is
// below -eta, its eigenvector (the direction of the saddle escape).
type certificate struct {
	lam       []float64
	dualBound float64
	minEig    float64
	vector    []float64 // unit eigenvector when not PSD
	psd       bool      // lambda_min(S) >= -eta
	method    string    // how minEig was found
}

// certifier checks points against one Q; it keeps S's storage across calls.
type certifier struct {
	q     *sparse.BlockSym
	s     *sparse.BlockSym
	eta   float64
	perm  []int            // fill-reducing order of Q's pattern (nil: AMD)
	chol  *sparse.Cholesky // symbolic analysis of S's pattern, made once
	csc   *sparse.CSC
	seed  uint64
	inv   []float64 // inverse-iteration vectors
	inv2  []float64
	sMulV []float64
}

func newCertifier(q *sparse.BlockSym, eta float64, perm []int, seed uint64) *certifier {
	n := q.Dim()
	return &certifier{q: q, s: q.Clone(), eta: eta, perm: perm, seed: seed,
		inv: make([]float64, n), inv2: make([]float64, n), sMulV: make([]float64, n)}
}

// buildS sets c.s = Q - Lambda (Lambda zero on the translation parts).
func (c *certifier) buildS(lam []float64, d int) {
	copy(c.s.Val, c.q.Val)
	b := c.q.B
	for i := 0; i < c.q.N; i++ {
		blk := c.s.Block(c.s.Diag[i])
		l := lam[i*d*d : (i+1)*d*d]
		for a := 0; a < d; a++ {
			for e := 0; e < d; e++ {
				blk[a*b+e] -= l[a*d+e]
			}
		}
	}
}

// check certifies x at rank r: the cheap test first (a Cholesky factor of
// S + eta I exists iff lambda_min(S) > -eta, up to rounding), and the
// smallest eigenpair only when it fails, because then the staircase needs
// the eigenvector.
func (c *certifier) check(m *manifold, x *sparse.Blocks) (certificate, error) {
	nq := m.newBlocks()
	m.mulQ(nq, x)
	cert := certificate{lam: make([]float64, m.n*m.d*m.d)}
	m.lambda(cert.lam, x, nq)
	cert.dualBound = m.traceLambda(cert.lam)
	c.buildS(cert.lam, m.d)

	if c.csc == nil {
		c.csc = c.s.LowerCSC(c.eta, 0)
		chol, err := sparse.Analyze(c.csc, c.perm)
		if err != nil {
			return cert, fmt.Errorf("certificate: analysing S: %w", err)
		}
		c.chol = chol
	} else {
		c.s.FillLowerCSC(c.csc, c.eta)
	}
	err := c.chol.Factorize(c.csc)
	if err == nil {
		cert.psd = true
		cert.minEig = c.inverseIteration(c.chol)
		cert.method = "cholesky"
		return cert, nil
	}
	var npd *sparse.NotPositiveDefiniteError
	if !errors.As(err, &npd) {
		return cert, fmt.Errorf("certificate: factoring S + eta I: %w", err)
	}
	// S + eta I has no factor, so lambda_min(S) < -eta. A factor of
	// S + tau I with tau just above |lambda_min| preconditions LOBPCG well
	// (the factor of Q is poor when Lambda is large on Q's low modes).
	var pre sparse.Preconditioner
	if sh, _, err := sparse.FactorShifted(c.s, 10*c.eta, 14); err == nil {
		pre = sh
	}
	res, err := sparse.SmallestEig(c.s, sparse.EigOptions{
		Tol: 1e-6, MaxIter: 2000, BlockSize: 4, Seed: c.seed, Precond: pre,
	})
	if err != nil {
		return cert, fmt.Errorf("certificate: smallest eigenpair of S: %w", err)
	}
	cert.minEig = res.Value
	cert.vector = res.Vector
	cert.method = "eigensolver"
	cert.psd = res.Value >= -c.eta
	return cert, nil
}

// inverseIteration estimates lambda_min(S) from the factor of S + eta I:
// a few steps of inverse iteration from a fixed start converge to the
// bottom of the spectrum (the null space of S, eigenvalue ~0, at a
// certified point), and the Rayleigh quotient there is the reported value.
func (c *certifier) inverseIteration(chol *sparse.Cholesky) float64 {
	v, w := c.inv, c.inv2
	for k := range v {
		// A deterministic start with components in every direction.
		v[k] = 1 + math.Sin(float64(k)*1.618033988749895)
	}
	normalize(v)
	for it := 0; it < 8; it++ {
		chol.Solve(w, v)
		normalize(w)
		v, w = w, v
	}
	c.s.MulVec(c.sMulV, v)
	rq := 0.0
	for k, x := range v {
		rq += x * c.sMulV[k]
	}
	return rq
}

func normalize(v []float64) {
	s := 0.0
	for _, x := range v {
		s += x * x
	}
	s = math.Sqrt(s)
	if s == 0 {
		return
	}
	for k := range v {
		v[k] /= s
	}
}

// maxDiag is the largest diagonal entry of Q, the scale that the
// eigenvalue tolerance is relative to: weights in the benchmark files range
// over six orders of magnitude.
func maxDiag(q *sparse.BlockSym) float64 {
	s, b := 0.0, q.B
	for i := 0; i < q.N; i++ {
		blk := q.Block(q.Diag[i])
		for a := 0; a < b; a++ {
			s = math.Max(s, blk[a*b+a])
		}
	}
	return s
}
