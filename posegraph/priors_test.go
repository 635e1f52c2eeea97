package posegraph

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// randomPriorGraph is randomLandmarkGraph with np priors on random poses,
// the first a pose prior when withPose, the others position priors.
func randomPriorGraph(rng *rand.Rand, d, n, nl, np int, withPose bool) *Graph {
	g := randomLandmarkGraph(rng, d, n, nl)
	var ps []Prior
	for k := 0; k < np; k++ {
		p := Prior{Kind: PositionPrior, Pose: rng.IntN(n), Tau: 0.1 + 10*rng.Float64()}
		if k == 0 && withPose {
			p.Kind, p.R, p.Kappa = PosePrior, randomRotation(rng, d), 0.1+10*rng.Float64()
		}
		for a := 0; a < d; a++ {
			p.T[a] = 3 * rng.NormFloat64()
		}
		ps = append(ps, p)
	}
	return g.WithPriors(ps)
}

// worldFrameCost is F written without the world vertex: the estimate x
// moved into the world frame (x_W^{-1} x_i), then the relative edges and
// landmark observations as usual, a pose prior (R, T) as
// kappa ||R_i - R||^2 + tau ||t_i - T||^2 and a position prior T as
// tau ||t_i - T||^2.
func worldFrameCost(g *Graph, x []Pose) float64 {
	d, w := g.D, g.World()
	inv := Inverse(&x[w], d)
	f := 0.0
	for _, e := range g.Edges {
		xi, xj := Compose(&inv, &x[e.I], d), Compose(&inv, &x[e.J], d)
		if e.Prior != NoPrior {
			xi = Identity(d)
		}
		if e.Prior == PosePrior || g.MeasuresRotation(&e) {
			for a := 0; a < d; a++ {
				for c := 0; c < d; c++ {
					v := xj.R[a*d+c]
					for k := 0; k < d; k++ {
						v -= xi.R[a*d+k] * e.R[k*d+c]
					}
					f += e.Kappa * v * v
				}
			}
		}
		for a := 0; a < d; a++ {
			v := xj.T[a] - xi.T[a]
			for c := 0; c < d; c++ {
				v -= xi.R[a*d+c] * e.T[c]
			}
			f += e.Tau * v * v
		}
	}
	return f
}

// Q of a graph with priors equals the dense residual construction, and
// tr(X Q X^T), Cost and the world-frame sum written without the world
// vertex agree at random poses.
func TestPriorLaplacianMatchesResiduals(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, d := range []int{2, 3} {
		for trial := 0; trial < 8; trial++ {
			n, nl, np := 2+rng.IntN(8), rng.IntN(4), 1+rng.IntN(5)
			g := randomPriorGraph(rng, d, n, nl, np, trial%2 == 0)
			t.Run(fmt.Sprintf("d=%d/n=%d/l=%d/p=%d", d, n, nl, np), func(t *testing.T) {
				if err := g.Validate(); err != nil {
					t.Fatal(err)
				}
				w := g.World()
				if w != n || g.IsLandmark(w) || g.Anchor() != w || len(g.Priors()) != np {
					t.Fatalf("world %d (want %d), anchor %d, %d priors", w, n, g.Anchor(), len(g.Priors()))
				}
				q := g.Laplacian(Poses)
				want := denseLandmarkQ(g)
				got := mat.NewDense(q.Dim(), q.Dim(), q.Dense())
				if !mat.EqualApprox(got, want, 1e-12*(1+mat.Norm(want, math.Inf(1)))) {
					t.Fatalf("Q differs from the residual construction:\ngot  %v\nwant %v", mat.Formatted(got), mat.Formatted(want))
				}
				x := randomPoses(rng, d, g.N())
				for k := 0; k < g.N(); k++ {
					if g.IsLandmark(k) {
						x[k].R = Identity(d).R
					}
				}
				cost := g.Cost(x, Poses)
				X := g.Lift(x, Poses, d+1)
				work := g.Lift(x, Poses, d+1)
				tr := TraceCost(q, X, work)
				wf := worldFrameCost(g, x)
				if math.Abs(tr-cost) > 1e-9*math.Max(1, cost) || math.Abs(wf-cost) > 1e-9*math.Max(1, cost) {
					t.Fatalf("tr(XQX^T) = %.15g, Cost = %.15g, world-frame sum = %.15g", tr, cost, wf)
				}
				// InWorldFrame puts W at the identity and keeps F.
				y := g.InWorldFrame(x)
				if dev := rotationDeviation(y[w].R[:], d); dev > 1e-12 || math.Abs(y[w].R[0]-1) > 1e-12 {
					t.Fatalf("world vertex not at the identity: %v", y[w])
				}
				if c2 := g.Cost(y, Poses); math.Abs(c2-cost) > 1e-9*math.Max(1, cost) {
					t.Fatalf("F changed in the world frame: %g -> %g", cost, c2)
				}
			})
		}
	}
}

