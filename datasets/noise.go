package datasets

import (
	"math"
	"math/rand/v2"

	"github.com/bcmsync/bcmsync/posegraph"
)

// The noise model. The maximum-likelihood objective of docs/design.md section 1,
//
//	F = sum_e kappa ||R_j - R_i Rt_e||_F^2 + tau ||t_j - t_i - R_i tt_e||^2,
//
// is twice the negative log-likelihood of measurements Rt_e = R_i^T R_j E_e,
// tt_e = R_i^T (t_j - t_i) + eps_e with
//
//	E_e   ~ Langevin(I, kappa): density proportional to exp(kappa tr E)
//	        with respect to Haar measure on SO(d),
//	eps_e ~ N(0, I_d / tau).
//
// Indeed ||I - E||_F^2 = 2d - 2 tr E, so exp(kappa tr E) is
// exp(-kappa/2 ||I - E||_F^2) up to a constant, and at the true poses the
// rotation residual is R_j (I - E_e). So the ML weight kappa IS the Langevin
// concentration in this parametrization; no conversion is needed. The angle
// theta of E (tr E = 2 cos theta in 2-D, 1 + 2 cos theta in 3-D) then has
//
//	SO(2): density on (-pi, pi] proportional to exp(2 kappa cos theta),
//	       a von Mises distribution with concentration 2 kappa;
//	SO(3): a uniform axis and density on [0, pi] proportional to
//	       (1 - cos theta) exp(2 kappa cos theta) (Haar measure on SO(3)
//	       has angle density (1 - cos theta) / pi).
//
// For large kappa the rotation error is a small rotation exp([w]_x) with
// w ~ N(0, I/(2 kappa)) in 3-D (theta ~ N(0, 1/(2 kappa)) in 2-D): an angle
// standard deviation of 1/sqrt(2 kappa) per axis.
//
// Per-edge cost at the truth. The rotation term is
// kappa ||I - E||_F^2 = 4 kappa (1 - cos theta) in both dimensions; its mean
// tends to d(d-1)/2 (the dimension of SO(d)) as kappa grows. The translation
// term is tau ||eps||^2, chi-squared with d degrees of freedom: mean d,
// variance 2d. Edges are independent, so E[F] and Var[F] are sums over edges
// (see ExpectedCost).

// rotNoise returns a Langevin(I, kappa) sample on SO(d) as a row-major d x d
// rotation (stride d).
func rotNoise(rng *rand.Rand, d int, kappa float64) [9]float64 {
	var r [9]float64
	if d == 2 {
		th := vonMises(rng, 2*kappa)
		c, s := math.Cos(th), math.Sin(th)
		r[0], r[1], r[2], r[3] = c, -s, s, c
		return r
	}
	th := langevinAngle3(rng, 2*kappa)
	return axisAngle(unitVector3(rng), th)
}

// vonMises samples an angle in (-pi, pi] with density proportional to
// exp(k cos theta), by Best and Fisher's (1979) wrapped-Cauchy rejection
// method, which accepts at least 65% of proposals for every k.
func vonMises(rng *rand.Rand, k float64) float64 {
	switch {
	case k < 1e-8:
		return math.Pi * (2*rng.Float64() - 1)
	case k > 1e6:
		// The rejection constants lose all precision here, and the
		// wrapped normal with variance 1/k differs from von Mises by
		// O(1/k) in distribution, far below anything observable.
		return rng.NormFloat64() / math.Sqrt(k)
	}
	tau := 1 + math.Sqrt(1+4*k*k)
	rho := (tau - math.Sqrt(2*tau)) / (2 * k)
	r := (1 + rho*rho) / (2 * rho)
	for {
		z := math.Cos(math.Pi * rng.Float64())
		f := (1 + r*z) / (r + z)
		c := k * (r - f)
		u := rng.Float64()
		if c*(2-c)-u > 0 || math.Log(c/u)+1-c >= 0 {
			th := math.Acos(math.Max(-1, math.Min(1, f)))
			if rng.Float64() < 0.5 {
				th = -th
			}
			return th
		}
	}
}

// langevinAngle3 samples theta in [0, pi] with density proportional to
// (1 - cos theta) exp(-a (1 - cos theta)), the rotation angle of a
// Langevin(I, a/2) rotation on SO(3).
//
// Proposal: theta = |w| with w ~ N(0, I/(2c)), density proportional to
// theta^2 exp(-c theta^2), truncated to [0, pi]. Because
// (1 - cos theta)/theta^2 decreases from 1/2 to 2/pi^2 on [0, pi], the choice
// c = 2a/pi^2 makes the ratio target/proposal at most 1/2 everywhere, so
// accepting with probability
//
//	2 (1 - cos theta)/theta^2 exp(-a (1 - cos theta) + c theta^2) <= 1
//
// is exact, and accepts about (4/pi^2)^(3/2) ~ 26% for large a. For small a
// the Gaussian mostly lands beyond pi; there the proposal is
// theta^2 on [0, pi] (c = 0) instead.
func langevinAngle3(rng *rand.Rand, a float64) float64 {
	if a < 1 {
		for {
			th := math.Pi * math.Cbrt(rng.Float64())
			if th == 0 {
				continue
			}
			u := oneMinusCos(th)
			if rng.Float64() < 2*u/(th*th)*math.Exp(-a*u) {
				return th
			}
		}
	}
	c := 2 * a / (math.Pi * math.Pi)
	s := 1 / math.Sqrt(2*c)
	for {
		x, y, z := s*rng.NormFloat64(), s*rng.NormFloat64(), s*rng.NormFloat64()
		th := math.Sqrt(x*x + y*y + z*z)
		if th > math.Pi || th == 0 {
			continue
		}
		u := oneMinusCos(th)
		if rng.Float64() < 2*u/(th*th)*math.Exp(-a*u+c*th*th) {
			return th
		}
	}
}

