package smalldense

import "math"

// MaxRows is the largest row count r for which the kernels run without
// allocating.
const MaxRows = 16

// jacobiTol is the relative size of the off-diagonal Gram entry below which
// two columns count as orthogonal. A few ulps: tighter would make the sweep
// chase rounding noise, looser would leave U visibly non-orthogonal.
const jacobiTol = 1e-15

// maxSweeps bounds the Jacobi sweeps. One-sided Jacobi converges
// quadratically; for d <= 3 four to six sweeps are typical.
const maxSweeps = 40

// svdCols runs a one-sided Jacobi SVD on the r x d row-major a in place: on
// return the columns of a are mutually orthogonal (a = U S) and v (d x d,
// row-major) holds the accumulated rotations, so that a_in = a_out v^T.
// For d = 3 the sweeps start from the closed-form eigenvectors of the Gram
// matrix (gramEig3), which leaves them almost nothing to do. (Finding the
// rotations by Jacobi on the Gram matrix instead was tried: it saves flops
// but not rotations, and measured slower for r <= 10.)
func svdCols(a []float64, v *[9]float64, r, d int) {
	*v = [9]float64{}
	for k := 0; k < d; k++ {
		v[k*d+k] = 1
	}
	if d == 3 {
		// Measured: about 9 rotations in 4.3 sweeps without, 0.02 rotations
		// in 1.02 sweeps with the closed-form start (random 5 x 3 input).
		gramEig3(a, v, r)
	}
	for sweep := 0; sweep < maxSweeps; sweep++ {
		rotated := false
		for p := 0; p < d-1; p++ {
			for q := p + 1; q < d; q++ {
				var alpha, beta, gamma float64
				for k := 0; k < r; k++ {
					ap, aq := a[k*d+p], a[k*d+q]
					alpha += ap * ap
					beta += aq * aq
					gamma += ap * aq
				}
				// |gamma| <= tol sqrt(alpha beta), squared to spare two
				// square roots. a is scaled to max |a_ij| = 1, so the product
				// underflows only for columns far below the rank cut.
				if gamma*gamma <= jacobiTol*jacobiTol*alpha*beta {
					continue
				}
				rotated = true
				c, s := jacobiRotation(alpha, beta, gamma)
				for k := 0; k < r; k++ {
					ap, aq := a[k*d+p], a[k*d+q]
					a[k*d+p] = c*ap - s*aq
					a[k*d+q] = s*ap + c*aq
				}
				for k := 0; k < d; k++ {
					vp, vq := v[k*d+p], v[k*d+q]
					v[k*d+p] = c*vp - s*vq
					v[k*d+q] = s*vp + c*vq
				}
			}
		}
		if !rotated {
			break
		}
	}
}

// jacobiRotation returns the rotation (c, s) that makes columns p and q
// orthogonal, given alpha = |a_p|^2, beta = |a_q|^2, gamma = <a_p, a_q> != 0:
// a_p <- c a_p - s a_q, a_q <- s a_p + c a_q, with |t| = |s/c| <= 1, the
// smaller root of t^2 + 2 zeta t - 1 = 0, zeta = (beta - alpha) / (2 gamma).
// Written as t = sign(x) y / (|x| + hypot(x, y)) with x = beta - alpha,
// y = 2 gamma, the chain of dependent square roots and divisions is four
// long-latency operations instead of five, and nothing overflows for the
// scaled inputs (alpha, beta <= r).
func jacobiRotation(alpha, beta, gamma float64) (c, s float64) {
	x, y := beta-alpha, 2*gamma
	t := y / (math.Abs(x) + math.Sqrt(x*x+y*y))
	if x < 0 {
		t = -t
	}
	c = 1 / math.Sqrt(1+t*t)
	return c, c * t
}