// WithPriors inserts the world vertex after the poses and before the
// landmarks, renumbering the landmarks and keeping every edge's ends.
func TestWithPriorsInsertsWorld(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	g := randomLandmarkGraph(rng, 2, 4, 2)
	g.Fixed = []int{1, 5}
	h := g.WithPriors([]Prior{{Kind: PositionPrior, Pose: 2, T: [3]float64{1, 2}, Tau: 1}})
	if h.N() != g.N()+1 || h.World() != 4 || h.IsLandmark(4) || !h.IsLandmark(5) || !h.IsLandmark(6) {
		t.Fatalf("n=%d world=%d landmarks %v", h.N(), h.World(), h.Landmark)
	}
	if h.IDs[4] != 1002 || h.IDs[5] != 1000 {
		t.Fatalf("ids %v: want the world's id 1002, above every other", h.IDs)
	}
	for k, e := range g.Edges {
		f := h.Edges[k]
		if h.IDs[f.I] != g.IDs[e.I] || h.IDs[f.J] != g.IDs[e.J] {
			t.Fatalf("edge %d moved: (%d, %d) -> (%d, %d)", k, g.IDs[e.I], g.IDs[e.J], h.IDs[f.I], h.IDs[f.J])
		}
	}
	if want := []int{1, 6}; fmt.Sprint(h.Fixed) != fmt.Sprint(want) || h.Anchor() != 4 {
		t.Fatalf("fixed %v, want %v", h.Fixed, want)
	}
	p := h.Edges[len(h.Edges)-1]
	if p.I != 4 || p.J != 2 || p.Prior != PositionPrior || p.R != Identity(2).R {
		t.Fatalf("prior edge %+v", p)
	}
	if err := h.Validate(); err != nil {
		t.Fatal(err)
	}
	if g.World() != -1 || len(g.Edges) == len(h.Edges) {
		t.Fatal("WithPriors changed its receiver")
	}
	// Rotation synchronization keeps the pose priors only.
	r := h.WithoutPositionPriors()
	if r.World() != -1 || r.N() != g.N() {
		t.Fatalf("without position priors: world %d, n %d", r.World(), r.N())
	}
	if r := h.WithoutPriors(); r.N() != g.N() || len(r.Edges) != len(g.Edges) || fmt.Sprint(r.IDs) != fmt.Sprint(g.IDs) {
		t.Fatalf("without priors: %d vertices, %d edges, ids %v", r.N(), len(r.Edges), r.IDs)
	}
}

func TestPriorValidate(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 26))
	base := func() *Graph { return randomPriorGraph(rng, 3, 5, 1, 3, true) }
	cases := []struct {
		name string
		edit func(g *Graph)
		want string
	}{
		{"position kappa", func(g *Graph) { g.Edges[len(g.Edges)-1].Kappa = 1 }, "kappa must be 0"},
		{"position R", func(g *Graph) { g.Edges[len(g.Edges)-1].R = randomRotation(rng, 3) }, "must have R = I"},
		{"position tau", func(g *Graph) { g.Edges[len(g.Edges)-1].Tau = 0 }, "tau=0 must be positive"},
		{"pose kappa", func(g *Graph) {
			for k := range g.Edges {
				if g.Edges[k].Prior == PosePrior {
					g.Edges[k].Kappa = -1
				}
			}
		}, "precisions kappa=-1"},
		{"edge to world", func(g *Graph) {
			g.Edges = append(g.Edges, Edge{I: 0, J: g.World(), R: Identity(3).R, Kappa: 1, Tau: 1})
		}, "touches the world vertex"},
		{"prior on landmark", func(g *Graph) { g.Edges[len(g.Edges)-1].J = g.N() - 1 }, "must measure a pose"},
		{"two worlds", func(g *Graph) { g.Edges[len(g.Edges)-1].I = 0 }, "not at the world vertex"},
		{"unobserved rotation", func(g *Graph) {
			for k := range g.Edges {
				if g.Edges[k].Prior != NoPrior {
					g.Edges[k].Prior, g.Edges[k].Kappa, g.Edges[k].R, g.Edges[k].T = PositionPrior, 0, Identity(3).R, [3]float64{}
				}
			}
		}, "rotation unobserved"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := base()
			if err := g.Validate(); err != nil {
				t.Fatal(err)
			}
			c.edit(g)
			err := g.Validate()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
}
