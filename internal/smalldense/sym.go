package smalldense

// SymAtB sets dst (d x d, row-major) to sym(A^T B) = (A^T B + B^T A)/2,
// where A and B are the first d columns of the r x b row-major blocks a and
// b (d <= bw, the blocks' width). This is the Lagrange multiplier block Lambda_i = sym(Y_i^T
// (XQ)_i) of the Stiefel constraint and the normal part of a projection onto
// the tangent space of St(d, r), which the BCM solver and the Riemannian
// trust region both need for every block. Both triangles of dst are set.
func SymAtB(dst, a, b []float64, r, bw, d int) {
	for t := 0; t < d; t++ {
		for c := t; c < d; c++ {
			v := 0.0
			for k := 0; k < r; k++ {
				v += a[k*bw+t]*b[k*bw+c] + a[k*bw+c]*b[k*bw+t]
			}
			dst[t*d+c] = v / 2
			dst[c*d+t] = v / 2
		}
	}
}
