package g2o

import (
	"fmt"
	"math"
)

// SE2Precisions returns the isotropic precisions of a 2-D edge whose
// information matrix has the upper triangle info = [I11 I12 I13 I22 I23 I33]
// in g2o order (x, y, theta): kappa = I33 and tau = 2 / tr(inv(W_t)) with
// W_t = [[I11, I12], [I12, I22]]. The cross terms I13 and I23 do not enter.
// It fails unless W_t is positive definite (by Cholesky), I33 > 0, and both
// precisions are finite; InfoPositiveDefinite checks the full matrix.
func SE2Precisions(info []float64) (kappa, tau float64, err error) {
	if len(info) != 6 {
		return 0, 0, fmt.Errorf("2-D information matrix needs 6 values, got %d", len(info))
	}
	kappa = info[5]
	if !(kappa > 0) {
		return 0, 0, fmt.Errorf("information matrix is not positive definite (I33 = %g)", kappa)
	}
	w := [4]float64{info[0], info[1], info[1], info[3]}
	tr, err := traceInverse(w[:], 2, "translation")
	if err != nil {
		return 0, 0, err
	}
	tau = 2 / tr
	if a, ok := scalar(w[:], 2); ok {
		tau = a // exact for the isotropic case, which Write produces
	}
	return kappa, tau, checkPrecisions(kappa, tau)
}

// SE3Precisions returns the isotropic precisions of a 3-D edge whose
// information matrix has the 21-value upper triangle info in g2o order
// (x y z qx qy qz, row by row): kappa = 3 / (2 tr(inv(W_R))) and
// tau = 3 / tr(inv(W_t)), with W_t the top-left and W_R the bottom-right
// 3 x 3 block. The cross block does not enter. It fails unless W_t and W_R
// are positive definite (by Cholesky) and both precisions are finite;
// InfoPositiveDefinite checks the full matrix.
func SE3Precisions(info []float64) (kappa, tau float64, err error) {
	if len(info) != 21 {
		return 0, 0, fmt.Errorf("3-D information matrix needs 21 values, got %d", len(info))
	}
	var a [36]float64
	unpackUpper(a[:], info, 6)
	var blk [9]float64
	for _, part := range [2]int{0, 3} {
		for r := 0; r < 3; r++ {
			for c := 0; c < 3; c++ {
				blk[r*3+c] = a[(part+r)*6+part+c]
			}
		}
		name := "translation"
		if part == 3 {
			name = "rotation"
		}
		tr, err := traceInverse(blk[:], 3, name)
		if err != nil {
			return 0, 0, err
		}
		a, iso := scalar(blk[:], 3) // exact for the isotropic case, which Write produces
		switch {
		case part == 0 && iso:
			tau = a
		case part == 0:
			tau = 3 / tr
		case iso:
			kappa = a / 2
		default:
			kappa = 3 / (2 * tr)
		}
	}
	return kappa, tau, checkPrecisions(kappa, tau)
}

// InfoPositiveDefinite checks by Cholesky that the full information matrix
// with upper triangle info (6 values for 2-D, 21 for 3-D, g2o order) is
// positive definite, cross terms included. The precisions do not depend on
// the cross terms, and some published data sets (cubicle) have edges that
// fail this test while their diagonal blocks are fine.
func InfoPositiveDefinite(info []float64) error {
	k := 0
	switch len(info) {
	case 6:
		k = 3
	case 21:
		k = 6
	default:
		return fmt.Errorf("an information matrix needs 6 or 21 values, got %d", len(info))
	}
	var a [36]float64
	unpackUpper(a[:k*k], info, k)
	if bad, piv := cholesky(a[:k*k], k); bad >= 0 {
		return fmt.Errorf("full %dx%d information matrix is not positive definite (Cholesky pivot %d is %g)", k, k, bad+1, piv)
	}
	return nil
}

func checkPrecisions(kappa, tau float64) error {
	if !(kappa > 0) || !(tau > 0) || math.IsInf(kappa, 0) || math.IsInf(tau, 0) {
		return fmt.Errorf("information matrix gives precisions kappa=%g tau=%g, not positive and finite", kappa, tau)
	}
	return nil
}

// scalar reports whether the k x k matrix a is a multiple a_00 I of the
// identity.
func scalar(a []float64, k int) (float64, bool) {
	for r := 0; r < k; r++ {
		for c := 0; c < k; c++ {
			want := 0.0
			if r == c {
				want = a[0]
			}
			if a[r*k+c] != want {
				return 0, false
			}
		}
	}
	return a[0], true
}

// unpackUpper fills the full symmetric k x k matrix a (row-major) from its
// upper triangle u, stored row by row.
func unpackUpper(a, u []float64, k int) {
	p := 0
	for r := 0; r < k; r++ {
		for c := r; c < k; c++ {
			a[r*k+c] = u[p]
			a[c*k+r] = u[p]
			p++
		}
	}
}

