package g2o

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bcmsync/bcmsync/posegraph"
)

// rotateByQuat rotates v by the unit quaternion q = (x, y, z, w) as the
// product q v q*, independently of the matrix formula.
func rotateByQuat(q [4]float64, v [3]float64) [3]float64 {
	mul := func(a, b [4]float64) [4]float64 {
		return [4]float64{
			a[3]*b[0] + a[0]*b[3] + a[1]*b[2] - a[2]*b[1],
			a[3]*b[1] - a[0]*b[2] + a[1]*b[3] + a[2]*b[0],
			a[3]*b[2] + a[0]*b[1] - a[1]*b[0] + a[2]*b[3],
			a[3]*b[3] - a[0]*b[0] - a[1]*b[1] - a[2]*b[2],
		}
	}
	r := mul(mul(q, [4]float64{v[0], v[1], v[2], 0}), [4]float64{-q[0], -q[1], -q[2], q[3]})
	return [3]float64{r[0], r[1], r[2]}
}

func unit(q [4]float64) [4]float64 {
	n := math.Sqrt(q[0]*q[0] + q[1]*q[1] + q[2]*q[2] + q[3]*q[3])
	return [4]float64{q[0] / n, q[1] / n, q[2] / n, q[3] / n}
}

// quatCases are random quaternions plus the hard ones: identity, rotations
// by pi about the axes and about diagonals (w = 0, where the trace formula
// divides by zero), and rotations just short of pi.
func quatCases() [][4]float64 {
	qs := [][4]float64{
		{0, 0, 0, 1}, {1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}, {0, 0, 0, -1},
		{1, 1, 0, 0}, {0, 1, 1, 0}, {1, 0, 1, 0}, {1, 1, 1, 0}, {1, -1, 1, 0},
		{1, 0, 0, 1e-9}, {0, 1, 0, 1e-12}, {0, 0, 1, -1e-9}, {1e-8, 1e-8, 1e-8, 1},
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for k := 0; k < 500; k++ {
		qs = append(qs, [4]float64{rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()})
	}
	return qs
}

// TestRotationFromQuat checks the matrix against the quaternion product and
// that it is a proper rotation.
func TestRotationFromQuat(t *testing.T) {
	for _, q := range quatCases() {
		r, ok := RotationFromQuat(q[0], q[1], q[2], q[3])
		if !ok {
			t.Fatalf("%v rejected", q)
		}
		u := unit(q)
		for c := 0; c < 3; c++ {
			var e [3]float64
			e[c] = 1
			v := rotateByQuat(u, e)
			for a := 0; a < 3; a++ {
				if math.Abs(r[a*3+c]-v[a]) > 1e-14 {
					t.Fatalf("q=%v: column %d of R is %v, q e q* = %v", q, c, []float64{r[c], r[3+c], r[6+c]}, v)
				}
			}
		}
		if dev := orthoDev(r); dev > 1e-14 || math.Abs(posegraph.Det(r[:], 3)-1) > 1e-14 {
			t.Fatalf("q=%v: R not a rotation (%g)", q, dev)
		}
	}
}

// TestQuatRoundTrip checks QuatFromRotation against RotationFromQuat both
// ways: R -> q -> R reproduces R, and q -> R -> q gives +-q.
func TestQuatRoundTrip(t *testing.T) {
	for _, q := range quatCases() {
		r, _ := RotationFromQuat(q[0], q[1], q[2], q[3])
		x, y, z, w := QuatFromRotation(r)
		if w < 0 {
			t.Errorf("w = %g < 0", w)
		}
		if n := x*x + y*y + z*z + w*w; math.Abs(n-1) > 1e-15 {
			t.Errorf("|q|^2 = %.17g", n)
		}
		r2, _ := RotationFromQuat(x, y, z, w)
		for k := range r {
			if math.Abs(r[k]-r2[k]) > 1e-15 {
				t.Fatalf("q=%v: R %v -> q %v -> R %v", q, r, []float64{x, y, z, w}, r2)
			}
		}
		u := unit(q)
		s := math.Copysign(1, u[0]*x+u[1]*y+u[2]*z+u[3]*w)
		for k, v := range []float64{x, y, z, w} {
			if math.Abs(s*v-u[k]) > 1e-14 {
				t.Fatalf("q=%v: got %v, want +-%v", q, []float64{x, y, z, w}, u)
			}
		}
	}
}

// TestQuatScaling checks that tiny, huge, zero and non-finite quaternions
// are handled without overflow, underflow or NaN.
func TestQuatScaling(t *testing.T) {
	want, _ := RotationFromQuat(1, 2, 3, 4)
	for _, s := range []float64{1e-310, 1e-200, 1e200, 1e307} {
		r, ok := RotationFromQuat(s, 2*s, 3*s, 4*s)
		if !ok {
			t.Fatalf("scale %g rejected", s)
		}
		for k := range r {
			if math.Abs(r[k]-want[k]) > 1e-15 {
				t.Errorf("scale %g: %v, want %v", s, r, want)
				break
			}
		}
	}
	for _, q := range [][4]float64{{0, 0, 0, 0}, {math.NaN(), 0, 0, 1}, {math.Inf(1), 0, 0, 1}} {
		if _, ok := RotationFromQuat(q[0], q[1], q[2], q[3]); ok {
			t.Errorf("%v accepted", q)
		}
	}
}

// TestAngle checks that angles round-trip through the 2-D rotation, exactly
// in the rotation where a nearby float allows it.
func TestAngle(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	exact := 0
	const trials = 2000
	for k := 0; k < trials; k++ {
		th := (2*rng.Float64() - 1) * 10
		r := RotationFromAngle(th)
		if dev := orthoDev(r2to3(r)); dev > 1e-15 {
			t.Fatalf("theta %g: not a rotation", th)
		}
		back := AngleFromRotation(r)
		if math.Abs(math.Remainder(back-th, 2*math.Pi)) > 1e-14 || math.Abs(back) > 3*math.Pi+1e-9 {
			t.Fatalf("theta %g -> %g", th, back)
		}
		if RotationFromAngle(back) == r {
			exact++
		}
	}
	t.Logf("%d of %d rotations reproduced exactly", exact, trials)
	if exact < trials*9/10 {
		t.Errorf("only %d of %d rotations reproduced exactly", exact, trials)
	}
	if th := AngleFromRotation(RotationFromAngle(math.Pi)); math.Abs(math.Abs(th)-math.Pi) > 1e-15 {
		t.Errorf("pi -> %g", th)
	}
}

func r2to3(r [9]float64) [9]float64 {
	return [9]float64{r[0], r[1], 0, r[2], r[3], 0, 0, 0, 1}
}

func orthoDev(r [9]float64) float64 {
	dev := 0.0
	for a := 0; a < 3; a++ {
		for b := 0; b < 3; b++ {
			s := 0.0
			for k := 0; k < 3; k++ {
				s += r[k*3+a] * r[k*3+b]
			}
			if a == b {
				s--
			}
			dev = math.Max(dev, math.Abs(s))
		}
	}
	return dev
}
