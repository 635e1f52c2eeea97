package trajeval

import (
	"math"
	"math/rand/v2"
)

// randRotation returns a random rotation of SO(d) (uniform in 2-D; a unit
// quaternion from a normalized Gaussian 4-vector in 3-D).
func randRotation(rng *rand.Rand, d int) [9]float64 {
	if d == 2 {
		return rot2(math.Pi * (2*rng.Float64() - 1))
	}
	var q [4]float64
	n := 0.0
	for k := range q {
		q[k] = rng.NormFloat64()
		n += q[k] * q[k]
	}
	n = math.Sqrt(n)
	w, x, y, z := q[0]/n, q[1]/n, q[2]/n, q[3]/n
	return [9]float64{
		1 - 2*(y*y+z*z), 2 * (x*y - w*z), 2 * (x*z + w*y),
		2 * (x*y + w*z), 1 - 2*(x*x+z*z), 2 * (y*z - w*x),
		2 * (x*z - w*y), 2 * (y*z + w*x), 1 - 2*(x*x+y*y),
	}
}

func rot2(th float64) [9]float64 {
	c, s := math.Cos(th), math.Sin(th)
	return [9]float64{c, -s, s, c}
}

// rotZ is the 3-D rotation by th about z.
func rotZ(th float64) [9]float64 {
	c, s := math.Cos(th), math.Sin(th)
	return [9]float64{c, -s, 0, s, c, 0, 0, 0, 1}
}

func randPoses(rng *rand.Rand, d, n int) []Pose {
	ps := make([]Pose, n)
	for k := range ps {
		ps[k].R = randRotation(rng, d)
		for a := 0; a < d; a++ {
			ps[k].T[a] = 10 * rng.NormFloat64()
		}
	}
	return ps
}

func maxAbs(v []float64) float64 {
	m := 0.0
	for _, x := range v {
		m = math.Max(m, math.Abs(x))
	}
	return m
}
