package smalldense

import "math"

// gramEig3 rotates the columns of the r x 3 matrix a by an orthogonal v
// (a <- a v) chosen from the closed-form eigen-decomposition of the Gram
// matrix a^T a, so that the columns of a come out nearly orthogonal. It is a
// preconditioner for the one-sided Jacobi sweeps of svdCols, which then
// usually finish in one rotating sweep instead of three or four: squaring
// a loses accuracy in the small singular values, which those sweeps restore.
// It reports false (leaving a and v unchanged) when the Gram matrix is
// already diagonal or its spectrum too clustered for the closed form to
// help.
func gramEig3(a []float64, v *[9]float64, r int) bool {
	var m00, m01, m02, m11, m12, m22 float64
	for k := 0; k < r; k++ {
		x, y, z := a[3*k], a[3*k+1], a[3*k+2]
		m00 += x * x
		m01 += x * y
		m02 += x * z
		m11 += y * y
		m12 += y * z
		m22 += z * z
	}
	off := m01*m01 + m02*m02 + m12*m12
	q := (m00 + m11 + m22) / 3
	d0, d1, d2 := m00-q, m11-q, m22-q
	p2 := d0*d0 + d1*d1 + d2*d2 + 2*off
	if off <= 1e-30*p2 || p2 == 0 {
		return false
	}
	p := math.Sqrt(p2 / 6)
	// Eigenvalues of B = (M - q I)/p are 2 cos(phi + 2 pi k/3), phi =
	// acos(det(B)/2)/3.
	ip := 1 / p
	b00, b11, b22 := d0*ip, d1*ip, d2*ip
	b01, b02, b12 := m01*ip, m02*ip, m12*ip
	det := b00*(b11*b22-b12*b12) - b01*(b01*b22-b12*b02) + b02*(b01*b12-b11*b02)
	h := det / 2
	if h > 1 {
		h = 1
	} else if h < -1 {
		h = -1
	}
	phi := math.Acos(h) / 3
	// cos(phi + 2 pi/3) = -cos(phi)/2 - sin(phi) sqrt(3)/2, phi in [0, pi/3].
	cp := math.Cos(phi)
	sp := math.Sqrt(math.Max(0, 1-cp*cp))
	l1 := q + 2*p*cp                 // largest
	l3 := q - p*(cp+math.Sqrt(3)*sp) // smallest
	l2 := 3*q - l1 - l3
	// The eigenvector of the better separated extreme eigenvalue is
	// determined well by the cross products of rows of M - lambda I.
	lam := l1
	if l2-l3 > l1-l2 {
		lam = l3
	}
	r0 := [3]float64{m00 - lam, m01, m02}
	r1 := [3]float64{m01, m11 - lam, m12}
	r2 := [3]float64{m02, m12, m22 - lam}
	c0, c1, c2 := cross(r0, r1), cross(r0, r2), cross(r1, r2)
	n0, n1, n2 := dot(c0, c0), dot(c1, c1), dot(c2, c2)
	e, n := c0, n0
	if n1 > n {
		e, n = c1, n1
	}
	if n2 > n {
		e, n = c2, n2
	}
	// Too clustered (or rounding noise): let the Jacobi sweeps do it all.
	if n <= 1e-20*p2*p2 {
		return false
	}
	s := 1 / math.Sqrt(n)
	e[0], e[1], e[2] = e[0]*s, e[1]*s, e[2]*s
	// An orthonormal basis f, g of the complement of e, then the 2 x 2
	// eigenproblem of M restricted to it, solved by one rotation.
	var f [3]float64
	if math.Abs(e[0]) < 0.6 {
		f = [3]float64{0, -e[2], e[1]} // e x (1, 0, 0), up to sign
	} else {
		f = [3]float64{e[2], 0, -e[0]} // e x (0, 1, 0), up to sign
	}
	s = 1 / math.Sqrt(dot(f, f))
	f[0], f[1], f[2] = f[0]*s, f[1]*s, f[2]*s
	g := cross(e, f)
	mv := func(x [3]float64) [3]float64 {
		return [3]float64{
			m00*x[0] + m01*x[1] + m02*x[2],
			m01*x[0] + m11*x[1] + m12*x[2],
			m02*x[0] + m12*x[1] + m22*x[2],
		}
	}
	mf, mg := mv(f), mv(g)
	alpha, beta, gamma := dot(f, mf), dot(g, mg), dot(f, mg)
	if gamma != 0 {
		c, sn := jacobiRotation(alpha, beta, gamma)
		for k := 0; k < 3; k++ {
			fk, gk := f[k], g[k]
			f[k] = c*fk - sn*gk
			g[k] = sn*fk + c*gk
		}
	}
	// v = [e f g] as columns; a <- a v.
	*v = [9]float64{e[0], f[0], g[0], e[1], f[1], g[1], e[2], f[2], g[2]}
	for k := 0; k < r; k++ {
		x, y, z := a[3*k], a[3*k+1], a[3*k+2]
		a[3*k] = x*e[0] + y*e[1] + z*e[2]
		a[3*k+1] = x*f[0] + y*f[1] + z*f[2]
		a[3*k+2] = x*g[0] + y*g[1] + z*g[2]
	}
	return true
}

func cross(a, b [3]float64) [3]float64 {
	return [3]float64{a[1]*b[2] - a[2]*b[1], a[2]*b[0] - a[0]*b[2], a[0]*b[1] - a[1]*b[0]}
}

func dot(a, b [3]float64) float64 { return a[0]*b[0] + a[1]*b[1] + a[2]*b[2] }
