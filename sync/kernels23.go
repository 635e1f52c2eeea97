package sync

import (
	"math"

	"github.com/bcmsync/bcmsync/internal/sparse"
)

// Unrolled per-pose kernels for SE(2): blocks of b = 3 columns (a 2 x 2
// Stiefel part and a translation), at rank 2 and at rank 3, where a
// staircase that escapes a saddle of a 2-D graph works (the hard M3500b:
// most of its solve). They follow kernels34.go's rules: each sum is formed
// in the generic loop's order from the same +0, terms the generic loop
// adds as exact zeros (a product with a zero of the basis) are left out,
// which changes no bit of a sum that starts from +0, and on amd64 the
// results are the generic loops' bits (TestKernels23 checks it), so a
// solve takes the same path whichever runs.

// kernels23 enables the kernels below; tests turn it off to compare them
// with the generic loops.
var kernels23 = true

// is23 reports whether the kernels below apply to d, r and b: d = 2,
// b = 3 and r = 2 or 3. The projection and the multipliers' product take
// any r; callers pass 2 for the rank a kernel does not fix.
func is23(d, r, b int) bool { return kernels23 && d == 2 && (r == 2 || r == 3) && b == 3 }

// projRange23 is projRange for d = 2, b = 3 (any r; r = 3 unrolled).
func projRange23(dst, x, v *sparse.Blocks, r, lo, hi int) {
	if r == 3 {
		projRange23r3(dst, x, v, lo, hi)
		return
	}
	rb := r * 3
	for i := lo; i < hi; i++ {
		xi, vi, di := x.Data[i*rb:(i+1)*rb], v.Data[i*rb:(i+1)*rb], dst.Data[i*rb:(i+1)*rb]
		// sym(Y^T V_Y), as smalldense.SymAtB sums it.
		var s00, s01, s11 float64
		for k := 0; k < r; k++ {
			xk, vk := (*[3]float64)(xi[k*3:k*3+3]), (*[3]float64)(vi[k*3:k*3+3])
			s00 += xk[0]*vk[0] + xk[0]*vk[0]
			s01 += xk[0]*vk[1] + xk[1]*vk[0]
			s11 += xk[1]*vk[1] + xk[1]*vk[1]
		}
		s00, s01, s11 = s00/2, s01/2, s11/2
		for k := 0; k < r; k++ {
			xk, vk, dk := (*[3]float64)(xi[k*3:k*3+3]), (*[3]float64)(vi[k*3:k*3+3]), (*[3]float64)(di[k*3:k*3+3])
			x0, x1 := xk[0], xk[1]
			d0 := vk[0] - x0*s00 - x1*s01
			d1 := vk[1] - x0*s01 - x1*s11
			dk[0], dk[1], dk[2] = d0, d1, vk[2]
		}
	}
}

// projRange23r3 is projRange23 at r = 3, each block read into locals
// before its result is written (dst may be v).
func projRange23r3(dst, x, v *sparse.Blocks, lo, hi int) {
	for i := lo; i < hi; i++ {
		xi := (*[9]float64)(x.Data[i*9 : i*9+9])
		vi := (*[9]float64)(v.Data[i*9 : i*9+9])
		x00, x01, x10, x11, x20, x21 := xi[0], xi[1], xi[3], xi[4], xi[6], xi[7]
		v00, v01, v02, v10, v11, v12, v20, v21, v22 := vi[0], vi[1], vi[2], vi[3], vi[4], vi[5], vi[6], vi[7], vi[8]
		// sym(Y^T V_Y), summed over the rows in order from +0.
		s00 := 0 + (x00*v00 + x00*v00)
		s01 := 0 + (x00*v01 + x01*v00)
		s11 := 0 + (x01*v01 + x01*v01)
		s00 += x10*v10 + x10*v10
		s01 += x10*v11 + x11*v10
		s11 += x11*v11 + x11*v11
		s00 += x20*v20 + x20*v20
		s01 += x20*v21 + x21*v20
		s11 += x21*v21 + x21*v21
		s00, s01, s11 = s00/2, s01/2, s11/2
		di := (*[9]float64)(dst.Data[i*9 : i*9+9])
		di[0], di[1], di[2] = v00-x00*s00-x01*s01, v01-x00*s01-x01*s11, v02
		di[3], di[4], di[5] = v10-x10*s00-x11*s01, v11-x10*s01-x11*s11, v12
		di[6], di[7], di[8] = v20-x20*s00-x21*s01, v21-x20*s01-x21*s11, v22
	}
}

