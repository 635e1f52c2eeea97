package trajeval

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/bcmsync/bcmsync/internal/smalldense"
)

// TestAlignExactTransform: a trajectory moved by a known SE(d) (or Sim(d))
// transform aligns back to zero error, and Align recovers the transform.
func TestAlignExactTransform(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, d := range []int{2, 3} {
		for _, kind := range []Alignment{AlignSE, AlignSim} {
			ref := randPoses(rng, d, 30)
			// est = G^-1 ref, so aligning est to ref must find G.
			g := Transform{R: randRotation(rng, d), Scale: 1}
			if kind == AlignSim {
				g.Scale = 0.3 + 2*rng.Float64()
			}
			for a := 0; a < d; a++ {
				g.T[a] = 5 * rng.NormFloat64()
			}
			est := make([]Pose, len(ref))
			for k, p := range ref {
				// x = R^T (y - t) / s, R_est = R^T R_ref.
				est[k].R = smalldense.MulTN(&g.R, &p.R, d)
				for a := 0; a < d; a++ {
					s := 0.0
					for b := 0; b < d; b++ {
						s += g.R[b*d+a] * (p.T[b] - g.T[b])
					}
					est[k].T[a] = s / g.Scale
				}
			}
			res, err := Evaluate(d, est, ref, Options{Align: kind})
			if err != nil {
				t.Fatal(err)
			}
			tr := res.Transform
			for a := range g.R[:d*d] {
				if math.Abs(tr.R[a]-g.R[a]) > 1e-12 {
					t.Errorf("d=%d %v: R = %v, want %v", d, kind, tr.R[:d*d], g.R[:d*d])
					break
				}
			}
			for a := 0; a < d; a++ {
				if math.Abs(tr.T[a]-g.T[a]) > 1e-11 {
					t.Errorf("d=%d %v: t = %v, want %v", d, kind, tr.T[:d], g.T[:d])
					break
				}
			}
			if math.Abs(tr.Scale-g.Scale) > 1e-12 {
				t.Errorf("d=%d %v: scale %v, want %v", d, kind, tr.Scale, g.Scale)
			}
			for name, e := range map[string][]float64{"ATE": res.ATE, "ATE rot": res.ATERot, "RPE": res.RPE, "RPE rot": res.RPERot} {
				if m := maxAbs(e); m > 1e-10 {
					t.Errorf("d=%d %v: %s up to %g, want 0", d, kind, name, m)
				}
			}
			// Without alignment the same pair is far apart.
			res, err = Evaluate(d, est, ref, Options{Align: AlignNone})
			if err != nil {
				t.Fatal(err)
			}
			if Summarize(res.ATE).RMSE < 1e-3 {
				t.Errorf("d=%d %v: unaligned ATE %g is not large", d, kind, Summarize(res.ATE).RMSE)
			}
		}
	}
}

// oracleAlign computes Umeyama's transform with gonum's dense SVD.
func oracleAlign(d int, est, ref []Pose, sim bool) Transform {
	n := float64(len(est))
	mx, my := make([]float64, d), make([]float64, d)
	for k := range est {
		for a := 0; a < d; a++ {
			mx[a] += est[k].T[a] / n
			my[a] += ref[k].T[a] / n
		}
	}
	c := mat.NewDense(d, d, nil)
	varX := 0.0
	for k := range est {
		dx, dy := mat.NewVecDense(d, nil), mat.NewVecDense(d, nil)
		for a := 0; a < d; a++ {
			dx.SetVec(a, est[k].T[a]-mx[a])
			dy.SetVec(a, ref[k].T[a]-my[a])
		}
		varX += mat.Dot(dx, dx) / n
		var o mat.Dense
		o.Outer(1/n, dy, dx)
		c.Add(c, &o)
	}
	var svd mat.SVD
	if !svd.Factorize(c, mat.SVDFull) {
		panic("svd failed")
	}
	var u, v mat.Dense
	svd.UTo(&u)
	svd.VTo(&v)
	sv := svd.Values(nil)
	s := mat.NewDiagDense(d, nil)
	for a := 0; a < d; a++ {
		s.SetDiag(a, 1)
	}
	if mat.Det(&u)*mat.Det(&v) < 0 {
		s.SetDiag(d-1, -1)
	}
	var r, tmp mat.Dense
	tmp.Mul(&u, s)
	r.Mul(&tmp, v.T())
	tr := Transform{Scale: 1}
	for a := 0; a < d; a++ {
		for b := 0; b < d; b++ {
			tr.R[a*d+b] = r.At(a, b)
		}
	}
	if sim {
		num := 0.0
		for a := 0; a < d; a++ {
			num += sv[a] * s.At(a, a)
		}
		tr.Scale = num / varX
	}
	for a := 0; a < d; a++ {
		x := 0.0
		for b := 0; b < d; b++ {
			x += tr.R[a*d+b] * mx[b]
		}
		tr.T[a] = my[a] - tr.Scale*x
	}
	return tr
}

