package rounding

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
)

// randomStiefel returns an r x d matrix with orthonormal columns, row-major.
func randomStiefel(rng *rand.Rand, r, d int) []float64 {
	a := mat.NewDense(r, d, nil)
	for p := 0; p < r; p++ {
		for c := 0; c < d; c++ {
			a.Set(p, c, rng.NormFloat64())
		}
	}
	var qr mat.QR
	qr.Factorize(a)
	var q mat.Dense
	qr.QTo(&q)
	out := make([]float64, r*d)
	for p := 0; p < r; p++ {
		for c := 0; c < d; c++ {
			out[p*d+c] = q.At(p, c)
		}
	}
	return out
}

// liftWith returns X with X_i = [O R_i + noise, p_i] (p_i random when b = d+1).
func liftWith(rng *rand.Rand, o []float64, rots []posegraph.Pose, r, d, b int, noise float64) *sparse.Blocks {
	x := sparse.NewBlocks(r, b, len(rots))
	for i, p := range rots {
		blk := x.Block(i)
		for a := 0; a < r; a++ {
			for c := 0; c < d; c++ {
				s := 0.0
				for k := 0; k < d; k++ {
					s += o[a*d+k] * p.R[k*d+c]
				}
				blk[a*b+c] = s + noise*rng.NormFloat64()
			}
			if b == d+1 {
				blk[a*b+d] = 10 * rng.NormFloat64()
			}
		}
	}
	return x
}

func randomRotations(rng *rand.Rand, d, n int) []posegraph.Pose {
	out := make([]posegraph.Pose, n)
	for i := range out {
		out[i].R = RandomRotation(rng, d)
	}
	return out
}

func TestRoundRecoversLiftedRotations(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, d := range []int{2, 3} {
		for _, r := range []int{d, d + 1, d + 3, 10} {
			for _, b := range []int{d, d + 1} {
				for _, noise := range []float64{0, 1e-3} {
					n := 40
					truth := randomRotations(rng, d, n)
					x := liftWith(rng, randomStiefel(rng, r, d), truth, r, d, b, noise)
					got := Round(x, d)
					if len(got) != n {
						t.Fatalf("d=%d r=%d: %d poses, want %d", d, r, len(got), n)
					}
					for i, p := range got {
						checkRotation(t, p.R, d, 1e-12, "rounded rotation")
						if p.T != ([3]float64{}) {
							t.Fatalf("pose %d: translation %v, want zero", i, p.T)
						}
					}
					tol := 1e-10
					if noise > 0 {
						tol = 50 * noise
					}
					sameUpToGauge(t, got, truth, d, true, tol)
				}
			}
		}
	}
}

// TestRoundFlipsReflectedBasis hands roundWith a basis U_d = O S, S a
// reflection, so that every U_d^T Y_i = S R_i is improper: the flip must
// restore R_i exactly.
func TestRoundFlipsReflectedBasis(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, d := range []int{2, 3} {
		r, n := d+2, 25
		truth := randomRotations(rng, d, n)
		o := randomStiefel(rng, r, d)
		x := liftWith(rng, o, truth, r, d, d+1, 0)
		reflected := append([]float64(nil), o...)
		for p := 0; p < r; p++ {
			reflected[p*d+d-1] = -reflected[p*d+d-1]
		}
		for _, ud := range [][]float64{o, reflected} {
			got := roundWith(x, d, ud, nil, false)
			for i := range got {
				checkRotation(t, got[i].R, d, 1e-12, "rounded rotation")
				for k := 0; k < d*d; k++ {
					if math.Abs(got[i].R[k]-truth[i].R[k]) > 1e-12 {
						t.Fatalf("d=%d pose %d: entry %d is %g, want %g", d, i, k, got[i].R[k], truth[i].R[k])
					}
				}
			}
		}
	}
}

// TestRoundMinorityImproper: with a few blocks reflected on purpose, the
// majority decides the orientation and the reflected ones are projected to
// rotations.
func TestRoundMinorityImproper(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	d, r, n := 3, 5, 30
	truth := randomRotations(rng, d, n)
	x := liftWith(rng, randomStiefel(rng, r, d), truth, r, d, d, 0)
	for _, i := range []int{2, 7, 11} {
		blk := x.Block(i)
		for a := 0; a < r; a++ {
			blk[a*d] = -blk[a*d] // Y_i S with S = diag(-1, 1, 1)
		}
	}
	got := Round(x, d)
	skip := map[int]bool{2: true, 7: true, 11: true}
	var a, b []posegraph.Pose
	for i := range got {
		checkRotation(t, got[i].R, d, 1e-12, "rounded rotation")
		if !skip[i] {
			a = append(a, got[i])
			b = append(b, truth[i])
		}
	}
	sameUpToGauge(t, a, b, d, true, 1e-2)
}

// TestTopLeftSingularMatchesSVD compares the basis from the r x r
// eigenproblem with gonum's SVD of the dense r x dn matrix Y: both must
// span the same subspace.
func TestTopLeftSingularMatchesSVD(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, d := range []int{2, 3} {
		r, n := 7, 15
		x := sparse.NewBlocks(r, d+1, n)
		for k := range x.Data {
			x.Data[k] = rng.NormFloat64()
		}
		ud := topLeftSingular(x, d, nil)
		y := mat.NewDense(r, d*n, nil)
		for i := 0; i < n; i++ {
			for a := 0; a < r; a++ {
				for c := 0; c < d; c++ {
					y.Set(a, i*d+c, x.Block(i)[a*(d+1)+c])
				}
			}
		}
		var svd mat.SVD
		if !svd.Factorize(y, mat.SVDThin) {
			t.Fatal("oracle SVD failed")
		}
		var u mat.Dense
		svd.UTo(&u)
		for p := 0; p < r; p++ {
			for q := 0; q < r; q++ {
				got, want := 0.0, 0.0
				for c := 0; c < d; c++ {
					got += ud[p*d+c] * ud[q*d+c]
					want += u.At(p, c) * u.At(q, c)
				}
				if math.Abs(got-want) > 1e-10 {
					t.Fatalf("d=%d: projector entry (%d,%d) = %g, SVD gives %g", d, p, q, got, want)
				}
			}
		}
	}
}

// TestNearestRotation checks the projection against its defining property:
// the result is a rotation and no random rotation is closer.
func TestNearestRotation(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, d := range []int{2, 3} {
		for trial := 0; trial < 50; trial++ {
			m := make([]float64, d*d)
			for k := range m {
				m[k] = rng.NormFloat64()
			}
			r := NearestRotation(m, d)
			checkRotation(t, r, d, 1e-12, "nearest rotation")
			dist := func(q [9]float64) float64 {
				s := 0.0
				for k := 0; k < d*d; k++ {
					s += (q[k] - m[k]) * (q[k] - m[k])
				}
				return s
			}
			best := dist(r)
			for k := 0; k < 200; k++ {
				q := mulRot(r, smallRotation(rng, d, 0.3), d)
				if dist(q) < best-1e-12 {
					t.Fatalf("d=%d: a rotation at distance %g beats the projection's %g", d, dist(q), best)
				}
			}
		}
		// Already a rotation: unchanged.
		q := RandomRotation(rng, d)
		r := NearestRotation(q[:d*d], d)
		for k := 0; k < d*d; k++ {
			if math.Abs(r[k]-q[k]) > 1e-14 {
				t.Fatalf("d=%d: projection moved a rotation by %g", d, r[k]-q[k])
			}
		}
	}
}