// subLambda23 is subLambda for d = 2, b = 3 (any r).
func subLambda23(v, work *sparse.Blocks, lam []float64, r, lo, hi int) {
	rb := r * 3
	for i := lo; i < hi; i++ {
		vi, wi := v.Data[i*rb:(i+1)*rb], work.Data[i*rb:(i+1)*rb]
		l := (*[4]float64)(lam[i*4 : i*4+4])
		for k := 0; k < r; k++ {
			vk, wk := (*[3]float64)(vi[k*3:k*3+3]), (*[3]float64)(wi[k*3:k*3+3])
			v0, v1 := vk[0], vk[1]
			wk[0] -= 0 + v0*l[0] + v1*l[2]
			wk[1] -= 0 + v0*l[1] + v1*l[3]
		}
	}
}

// removeRange23 is gauge.removeRange for b = 3, r = 2 or 3: v_i -= Omega
// X_i.
func removeRange23(v, x *sparse.Blocks, om []float64, r, lo, hi int) {
	if r == 2 {
		o := (*[4]float64)(om[:4])
		for i := lo; i < hi; i++ {
			xi := (*[6]float64)(x.Data[i*6 : i*6+6])
			vi := (*[6]float64)(v.Data[i*6 : i*6+6])
			for p := 0; p < 2; p++ {
				o0, o1 := o[p*2], o[p*2+1]
				vi[p*3+0] -= 0 + o0*xi[0] + o1*xi[3]
				vi[p*3+1] -= 0 + o0*xi[1] + o1*xi[4]
				vi[p*3+2] -= 0 + o0*xi[2] + o1*xi[5]
			}
		}
		return
	}
	o := (*[9]float64)(om[:9])
	for i := lo; i < hi; i++ {
		xi := (*[9]float64)(x.Data[i*9 : i*9+9])
		vi := (*[9]float64)(v.Data[i*9 : i*9+9])
		for p := 0; p < 3; p++ {
			o0, o1, o2 := o[p*3], o[p*3+1], o[p*3+2]
			vi[p*3+0] -= 0 + o0*xi[0] + o1*xi[3] + o2*xi[6]
			vi[p*3+1] -= 0 + o0*xi[1] + o1*xi[4] + o2*xi[7]
			vi[p*3+2] -= 0 + o0*xi[2] + o1*xi[5] + o2*xi[8]
		}
	}
}

// xxTRange23 is xxTRange for b = 3, r = 2 or 3: out's entries are held in
// locals across the poses, each still summed pose by pose in order.
func xxTRange23(out []float64, a, b *sparse.Blocks, r, lo, hi int) {
	if r == 2 {
		o := (*[4]float64)(out[:4])
		o00, o01, o10, o11 := o[0], o[1], o[2], o[3]
		for i := lo; i < hi; i++ {
			ai := (*[6]float64)(a.Data[i*6 : i*6+6])
			bi := (*[6]float64)(b.Data[i*6 : i*6+6])
			o00 += 0 + ai[0]*bi[0] + ai[1]*bi[1] + ai[2]*bi[2]
			o01 += 0 + ai[0]*bi[3] + ai[1]*bi[4] + ai[2]*bi[5]
			o10 += 0 + ai[3]*bi[0] + ai[4]*bi[1] + ai[5]*bi[2]
			o11 += 0 + ai[3]*bi[3] + ai[4]*bi[4] + ai[5]*bi[5]
		}
		o[0], o[1], o[2], o[3] = o00, o01, o10, o11
		return
	}
	o := (*[9]float64)(out[:9])
	o00, o01, o02 := o[0], o[1], o[2]
	o10, o11, o12 := o[3], o[4], o[5]
	o20, o21, o22 := o[6], o[7], o[8]
	for i := lo; i < hi; i++ {
		ai := (*[9]float64)(a.Data[i*9 : i*9+9])
		bi := (*[9]float64)(b.Data[i*9 : i*9+9])
		a0, a1, a2 := ai[0], ai[1], ai[2]
		o00 += 0 + a0*bi[0] + a1*bi[1] + a2*bi[2]
		o01 += 0 + a0*bi[3] + a1*bi[4] + a2*bi[5]
		o02 += 0 + a0*bi[6] + a1*bi[7] + a2*bi[8]
		a0, a1, a2 = ai[3], ai[4], ai[5]
		o10 += 0 + a0*bi[0] + a1*bi[1] + a2*bi[2]
		o11 += 0 + a0*bi[3] + a1*bi[4] + a2*bi[5]
		o12 += 0 + a0*bi[6] + a1*bi[7] + a2*bi[8]
		a0, a1, a2 = ai[6], ai[7], ai[8]
		o20 += 0 + a0*bi[0] + a1*bi[1] + a2*bi[2]
		o21 += 0 + a0*bi[3] + a1*bi[4] + a2*bi[5]
		o22 += 0 + a0*bi[6] + a1*bi[7] + a2*bi[8]
	}
	o[0], o[1], o[2] = o00, o01, o02
	o[3], o[4], o[5] = o10, o11, o12
	o[6], o[7], o[8] = o20, o21, o22
}

