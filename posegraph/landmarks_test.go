package posegraph

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// randomLandmarkGraph returns n poses on an odometry chain (plus a few
// random loop edges) and nl landmarks after them, each observed by one to
// four random poses, with random measurements and weights.
func randomLandmarkGraph(rng *rand.Rand, d, n, nl int) *Graph {
	g := randomGraph(rng, d, n, n/3)
	for k := 0; k < nl; k++ {
		g.IDs = append(g.IDs, 1000+k)
	}
	g.Landmark = make([]bool, n+nl)
	for k := n; k < n+nl; k++ {
		g.Landmark[k] = true
		for o := 1 + rng.IntN(4); o > 0; o-- {
			e := Edge{I: rng.IntN(n), J: k, R: Identity(d).R, Tau: 0.1 + 10*rng.Float64()}
			for a := 0; a < d; a++ {
				e.T[a] = 3 * rng.NormFloat64()
			}
			g.Edges = append(g.Edges, e)
		}
	}
	return g
}

// denseLandmarkQ is an oracle built from the residuals themselves: a pose
// edge contributes as in denseQ; an observation's residual
// l_k - t_i - R_i z = X v, with v = e_(k, d) - [z; 1]_i, adds tau v v^T.
// A position prior (priors.go) is such a point term, with the world
// vertex as i and the pose's translation as the point k.
func denseLandmarkQ(g *Graph) *mat.Dense {
	d, n := g.D, g.N()
	b := d + 1
	poseOnly := *g
	poseOnly.Edges = nil
	var obs []Edge
	for _, e := range g.Edges {
		if !g.MeasuresRotation(&e) {
			obs = append(obs, e)
		} else {
			poseOnly.Edges = append(poseOnly.Edges, e)
		}
	}
	q := denseQ(&poseOnly, Poses)
	for _, e := range obs {
		v := make([]float64, b*n)
		v[e.J*b+d] = 1
		for a := 0; a < d; a++ {
			v[e.I*b+a] = -e.T[a]
		}
		v[e.I*b+d] = -1
		var vv mat.Dense
		vec := mat.NewVecDense(b*n, v)
		vv.Outer(e.Tau, vec, vec)
		q.Add(q, &vv)
	}
	return q
}

func TestLandmarkLaplacianMatchesResiduals(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, d := range []int{2, 3} {
		for trial := 0; trial < 6; trial++ {
			n, nl := 2+rng.IntN(8), 1+rng.IntN(6)
			g := randomLandmarkGraph(rng, d, n, nl)
			t.Run(fmt.Sprintf("d=%d/n=%d/l=%d", d, n, nl), func(t *testing.T) {
				if err := g.Validate(); err != nil {
					t.Fatal(err)
				}
				q := g.Laplacian(Poses)
				if err := q.CheckSymmetric(0); err != nil {
					t.Fatal(err)
				}
				want := denseLandmarkQ(g)
				got := mat.NewDense(q.Dim(), q.Dim(), q.Dense())
				if !mat.EqualApprox(got, want, 1e-12*(1+mat.Norm(want, math.Inf(1)))) {
					t.Fatalf("Q differs from the residual construction:\ngot  %v\nwant %v", mat.Formatted(got), mat.Formatted(want))
				}
				// A landmark's rotation rows and columns are exactly zero.
				b := d + 1
				for k := n; k < n+nl; k++ {
					for a := 0; a < d; a++ {
						for c := 0; c < q.Dim(); c++ {
							if got.At(k*b+a, c) != 0 || got.At(c, k*b+a) != 0 {
								t.Fatalf("Q[%d, %d] = %g, want exactly 0 (landmark rotation row)", k*b+a, c, got.At(k*b+a, c))
							}
						}
					}
				}
				// F through Q equals the edge sum and the explicit residuals.
				x := randomPoses(rng, d, n+nl)
				for k := n; k < n+nl; k++ {
					x[k].R = Identity(d).R
				}
				explicit := 0.0
				for _, e := range g.Edges {
					ri := x[e.I].R
					if g.IsLandmark(e.J) {
						for a := 0; a < d; a++ {
							v := x[e.J].T[a] - x[e.I].T[a]
							for c := 0; c < d; c++ {
								v -= ri[a*d+c] * e.T[c]
							}
							explicit += e.Tau * v * v
						}
						continue
					}
					explicit += (&Graph{D: d, IDs: []int{0, 1}, Edges: []Edge{{I: 0, J: 1, R: e.R, T: e.T, Kappa: e.Kappa, Tau: e.Tau}}}).
						Cost([]Pose{x[e.I], x[e.J]}, Poses)
				}
				cost := g.Cost(x, Poses)
				for _, r := range []int{d, d + 2} {
					X := g.Lift(x, Poses, r)
					work := g.Lift(x, Poses, r)
					tr := TraceCost(q, X, work)
					if math.Abs(tr-cost) > 1e-10*math.Max(1, cost) || math.Abs(explicit-cost) > 1e-10*math.Max(1, cost) {
						t.Fatalf("r=%d: tr(XQX^T) = %.15g, Cost = %.15g, explicit = %.15g", r, tr, cost, explicit)
					}
				}
				// Cost does not depend on a landmark's rotation.
				for k := n; k < n+nl; k++ {
					x[k].R = randomRotation(rng, d)
				}
				if c2 := g.Cost(x, Poses); math.Abs(c2-cost) > 1e-12*math.Max(1, cost) {
					t.Fatalf("Cost changed with the landmarks' rotations: %g -> %g", cost, c2)
				}
			})
		}
	}
}