// scaleInto copies h into a and returns the factor by which a must be
// multiplied to give h back: 1 when max |h_ij| lies in [2^-100, 2^100], else
// max |h_ij|, with a = h / max |h_ij|. Scaling keeps the Gram sums clear of
// overflow and underflow for huge and tiny inputs (the Jacobi test squares
// the Gram entries, so fourth powers of the entries must stay normal); the
// common case is a plain copy. It returns 0 for a zero h.
func scaleInto(a, h []float64) float64 {
	amax := 0.0
	for k, x := range h {
		a[k] = x
		if ax := math.Abs(x); ax > amax {
			amax = ax
		}
	}
	const lo, hi = 0x1p-100, 0x1p100
	if amax == 0 || (amax >= lo && amax <= hi) || math.IsInf(amax, 0) || math.IsNaN(amax) {
		if amax == 0 {
			return 0
		}
		return 1
	}
	if amax < 0x1p-1000 {
		// 1/amax would overflow for subnormal amax: scale in two steps.
		for k := range a {
			a[k] *= 0x1p600
		}
		inv := 1 / (amax * 0x1p600)
		for k := range a {
			a[k] *= inv
		}
		return amax
	}
	inv := 1 / amax
	for k := range a {
		a[k] *= inv
	}
	return amax
}

// Polar sets dst (r x d, row-major) to the polar factor U I_{r x d} V^T of
// the r x d matrix h = U S V^T, the Stiefel matrix (dst^T dst = I_d) that
// maximizes <h, Y>, and returns the nuclear norm ||h||_* = sum S. It requires
// r >= d, 1 <= d <= 3. When h is rank-deficient the missing directions of U
// are completed deterministically from the standard basis; any completion is
// a maximizer. dst and h may alias. Polar does not allocate for r <= MaxRows.
func Polar(dst, h []float64, r, d int) (nuclear float64) {
	return polar(dst, h, r, d, false)
}

// NearestRotation sets dst (d x d) to the rotation closest to m in the
// Frobenius norm: U diag(1, ..., 1, det(U V^T)) V^T for m = U S V^T. The sign
// correction falls on the smallest singular value, as in the orthogonal
// Procrustes problem. dst and m may alias.
func NearestRotation(dst, m []float64, d int) {
	polar(dst, m, d, d, true)
}

// Nuclear returns ||h||_*, the sum of the singular values of the r x d
// matrix h. It does not allocate for r <= MaxRows.
func Nuclear(h []float64, r, d int) float64 {
	var buf [MaxRows * 3]float64
	var a []float64
	if r <= MaxRows {
		a = buf[:r*d]
	} else {
		a = make([]float64, r*d)
	}
	scale := scaleInto(a, h)
	if scale == 0 {
		return 0
	}
	var v [9]float64
	svdCols(a, &v, r, d)
	s := 0.0
	for k := 0; k < d; k++ {
		s += colNorm(a, r, d, k)
	}
	return s * scale
}

func colNorm(a []float64, r, d, k int) float64 {
	s := 0.0
	for i := 0; i < r; i++ {
		s += a[i*d+k] * a[i*d+k]
	}
	return math.Sqrt(s)
}

