package posegraph

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestEdgeCostsHand checks one SE(2) edge against the value worked out by
// hand: R_i = I, R_j the rotation by theta, R_e = I, so the rotation term is
// kappa ||R_j - I||_F^2 = 4 kappa (1 - cos theta); t_i = 0, t_j = (1, 2),
// t_e = (1, 0), so the translation term is tau ||(0, 2)||^2 = 4 tau.
func TestEdgeCostsHand(t *testing.T) {
	const th, kappa, tau = 0.3, 7.0, 5.0
	g := &Graph{D: 2, IDs: []int{0, 1}, Edges: []Edge{{I: 0, J: 1, R: Identity(2).R, T: [3]float64{1, 0}, Kappa: kappa, Tau: tau}}}
	x := []Pose{Identity(2), {R: [9]float64{math.Cos(th), -math.Sin(th), math.Sin(th), math.Cos(th)}, T: [3]float64{1, 2}}}
	rot := 4 * kappa * (1 - math.Cos(th))
	got := g.EdgeCosts(nil, x, Poses)
	if want := rot + 4*tau; len(got) != 1 || math.Abs(got[0]-want) > 1e-12*want {
		t.Errorf("Poses: got %v, want [%g]", got, want)
	}
	got = g.EdgeCosts(got, x, Rotations)
	if len(got) != 1 || math.Abs(got[0]-rot) > 1e-12*rot {
		t.Errorf("Rotations: got %v, want [%g]", got, rot)
	}
}

// TestEdgeCostsSumToCost checks that the terms are Cost's edge by edge: each
// is Cost of the one-edge graph, and they sum to Cost, raw rotations
// included.
func TestEdgeCostsSumToCost(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, d := range []int{2, 3} {
		for _, p := range []Problem{Poses, Rotations} {
			for _, raw := range []bool{false, true} {
				g := randomGraph(rng, d, 12, 20)
				g.RawRotations = raw
				if raw {
					for k := range g.Edges {
						for a := range g.Edges[k].R[:d*d] {
							g.Edges[k].R[a] *= 1 + 1e-6
						}
					}
				}
				x := randomPoses(rng, d, g.N())
				terms := g.EdgeCosts(make([]float64, 3), x, p)
				if len(terms) != g.M() {
					t.Fatalf("d=%d %v raw=%v: %d terms for %d edges", d, p, raw, len(terms), g.M())
				}
				sum := 0.0
				for k, v := range terms {
					one := *g
					one.Edges = g.Edges[k : k+1]
					if want := one.Cost(x, p); math.Abs(v-want) > 1e-12*math.Abs(want) {
						t.Errorf("d=%d %v raw=%v: edge %d term %g, one-edge Cost %g", d, p, raw, k, v, want)
					}
					sum += v
				}
				if want := g.Cost(x, p); math.Abs(sum-want) > 1e-12*want {
					t.Errorf("d=%d %v raw=%v: terms sum to %g, Cost %g", d, p, raw, sum, want)
				}
			}
		}
	}
}
