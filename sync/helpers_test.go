package sync

import (
	"math"
	"math/rand/v2"

	"github.com/bcmsync/bcmsync/posegraph"
)

// rotation returns exp of the skew matrix of w (Rodrigues), row-major d x d;
// for d = 2 only w[0] (the angle) is used.
func rotation(d int, w [3]float64) [9]float64 {
	var r [9]float64
	if d == 2 {
		c, s := math.Cos(w[0]), math.Sin(w[0])
		r[0], r[1], r[2], r[3] = c, -s, s, c
		return r
	}
	th := math.Sqrt(w[0]*w[0] + w[1]*w[1] + w[2]*w[2])
	k := [9]float64{0, -w[2], w[1], w[2], 0, -w[0], -w[1], w[0], 0}
	var k2 [9]float64
	for a := 0; a < 3; a++ {
		for b := 0; b < 3; b++ {
			for c := 0; c < 3; c++ {
				k2[a*3+b] += k[a*3+c] * k[c*3+b]
			}
		}
	}
	s, c := 1.0, 0.5
	if th > 1e-8 {
		s, c = math.Sin(th)/th, (1-math.Cos(th))/(th*th)
	}
	for a := 0; a < 9; a++ {
		r[a] = s*k[a] + c*k2[a]
	}
	r[0]++
	r[4]++
	r[8]++
	return r
}

func mul(d int, a, b [9]float64) [9]float64 {
	var c [9]float64
	for i := 0; i < d; i++ {
		for j := 0; j < d; j++ {
			for k := 0; k < d; k++ {
				c[i*d+j] += a[i*d+k] * b[k*d+j]
			}
		}
	}
	return c
}

func transpose(d int, a [9]float64) [9]float64 {
	var t [9]float64
	for i := 0; i < d; i++ {
		for j := 0; j < d; j++ {
			t[i*d+j] = a[j*d+i]
		}
	}
	return t
}

// noisyGraph builds a connected graph over a random walk: odometry edges
// plus loop closures to random earlier poses, with rotation noise of
// standard deviation sigmaR (radians per axis) and translation noise sigmaT.
func noisyGraph(d, n, closures int, sigmaR, sigmaT float64, seed uint64) (*posegraph.Graph, []posegraph.Pose) {
	rng := rand.New(rand.NewPCG(seed, 99))
	truth := make([]posegraph.Pose, n)
	truth[0] = posegraph.Identity(d)
	for i := 1; i < n; i++ {
		var w [3]float64
		for a := range w {
			w[a] = 0.3 * rng.NormFloat64()
		}
		truth[i].R = mul(d, truth[i-1].R, rotation(d, w))
		for a := 0; a < d; a++ {
			step := 0.0
			if a == 0 {
				step = 1
			}
			for c := 0; c < d; c++ {
				truth[i].T[a] += truth[i-1].R[a*d+c] * step
			}
			truth[i].T[a] += truth[i-1].T[a] + 0.1*rng.NormFloat64()
		}
	}
	g := &posegraph.Graph{D: d}
	for i := 0; i < n; i++ {
		g.IDs = append(g.IDs, i)
	}
	add := func(i, j int) {
		rel := mul(d, transpose(d, truth[i].R), truth[j].R)
		var w [3]float64
		for a := range w {
			w[a] = sigmaR * rng.NormFloat64()
		}
		e := posegraph.Edge{I: i, J: j, R: mul(d, rel, rotation(d, w)), Kappa: 1 / (2 * math.Max(sigmaR*sigmaR, 1e-6)), Tau: 1 / math.Max(sigmaT*sigmaT, 1e-6)}
		for a := 0; a < d; a++ {
			for c := 0; c < d; c++ {
				e.T[a] += truth[i].R[c*d+a] * (truth[j].T[c] - truth[i].T[c])
			}
			e.T[a] += sigmaT * rng.NormFloat64()
		}
		g.Edges = append(g.Edges, e)
	}
	for i := 0; i+1 < n; i++ {
		add(i, i+1)
	}
	for k := 0; k < closures; k++ {
		j := 2 + rng.IntN(n-2)
		i := rng.IntN(j - 1)
		add(i, j)
	}
	return g, truth
}