// coordsRange23 is hessianPrecond.coordsRange for d = 2, b = 3 in the full
// form at r = 2 (k = 3) or r = 3 (k = 6), where setRank's basis is the
// skew pair (0,1), entries +-1/sqrt2, then (r = 3) the complement row 2
// in columns 0 and 1, then the r translations: c_i = the coordinates of
// W_i^T v_i. Only the entries of u = W_i^T v_i the basis reads are formed.
func coordsRange23(c, w []float64, v *sparse.Blocks, r, lo, hi int) {
	const s = 1 / math.Sqrt2
	if r == 2 {
		for i := lo; i < hi; i++ {
			wi := (*[4]float64)(w[i*4 : i*4+4])
			vi := (*[6]float64)(v.Data[i*6 : i*6+6])
			// u[a*3+col] = sum_t w[t*2+a] v[t*3+col]
			u1 := 0 + wi[0]*vi[1] + wi[2]*vi[4]
			u2 := 0 + wi[0]*vi[2] + wi[2]*vi[5]
			u3 := 0 + wi[1]*vi[0] + wi[3]*vi[3]
			u5 := 0 + wi[1]*vi[2] + wi[3]*vi[5]
			ci := (*[3]float64)(c[i*3 : i*3+3])
			ci[0] = 0 + s*u1 + -s*u3
			ci[1] = 0 + u2
			ci[2] = 0 + u5
		}
		return
	}
	for i := lo; i < hi; i++ {
		wi := (*[9]float64)(w[i*9 : i*9+9])
		vi := (*[9]float64)(v.Data[i*9 : i*9+9])
		u1 := 0 + wi[0]*vi[1] + wi[3]*vi[4] + wi[6]*vi[7]
		u2 := 0 + wi[0]*vi[2] + wi[3]*vi[5] + wi[6]*vi[8]
		u3 := 0 + wi[1]*vi[0] + wi[4]*vi[3] + wi[7]*vi[6]
		u5 := 0 + wi[1]*vi[2] + wi[4]*vi[5] + wi[7]*vi[8]
		u6 := 0 + wi[2]*vi[0] + wi[5]*vi[3] + wi[8]*vi[6]
		u7 := 0 + wi[2]*vi[1] + wi[5]*vi[4] + wi[8]*vi[7]
		u8 := 0 + wi[2]*vi[2] + wi[5]*vi[5] + wi[8]*vi[8]
		ci := (*[6]float64)(c[i*6 : i*6+6])
		ci[0] = 0 + s*u1 + -s*u3
		ci[1] = 0 + u6
		ci[2] = 0 + u7
		ci[3] = 0 + u2
		ci[4] = 0 + u5
		ci[5] = 0 + u8
	}
}

// vectorRange23 is hessianPrecond.vectorRange for the cases of
// coordsRange23: dst_i = W_i times the tangent vector with coordinates
// z_i. The products with the basis' zero entries of u are left out.
func vectorRange23(dst *sparse.Blocks, w, z []float64, r, lo, hi int) {
	const s = 1 / math.Sqrt2
	if r == 2 {
		for i := lo; i < hi; i++ {
			zi := (*[3]float64)(z[i*3 : i*3+3])
			u1, u3 := 0+s*zi[0], 0+-s*zi[0]
			u2, u5 := 0+zi[1], 0+zi[2]
			wi := (*[4]float64)(w[i*4 : i*4+4])
			di := (*[6]float64)(dst.Data[i*6 : i*6+6])
			for t := 0; t < 2; t++ {
				w0, w1 := wi[t*2], wi[t*2+1]
				di[t*3+0] = 0 + w1*u3
				di[t*3+1] = 0 + w0*u1
				di[t*3+2] = 0 + w0*u2 + w1*u5
			}
		}
		return
	}
	for i := lo; i < hi; i++ {
		zi := (*[6]float64)(z[i*6 : i*6+6])
		u1, u3 := 0+s*zi[0], 0+-s*zi[0]
		u6, u7 := 0+zi[1], 0+zi[2]
		u2, u5, u8 := 0+zi[3], 0+zi[4], 0+zi[5]
		wi := (*[9]float64)(w[i*9 : i*9+9])
		di := (*[9]float64)(dst.Data[i*9 : i*9+9])
		for t := 0; t < 3; t++ {
			w0, w1, w2 := wi[t*3], wi[t*3+1], wi[t*3+2]
			di[t*3+0] = 0 + w1*u3 + w2*u6
			di[t*3+1] = 0 + w0*u1 + w2*u7
			di[t*3+2] = 0 + w0*u2 + w1*u5 + w2*u8
		}
	}
}