// oneMinusCos is 1 - cos(th) without cancellation for small th.
func oneMinusCos(th float64) float64 {
	s := math.Sin(th / 2)
	return 2 * s * s
}

// unitVector3 returns a uniformly distributed unit vector in R^3.
func unitVector3(rng *rand.Rand) [3]float64 {
	for {
		x, y, z := rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()
		if n := math.Sqrt(x*x + y*y + z*z); n > 1e-12 {
			return [3]float64{x / n, y / n, z / n}
		}
	}
}

// axisAngle returns the rotation by th about the unit axis k (Rodrigues).
func axisAngle(k [3]float64, th float64) [9]float64 {
	c, s := math.Cos(th), math.Sin(th)
	v := oneMinusCos(th)
	x, y, z := k[0], k[1], k[2]
	return [9]float64{
		c + x*x*v, x*y*v - z*s, x*z*v + y*s,
		y*x*v + z*s, c + y*y*v, y*z*v - x*s,
		z*x*v - y*s, z*y*v + x*s, c + z*z*v,
	}
}

// randomRotation returns a Haar-distributed rotation of SO(d).
func randomRotation(rng *rand.Rand, d int) [9]float64 {
	if d == 2 {
		th := math.Pi * (2*rng.Float64() - 1)
		c, s := math.Cos(th), math.Sin(th)
		return [9]float64{c, -s, s, c}
	}
	// A normalized Gaussian 4-vector is a uniform unit quaternion, and
	// unit quaternions cover SO(3) twice with Haar measure.
	var q [4]float64
	for {
		n := 0.0
		for k := range q {
			q[k] = rng.NormFloat64()
			n += q[k] * q[k]
		}
		if n > 1e-12 {
			n = math.Sqrt(n)
			for k := range q {
				q[k] /= n
			}
			break
		}
	}
	w, x, y, z := q[0], q[1], q[2], q[3]
	return [9]float64{
		1 - 2*(y*y+z*z), 2 * (x*y - w*z), 2 * (x*z + w*y),
		2 * (x*y + w*z), 1 - 2*(x*x+z*z), 2 * (y*z - w*x),
		2 * (x*z - w*y), 2 * (y*z + w*x), 1 - 2*(x*x+y*y),
	}
}

// angleMoments returns E[1 - cos theta] and E[(1 - cos theta)^2] for the
// angle of a Langevin(I, kappa) rotation on SO(d), by composite Simpson
// quadrature of the angle densities above (the integrands are smooth, and
// the range is cut where the weight exp(-2 kappa (1 - cos theta)) falls
// below e^-80).
func angleMoments(d int, kappa float64) (m1, m2 float64) {
	a := 2 * kappa
	hi := math.Pi
	if a > 40 {
		hi = 2 * math.Asin(math.Sqrt(40/a)) // a (1 - cos hi) = 80
	}
	const n = 4000 // even
	h := hi / n
	var z, s1, s2 float64
	for k := 0; k <= n; k++ {
		th := float64(k) * h
		u := oneMinusCos(th)
		w := math.Exp(-a * u)
		if d == 3 {
			w *= u
		}
		switch {
		case k == 0 || k == n:
		case k%2 == 1:
			w *= 4
		default:
			w *= 2
		}
		z += w
		s1 += w * u
		s2 += w * u * u
	}
	return s1 / z, s2 / z
}

// EdgeCostMoments returns the mean and variance of one edge's term in F at
// the ground truth, for an edge generated with noise Langevin(I, kappa) and
// N(0, I/tau) in dimension d: the rotation term 4 kappa (1 - cos theta) and,
// for posegraph.Poses, the translation term, chi-squared with d degrees of
// freedom.
func EdgeCostMoments(d int, kappa float64, p posegraph.Problem) (mean, variance float64) {
	m1, m2 := angleMoments(d, kappa)
	mean = 4 * kappa * m1
	variance = 16 * kappa * kappa * (m2 - m1*m1)
	if p == posegraph.Poses {
		mean += float64(d)
		variance += 2 * float64(d)
	}
	return mean, variance
}

// ExpectedCost returns the mean and variance of F(ground truth) over the
// noise, for a graph whose measurements were generated by this package with
// noise (not NoiseFree): the sum over edges of EdgeCostMoments, edges being
// independent. A landmark observation (kappa = 0, from AddLandmarks) has
// no rotation term: its cost is chi-squared with d degrees of freedom. A
// ground-truth cost many standard deviations away signals a noise model
// that does not match the weights.
func ExpectedCost(g *posegraph.Graph, p posegraph.Problem) (mean, variance float64) {
	type mv struct{ m, v float64 }
	memo := map[float64]mv{}
	for _, e := range g.Edges {
		t, ok := memo[e.Kappa]
		if !ok {
			t.m, t.v = EdgeCostMoments(g.D, e.Kappa, p)
			memo[e.Kappa] = t
		}
		mean += t.m
		variance += t.v
	}
	return mean, variance
}
