package posegraph

import (
	"math"
	"math/rand/v2"
)

// randomRotation returns a uniformly random rotation of SO(d), row-major.
func randomRotation(rng *rand.Rand, d int) [9]float64 {
	var r [9]float64
	if d == 2 {
		th := rng.Float64() * 2 * math.Pi
		c, s := math.Cos(th), math.Sin(th)
		r[0], r[1], r[2], r[3] = c, -s, s, c
		return r
	}
	// Unit quaternion from four Gaussians is uniform on SO(3).
	w, x, y, z := rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()
	n := math.Sqrt(w*w + x*x + y*y + z*z)
	w, x, y, z = w/n, x/n, y/n, z/n
	r = [9]float64{
		1 - 2*(y*y+z*z), 2 * (x*y - w*z), 2 * (x*z + w*y),
		2 * (x*y + w*z), 1 - 2*(x*x+z*z), 2 * (y*z - w*x),
		2 * (x*z - w*y), 2 * (y*z + w*x), 1 - 2*(x*x+y*y),
	}
	return r
}

// randomGraph returns a connected graph: an odometry chain plus extra random
// edges (repeated pairs included), random measurements and weights.
func randomGraph(rng *rand.Rand, d, n, extra int) *Graph {
	g := &Graph{D: d}
	for i := 0; i < n; i++ {
		g.IDs = append(g.IDs, 10*i+3)
	}
	add := func(i, j int) {
		e := Edge{I: i, J: j, R: randomRotation(rng, d), Kappa: 0.1 + 10*rng.Float64(), Tau: 0.1 + 10*rng.Float64()}
		for a := 0; a < d; a++ {
			e.T[a] = rng.NormFloat64()
		}
		g.Edges = append(g.Edges, e)
	}
	for i := 0; i+1 < n; i++ {
		add(i, i+1)
	}
	for k := 0; k < extra; k++ {
		i, j := rng.IntN(n), rng.IntN(n)
		if i != j {
			add(i, j)
		}
	}
	return g
}

func randomPoses(rng *rand.Rand, d, n int) []Pose {
	x := make([]Pose, n)
	for i := range x {
		x[i].R = randomRotation(rng, d)
		for a := 0; a < d; a++ {
			x[i].T[a] = 5 * rng.NormFloat64()
		}
	}
	return x
}