func TestLandmarkValidate(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	base := func() *Graph { return randomLandmarkGraph(rng, 2, 4, 2) }
	cases := []struct {
		name string
		edit func(g *Graph)
		want string
	}{
		{"landmark first", func(g *Graph) { g.Landmark[0], g.Landmark[g.N()-1] = true, false }, "landmark"},
		{"mask length", func(g *Graph) { g.Landmark = g.Landmark[:2] }, "mask has 2 entries"},
		{"from landmark", func(g *Graph) {
			e := &g.Edges[len(g.Edges)-1]
			e.I, e.J = e.J, e.I
		}, "starts at landmark"},
		{"kappa", func(g *Graph) { g.Edges[len(g.Edges)-1].Kappa = 1 }, "kappa must be 0"},
		{"tau", func(g *Graph) { g.Edges[len(g.Edges)-1].Tau = 0 }, "must be positive"},
		{"rotation", func(g *Graph) { g.Edges[len(g.Edges)-1].R[1] = 0.5 }, "R = I"},
		{"nan", func(g *Graph) { g.Edges[len(g.Edges)-1].T[0] = math.NaN() }, "not finite"},
		{"unobserved", func(g *Graph) {
			g.IDs = append(g.IDs, 5000)
			g.Landmark = append(g.Landmark, true)
		}, "disconnected"},
	}
	for _, c := range cases {
		g := base()
		if err := g.Validate(); err != nil {
			t.Fatalf("%s: base graph: %v", c.name, err)
		}
		c.edit(g)
		err := g.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Validate = %v, want an error containing %q", c.name, err, c.want)
		}
	}
}

// Two pose chains that share no pose edge but observe a common landmark
// form one component.
func TestLandmarkConnects(t *testing.T) {
	id := Identity(2)
	g := &Graph{D: 2, IDs: []int{0, 1, 2, 3, 9}, Landmark: []bool{false, false, false, false, true}}
	g.Edges = []Edge{
		{I: 0, J: 1, R: id.R, T: [3]float64{1}, Kappa: 1, Tau: 1},
		{I: 2, J: 3, R: id.R, T: [3]float64{1}, Kappa: 1, Tau: 1},
		{I: 1, J: 4, R: id.R, T: [3]float64{0, 1}, Tau: 1},
		{I: 2, J: 4, R: id.R, T: [3]float64{0, -1}, Tau: 1},
	}
	if err := g.Validate(); err != nil {
		t.Fatalf("Validate = %v, want nil (the landmark connects the chains)", err)
	}
	if g.NumPoses() != 4 || g.NumLandmarks() != 1 || g.LandmarkMask() == nil {
		t.Fatalf("NumPoses %d NumLandmarks %d", g.NumPoses(), g.NumLandmarks())
	}
	g.Fixed = []int{4, 2}
	if a := g.Anchor(); a != 2 {
		t.Fatalf("Anchor = %d, want 2 (a FIX'ed landmark cannot anchor)", a)
	}
}