// cost is sum_k ||y_k - (s R x_k + t)||^2.
func cost(d int, tr Transform, est, ref []Pose) float64 {
	f := 0.0
	for k := range est {
		p := tr.Apply(est[k], d)
		for a := 0; a < d; a++ {
			f += (ref[k].T[a] - p.T[a]) * (ref[k].T[a] - p.T[a])
		}
	}
	return f
}

// TestAlignOracle compares Align with the dense gonum SVD on noisy random
// data, including a reflection case where the determinant correction is
// needed, and checks by brute force that no nearby rotation, translation
// or scale fits better.
func TestAlignOracle(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 40; trial++ {
		d := 2 + trial%2
		n := 3 + rng.IntN(20)
		ref := randPoses(rng, d, n)
		est := make([]Pose, n)
		g := randRotation(rng, d)
		for k := range est {
			for a := 0; a < d; a++ {
				s := 0.0
				for b := 0; b < d; b++ {
					s += g[a*d+b] * ref[k].T[b]
				}
				est[k].T[a] = 0.7*s + 3 + rng.NormFloat64()*float64(trial%5)
			}
			if trial%7 == 6 {
				est[k].T[0] = -est[k].T[0] // a mirror image: det correction
			}
		}
		for _, kind := range []Alignment{AlignSE, AlignSim} {
			got, err := Align(d, est, ref, kind)
			if err != nil {
				t.Fatal(err)
			}
			want := oracleAlign(d, est, ref, kind == AlignSim)
			scale := 1 + maxAbs(want.T[:d])
			for a := range got.R[:d*d] {
				if math.Abs(got.R[a]-want.R[a]) > 1e-9 {
					t.Errorf("trial %d d=%d %v: R %v, oracle %v", trial, d, kind, got.R[:d*d], want.R[:d*d])
					break
				}
			}
			for a := 0; a < d; a++ {
				if math.Abs(got.T[a]-want.T[a]) > 1e-9*scale {
					t.Errorf("trial %d d=%d %v: t %v, oracle %v", trial, d, kind, got.T[:d], want.T[:d])
					break
				}
			}
			if math.Abs(got.Scale-want.Scale) > 1e-9 {
				t.Errorf("trial %d d=%d %v: scale %v, oracle %v", trial, d, kind, got.Scale, want.Scale)
			}
			if p := Det(&got.R, d); math.Abs(p-1) > 1e-12 {
				t.Errorf("trial %d: det R = %v", trial, p)
			}
			// Brute force: perturbations never lower the cost.
			f0 := cost(d, got, est, ref)
			for k := 0; k < 50; k++ {
				pert := got
				step := 1e-3 * float64(1+k%5)
				pert.R = smalldense.Mul(&got.R, ptr(smallRotation(rng, d, step)), d)
				for a := 0; a < d; a++ {
					pert.T[a] += step * rng.NormFloat64()
				}
				if kind == AlignSim {
					pert.Scale *= 1 + step*rng.NormFloat64()
				}
				if f := cost(d, pert, est, ref); f < f0-1e-9*(1+f0) {
					t.Errorf("trial %d d=%d %v: a perturbed transform fits better: %v < %v", trial, d, kind, f, f0)
					break
				}
			}
		}
	}
}

func ptr(r [9]float64) *[9]float64 { return &r }

// smallRotation is a rotation by about step radians about a random axis.
func smallRotation(rng *rand.Rand, d int, step float64) [9]float64 {
	if d == 2 {
		return rot2(step * rng.NormFloat64())
	}
	w := [3]float64{step * rng.NormFloat64(), step * rng.NormFloat64(), step * rng.NormFloat64()}
	th := math.Sqrt(w[0]*w[0] + w[1]*w[1] + w[2]*w[2])
	x, y, z := w[0]/th, w[1]/th, w[2]/th
	c, s := math.Cos(th), math.Sin(th)
	v := 1 - c
	return [9]float64{
		c + x*x*v, x*y*v - z*s, x*z*v + y*s,
		y*x*v + z*s, c + y*y*v, y*z*v - x*s,
		z*x*v - y*s, z*y*v + x*s, c + z*z*v,
	}
}

// Det is the determinant of a d x d row-major matrix (test helper).
func Det(r *[9]float64, d int) float64 {
	if d == 2 {
		return r[0]*r[3] - r[1]*r[2]
	}
	return r[0]*(r[4]*r[8]-r[5]*r[7]) - r[1]*(r[3]*r[8]-r[5]*r[6]) + r[2]*(r[3]*r[7]-r[4]*r[6])
}