func polar(dst, h []float64, r, d int, rotation bool) float64 {
	if d < 1 || d > 3 || r < d {
		panic("smalldense: Polar needs 1 <= d <= 3 and r >= d")
	}
	// One scratch matrix: a = h (scaled), then U S, then U in place. Kept
	// small because Go zeroes it on every call.
	var buf [MaxRows * 3]float64
	var a []float64
	if r <= MaxRows {
		a = buf[:r*d]
	} else {
		a = make([]float64, r*d)
	}
	scale := scaleInto(a, h)
	var v [9]float64
	svdCols(a, &v, r, d)

	// Singular values and the order in which the columns of U are fixed:
	// largest first, so each later column is orthogonalized against better
	// determined ones.
	var sv [3]float64
	var order [3]int
	for k := 0; k < d; k++ {
		sv[k] = colNorm(a, r, d, k)
		order[k] = k
	}
	for i := 1; i < d; i++ {
		for j := i; j > 0 && sv[order[j]] > sv[order[j-1]]; j-- {
			order[j], order[j-1] = order[j-1], order[j]
		}
	}
	// Below cut a column's direction is rounding noise and it is treated
	// as a zero singular value.
	cut := sv[order[0]] * float64(r) * 1e-15
	for n := 0; n < d; n++ {
		k := order[n]
		ok := sv[k] > cut && sv[k] > 0
		if ok {
			inv := 1 / sv[k]
			for i := 0; i < r; i++ {
				a[i*d+k] *= inv
			}
			if n > 0 {
				// Restores the orthogonality lost to rounding in nearly
				// dependent columns.
				ok = orthonormalize(a, r, d, k, order[:n])
			}
		}
		if !ok {
			completeBasis(a, r, d, k, order[:n])
		}
	}
	if rotation {
		// det(U V^T) = det(U) det(V) for square U.
		if det(a, d)*det(v[:], d) < 0 {
			k := order[d-1]
			for i := 0; i < r; i++ {
				a[i*d+k] = -a[i*d+k]
			}
		}
	}
	// dst = U V^T.
	switch d {
	case 2:
		for i := 0; i < r; i++ {
			u0, u1 := a[i*2], a[i*2+1]
			dst[i*2] = u0*v[0] + u1*v[1]
			dst[i*2+1] = u0*v[2] + u1*v[3]
		}
	case 3:
		for i := 0; i < r; i++ {
			u0, u1, u2 := a[i*3], a[i*3+1], a[i*3+2]
			dst[i*3] = u0*v[0] + u1*v[1] + u2*v[2]
			dst[i*3+1] = u0*v[3] + u1*v[4] + u2*v[5]
			dst[i*3+2] = u0*v[6] + u1*v[7] + u2*v[8]
		}
	default:
		for i := 0; i < r; i++ {
			dst[i] = a[i] * v[0]
		}
	}
	return (sv[0] + sv[1] + sv[2]) * scale
}

// orthonormalize makes column k of u (of unit length on entry) orthogonal to
// the unit columns in prev and normalizes it. After a converged Jacobi SVD
// one Gram-Schmidt pass only removes rounding; a second pass runs when the
// first removed a noticeable part (the column was nearly dependent), which
// is Kahan's "twice is enough". It reports false if too little of the
// column survives to give a trustworthy direction.
func orthonormalize(u []float64, r, d, k int, prev []int) bool {
	nrm := 1.0
	for pass := 0; pass < 2; pass++ {
		for _, j := range prev {
			s := 0.0
			for i := 0; i < r; i++ {
				s += u[i*d+j] * u[i*d+k]
			}
			for i := 0; i < r; i++ {
				u[i*d+k] -= s * u[i*d+j]
			}
		}
		before := nrm
		nrm = colNorm(u, r, d, k)
		if nrm > 0.5*before {
			break
		}
	}
	if nrm < 1e-3 {
		return false
	}
	inv := 1 / nrm
	for i := 0; i < r; i++ {
		u[i*d+k] *= inv
	}
	return true
}

// completeBasis sets column k of u to the unit vector orthogonal to the
// columns in prev built from the standard basis vector e_t whose residual is
// largest (smallest t on ties). With fewer than r previous columns some
// residual has squared norm >= (r - len(prev))/r >= 1/3, so the choice is
// well conditioned and deterministic.
func completeBasis(u []float64, r, d, k int, prev []int) {
	best, bestNorm := 0, -1.0
	for t := 0; t < r; t++ {
		// Residual norm^2 of e_t is 1 - sum_j u[t][j]^2.
		s := 1.0
		for _, j := range prev {
			s -= u[t*d+j] * u[t*d+j]
		}
		if s > bestNorm+1e-12 {
			best, bestNorm = t, s
		}
	}
	for i := 0; i < r; i++ {
		u[i*d+k] = 0
	}
	u[best*d+k] = 1
	orthonormalize(u, r, d, k, prev)
}

// det is the determinant of the d x d row-major m, d <= 3.
func det(m []float64, d int) float64 {
	switch d {
	case 1:
		return m[0]
	case 2:
		return m[0]*m[3] - m[1]*m[2]
	}
	return m[0]*(m[4]*m[8]-m[5]*m[7]) - m[1]*(m[3]*m[8]-m[5]*m[6]) + m[2]*(m[3]*m[7]-m[4]*m[6])
}
