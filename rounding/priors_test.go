package rounding

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bcmsync/bcmsync/posegraph"
)

// placeWorld recovers the world frame exactly from noise-free priors: for
// poses x in some frame and priors measuring G x_i, the world vertex is
// G^{-1} in x's frame; and the chordal and odometry initializations of a
// graph with noise-free edges and priors are the truth in the world frame.
func TestPlaceWorldExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	for _, d := range []int{2, 3} {
		for _, withPose := range []bool{false, true} {
			g, truth := exactChain(rng, d, 12)
			world := posegraph.Pose{R: RandomRotation(rng, d)}
			for a := 0; a < d; a++ {
				world.T[a] = 10 * rng.NormFloat64()
			}
			var ps []posegraph.Prior
			for k, i := range []int{0, 4, 7, 11} {
				m := posegraph.Compose(&world, &truth[i], d)
				p := posegraph.Prior{Kind: posegraph.PositionPrior, Pose: i, T: m.T, Tau: 1 + float64(k)}
				if withPose && k == 1 {
					p.Kind, p.R, p.Kappa = posegraph.PosePrior, m.R, 3
				}
				ps = append(ps, p)
			}
			g = g.WithPriors(ps)
			x := append(append([]posegraph.Pose(nil), truth...), posegraph.Identity(d))
			got := placeWorld(g, x, false, priorEdges(g))
			inv := posegraph.Inverse(&world, d)
			for k := 0; k < d*d; k++ {
				if math.Abs(got.R[k]-inv.R[k]) > 1e-9 {
					t.Fatalf("d=%d pose=%v: R_W = %v, want %v", d, withPose, got.R, inv.R)
				}
			}
			for a := 0; a < d; a++ {
				if math.Abs(got.T[a]-inv.T[a]) > 1e-8 {
					t.Fatalf("d=%d pose=%v: t_W = %v, want %v", d, withPose, got.T, inv.T)
				}
			}
			for name, init := range map[string]func(*posegraph.Graph) ([]posegraph.Pose, error){"chordal": Chordal, "odometry": Odometry} {
				y, err := init(g)
				if err != nil {
					t.Fatalf("d=%d pose=%v %s: %v", d, withPose, name, err)
				}
				for i := range truth {
					want := posegraph.Compose(&world, &truth[i], d)
					for a := 0; a < d; a++ {
						if math.Abs(y[i].T[a]-want.T[a]) > 1e-7 {
							t.Fatalf("d=%d pose=%v %s: pose %d at %v, want %v", d, withPose, name, i, y[i].T, want.T)
						}
					}
				}
			}
		}
	}
}

// exactChain is a chain of n random poses with exact odometry edges.
func exactChain(rng *rand.Rand, d, n int) (*posegraph.Graph, []posegraph.Pose) {
	truth := make([]posegraph.Pose, n)
	g := &posegraph.Graph{D: d}
	for i := range truth {
		truth[i].R = RandomRotation(rng, d)
		for a := 0; a < d; a++ {
			truth[i].T[a] = 5 * rng.NormFloat64()
		}
		g.IDs = append(g.IDs, i)
		if i > 0 {
			rel := posegraph.Between(&truth[i-1], &truth[i], d)
			g.Edges = append(g.Edges, posegraph.Edge{I: i - 1, J: i, R: rel.R, T: rel.T, Kappa: 10, Tau: 10})
		}
	}
	return g, truth
}

