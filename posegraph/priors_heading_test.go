package posegraph

import "testing"

// PriorsFixHeading: a pose prior fixes the heading; position priors do
// when their points do not coincide (2-D) or are not on one line (3-D).
func TestPriorsFixHeading(t *testing.T) {
	pos := func(x, y, z float64) Edge {
		return Edge{Prior: PositionPrior, T: [3]float64{x, y, z}, Tau: 1}
	}
	cases := []struct {
		name  string
		d     int
		edges []Edge
		want  bool
	}{
		{"none", 2, nil, true},
		{"one fix", 2, []Edge{pos(3, 3, 0)}, false},
		{"one point twice", 2, []Edge{pos(3, 3, 0), pos(3, 3, 0)}, false},
		{"two points", 2, []Edge{pos(3, 3, 0), pos(4, 3, 0)}, true},
		{"pose prior", 2, []Edge{pos(3, 3, 0), {Prior: PosePrior}}, true},
		{"3-D line", 3, []Edge{pos(0, 0, 0), pos(1, 1, 1), pos(2, 2, 2), pos(-5, -5, -5)}, false},
		{"3-D plane", 3, []Edge{pos(0, 0, 0), pos(1, 0, 0), pos(0, 1, 0)}, true},
		{"3-D two points", 3, []Edge{pos(0, 0, 0), pos(1, 0, 0)}, false},
	}
	for _, c := range cases {
		g := &Graph{D: c.d, Edges: c.edges}
		if got := g.PriorsFixHeading(); got != c.want {
			t.Errorf("%s: PriorsFixHeading %v, want %v", c.name, got, c.want)
		}
	}
}
