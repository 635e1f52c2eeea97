package posegraph

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// cycle returns a d-dimensional cycle of n poses with unit measurements
// and weights 1, read from "cycle.g2o" with edge k on line k+1.
func cycle(d, n int) *Graph {
	g := &Graph{D: d, Source: "cycle.g2o"}
	for i := 0; i < n; i++ {
		g.IDs = append(g.IDs, i)
	}
	for i := 0; i < n; i++ {
		e := Edge{I: i, J: (i + 1) % n, R: Identity(d).R, Kappa: 1, Tau: 1, Line: i + 1}
		e.T[0] = 1
		g.Edges = append(g.Edges, e)
	}
	return g
}

func wantError(t *testing.T, name string, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error, want one containing %q", name, parts)
		return
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("%s: error %q lacks %q", name, err, p)
		}
	}
}

// TestCheckScaleMagnitudes: each number past MaxMagnitude (or below
// MinWeight) is refused at its record, FILE:LINE.
func TestCheckScaleMagnitudes(t *testing.T) {
	if err := cycle(2, 5).CheckScale(); err != nil {
		t.Fatalf("a plain cycle: %v", err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, d := range []int{2, 3} {
		if err := randomGraph(rng, d, 30, 20).Validate(); err != nil {
			t.Errorf("random %d-D graph: %v", d, err)
		}
	}
	for _, c := range []struct {
		name   string
		change func(g *Graph)
		want   []string
	}{
		{"translation", func(g *Graph) { g.Edges[2].T[1] = -1e200 }, []string{"cycle.g2o:3: ", "-1e+200", "larger unit"}},
		{"translation 3-D", func(g *Graph) { g.Edges[1].T[2] = 2 * MaxMagnitude }, []string{"cycle.g2o:2: ", "2e+50"}},
		{"kappa", func(g *Graph) { g.Edges[3].Kappa = 1e60 }, []string{"cycle.g2o:4: ", "rotation precision kappa = 1e+60", "[1e-50, 1e+50]"}},
		{"tau", func(g *Graph) { g.Edges[0].Tau = 1e-60 }, []string{"cycle.g2o:1: ", "translation precision tau = 1e-60"}},
		{"lever", func(g *Graph) { g.Edges[4].T[0], g.Edges[4].Tau = 1e30, 1 }, []string{"cycle.g2o:5: ", "tau |t|^2 = 1e+60"}},
		{"vertex", func(g *Graph) {
			g.HasInitial = make([]bool, g.N())
			g.Initial = make([]Pose, g.N())
			g.VertexLines = []int{10, 11, 12, 13, 14}
			g.HasInitial[2], g.Initial[2].T[0] = true, 1e51
		}, []string{"cycle.g2o:12: vertex 2's position", "1e+51"}},
		{"vertex without a line", func(g *Graph) {
			g.HasInitial = make([]bool, g.N())
			g.Initial = make([]Pose, g.N())
			g.HasInitial[3], g.Initial[3].T[1] = true, -1e51
		}, []string{"cycle.g2o: vertex 3: vertex 3's position"}},
	} {
		d := 2
		if strings.Contains(c.name, "3-D") {
			d = 3
		}
		g := cycle(d, 5)
		c.change(g)
		wantError(t, c.name, g.CheckScale(), c.want...)
		// Validate runs the same checks, for a caller of sync.Solve.
		wantError(t, c.name+" (Validate)", g.Validate(), c.want...)
	}
}

// TestCheckScaleContrast: a heavy edge whose group hangs on light edges
// is refused past MaxWeightRatio, and a light edge that holds nothing is
// not.
func TestCheckScaleContrast(t *testing.T) {
	// Edge 2 joins poses 2 and 3, held to the rest by edges 1 and 3 (total
	// weight 2): the contrast is w / 2.
	for _, c := range []struct {
		w      float64
		refuse bool
	}{{1.9 * MaxWeightRatio, false}, {2.1 * MaxWeightRatio, true}, {1e20, true}} {
		for _, which := range []string{"kappa", "tau"} {
			g := cycle(2, 5)
			// The other weight at 1e3 on every edge keeps each edge's own
			// kappa and tau within MaxWeightRatio of each other.
			for k := range g.Edges {
				if which == "kappa" {
					g.Edges[k].Tau = 1e3
				} else {
					g.Edges[k].Kappa = 1e3
				}
			}
			if which == "kappa" {
				g.Edges[2].Kappa = c.w
			} else {
				g.Edges[2].Tau = c.w
			}
			err := g.CheckScale()
			if !c.refuse {
				if err != nil {
					t.Errorf("%s %g: %v", which, c.w, err)
				}
				continue
			}
			wantError(t, which, err, "cycle.g2o:3: ", which+" = ", "group of 2 vertices (ids 2, 3)", "(lines 2, 4)")
		}
	}
	// A loop closure 1e-14 times lighter than everything else adds to
	// weights that are there anyway: accepted.
	g := cycle(3, 6)
	g.Edges = append(g.Edges, Edge{I: 0, J: 3, R: Identity(3).R, Kappa: 1e-14, Tau: 1e-14, Line: 7})
	if err := g.CheckScale(); err != nil {
		t.Errorf("a weak loop closure: %v", err)
	}
	// Weights graded by a factor 10 along a path: no single step is steep,
	// but the heaviest end hangs on the lightest edge.
	g = &Graph{D: 2, Source: "path"}
	for i := 0; i <= 15; i++ {
		g.IDs = append(g.IDs, i)
	}
	for i := 0; i < 15; i++ {
		g.Edges = append(g.Edges, Edge{I: i, J: i + 1, R: Identity(2).R, Kappa: 1, Tau: math.Pow(10, float64(i)), Line: i + 1})
	}
	wantError(t, "graded path", g.CheckScale(), "path:15: ", "tau = 1e+14")
	// A chain of heavy edges held by light ones at its two ends: in
	// floating point the chain's vertex sums cancel the light weights.
	g = cycle(2, 6)
	g.Edges[1].Kappa, g.Edges[2].Kappa, g.Edges[3].Kappa = 1e13, 1e13, 1e13
	wantError(t, "heavy chain", g.CheckScale(), "group of 4 vertices (ids 1, 2, 3, 4)", "(lines 1, 5)")
	// Landmark observations count for tau; they have no kappa.
	g = cycle(2, 4)
	g.IDs = append(g.IDs, 100)
	g.Landmark = []bool{false, false, false, false, true}
	g.Edges = append(g.Edges,
		Edge{I: 0, J: 4, R: Identity(2).R, Tau: 1e11, Line: 5},
		Edge{I: 1, J: 4, R: Identity(2).R, Tau: 1, Line: 6})
	if err := g.Validate(); err != nil {
		t.Errorf("observations: %v", err)
	}
	// Pose 0 and the landmark, bound by 1e14, hang on three edges of 1.
	g.Edges[4].Tau = 1e14
	wantError(t, "observations", g.Validate(), "cycle.g2o:5: translation precision tau = 1e+14", "ids 0, 100", "(lines 1, 4, 6)")
}

// TestCheckScaleOracle compares the contrast check with its definition,
// computed directly on small random graphs whose weights span 30 decades:
// for every weight t, every connected component X of the edges of weight
// at least t that is joined to the rest of the graph must have its
// heaviest edge within MaxWeightRatio of the total weight of the edges
// leaving it (summed directly, as light weights only).
func TestCheckScaleOracle(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	refused, accepted := 0, 0
	for trial := 0; trial < 400; trial++ {
		n := 3 + rng.IntN(6)
		g := &Graph{D: 2, Source: "random"}
		for i := 0; i < n; i++ {
			g.IDs = append(g.IDs, i)
		}
		add := func(i, j int) {
			w := math.Pow(10, -15+30*rng.Float64())
			if rng.IntN(4) == 0 && len(g.Edges) > 0 {
				w = g.Edges[rng.IntN(len(g.Edges))].Tau // ties
			}
			// kappa = tau: each edge's own two weights agree, and kappa's
			// groups are tau's.
			g.Edges = append(g.Edges, Edge{I: i, J: j, R: Identity(2).R, Kappa: w, Tau: w, Line: len(g.Edges) + 1})
		}
		for i := 1; i < n; i++ {
			add(rng.IntN(i), i) // a random spanning tree
		}
		for k := rng.IntN(2 * n); k > 0; k-- {
			if i, j := rng.IntN(n), rng.IntN(n); i != j {
				add(i, j)
			}
		}
		want := contrastOracle(g)
		err := g.CheckScale()
		if (err != nil) != want {
			t.Fatalf("trial %d: CheckScale %v, the definition says refuse=%t; edges %+v", trial, err, want, g.Edges)
		}
		if want {
			refused++
		} else {
			accepted++
		}
	}
	if refused < 50 || accepted < 50 {
		t.Errorf("%d refused and %d accepted: the trials do not test both sides", refused, accepted)
	}
}

// contrastOracle reports whether some component of the edges of tau at
// least t, for some t, has a contrast beyond MaxWeightRatio.
func contrastOracle(g *Graph) bool {
	n := g.N()
	for _, th := range g.Edges {
		comp := make([]int, n)
		for i := range comp {
			comp[i] = i
		}
		for changed := true; changed; {
			changed = false
			for _, e := range g.Edges {
				if e.Tau >= th.Tau && comp[e.I] != comp[e.J] {
					c := min(comp[e.I], comp[e.J])
					comp[e.I], comp[e.J] = c, c
					changed = true
				}
			}
		}
		for root := 0; root < n; root++ {
			heavy, cut := 0.0, 0.0
			for _, e := range g.Edges {
				in, jn := comp[e.I] == root, comp[e.J] == root
				switch {
				case in && jn:
					heavy = max(heavy, e.Tau)
				case in != jn:
					cut += e.Tau
				}
			}
			if cut > 0 && heavy > MaxWeightRatio*cut {
				return true
			}
		}
	}
	return false
}

// TestSubgraphVertexLines: a component keeps its vertices' lines.
func TestSubgraphVertexLines(t *testing.T) {
	g := cycle(2, 4)
	g.VertexLines = []int{7, 8, 9, 10}
	s := g.Subgraph([]int{1, 3})
	if len(s.VertexLines) != 2 || s.VertexLines[0] != 8 || s.VertexLines[1] != 10 {
		t.Errorf("VertexLines %v, want [8 10]", s.VertexLines)
	}
}

// BenchmarkCheckScale: the usual graph (weights within MaxWeightRatio of
// each other, one pass) and one whose weights span more (the merge tree).
func BenchmarkCheckScale(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	g := randomGraph(rng, 3, 100000, 100000)
	b.Run("within", func(b *testing.B) {
		for b.Loop() {
			if err := g.CheckScale(); err != nil {
				b.Fatal(err)
			}
		}
	})
	spread := *g
	spread.Edges = append([]Edge(nil), g.Edges...)
	for k := range spread.Edges {
		spread.Edges[k].Tau = math.Pow(10, 10*rng.Float64()-5) * (1 + float64(k%2)*1e3) // 13 decades, no steep group
	}
	b.Run("spread", func(b *testing.B) {
		for b.Loop() {
			spread.CheckScale()
		}
	})
}

// TestCheckScaleWithinEdge: an edge whose own rotation and translation
// weights (kappa, kappa + tau |t|^2, tau on Q's diagonal) lie more than
// MaxWeightRatio apart is refused at its line, even when no group of
// vertices is (every edge alike); the rotation problem, which ignores
// tau and the translations, accepts it, and anything else about them.
func TestCheckScaleWithinEdge(t *testing.T) {
	for _, c := range []struct {
		kappa, tau, t float64
		refuse        bool
		want          string
	}{
		{1, 0.9e12, 1, false, ""},
		{1, 1e13, 0, true, "cycle.g2o:1: the rotation precision kappa = 1 and the translation precision tau = 1e+13"},
		{1e13, 1, 1, true, "cycle.g2o:1: the rotation precision kappa = 1e+13 and the translation precision tau = 1"},
		// A long translation: tau |t|^2 on the rotation diagonal.
		{1, 1, 2e6, true, "(tau |t|^2 = 4e+12)"},
	} {
		g := cycle(3, 5)
		for k := range g.Edges {
			g.Edges[k].Kappa, g.Edges[k].Tau, g.Edges[k].T[0] = c.kappa, c.tau, c.t
		}
		err := g.Validate()
		if !c.refuse {
			if err != nil {
				t.Errorf("kappa %g tau %g t %g: %v", c.kappa, c.tau, c.t, err)
			}
			continue
		}
		wantError(t, c.want, err, c.want, "times apart", "--rotations")
		if err := g.ValidateFor(Rotations); err != nil {
			t.Errorf("kappa %g tau %g t %g, rotations: %v", c.kappa, c.tau, c.t, err)
		}
	}
	// The rotation problem ignores tau's range and the translations' size
	// too, but not kappa's.
	g := cycle(2, 4)
	g.Edges[1].Tau, g.Edges[2].T[0] = 1e60, 1e200
	if err := g.CheckScaleFor(Rotations); err != nil {
		t.Errorf("rotations with tau 1e60 and a translation of 1e200: %v", err)
	}
	if err := g.CheckScale(); err == nil {
		t.Error("poses with tau 1e60 and a translation of 1e200: accepted")
	}
	g.Edges[3].Kappa = 1e60
	wantError(t, "rotations, kappa 1e60", g.CheckScaleFor(Rotations), "cycle.g2o:4: ", "kappa = 1e+60")
}
