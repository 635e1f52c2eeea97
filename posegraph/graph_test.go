package posegraph

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

func TestComponentsAndValidate(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	g := randomGraph(rng, 3, 10, 0)
	// Cut the chain between 3 and 4 and between 6 and 7: components {0..3}, {4..6}, {7..9}.
	var kept []Edge
	for _, e := range g.Edges {
		if !(e.I == 3 && e.J == 4) && !(e.I == 6 && e.J == 7) {
			kept = append(kept, e)
		}
	}
	g.Edges = kept
	g.Source = "cut.g2o"
	comps := g.Components()
	want := [][]int{{0, 1, 2, 3}, {4, 5, 6}, {7, 8, 9}}
	if !reflect.DeepEqual(comps, want) {
		t.Fatalf("components = %v, want %v", comps, want)
	}
	err := g.Validate()
	if !IsDisconnected(err) {
		t.Fatalf("Validate = %v, want a DisconnectedError", err)
	}
	if !strings.Contains(err.Error(), "cut.g2o") || !strings.Contains(err.Error(), "[4 3 3]") {
		t.Errorf("message %q should name the file and the component sizes", err)
	}
	s := g.Subgraph(comps[0])
	if s.N() != 4 || s.M() != 3 || s.Validate() != nil {
		t.Errorf("largest component: n=%d m=%d err=%v", s.N(), s.M(), s.Validate())
	}
	if s.IDs[3] != g.IDs[3] {
		t.Errorf("subgraph lost the ids: %v", s.IDs)
	}
}

func TestValidateRejects(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	base := func() *Graph { g := randomGraph(rng, 2, 4, 0); g.Source = "x.g2o"; return g }
	cases := []struct {
		name  string
		edit  func(g *Graph)
		wants string
	}{
		{"self loop", func(g *Graph) { g.Edges[0].J = g.Edges[0].I; g.Edges[0].Line = 7 }, "x.g2o:7: edge from pose"},
		{"zero kappa", func(g *Graph) { g.Edges[1].Kappa = 0 }, "precisions"},
		{"not a rotation", func(g *Graph) { g.Edges[2].R[0] = 2 }, "not a rotation"},
		{"dimension", func(g *Graph) { g.D = 4 }, "dimension 4"},
		{"duplicate id", func(g *Graph) { g.IDs[1] = g.IDs[0] }, "names poses"},
		{"out of range", func(g *Graph) { g.Edges[0].J = 99 }, "outside"},
	}
	for _, c := range cases {
		g := base()
		c.edit(g)
		err := g.Validate()
		if err == nil || !strings.Contains(err.Error(), c.wants) {
			t.Errorf("%s: Validate = %v, want a message containing %q", c.name, err, c.wants)
		}
	}
	if err := base().Validate(); err != nil {
		t.Errorf("valid graph rejected: %v", err)
	}
}

// Subgraphs splits a graph in one pass into the induced subgraphs: each
// part's poses in its order with their ids and initial estimates, the
// edges between them renumbered (in g's order), its FIX marks; checked
// against a direct construction by a map from pose to local index.
func TestSubgraphsInduced(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	g := randomGraph(rng, 2, 12, 8)
	g.Fixed = []int{0, 5, 9}
	g.Initial = make([]Pose, g.N())
	for i := range g.Initial {
		g.Initial[i] = Identity(2)
		g.Initial[i].T[0] = float64(i)
	}
	parts := [][]int{{0, 1, 2, 3, 4}, {5, 7, 8}, {9, 11}} // 6 and 10 in none
	subs := g.Subgraphs(parts)
	kept := 0
	for p, poses := range parts {
		idx := map[int]int{}
		want := &Graph{D: g.D}
		for k, i := range poses {
			idx[i] = k
			want.IDs = append(want.IDs, g.IDs[i])
			want.Initial = append(want.Initial, g.Initial[i])
		}
		for _, f := range g.Fixed {
			if k, ok := idx[f]; ok {
				want.Fixed = append(want.Fixed, k)
			}
		}
		for _, e := range g.Edges {
			a, okA := idx[e.I]
			b, okB := idx[e.J]
			if okA && okB {
				e.I, e.J = a, b
				want.Edges = append(want.Edges, e)
			}
		}
		kept += len(want.Edges)
		if !reflect.DeepEqual(subs[p], want) {
			t.Errorf("part %d: Subgraphs gave %+v, want %+v", p, subs[p], want)
		}
		if one := g.Subgraph(poses); !reflect.DeepEqual(one, want) {
			t.Errorf("part %d: Subgraph gave %+v, want %+v", p, one, want)
		}
	}
	if kept == 0 || kept == g.M() {
		t.Fatalf("the parts keep %d of %d edges: the test should cut some and keep some", kept, g.M())
	}
}
