package posegraph

import (
	"math"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// homogeneous returns p as the (d+1) x (d+1) matrix [[R, t], [0, 1]].
func homogeneous(p Pose, d int) *mat.Dense {
	h := mat.NewDense(d+1, d+1, nil)
	for a := 0; a < d; a++ {
		for c := 0; c < d; c++ {
			h.Set(a, c, p.R[a*d+c])
		}
		h.Set(a, d, p.T[a])
	}
	h.Set(d, d, 1)
	return h
}

// TestComposeBetween checks Compose, Between and Inverse against products
// and inverses of homogeneous matrices (gonum) in 2-D and 3-D.
func TestComposeBetween(t *testing.T) {
	pose := func(d int, th float64, tr [3]float64) Pose {
		p := Pose{T: tr}
		c, s := math.Cos(th), math.Sin(th)
		if d == 2 {
			p.R = [9]float64{c, -s, s, c}
		} else {
			// A rotation about the axis (1, 2, 2)/3.
			k := [3]float64{1.0 / 3, 2.0 / 3, 2.0 / 3}
			for a := 0; a < 3; a++ {
				for b := 0; b < 3; b++ {
					v := (1 - c) * k[a] * k[b]
					if a == b {
						v += c
					}
					p.R[a*3+b] = v
				}
			}
			p.R[1] -= s * k[2]
			p.R[3] += s * k[2]
			p.R[2] += s * k[1]
			p.R[6] -= s * k[1]
			p.R[5] -= s * k[0]
			p.R[7] += s * k[0]
		}
		return p
	}
	for _, d := range []int{2, 3} {
		p := pose(d, 0.7, [3]float64{1, -2, 0.5})
		q := pose(d, -1.9, [3]float64{-0.3, 4, 2})
		hp, hq := homogeneous(p, d), homogeneous(q, d)
		var want, inv mat.Dense
		want.Mul(hp, hq)
		if !mat.EqualApprox(homogeneous(Compose(&p, &q, d), d), &want, 1e-12) {
			t.Errorf("d=%d: Compose", d)
		}
		if err := inv.Inverse(hp); err != nil {
			t.Fatal(err)
		}
		want.Mul(&inv, hq)
		if !mat.EqualApprox(homogeneous(Between(&p, &q, d), d), &want, 1e-12) {
			t.Errorf("d=%d: Between", d)
		}
		if !mat.EqualApprox(homogeneous(Inverse(&p, d), d), &inv, 1e-12) {
			t.Errorf("d=%d: Inverse", d)
		}
	}
}
