package rounding

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/bcmsync/bcmsync/posegraph"
)

// translationOracle minimizes F over t with R fixed and t_anchor fixed by
// dense least squares on the weighted residuals sqrt(tau)(t_j - t_i - R_i tt).
func translationOracle(t *testing.T, g *posegraph.Graph, poses []posegraph.Pose) [][3]float64 {
	n, d, anchor := g.N(), g.D, g.Anchor()
	col := func(i, a int) int { return reduced(i, anchor)*d + a }
	a := mat.NewDense(g.M()*d, (n-1)*d, nil)
	b := mat.NewVecDense(g.M()*d, nil)
	for k, e := range g.Edges {
		w := math.Sqrt(e.Tau)
		for p := 0; p < d; p++ {
			row := k*d + p
			rhs := 0.0
			for q := 0; q < d; q++ {
				rhs += poses[e.I].R[p*d+q] * e.T[q]
			}
			// w (t_j - t_i) = w (R_i tt) with the anchor's known part moved right.
			if e.J == anchor {
				rhs -= poses[anchor].T[p]
			} else {
				a.Set(row, col(e.J, p), w)
			}
			if e.I == anchor {
				rhs += poses[anchor].T[p]
			} else {
				a.Set(row, col(e.I, p), -w)
			}
			b.SetVec(row, w*rhs)
		}
	}
	x := denseLeastSquares(t, a, b)
	out := make([][3]float64, n)
	out[anchor] = poses[anchor].T
	for i := 0; i < n; i++ {
		if i != anchor {
			for p := 0; p < d; p++ {
				out[i][p] = x.AtVec(col(i, p))
			}
		}
	}
	return out
}

// translationGradient returns dF/dt_i for all i, flattened.
func translationGradient(g *posegraph.Graph, poses []posegraph.Pose) []float64 {
	d := g.D
	grad := make([]float64, g.N()*d)
	for _, e := range g.Edges {
		for p := 0; p < d; p++ {
			r := poses[e.J].T[p] - poses[e.I].T[p]
			for q := 0; q < d; q++ {
				r -= poses[e.I].R[p*d+q] * e.T[q]
			}
			grad[e.J*d+p] += 2 * e.Tau * r
			grad[e.I*d+p] -= 2 * e.Tau * r
		}
	}
	return grad
}

func TestRecoverTranslations(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, d := range []int{2, 3} {
		for trial, n := range []int{2, 5, 30} {
			g, truth := randomGraph(rng, d, n, 2*n, 0.1, 0.5)
			if trial == 2 {
				g.Fixed = []int{n / 2} // an anchor other than pose 0
				// A parallel edge exercises summed duplicates.
				g.Edges = append(g.Edges, g.Edges[3])
			}
			poses := make([]posegraph.Pose, n)
			for i := range poses {
				poses[i].R = mulRot(truth[i].R, smallRotation(rng, d, 0.05), d)
			}
			poses[g.Anchor()].T = [3]float64{1, -2, 3}
			if err := RecoverTranslations(g, poses); err != nil {
				t.Fatalf("d=%d n=%d: %v", d, n, err)
			}
			want := translationOracle(t, g, poses)
			for i := range poses {
				for p := 0; p < d; p++ {
					if math.Abs(poses[i].T[p]-want[i][p]) > 1e-8*(1+math.Abs(want[i][p])) {
						t.Fatalf("d=%d n=%d pose %d: t[%d] = %.12g, dense least squares gives %.12g", d, n, i, p, poses[i].T[p], want[i][p])
					}
				}
			}
			if poses[g.Anchor()].T != ([3]float64{1, -2, 3}) {
				t.Fatalf("anchor translation moved to %v", poses[g.Anchor()].T)
			}
			f := g.Cost(poses, posegraph.Poses)
			for k, v := range translationGradient(g, poses) {
				if math.Abs(v) > 1e-8*(1+f) {
					t.Fatalf("d=%d n=%d: dF/dt entry %d = %g at the recovered translations", d, n, k, v)
				}
			}
			// Minimal: any perturbation of the translations increases F.
			for k := 0; k < 20; k++ {
				q := append([]posegraph.Pose(nil), poses...)
				for i := range q {
					for p := 0; p < d; p++ {
						q[i].T[p] += 1e-3 * rng.NormFloat64()
					}
				}
				if fq := g.Cost(q, posegraph.Poses); fq < f {
					t.Fatalf("d=%d n=%d: perturbed translations give F = %.15g < %.15g", d, n, fq, f)
				}
			}
		}
	}
}

func TestRecoverTranslationsErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	g, _ := randomGraph(rng, 2, 6, 0, 0, 0)
	g.Edges = g.Edges[:2] // poses 3..5 cut off
	err := RecoverTranslations(g, make([]posegraph.Pose, 6))
	var de *posegraph.DisconnectedError
	if !errors.As(err, &de) {
		t.Fatalf("disconnected graph: got %v, want a *posegraph.DisconnectedError", err)
	}
	if err := RecoverTranslations(g, make([]posegraph.Pose, 5)); err == nil {
		t.Fatal("wrong number of poses: no error")
	}
	g2, _ := randomGraph(rng, 3, 4, 0, 0, 0)
	g2.Edges[1].J = g2.Edges[1].I
	g2.Edges[1].Line = 42
	if err := RecoverTranslations(g2, make([]posegraph.Pose, 4)); err == nil {
		t.Fatal("self-loop: no error")
	} else if want := "random:42"; !contains(err.Error(), want) {
		t.Fatalf("self-loop error %q does not name %q", err, want)
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func TestToGauge(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	for _, d := range []int{2, 3} {
		for _, withInitial := range []bool{false, true} {
			n := 12
			g, truth := randomGraph(rng, d, n, 10, 0.1, 0.3)
			g.Fixed = []int{4}
			if withInitial {
				g.Initial = make([]posegraph.Pose, n)
				g.HasInitial = make([]bool, n)
				g.Initial[4] = truth[4]
				g.HasInitial[4] = true
			}
			poses := Random(g, 99)
			f0 := g.Cost(poses, posegraph.Poses)
			ToGauge(g, poses)
			want := posegraph.Identity(d)
			if withInitial {
				want = truth[4]
			}
			if poses[4] != want {
				t.Fatalf("d=%d: anchor is %v, want %v", d, poses[4], want)
			}
			if f := g.Cost(poses, posegraph.Poses); math.Abs(f-f0) > 1e-9*f0 {
				t.Fatalf("d=%d: F changed from %.15g to %.15g", d, f0, f)
			}
			for i := range poses {
				checkRotation(t, poses[i].R, d, 1e-12, "gauged rotation")
			}
		}
	}
}
