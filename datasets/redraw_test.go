package datasets

import (
	"math"
	"testing"

	"github.com/bcmsync/bcmsync/posegraph"
)

// TestRedraw checks that Redraw keeps the structure and the weights, draws
// the same bits for the same seed and other bits for another, and draws
// noise at the stated weights: F at the truth of a redrawn graph (with
// landmarks, and with each edge at its own weights) lies within 4 standard
// deviations of its chi-squared expectation, for several seeds.
func TestRedraw(t *testing.T) {
	for _, f := range families() {
		cfg := baseConfig()
		cfg.Kappa = 30
		g, truth, err := f.gen(cfg)
		if err != nil {
			t.Fatal(err)
		}
		g, truth, err = AddLandmarks(g, truth, LandmarkConfig{N: 10, Tau: 50, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		// Weights that differ from edge to edge.
		for k := range g.Edges {
			e := &g.Edges[k]
			e.Tau *= 1 + float64(k%3)
			if e.Kappa > 0 {
				e.Kappa *= 1 + float64(k%5)
			}
			e.Meas, e.Info = []float64{1}, []float64{1}
		}
		a, err := Redraw(g, truth, 7)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Validate(); err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		b, _ := Redraw(g, truth, 7)
		c, _ := Redraw(g, truth, 8)
		same, differ := true, false
		for k := range g.Edges {
			ea, eb, ec, e := &a.Edges[k], &b.Edges[k], &c.Edges[k], &g.Edges[k]
			if ea.I != e.I || ea.J != e.J || ea.Kappa != e.Kappa || ea.Tau != e.Tau || ea.Line != e.Line {
				t.Fatalf("%s: edge %d changed structure or weights", f.name, k)
			}
			if ea.Meas != nil || ea.Info != nil {
				t.Fatalf("%s: edge %d kept the file's values", f.name, k)
			}
			same = same && ea.R == eb.R && ea.T == eb.T
			differ = differ || ea.T != ec.T
		}
		if !same || !differ {
			t.Errorf("%s: same seed same bits %v, another seed other bits %v", f.name, same, differ)
		}
		for _, seed := range []uint64{1, 2, 3} {
			r, err := Redraw(g, truth, seed)
			if err != nil {
				t.Fatal(err)
			}
			mean, v := ExpectedCost(r, posegraph.Poses)
			got := r.Cost(truth, posegraph.Poses)
			if z := math.Abs(got-mean) / math.Sqrt(v); z > 4 {
				t.Errorf("%s seed %d: F(truth) = %g, expected %g +- %g (%.1f sd)", f.name, seed, got, mean, math.Sqrt(v), z)
			}
		}
	}
	if _, err := Redraw(nil, nil, 1); err == nil {
		t.Error("Redraw accepted a nil graph")
	}
	g, truth, _ := Manhattan(20, 5, baseConfig())
	if _, err := Redraw(g, truth[:5], 1); err == nil {
		t.Error("Redraw accepted a short truth")
	}
}
