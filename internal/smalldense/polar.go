package smalldense

import "math"

// MaxRows is the largest row count r for which the kernels run without
// allocating.
const MaxRows = 32

// jacobiTol is the relative size of the off-diagonal Gram entry below which
// two columns count as orthogonal. A few ulps: tighter would make the sweep
// chase rounding noise, looser would leave U visibly non-orthogonal.
const jacobiTol = 4e-16

// maxSweeps bounds the Jacobi sweeps. One-sided Jacobi converges
// quadratically; for d <= 3 four to six sweeps are typical.
const maxSweeps = 40

// svdCols runs a one-sided Jacobi SVD on the r x d row-major a in place: on
// return the columns of a are mutually orthogonal (a = U S) and v (d x d,
// row-major) holds the accumulated rotations, so that a_in = a_out v^T.
func svdCols(a []float64, v *[9]float64, r, d int) {
	*v = [9]float64{}
	for k := 0; k < d; k++ {
		v[k*d+k] = 1
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
				if gamma == 0 || math.Abs(gamma) <= jacobiTol*math.Sqrt(alpha)*math.Sqrt(beta) {
					continue
				}
				rotated = true
				zeta := (beta - alpha) / (2 * gamma)
				var t float64
				if az := math.Abs(zeta); az > 1e150 {
					// zeta^2 would overflow; t ~ 1/(2 zeta).
					t = 0.5 / zeta
				} else {
					t = 1 / (az + math.Sqrt(1+zeta*zeta))
					if zeta < 0 {
						t = -t
					}
				}
				c := 1 / math.Sqrt(1+t*t)
				s := c * t
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

// scaleInto copies h/amax into a and returns amax = max |h_ij| (0 for a zero
// h, in which case a is zeroed). Scaling keeps the Gram sums clear of overflow
// and underflow for huge and tiny inputs.
func scaleInto(a, h []float64) float64 {
	amax := 0.0
	for _, x := range h {
		if ax := math.Abs(x); ax > amax {
			amax = ax
		}
	}
	if amax == 0 || math.IsInf(amax, 0) || math.IsNaN(amax) {
		copy(a, h)
		if amax == 0 {
			return 0
		}
		return amax
	}
	inv := 1 / amax
	for k, x := range h {
		a[k] = x * inv
	}
	if math.IsInf(inv, 0) { // amax subnormal: scale in two steps
		s := math.Ldexp(1, 600)
		for k, x := range h {
			a[k] = (x * s) / (amax * s)
		}
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
	amax := scaleInto(a, h)
	if amax == 0 {
		return 0
	}
	var v [9]float64
	svdCols(a, &v, r, d)
	s := 0.0
	for k := 0; k < d; k++ {
		s += colNorm(a, r, d, k)
	}
	return s * amax
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
	var buf, ubuf [MaxRows * 3]float64
	var a, u []float64
	if r <= MaxRows {
		a, u = buf[:r*d], ubuf[:r*d]
	} else {
		a, u = make([]float64, r*d), make([]float64, r*d)
	}
	amax := scaleInto(a, h)
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
	smax := sv[order[0]]
	// Below this a column's direction is rounding noise and it is treated as
	// a zero singular value.
	cut := smax * float64(r) * 1e-15
	for n := 0; n < d; n++ {
		k := order[n]
		ok := sv[k] > cut && sv[k] > 0
		if ok {
			inv := 1 / sv[k]
			for i := 0; i < r; i++ {
				u[i*d+k] = a[i*d+k] * inv
			}
			// Twice is enough (Kahan): restores orthogonality lost to
			// rounding in nearly dependent columns.
			ok = orthonormalize(u, r, d, k, order[:n])
		}
		if !ok {
			completeBasis(u, r, d, k, order[:n])
		}
	}
	if rotation {
		// det(U V^T) = det(U) det(V) for square U.
		if det(u, d)*det(v[:], d) < 0 {
			k := order[d-1]
			for i := 0; i < r; i++ {
				u[i*d+k] = -u[i*d+k]
			}
		}
	}
	// dst = U V^T.
	for i := 0; i < r; i++ {
		for c := 0; c < d; c++ {
			s := 0.0
			for k := 0; k < d; k++ {
				s += u[i*d+k] * v[c*d+k]
			}
			dst[i*d+c] = s
		}
	}
	return (sv[0] + sv[1] + sv[2]) * amax
}

// orthonormalize makes column k of u orthogonal to the columns in prev and of
// unit length, with two Gram-Schmidt passes. It reports false if too little
// of the column survives to give a trustworthy direction.
func orthonormalize(u []float64, r, d, k int, prev []int) bool {
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
	}
	nrm := colNorm(u, r, d, k)
	if nrm < 0.5 {
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