// TestAlignByHand: ref (0,0), (2,0) and est (0,0), (3,0). The rigid fit
// centres est on ref's mean, leaving 0.5 at both ends; the similarity fit
// scales by 2/3 and matches exactly.
func TestAlignByHand(t *testing.T) {
	for _, d := range []int{2, 3} {
		id := Pose{R: Identity(d).R}
		ref := []Pose{id, id}
		est := []Pose{id, id}
		ref[1].T[0], est[1].T[0] = 2, 3
		tr, err := Align(d, est, ref, AlignSE)
		if err != nil {
			t.Fatal(err)
		}
		if tr.T[0] != -0.5 || tr.T[1] != 0 || tr.Scale != 1 {
			t.Errorf("d=%d se: %+v", d, tr)
		}
		res, err := Evaluate(d, est, ref, Options{Align: AlignSE})
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(res.ATE[0]-0.5) > 1e-15 || math.Abs(res.ATE[1]-0.5) > 1e-15 || res.RPE[0] != 1 {
			t.Errorf("d=%d se: ATE %v RPE %v, want [0.5 0.5] [1]", d, res.ATE, res.RPE)
		}
		res, err = Evaluate(d, est, ref, Options{Align: AlignSim})
		if err != nil {
			t.Fatal(err)
		}
		if s := res.Transform.Scale; math.Abs(s-2.0/3) > 1e-15 || maxAbs(res.ATE) > 1e-15 || maxAbs(res.RPE) > 1e-15 {
			t.Errorf("d=%d sim: scale %v ATE %v RPE %v", d, s, res.ATE, res.RPE)
		}
	}
	// A similarity fit of coincident positions is undefined.
	p := []Pose{{R: Identity(2).R}, {R: Identity(2).R}}
	if _, err := Align(2, p, p, AlignSim); err == nil {
		t.Error("sim alignment of coincident points: no error")
	}
}

func TestParseAlignment(t *testing.T) {
	for _, a := range []Alignment{AlignNone, AlignSE, AlignSim} {
		if b, err := ParseAlignment(a.String()); err != nil || b != a {
			t.Errorf("%v: %v %v", a, b, err)
		}
	}
	if _, err := ParseAlignment("rigid"); err == nil {
		t.Error("rigid: no error")
	}
}

// TestRotationAngle checks angles near 0, pi/2 and pi in 2-D and 3-D.
func TestRotationAngle(t *testing.T) {
	for _, th := range []float64{0, 1e-9, 0.3, math.Pi / 2, 3, math.Pi - 1e-9, math.Pi} {
		r2 := rot2(th)
		if got := RotationAngle(&r2, 2); math.Abs(got-th) > 1e-15 {
			t.Errorf("2-D %v: %v", th, got)
		}
		m := rot2(-th)
		if got := RotationAngle(&m, 2); math.Abs(got-th) > 1e-15 {
			t.Errorf("2-D %v: %v", -th, got)
		}
		// About a tilted axis in 3-D.
		rng := rand.New(rand.NewPCG(5, 6))
		g := randRotation(rng, 3)
		rz := rotZ(th)
		tmp := smalldense.Mul(&g, &rz, 3)
		r3 := smalldense.Mul(&tmp, ptr(transpose3(g)), 3)
		if got := RotationAngle(&r3, 3); math.Abs(got-th) > 1e-14 {
			t.Errorf("3-D %v: %v", th, got)
		}
	}
}

func transpose3(r [9]float64) [9]float64 {
	return [9]float64{r[0], r[3], r[6], r[1], r[4], r[7], r[2], r[5], r[8]}
}

// TestAlignCollinear: positions on a line leave the rotation about the line
// free; the fit is still exact (zero ATE and RPE translation), whichever
// completion the kernel picks.
func TestAlignCollinear(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, d := range []int{2, 3} {
		ref := make([]Pose, 6)
		for k := range ref {
			ref[k].R = randRotation(rng, d)
			ref[k].T = [3]float64{float64(k), 2 * float64(k), 0}
			if d == 3 {
				ref[k].T[2] = -float64(k)
			}
		}
		g := Transform{R: randRotation(rng, d), T: [3]float64{1, -2, 3}, Scale: 1}
		est := make([]Pose, len(ref))
		for k, p := range ref {
			est[k] = g.Apply(p, d)
		}
		res, err := Evaluate(d, est, ref, Options{Align: AlignSE})
		if err != nil {
			t.Fatal(err)
		}
		if m := maxAbs(res.ATE); m > 1e-12 {
			t.Errorf("d=%d: ATE up to %g on a line", d, m)
		}
		if p := Det(&res.Transform.R, d); math.Abs(p-1) > 1e-12 {
			t.Errorf("d=%d: det R = %v", d, p)
		}
	}
}
