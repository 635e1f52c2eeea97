package rounding

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/bcmsync/bcmsync/internal/smalldense"
	"github.com/bcmsync/bcmsync/posegraph"
)

// randomGraph returns a connected graph on n poses (a chain plus extra
// random loop closures) with measurements generated from the returned ground
// truth, perturbed by rotation noise of about rotNoise radians and
// translation noise of standard deviation transNoise.
func randomGraph(rng *rand.Rand, d, n, extra int, rotNoise, transNoise float64) (*posegraph.Graph, []posegraph.Pose) {
	truth := make([]posegraph.Pose, n)
	for i := range truth {
		truth[i].R = RandomRotation(rng, d)
		for a := 0; a < d; a++ {
			truth[i].T[a] = 5 * rng.NormFloat64()
		}
	}
	g := &posegraph.Graph{D: d, Source: "random"}
	for i := 0; i < n; i++ {
		g.IDs = append(g.IDs, 10+i)
	}
	add := func(i, j int) {
		e := posegraph.Edge{I: i, J: j, Kappa: 0.5 + 2*rng.Float64(), Tau: 0.5 + 2*rng.Float64()}
		ri, rj := &truth[i].R, &truth[j].R
		rel := smalldense.MulTN(ri, rj, d)
		if rotNoise > 0 {
			rel = mulRot(rel, smallRotation(rng, d, rotNoise), d)
		}
		e.R = rel
		for a := 0; a < d; a++ {
			s := 0.0
			for k := 0; k < d; k++ {
				s += ri[k*d+a] * (truth[j].T[k] - truth[i].T[k])
			}
			e.T[a] = s + transNoise*rng.NormFloat64()
		}
		g.Edges = append(g.Edges, e)
	}
	for i := 0; i+1 < n; i++ {
		add(i, i+1)
	}
	for k := 0; k < extra; k++ {
		i, j := rng.IntN(n), rng.IntN(n)
		if i == j {
			continue
		}
		add(i, j)
	}
	return g, truth
}

// mulRot is smalldense.Mul for values (the call sites pass expressions).
func mulRot(a, b [9]float64, d int) [9]float64 { return smalldense.Mul(&a, &b, d) }

func transpose(a [9]float64, d int) [9]float64 {
	var t [9]float64
	for p := 0; p < d; p++ {
		for q := 0; q < d; q++ {
			t[q*d+p] = a[p*d+q]
		}
	}
	return t
}

// smallRotation is exp of a random skew matrix of norm about sigma.
func smallRotation(rng *rand.Rand, d int, sigma float64) [9]float64 {
	if d == 2 {
		th := sigma * rng.NormFloat64()
		return [9]float64{math.Cos(th), -math.Sin(th), math.Sin(th), math.Cos(th)}
	}
	w := [3]float64{sigma * rng.NormFloat64(), sigma * rng.NormFloat64(), sigma * rng.NormFloat64()}
	th := math.Sqrt(w[0]*w[0] + w[1]*w[1] + w[2]*w[2])
	if th == 0 {
		return [9]float64{1, 0, 0, 0, 1, 0, 0, 0, 1}
	}
	k := [3]float64{w[0] / th, w[1] / th, w[2] / th}
	K := [9]float64{0, -k[2], k[1], k[2], 0, -k[0], -k[1], k[0], 0}
	K2 := mulRot(K, K, 3)
	var r [9]float64
	for p := 0; p < 9; p++ {
		r[p] = math.Sin(th)*K[p] + (1-math.Cos(th))*K2[p]
	}
	r[0]++
	r[4]++
	r[8]++
	return r
}

// checkRotation fails unless r is in SO(d) to tol.
func checkRotation(t *testing.T, r [9]float64, d int, tol float64, what string) {
	t.Helper()
	rt := mulRot(transpose(r, d), r, d)
	for p := 0; p < d; p++ {
		for q := 0; q < d; q++ {
			want := 0.0
			if p == q {
				want = 1
			}
			if math.Abs(rt[p*d+q]-want) > tol {
				t.Fatalf("%s: R^T R - I has entry %g", what, rt[p*d+q]-want)
			}
		}
	}
	if det := posegraph.Det(r[:], d); math.Abs(det-1) > tol {
		t.Fatalf("%s: det R = %g", what, det)
	}
}

// sameUpToGauge fails unless a_i = M b_i for one rigid motion M (rotations
// only if rotOnly) for all i, to tol.
func sameUpToGauge(t *testing.T, a, b []posegraph.Pose, d int, rotOnly bool, tol float64) {
	t.Helper()
	// M = a_0 b_0^{-1}.
	rm := mulRot(a[0].R, transpose(b[0].R, d), d)
	var tm [3]float64
	for p := 0; p < d; p++ {
		s := 0.0
		for k := 0; k < d; k++ {
			s += rm[p*d+k] * b[0].T[k]
		}
		tm[p] = a[0].T[p] - s
	}
	for i := range a {
		r := mulRot(rm, b[i].R, d)
		for k := 0; k < d*d; k++ {
			if math.Abs(r[k]-a[i].R[k]) > tol {
				t.Fatalf("pose %d: rotation differs from the reference (after the gauge) by %g", i, r[k]-a[i].R[k])
			}
		}
		if rotOnly {
			continue
		}
		for p := 0; p < d; p++ {
			s := tm[p]
			for k := 0; k < d; k++ {
				s += rm[p*d+k] * b[i].T[k]
			}
			if math.Abs(s-a[i].T[p]) > tol*(1+math.Abs(s)) {
				t.Fatalf("pose %d: translation %d differs from the reference (after the gauge) by %g", i, p, s-a[i].T[p])
			}
		}
	}
}

// denseLeastSquares solves min ||A x - b|| (A of full column rank) with
// gonum's SVD. (gonum's QR solve returned a visibly non-minimal answer on
// some of these very sparse, well-conditioned matrices; the SVD did not.)
func denseLeastSquares(t *testing.T, a *mat.Dense, b *mat.VecDense) *mat.VecDense {
	t.Helper()
	var svd mat.SVD
	if !svd.Factorize(a, mat.SVDThin) {
		t.Fatal("dense oracle: SVD failed")
	}
	_, c := a.Dims()
	var z mat.Dense
	svd.SolveTo(&z, b, c)
	x := mat.NewVecDense(c, nil)
	x.CopyVec(z.ColView(0))
	return x
}
