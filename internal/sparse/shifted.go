package sparse

import (
	"errors"
	"fmt"
	"math"
)

// FactorShifted factors q + tau I for the first tau in tau0, 10 tau0,
// 100 tau0, ... (at most tries values) for which it is positive definite,
// and returns the factor and that tau. The analysis (BlockOrder ordering and
// symbolic factorization) is done once. Every failed shift proves
// lambda_min(q) < -tau, so on success lambda_min(q) lies in
// (-tau, -tau/10] unless the first shift succeeded.
//
// A factor of S + tau I with tau of the order of |lambda_min(S)| is the
// preconditioner that makes LOBPCG fast on a certificate matrix
// S = Q - Lambda: the preconditioned spectrum (lambda - lambda_min) /
// (lambda + tau) is then well clustered. A factor of Q + sigma I is a poor
// substitute when Lambda is large on the low-frequency modes of Q.
func FactorShifted(q *BlockSym, tau0 float64, tries int) (*Cholesky, float64, error) {
	if !(tau0 > 0) || math.IsInf(tau0, 0) || tries < 1 {
		return nil, 0, fmt.Errorf("sparse: FactorShifted: bad first shift %g or tries %d", tau0, tries)
	}
	c, err := AnalyzeBlocks(q, BlockOrder(q, 0))
	if err != nil {
		return nil, 0, err
	}
	tau := tau0
	for k := 0; k < tries; k++ {
		err = c.FactorizeBlocks(q, tau)
		if err == nil {
			return c, tau, nil
		}
		if !IsNotPositiveDefinite(err) {
			return nil, 0, err
		}
		tau *= 10
	}
	var npd *NotPositiveDefiniteError
	errors.As(err, &npd)
	return nil, 0, fmt.Errorf("sparse: FactorShifted: not positive definite up to shift %g: %w", tau/10, err)
}
