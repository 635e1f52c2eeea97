package sync

import (
	"math"

	"github.com/bcmsync/bcmsync/internal/sparse"
)

// Unrolled per-pose kernels for SE(3) at rank 3, the trust region's case
// on every large 3-D graph: blocks of b = 4 columns (a 3 x 3 Stiefel part
// and a translation) and r = 3 rows. The generic loops run over r, b and d
// with 3 or 4 iterations each and spend more on bounds checks and counters
// than on the products; these do the same arithmetic over fixed-size
// arrays. Each sum is formed in the generic loop's order, from the same
// +0 where the generic loop starts from one (so that a sum of -0 products
// is +0 in both), and on amd64, where Go never fuses a multiply and an
// add, the results are the same bits (TestKernels34 checks it) and a
// solve takes the same path whichever runs. Where Go fuses them (arm64,
// for one) the two may round differently in the last place.

// kernels34 enables the kernels below; tests turn it off to compare them
// with the generic loops.
var kernels34 = true

// is34 reports whether the kernels below apply to d, r and b. The
// projection and the multipliers' product take any r; callers pass 3 for
// the dimension a kernel does not fix.
func is34(d, r, b int) bool { return kernels34 && d == 3 && r == 3 && b == 4 }

// projRange34 is projRange for d = 3, b = 4 (any r).
func projRange34(dst, x, v *sparse.Blocks, r, lo, hi int) {
	rb := r * 4
	for i := lo; i < hi; i++ {
		xi, vi, di := x.Data[i*rb:(i+1)*rb], v.Data[i*rb:(i+1)*rb], dst.Data[i*rb:(i+1)*rb]
		// sym(Y^T V_Y), as smalldense.SymAtB sums it.
		var s00, s01, s02, s11, s12, s22 float64
		for k := 0; k < r; k++ {
			xk, vk := (*[4]float64)(xi[k*4:k*4+4]), (*[4]float64)(vi[k*4:k*4+4])
			s00 += xk[0]*vk[0] + xk[0]*vk[0]
			s01 += xk[0]*vk[1] + xk[1]*vk[0]
			s02 += xk[0]*vk[2] + xk[2]*vk[0]
			s11 += xk[1]*vk[1] + xk[1]*vk[1]
			s12 += xk[1]*vk[2] + xk[2]*vk[1]
			s22 += xk[2]*vk[2] + xk[2]*vk[2]
		}
		s00, s01, s02, s11, s12, s22 = s00/2, s01/2, s02/2, s11/2, s12/2, s22/2
		for k := 0; k < r; k++ {
			xk, vk, dk := (*[4]float64)(xi[k*4:k*4+4]), (*[4]float64)(vi[k*4:k*4+4]), (*[4]float64)(di[k*4:k*4+4])
			x0, x1, x2 := xk[0], xk[1], xk[2]
			d0 := vk[0] - x0*s00 - x1*s01 - x2*s02
			d1 := vk[1] - x0*s01 - x1*s11 - x2*s12
			d2 := vk[2] - x0*s02 - x1*s12 - x2*s22
			dk[0], dk[1], dk[2], dk[3] = d0, d1, d2, vk[3]
		}
	}
}

// subLambda34 is subLambda for d = 3, b = 4 (any r).
func subLambda34(v, work *sparse.Blocks, lam []float64, r, lo, hi int) {
	rb := r * 4
	for i := lo; i < hi; i++ {
		vi, wi := v.Data[i*rb:(i+1)*rb], work.Data[i*rb:(i+1)*rb]
		l := (*[9]float64)(lam[i*9 : i*9+9])
		for k := 0; k < r; k++ {
			vk, wk := (*[4]float64)(vi[k*4:k*4+4]), (*[4]float64)(wi[k*4:k*4+4])
			v0, v1, v2 := vk[0], vk[1], vk[2]
			wk[0] -= 0 + v0*l[0] + v1*l[3] + v2*l[6]
			wk[1] -= 0 + v0*l[1] + v1*l[4] + v2*l[7]
			wk[2] -= 0 + v0*l[2] + v1*l[5] + v2*l[8]
		}
	}
}

// mulWU34 sets the 3 x 4 dst = W u for the 3 x 3 W (the pose's basis
// frame) and 3 x 4 u, each entry summed over W's columns in order.
func mulWU34(dst *[12]float64, w *[9]float64, u *[12]float64) {
	for t := 0; t < 3; t++ {
		w0, w1, w2 := w[t*3], w[t*3+1], w[t*3+2]
		dst[t*4+0] = 0 + w0*u[0] + w1*u[4] + w2*u[8]
		dst[t*4+1] = 0 + w0*u[1] + w1*u[5] + w2*u[9]
		dst[t*4+2] = 0 + w0*u[2] + w1*u[6] + w2*u[10]
		dst[t*4+3] = 0 + w0*u[3] + w1*u[7] + w2*u[11]
	}
}

