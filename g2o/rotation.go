package g2o

import "math"

// RotationFromAngle returns the 2-D rotation by theta radians, row-major with
// stride 2: [cos -sin; sin cos].
func RotationFromAngle(theta float64) [9]float64 {
	s, c := math.Sincos(theta)
	return [9]float64{c, -s, s, c}
}

// AngleFromRotation returns the angle theta of the 2-D rotation r (row-major,
// stride 2): atan2's answer in [-pi, pi], unless a float within a few ulps of
// it or of its 2 pi shifts reproduces r bit for bit under RotationFromAngle
// where atan2's does not. So writing a pose read from a file and reading it
// again usually loses nothing.
func AngleFromRotation(r [9]float64) float64 {
	th := math.Atan2(r[2], r[0])
	if exactAngle(th, r) {
		return th
	}
	// atan2(sin t, cos t) can land an ulp or two away from an angle that
	// reproduces r, and a file's angle may lie outside [-pi, pi]: look at
	// the nearest few floats around th and th +- 2 pi.
	for _, base := range [3]float64{th, th + 2*math.Pi, th - 2*math.Pi} {
		up, down := base, base
		if exactAngle(base, r) {
			return base
		}
		for k := 0; k < 4; k++ {
			up = math.Nextafter(up, math.Inf(1))
			if exactAngle(up, r) {
				return up
			}
			down = math.Nextafter(down, math.Inf(-1))
			if exactAngle(down, r) {
				return down
			}
		}
	}
	return th
}

func exactAngle(th float64, r [9]float64) bool {
	s, c := math.Sincos(th)
	return c == r[0] && s == r[2] && -s == r[1] && c == r[3]
}

// RotationFromQuat returns the 3-D rotation (row-major, stride 3) of the
// quaternion x i + y j + z k + w, which need not have unit norm: it is
// normalized first, scaled so that tiny or huge components neither underflow
// nor overflow. ok is false when the quaternion is zero or not finite.
func RotationFromQuat(x, y, z, w float64) (r [9]float64, ok bool) {
	x, y, z, w, ok = normalizeQuat(x, y, z, w)
	if !ok {
		return r, false
	}
	xx, yy, zz := x*x, y*y, z*z
	xy, xz, yz := x*y, x*z, y*z
	xw, yw, zw := x*w, y*w, z*w
	r = [9]float64{
		1 - 2*(yy+zz), 2 * (xy - zw), 2 * (xz + yw),
		2 * (xy + zw), 1 - 2*(xx+zz), 2 * (yz - xw),
		2 * (xz - yw), 2 * (yz + xw), 1 - 2*(xx+yy),
	}
	return r, true
}

// RotationFromQuatRaw returns the matrix that Eigen's
// Quaternion::toRotationMatrix builds from x i + y j + z k + w as given,
// without normalizing it, as SE-Sync's g2o reader does (ReadOptions
// RawQuaternions):
//
//	[[1 - 2(y^2 + z^2), 2(xy - zw),        2(xz + yw)],
//	 [2(xy + zw),        1 - 2(x^2 + z^2), 2(yz - xw)],
//	 [2(xz - yw),        2(yz + xw),        1 - 2(x^2 + y^2)]]
//
// For q = s u with u a unit quaternion this is exactly I + s^2 (R(u) - I):
// a rotation only when s = 1, off orthogonal by O(|s^2 - 1|) otherwise. ok
// is false when the quaternion is zero or not finite, which Read rejects in
// either reading.
func RotationFromQuatRaw(x, y, z, w float64) (r [9]float64, ok bool) {
	if s := math.Max(math.Max(math.Abs(x), math.Abs(y)), math.Max(math.Abs(z), math.Abs(w))); !(s > 0) || math.IsInf(s, 0) {
		return r, false // zero, NaN (comparison false) or infinite
	}
	xx, yy, zz := x*x, y*y, z*z
	xy, xz, yz := x*y, x*z, y*z
	xw, yw, zw := x*w, y*w, z*w
	r = [9]float64{
		1 - 2*(yy+zz), 2 * (xy - zw), 2 * (xz + yw),
		2 * (xy + zw), 1 - 2*(xx+zz), 2 * (yz - xw),
		2 * (xz - yw), 2 * (yz + xw), 1 - 2*(xx+yy),
	}
	return r, true
}

func normalizeQuat(x, y, z, w float64) (float64, float64, float64, float64, bool) {
	s := math.Max(math.Max(math.Abs(x), math.Abs(y)), math.Max(math.Abs(z), math.Abs(w)))
	if !(s > 0) || math.IsInf(s, 0) {
		// Zero, NaN (comparison false) or infinite.
		return 0, 0, 0, 0, false
	}
	x, y, z, w = x/s, y/s, z/s, w/s
	n := math.Sqrt(x*x + y*y + z*z + w*w) // in [1, 2]: no over- or underflow
	return x / n, y / n, z / n, w / n, true
}

// QuatFromRotation returns the unit quaternion (x, y, z, w), w >= 0, of the
// 3-D rotation r (row-major, stride 3) by Shepperd's method: of the four
// candidate formulas it uses the one whose square root has the largest
// argument (at least 1 for a rotation), so there is no cancellation or
// division by a small number near rotations by pi. A matrix that is only
// approximately a rotation gives the normalized quaternion of the formula.
func QuatFromRotation(r [9]float64) (x, y, z, w float64) {
	r00, r01, r02 := r[0], r[1], r[2]
	r10, r11, r12 := r[3], r[4], r[5]
	r20, r21, r22 := r[6], r[7], r[8]
	// 4w^2, 4x^2, 4y^2, 4z^2 for a rotation; they sum to 4.
	a := [4]float64{
		1 + r00 + r11 + r22,
		1 + r00 - r11 - r22,
		1 - r00 + r11 - r22,
		1 - r00 - r11 + r22,
	}
	k := 0
	for i := 1; i < 4; i++ {
		if a[i] > a[k] {
			k = i
		}
	}
	h := 0.5 * math.Sqrt(a[k])
	f := 0.25 / h
	switch k {
	case 0:
		w = h
		x = (r21 - r12) * f
		y = (r02 - r20) * f
		z = (r10 - r01) * f
	case 1:
		x = h
		w = (r21 - r12) * f
		y = (r01 + r10) * f
		z = (r02 + r20) * f
	case 2:
		y = h
		w = (r02 - r20) * f
		x = (r01 + r10) * f
		z = (r12 + r21) * f
	default:
		z = h
		w = (r10 - r01) * f
		x = (r02 + r20) * f
		y = (r12 + r21) * f
	}
	if w < 0 {
		x, y, z, w = -x, -y, -z, -w
	}
	if nx, ny, nz, nw, ok := normalizeQuat(x, y, z, w); ok {
		return nx, ny, nz, nw
	}
	// Only a non-finite r gets here.
	return x, y, z, w
}
