package smalldense

// Mul returns a b for d x d matrices (d <= 3) stored row-major with stride
// d in the first d*d entries of fixed-size arrays, the layout of
// posegraph.Pose's rotation. It returns by value, so it does not allocate.
func Mul(a, b *[9]float64, d int) [9]float64 {
	var c [9]float64
	for i := 0; i < d; i++ {
		for j := 0; j < d; j++ {
			s := 0.0
			for k := 0; k < d; k++ {
				s += a[i*d+k] * b[k*d+j]
			}
			c[i*d+j] = s
		}
	}
	return c
}

// MulTN returns a^T b for d x d matrices laid out as for Mul; with a a
// rotation it is a^-1 b, the relative rotation of b seen from a.
func MulTN(a, b *[9]float64, d int) [9]float64 {
	var c [9]float64
	for i := 0; i < d; i++ {
		for j := 0; j < d; j++ {
			s := 0.0
			for k := 0; k < d; k++ {
				s += a[k*d+i] * b[k*d+j]
			}
			c[i*d+j] = s
		}
	}
	return c
}

// MulTVec returns a^T v for a d x d matrix laid out as for Mul and a
// d-vector; with a a pose's rotation and v a difference of positions it
// expresses v in that pose's frame (the translation of a relative pose).
func MulTVec(a *[9]float64, v *[3]float64, d int) [3]float64 {
	var c [3]float64
	for i := 0; i < d; i++ {
		s := 0.0
		for k := 0; k < d; k++ {
			s += a[k*d+i] * v[k]
		}
		c[i] = s
	}
	return c
}