// mulWtV34 sets the 3 x 4 dst = W^T v, each entry summed over W's rows in
// order.
func mulWtV34(dst *[12]float64, w *[9]float64, v *[12]float64) {
	for a := 0; a < 3; a++ {
		w0, w1, w2 := w[a], w[3+a], w[6+a]
		dst[a*4+0] = 0 + w0*v[0] + w1*v[4] + w2*v[8]
		dst[a*4+1] = 0 + w0*v[1] + w1*v[5] + w2*v[9]
		dst[a*4+2] = 0 + w0*v[2] + w1*v[6] + w2*v[10]
		dst[a*4+3] = 0 + w0*v[3] + w1*v[7] + w2*v[11]
	}
}

// removeRange34 is gauge.removeRange for r = 3, b = 4: v_i -= Omega X_i.
func removeRange34(v, x *sparse.Blocks, om *[9]float64, lo, hi int) {
	var s [12]float64
	for i := lo; i < hi; i++ {
		xi := (*[12]float64)(x.Data[i*12 : i*12+12])
		vi := (*[12]float64)(v.Data[i*12 : i*12+12])
		mulWU34(&s, om, xi)
		for k, sk := range s {
			vi[k] -= sk
		}
	}
}

// xxTRange34 is xxTRange for r = 3, b = 4.
func xxTRange34(out []float64, a, b *sparse.Blocks, lo, hi int) {
	o := (*[9]float64)(out[:9])
	for i := lo; i < hi; i++ {
		ai := (*[12]float64)(a.Data[i*12 : i*12+12])
		bi := (*[12]float64)(b.Data[i*12 : i*12+12])
		for p := 0; p < 3; p++ {
			a0, a1, a2, a3 := ai[p*4], ai[p*4+1], ai[p*4+2], ai[p*4+3]
			o[p*3+0] += a0*bi[0] + a1*bi[1] + a2*bi[2] + a3*bi[3]
			o[p*3+1] += a0*bi[4] + a1*bi[5] + a2*bi[6] + a3*bi[7]
			o[p*3+2] += a0*bi[8] + a1*bi[9] + a2*bi[10] + a3*bi[11]
		}
	}
}

// coordsRange34 is hessianPrecond.coordsRange for d = r = 3, b = 4, where
// setRank's basis is the skew pairs (0,1), (0,2), (1,2), entries +-1/sqrt2,
// then the three translations: c_i = the coordinates of W_i^T v_i. Each
// sum starts from 0, as the generic loop's does.
func coordsRange34(c, w []float64, v *sparse.Blocks, lo, hi int) {
	const s = 1 / math.Sqrt2
	var u [12]float64
	for i := lo; i < hi; i++ {
		mulWtV34(&u, (*[9]float64)(w[i*9:i*9+9]), (*[12]float64)(v.Data[i*12:i*12+12]))
		ci := (*[6]float64)(c[i*6 : i*6+6])
		ci[0] = 0 + s*u[1] + -s*u[4]
		ci[1] = 0 + s*u[2] + -s*u[8]
		ci[2] = 0 + s*u[6] + -s*u[9]
		ci[3] = 0 + u[3]
		ci[4] = 0 + u[7]
		ci[5] = 0 + u[11]
	}
}

// vectorRange34 is hessianPrecond.vectorRange for d = r = 3, b = 4 (see
// coordsRange34): dst_i = W_i times the tangent vector with coordinates z_i.
func vectorRange34(dst *sparse.Blocks, w, z []float64, lo, hi int) {
	const s = 1 / math.Sqrt2
	var u [12]float64
	for i := lo; i < hi; i++ {
		zi := (*[6]float64)(z[i*6 : i*6+6])
		u[1], u[4] = 0+s*zi[0], 0+-s*zi[0]
		u[2], u[8] = 0+s*zi[1], 0+-s*zi[1]
		u[6], u[9] = 0+s*zi[2], 0+-s*zi[2]
		u[3], u[7], u[11] = 0+zi[3], 0+zi[4], 0+zi[5]
		mulWU34((*[12]float64)(dst.Data[i*12:i*12+12]), (*[9]float64)(w[i*9:i*9+9]), &u)
	}
}
