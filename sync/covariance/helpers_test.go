package covariance_test

import (
	"math"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/bcmsync/bcmsync/posegraph"
	"github.com/bcmsync/bcmsync/sync/covariance"
)

// coords lays out the dense oracle's coordinates: vertex i's block starts
// at off[i] and has size[i] entries (PoseDim(d) for a pose, d for a
// landmark).
type coords struct {
	off, size []int
	dim       int
}

func layout(g *posegraph.Graph) coords {
	var c coords
	p := covariance.PoseDim(g.D)
	for i := 0; i < g.N(); i++ {
		k := p
		if g.IsLandmark(i) {
			k = g.D
		}
		c.off = append(c.off, c.dim)
		c.size = append(c.size, k)
		c.dim += k
	}
	return c
}

// residuals returns the whitened residual vector of every edge at x:
// sqrt(kappa) vec(R_j - R_i Rt) for pose edges, then
// sqrt(tau) (t_j - t_i - R_i tt), written from docs/design.md section 1
// with no code shared with the package.
func residuals(g *posegraph.Graph, x []posegraph.Pose) []float64 {
	d := g.D
	var r []float64
	for _, e := range g.Edges {
		xi, xj := x[e.I], x[e.J]
		if !g.IsLandmark(e.J) {
			sk := math.Sqrt(e.Kappa)
			for a := 0; a < d; a++ {
				for b := 0; b < d; b++ {
					v := xj.R[a*d+b]
					for c := 0; c < d; c++ {
						v -= xi.R[a*d+c] * e.R[c*d+b]
					}
					r = append(r, sk*v)
				}
			}
		}
		st := math.Sqrt(e.Tau)
		for a := 0; a < d; a++ {
			v := xj.T[a] - xi.T[a]
			for c := 0; c < d; c++ {
				v -= xi.R[a*d+c] * e.T[c]
			}
			r = append(r, st*v)
		}
	}
	return r
}

// expRot returns the rotation Exp(w): the angle w[0] in 2-D, Rodrigues'
// formula for the axis-angle w in 3-D.
func expRot(d int, w [3]float64) [9]float64 {
	if d == 2 {
		c, s := math.Cos(w[0]), math.Sin(w[0])
		return [9]float64{c, -s, s, c}
	}
	th := math.Sqrt(w[0]*w[0] + w[1]*w[1] + w[2]*w[2])
	k := [9]float64{0, -w[2], w[1], w[2], 0, -w[0], -w[1], w[0], 0}
	var kk [9]float64
	for a := 0; a < 3; a++ {
		for b := 0; b < 3; b++ {
			for c := 0; c < 3; c++ {
				kk[a*3+b] += k[a*3+c] * k[c*3+b]
			}
		}
	}
	s, c := 1.0, 0.5
	if th > 1e-8 {
		s, c = math.Sin(th)/th, (1-math.Cos(th))/(th*th)
	}
	var r [9]float64
	for a := range r {
		r[a] = s*k[a] + c*kk[a]
	}
	r[0]++
	r[4]++
	r[8]++
	return r
}

func mulRot(a, b [9]float64, d int) [9]float64 {
	var r [9]float64
	for i := 0; i < d; i++ {
		for j := 0; j < d; j++ {
			for k := 0; k < d; k++ {
				r[i*d+j] += a[i*d+k] * b[k*d+j]
			}
		}
	}
	return r
}

// logRot returns w with R = Exp(w) for a rotation R near I: the angle in
// 2-D, the axis-angle vector in 3-D.
func logRot(d int, r [9]float64) [3]float64 {
	if d == 2 {
		return [3]float64{math.Atan2(r[2], r[0])}
	}
	c := math.Max(-1, math.Min(1, (r[0]+r[4]+r[8]-1)/2))
	th := math.Acos(c)
	f := 0.5
	if th > 1e-8 {
		f = th / (2 * math.Sin(th))
	}
	return [3]float64{f * (r[7] - r[5]), f * (r[2] - r[6]), f * (r[3] - r[1])}
}

// perturb returns x with coordinate a of vertex i moved by h: a
// translation coordinate in the world frame, a rotation one on the right.
func perturb(g *posegraph.Graph, x []posegraph.Pose, i, a int, h float64) []posegraph.Pose {
	d := g.D
	y := append([]posegraph.Pose(nil), x...)
	if a < d {
		y[i].T[a] += h
		return y
	}
	var w [3]float64
	w[a-d] = h
	y[i].R = mulRot(y[i].R, expRot(d, w), d)
	return y
}

// denseCovariance is the oracle: the information J^T J with J by central
// differences of residuals, without the gauge's coordinates, inverted by
// gonum. It returns the covariance over all coordinates (zero rows and
// columns for the gauge).
func denseCovariance(t testing.TB, g *posegraph.Graph, x []posegraph.Pose, gauge int) (*mat.Dense, coords) {
	t.Helper()
	c := layout(g)
	r0 := residuals(g, x)
	jac := mat.NewDense(len(r0), c.dim, nil)
	const h = 1e-6
	for i := 0; i < g.N(); i++ {
		for a := 0; a < c.size[i]; a++ {
			rp := residuals(g, perturb(g, x, i, a, h))
			rm := residuals(g, perturb(g, x, i, a, -h))
			for k := range rp {
				jac.Set(k, c.off[i]+a, (rp[k]-rm[k])/(2*h))
			}
		}
	}
	var info mat.Dense
	info.Mul(jac.T(), jac)
	keep := []int{}
	for k := 0; k < c.dim; k++ {
		if k < c.off[gauge] || k >= c.off[gauge]+c.size[gauge] {
			keep = append(keep, k)
		}
	}
	sub := mat.NewDense(len(keep), len(keep), nil)
	for a, ka := range keep {
		for b, kb := range keep {
			sub.Set(a, b, info.At(ka, kb))
		}
	}
	var inv mat.Dense
	if err := inv.Inverse(sub); err != nil {
		t.Fatalf("dense oracle: %v", err)
	}
	full := mat.NewDense(c.dim, c.dim, nil)
	for a, ka := range keep {
		for b, kb := range keep {
			full.Set(ka, kb, inv.At(a, b))
		}
	}
	return full, c
}