// cholesky overwrites the lower triangle of the k x k matrix a with its
// Cholesky factor L (a = L L^T). It returns the index of the first pivot
// that is not positive (and that pivot), or -1 on success.
func cholesky(a []float64, k int) (bad int, pivot float64) {
	for j := 0; j < k; j++ {
		d := a[j*k+j]
		for p := 0; p < j; p++ {
			d -= a[j*k+p] * a[j*k+p]
		}
		if !(d > 0) || math.IsInf(d, 0) {
			return j, d
		}
		d = math.Sqrt(d)
		a[j*k+j] = d
		for i := j + 1; i < k; i++ {
			s := a[i*k+j]
			for p := 0; p < j; p++ {
				s -= a[i*k+p] * a[j*k+p]
			}
			a[i*k+j] = s / d
		}
	}
	return -1, 0
}

// traceInverse returns tr(inv(a)) for a symmetric positive definite k x k
// matrix (k <= 3) as the squared Frobenius norm of inv(L), L its Cholesky
// factor: no explicit inverse and no cancellation from a determinant. It
// fails, naming the block, when a is not positive definite or the trace is
// not finite.
func traceInverse(a []float64, k int, block string) (float64, error) {
	var w [9]float64
	copy(w[:k*k], a)
	if bad, piv := cholesky(w[:k*k], k); bad >= 0 {
		return 0, fmt.Errorf("information matrix is not positive definite in its %s block (Cholesky pivot %d is %g)", block, bad+1, piv)
	}
	// Column c of inv(L) by forward substitution on e_c; rows above c are 0.
	tr := 0.0
	var x [3]float64
	for c := 0; c < k; c++ {
		for i := c; i < k; i++ {
			s := 0.0
			if i == c {
				s = 1
			}
			for p := c; p < i; p++ {
				s -= w[i*k+p] * x[p]
			}
			x[i] = s / w[i*k+i]
			tr += x[i] * x[i]
		}
	}
	if !(tr > 0) || math.IsInf(tr, 0) {
		return 0, fmt.Errorf("information matrix is numerically singular in its %s block", block)
	}
	return tr, nil
}

// se2Fast is SE2Precisions and InfoPositiveDefinite for the common case, a
// 2-D edge whose precisions are fine and whose full information matrix is
// positive definite: the same operations in the same order, unrolled for
// the 2 x 2 and 3 x 3 Cholesky factorizations (a file is mostly edges,
// and the general loops cost as much as reading the numbers). It returns
// SE2Precisions' kappa and tau bit for bit, and ok false wherever either
// function would report a problem; the caller then asks them which.
func se2Fast(info []float64) (kappa, tau float64, ok bool) {
	if len(info) != 6 {
		return 0, 0, false
	}
	i11, i12, i13, i22, i23, i33 := info[0], info[1], info[2], info[3], info[4], info[5]
	kappa = i33
	if !(kappa > 0) {
		return 0, 0, false
	}
	// traceInverse of [[i11, i12], [i12, i22]].
	l00 := i11
	if !(l00 > 0) || math.IsInf(l00, 0) {
		return 0, 0, false
	}
	l00 = math.Sqrt(l00)
	l10 := i12 / l00
	l11 := i22
	l11 -= l10 * l10
	if !(l11 > 0) || math.IsInf(l11, 0) {
		return 0, 0, false
	}
	l11 = math.Sqrt(l11)
	tr := 0.0
	x0 := 1 / l00
	tr += x0 * x0
	s := 0.0
	s -= l10 * x0
	x1 := s / l11
	tr += x1 * x1
	x1 = 1 / l11
	tr += x1 * x1
	if !(tr > 0) || math.IsInf(tr, 0) {
		return 0, 0, false
	}
	tau = 2 / tr
	if i12 == 0 && i22 == i11 {
		tau = i11 // scalar: exact for the isotropic case
	}
	if checkPrecisions(kappa, tau) != nil {
		return 0, 0, false
	}
	// InfoPositiveDefinite: cholesky of the full 3 x 3 matrix.
	a00 := i11
	if !(a00 > 0) || math.IsInf(a00, 0) {
		return 0, 0, false
	}
	a00 = math.Sqrt(a00)
	a10, a20 := i12/a00, i13/a00
	a11 := i22
	a11 -= a10 * a10
	if !(a11 > 0) || math.IsInf(a11, 0) {
		return 0, 0, false
	}
	a11 = math.Sqrt(a11)
	a21 := i23
	a21 -= a20 * a10
	a21 /= a11
	a22 := i33
	a22 -= a20 * a20
	a22 -= a21 * a21
	if !(a22 > 0) || math.IsInf(a22, 0) {
		return 0, 0, false
	}
	return kappa, tau, true
}
