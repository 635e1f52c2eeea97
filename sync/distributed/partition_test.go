package distributed

import (
	"slices"
	"sort"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/bcmsync/bcmsync/posegraph"
)

// denseFiedler is the oracle of fiedler: the eigenvector of the second
// smallest eigenvalue of g's graph Laplacian (one unit weight per pair of
// poses joined by an edge), from gonum's dense eigensolver, with the
// eigenvalues' gap above it (lambda3 - lambda2).
func denseFiedler(g *posegraph.Graph) ([]float64, float64, float64) {
	n := g.N()
	adj := map[[2]int]bool{}
	for _, e := range g.Edges {
		i, j := min(e.I, e.J), max(e.I, e.J)
		if i != j {
			adj[[2]int{i, j}] = true
		}
	}
	l := mat.NewSymDense(n, nil)
	for e := range adj {
		i, j := e[0], e[1]
		l.SetSym(i, i, l.At(i, i)+1)
		l.SetSym(j, j, l.At(j, j)+1)
		l.SetSym(i, j, -1)
	}
	var es mat.EigenSym
	if !es.Factorize(l, true) {
		panic("eigen")
	}
	var v mat.Dense
	es.VectorsTo(&v)
	vals := es.Values(nil)
	return mat.Col(nil, 1, &v), vals[1], vals[2] - vals[1]
}

func abs(x float64) float64 { return max(x, -x) }

// Spectral's two halves are the level sets of the Fiedler vector that the
// dense oracle computes, its parts are balanced, it is deterministic, and
// it cuts a graph of two clusters at the one edge between them.
func TestSpectralPartition(t *testing.T) {
	for _, d := range []int{2, 3} {
		g := testGraph(t, d)
		n := g.N()
		f, lambda2, gap := denseFiedler(g)
		if lambda2 <= 0 || gap < 1e-3*lambda2 {
			t.Fatalf("d=%d: the oracle's Fiedler value %g is not simple (gap %g)", d, lambda2, gap)
		}
		// fiedler against the oracle, up to sign.
		all, local := make([]int, n), make([]int, n)
		for i := range all {
			all[i], local[i] = i, i
		}
		v, err := fiedler(all, poseAdjacency(g), local)
		if err != nil {
			t.Fatal(err)
		}
		dot := 0.0
		for i := range v {
			dot += v[i] * f[i]
		}
		if 1-abs(dot) > 1e-6 {
			t.Errorf("d=%d: |<v, oracle>| = %.9f", d, abs(dot))
		}
		if dot < 0 {
			for i := range f {
				f[i] = -f[i]
			}
		}
		// Spectral's halves are the oracle's: the n/2 smallest entries.
		p, err := Spectral(g, 2)
		if err != nil {
			t.Fatal(err)
		}
		order := make([]int, n)
		for i := range order {
			order[i] = i
		}
		sort.SliceStable(order, func(a, b int) bool { return f[order[a]] < f[order[b]] })
		if margin := f[order[n/2]] - f[order[n/2-1]]; margin < 1e-6 {
			t.Fatalf("d=%d: the oracle's median is not separated (%g)", d, margin)
		}
		for r, i := range order {
			if want := r >= n/2; (p.Part[i] == 1) != want {
				t.Errorf("d=%d: pose %d (rank %d of the oracle's order) in part %d", d, i, r, p.Part[i])
			}
		}
		for _, k := range []int{1, 2, 3, 4, 5} {
			p, err := Spectral(g, k)
			if err != nil || p.Validate(n) != nil {
				t.Fatalf("d=%d K=%d: %v", d, k, err)
			}
			count := make([]int, k)
			for _, q := range p.Part {
				count[q]++
			}
			if lo, hi := slices.Min(count), slices.Max(count); hi-lo > 1 {
				t.Errorf("d=%d K=%d: part sizes %v", d, k, count)
			}
			again, _ := Spectral(g, k)
			if !slices.Equal(p.Part, again.Part) {
				t.Errorf("d=%d K=%d: two runs split differently", d, k)
			}
		}
		for _, k := range []int{0, n + 1} {
			if _, err := Spectral(g, k); err == nil {
				t.Errorf("Spectral with %d parts accepted", k)
			}
		}
	}
	// Two copies of a graph joined by one edge: the cut is that edge.
	g := testGraph(t, 2)
	n := g.N()
	two := &posegraph.Graph{D: g.D, IDs: make([]int, 2*n)}
	for i := range two.IDs {
		two.IDs[i] = i
	}
	for _, e := range g.Edges {
		two.Edges = append(two.Edges, e)
		e.I, e.J = e.I+n, e.J+n
		two.Edges = append(two.Edges, e)
	}
	bridge := g.Edges[0]
	bridge.I, bridge.J = n-1, n
	two.Edges = append(two.Edges, bridge)
	p, err := Spectral(two, 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, cut := p.Boundary(two); cut != 1 {
		t.Errorf("two clusters: %d edges cut, want the bridge alone", cut)
	}
}

// Spectral gives every part a pose on graphs as small as the parts, on
// chains (whose pieces are below LOBPCG's block size) and without edges.
func TestSpectralSmallGraphs(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5, 8, 13} {
		g := &posegraph.Graph{D: 2, IDs: make([]int, n)}
		for i := 0; i+1 < n; i++ {
			g.Edges = append(g.Edges, posegraph.Edge{I: i, J: i + 1, Kappa: 1, Tau: 1, R: posegraph.Identity(2).R})
		}
		for k := 1; k <= n; k++ {
			p, err := Spectral(g, k)
			if err == nil {
				err = p.Validate(n)
			}
			if err != nil {
				t.Errorf("chain of %d in %d parts: %v", n, k, err)
			}
		}
	}
	g := &posegraph.Graph{D: 2, IDs: make([]int, 6)}
	if p, err := Spectral(g, 3); err != nil || p.Validate(6) != nil {
		t.Errorf("no edges: %v", err)
	}
}
