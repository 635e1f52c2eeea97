package posegraph

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// denseQ assembles Q without the block formulas: each edge's residual
// (X_j - X_i T_e) W_e^{1/2} is a linear map X -> X M_e with M_e of size
// (b n) x b, so F = tr(X (sum_e M_e M_e^T) X^T).
func denseQ(g *Graph, p Problem) *mat.Dense {
	d, n := g.D, g.N()
	b := p.BlockSize(d)
	q := mat.NewDense(b*n, b*n, nil)
	for _, e := range g.Edges {
		t := mat.NewDense(b, b, nil) // T_e
		for a := 0; a < d; a++ {
			for c := 0; c < d; c++ {
				t.Set(a, c, e.R[a*d+c])
			}
		}
		w := make([]float64, b)
		for a := 0; a < d; a++ {
			w[a] = math.Sqrt(e.Kappa)
		}
		if p == Poses {
			for a := 0; a < d; a++ {
				t.Set(a, d, e.T[a])
			}
			t.Set(d, d, 1)
			w[d] = math.Sqrt(e.Tau)
		}
		m := mat.NewDense(b*n, b, nil)
		for a := 0; a < b; a++ {
			for c := 0; c < b; c++ {
				v := -t.At(a, c)
				if a == c {
					m.Set(e.J*b+a, c, w[c])
				}
				m.Set(e.I*b+a, c, v*w[c])
			}
		}
		var mmT mat.Dense
		mmT.Mul(m, m.T())
		q.Add(q, &mmT)
	}
	return q
}

func TestLaplacianMatchesDenseAssembly(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, p := range []Problem{Poses, Rotations} {
		for _, d := range []int{2, 3} {
			for trial := 0; trial < 5; trial++ {
				n := 2 + rng.IntN(12)
				g := randomGraph(rng, d, n, rng.IntN(3*n))
				t.Run(fmt.Sprintf("%v/d=%d/n=%d", p, d, n), func(t *testing.T) {
					q := g.Laplacian(p)
					if err := q.CheckSymmetric(0); err != nil {
						t.Fatal(err)
					}
					want := denseQ(g, p)
					got := mat.NewDense(q.Dim(), q.Dim(), q.Dense())
					if !mat.EqualApprox(got, want, 1e-12*(1+mat.Norm(want, math.Inf(1)))) {
						t.Fatalf("Q differs from the dense assembly:\ngot  %v\nwant %v", mat.Formatted(got), mat.Formatted(want))
					}
					// Q is positive semidefinite; for poses a common shift of
					// all translations is in its null space.
					var es mat.EigenSym
					if !es.Factorize(mat.NewSymDense(q.Dim(), q.Dense()), false) {
						t.Fatal("eigendecomposition failed")
					}
					vals := es.Values(nil)
					tol := 1e-9 * vals[len(vals)-1]
					if vals[0] < -tol {
						t.Fatalf("Q has eigenvalue %g < 0", vals[0])
					}
					if p == Poses && vals[0] > tol {
						t.Fatalf("smallest eigenvalue of the SE(d) Q = %g, want 0", vals[0])
					}
				})
			}
		}
	}
}

func TestTraceCostEqualsEdgeCost(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, p := range []Problem{Poses, Rotations} {
		for _, d := range []int{2, 3} {
			for trial := 0; trial < 10; trial++ {
				n := 2 + rng.IntN(40)
				g := randomGraph(rng, d, n, rng.IntN(3*n))
				x := randomPoses(rng, d, n)
				q := g.Laplacian(p)
				for _, r := range []int{d, d + 2} {
					X := g.Lift(x, p, r)
					work := g.Lift(x, p, r)
					got := TraceCost(q, X, work)
					want := g.Cost(x, p)
					if math.Abs(got-want) > 1e-10*math.Max(1, want) {
						t.Errorf("%v d=%d n=%d r=%d: tr(XQX^T) = %.15g, edge sum = %.15g", p, d, n, r, got, want)
					}
				}
			}
		}
	}
}

// The objective of a noise-free graph at its ground truth is zero, and
// rotating the whole solution (gauge) does not change F.
func TestCostGaugeInvariance(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, d := range []int{2, 3} {
		n := 20
		truth := randomPoses(rng, d, n)
		g := randomGraph(rng, d, n, 30)
		for k := range g.Edges {
			e := &g.Edges[k]
			ri, rj := truth[e.I].R, truth[e.J].R
			for a := 0; a < d; a++ {
				for c := 0; c < d; c++ {
					s := 0.0
					for m := 0; m < d; m++ {
						s += ri[m*d+a] * rj[m*d+c]
					}
					e.R[a*d+c] = s
				}
				s := 0.0
				for m := 0; m < d; m++ {
					s += ri[m*d+a] * (truth[e.J].T[m] - truth[e.I].T[m])
				}
				e.T[a] = s
			}
		}
		if f := g.Cost(truth, Poses); f > 1e-20 {
			t.Errorf("d=%d: F(ground truth) = %g on a noise-free graph, want 0", d, f)
		}
		x := randomPoses(rng, d, n)
		f0 := g.Cost(x, Poses)
		o := randomRotation(rng, d)
		y := make([]Pose, n)
		for i := range x {
			for a := 0; a < d; a++ {
				for c := 0; c < d; c++ {
					s := 0.0
					for m := 0; m < d; m++ {
						s += o[a*d+m] * x[i].R[m*d+c]
					}
					y[i].R[a*d+c] = s
				}
				s := 1.5
				for m := 0; m < d; m++ {
					s += o[a*d+m] * x[i].T[m]
				}
				y[i].T[a] = s
			}
		}
		if f1 := g.Cost(y, Poses); math.Abs(f1-f0) > 1e-10*f0 {
			t.Errorf("d=%d: F changed under a rigid motion: %g -> %g", d, f0, f1)
		}
	}
}