// Two chains joined only through their priors are initialized apart and
// each placed by its own priors: with exact data, the truth in the world
// frame.
func TestAroundWorldParts(t *testing.T) {
	rng := rand.New(rand.NewPCG(33, 34))
	for _, d := range []int{2, 3} {
		a, ta := exactChain(rng, d, 6)
		b, tb := exactChain(rng, d, 5)
		g := &posegraph.Graph{D: d, IDs: append(append([]int(nil), a.IDs...), 10, 11, 12, 13, 14), Edges: a.Edges}
		for _, e := range b.Edges {
			e.I, e.J = e.I+6, e.J+6
			g.Edges = append(g.Edges, e)
		}
		truth := append(ta, tb...)
		var ps []posegraph.Prior
		for _, i := range []int{0, 2, 5, 6, 8, 10} {
			ps = append(ps, posegraph.Prior{Kind: posegraph.PositionPrior, Pose: i, T: truth[i].T, Tau: 2})
		}
		g = g.WithPriors(ps)
		if err := g.Validate(); err != nil {
			t.Fatal(err)
		}
		y, err := Chordal(g)
		if err != nil {
			t.Fatal(err)
		}
		for i := range truth {
			for c := 0; c < d; c++ {
				if math.Abs(y[i].T[c]-truth[i].T[c]) > 1e-7 {
					t.Fatalf("d=%d: pose %d at %v, want %v", d, i, y[i].T, truth[i].T)
				}
			}
		}
	}
}

// SettleWorld puts a world vertex that the rounding left at a wrong
// rotation back where the priors put it: on exact data F returns to 0,
// and an estimate it cannot improve is left as it is.
func TestSettleWorld(t *testing.T) {
	rng := rand.New(rand.NewPCG(35, 36))
	for _, d := range []int{2, 3} {
		g, truth := exactChain(rng, d, 8)
		var ps []posegraph.Prior
		for _, i := range []int{1, 6} { // two fixes: a reflection fits them as well
			ps = append(ps, posegraph.Prior{Kind: posegraph.PositionPrior, Pose: i, T: truth[i].T, Tau: 3})
		}
		g = g.WithPriors(ps)
		w := g.World()
		x := append(append([]posegraph.Pose(nil), truth...), posegraph.Identity(d))
		plan := NewPlan(g, nil, nil)
		good := append([]posegraph.Pose(nil), x...)
		if err := plan.SettleWorld(good, false); err != nil {
			t.Fatal(err)
		}
		if f := g.Cost(good, posegraph.Poses); f > 1e-18 || good[w] != x[w] {
			t.Fatalf("d=%d: an optimal estimate changed: F %g, world %v", d, f, good[w])
		}
		x[w].R = RandomRotation(rng, d)
		x[w].T = [3]float64{1, -2, 0.5}
		if err := plan.RecoverTranslations(x); err != nil {
			t.Fatal(err)
		}
		before := g.Cost(x, posegraph.Poses)
		if err := plan.SettleWorld(x, false); err != nil {
			t.Fatal(err)
		}
		if f := g.Cost(x, posegraph.Poses); !(f < 1e-12*before) {
			t.Fatalf("d=%d: F %g after SettleWorld, %g before", d, f, before)
		}
	}
}

// BenchmarkChordalPriorParts initializes a graph of many short chains held
// together only by their GPS fixes: each part is initialized and placed on
// its own, so the cost should grow with the graph, not with the graph times
// the parts.
func BenchmarkChordalPriorParts(b *testing.B) {
	for _, parts := range []int{100, 1000} {
		b.Run(fmt.Sprint(parts), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(35, 36))
			g := &posegraph.Graph{D: 2}
			var ps []posegraph.Prior
			for p := 0; p < parts; p++ {
				c, truth := exactChain(rng, 2, 4)
				base := g.N()
				g.IDs = append(g.IDs, base, base+1, base+2, base+3)
				for _, e := range c.Edges {
					e.I, e.J = e.I+base, e.J+base
					g.Edges = append(g.Edges, e)
				}
				for _, i := range []int{0, 3} {
					ps = append(ps, posegraph.Prior{Kind: posegraph.PositionPrior, Pose: base + i, T: truth[i].T, Tau: 2})
				}
			}
			g = g.WithPriors(ps)
			b.ResetTimer()
			for range b.N {
				if _, err := Chordal(g); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
