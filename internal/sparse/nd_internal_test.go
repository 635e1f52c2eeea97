package sparse

import (
	"math/rand/v2"
	"testing"
)

// latticeGraph is the graph of a kx x ky x kz lattice (7-point stencil),
// node x + kx (y + ky z), with unit edge weights and node weight b.
func latticeGraph(kx, ky, kz, b int) *ndGraph {
	n := kx * ky * kz
	g := &ndGraph{xadj: make([]int, n+1), vwgt: make([]int, n), tw: n * b}
	for i := 0; i < n; i++ {
		x, y, z := i%kx, (i/kx)%ky, i/(kx*ky)
		for _, nb := range [][4]int{{x - 1, y, z, i - 1}, {x + 1, y, z, i + 1}, {x, y - 1, z, i - kx}, {x, y + 1, z, i + kx}, {x, y, z - 1, i - kx*ky}, {x, y, z + 1, i + kx*ky}} {
			if nb[0] >= 0 && nb[0] < kx && nb[1] >= 0 && nb[1] < ky && nb[2] >= 0 && nb[2] < kz {
				g.adj = append(g.adj, nb[3])
				g.ewgt = append(g.ewgt, 1)
			}
		}
		g.xadj[i+1] = len(g.adj)
		g.vwgt[i] = b
	}
	return g
}

// checkSeparator reports whether where is a vertex separator of g (no edge
// joins sides 0 and 1) and returns the weights of the sides and separator.
func checkSeparator(t *testing.T, g *ndGraph, where []uint8) (pw [3]int) {
	t.Helper()
	for v := 0; v < g.n(); v++ {
		pw[where[v]] += g.vwgt[v]
		if where[v] == 2 {
			continue
		}
		for _, u := range g.adj[g.xadj[v]:g.xadj[v+1]] {
			if where[u] != 2 && where[u] != where[v] {
				t.Fatalf("edge %d-%d joins the two sides", v, u)
			}
		}
	}
	return pw
}

// TestSeparate checks the separator property and the balance bound on
// lattices, and that the separator is no larger than the lattice's
// smallest plane (which separates it with perfect balance).
func TestSeparate(t *testing.T) {
	for _, c := range [][3]int{{10, 10, 10}, {24, 24, 6}, {60, 40, 1}, {7, 9, 11}} {
		g := latticeGraph(c[0], c[1], c[2], 3)
		w := newNDWork(g, g.n())
		rng := rand.New(rand.NewPCG(1, 2))
		where := w.separate(g, rng)
		pw := checkSeparator(t, g, where)
		maxw := int(float64(g.tw) * (1 + ndImbalance) / 2)
		if pw[0] == 0 || pw[1] == 0 || pw[0] > maxw || pw[1] > maxw {
			t.Errorf("lattice %v: sides weigh %d and %d, bound %d", c, pw[0], pw[1], maxw)
		}
		plane := 3 * min(c[0]*c[1], c[1]*c[2], c[0]*c[2])
		t.Logf("lattice %v: separator %d (plane %d), sides %d %d", c, pw[2], plane, pw[0], pw[1])
		if pw[2] > plane {
			t.Errorf("lattice %v: separator weighs %d, more than the plane's %d", c, pw[2], plane)
		}
	}
}

// TestCoverCut checks that coverCut turns a random bisection of a small
// random graph into a vertex separator of minimum size, found by brute
// force over the subsets of the cut's end nodes.
func TestCoverCut(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 200; trial++ {
		n := 4 + rng.IntN(12)
		g := &ndGraph{xadj: make([]int, n+1), vwgt: make([]int, n), tw: n}
		p := 0.1 + 0.4*rng.Float64()
		nbrs := make([][]int, n)
		for i := 0; i < n; i++ {
			for j := i + 1; j < n; j++ {
				if rng.Float64() < p {
					nbrs[i] = append(nbrs[i], j)
					nbrs[j] = append(nbrs[j], i)
				}
			}
		}
		for i := 0; i < n; i++ {
			g.adj = append(g.adj, nbrs[i]...)
			for range nbrs[i] {
				g.ewgt = append(g.ewgt, 1)
			}
			g.xadj[i+1] = len(g.adj)
			g.vwgt[i] = 1
		}
		where := make([]uint8, n)
		for i := range where {
			where[i] = uint8(rng.IntN(2))
		}
		orig := append([]uint8(nil), where...)
		w := newNDWork(g, n)
		w.coverCut(g, where)
		pw := checkSeparator(t, g, where)
		for v := range where {
			if where[v] != 2 && where[v] != orig[v] {
				t.Fatalf("node %d changed side", v)
			}
		}
		// Smallest set of nodes covering every cut edge.
		best := n + 1
		for s := 0; s < 1<<n; s++ {
			size := 0
			for v := 0; v < n; v++ {
				size += s >> v & 1
			}
			if size >= best {
				continue
			}
			ok := true
			for v := 0; v < n && ok; v++ {
				for _, u := range g.adj[g.xadj[v]:g.xadj[v+1]] {
					if orig[u] != orig[v] && s>>v&1 == 0 && s>>u&1 == 0 {
						ok = false
						break
					}
				}
			}
			if ok {
				best = size
			}
		}
		if pw[2] != best {
			t.Fatalf("trial %d: cover of %d nodes, minimum %d", trial, pw[2], best)
		}
	}
}

// TestRefineSeparator checks that node refinement keeps a separator, never
// makes it heavier and respects the balance bound, starting from thick
// separators of a lattice (two neighbouring planes and more).
func TestRefineSeparator(t *testing.T) {
	const k = 12
	g := latticeGraph(k, k, k, 1)
	maxw := int(float64(g.tw) * (1 + ndImbalance) / 2)
	for _, thick := range []int{1, 2, 4} {
		where := make([]uint8, g.n())
		for v := range where {
			switch z := v / (k * k); {
			case z < k/2-thick/2:
				where[v] = 0
			case z < k/2-thick/2+thick:
				where[v] = 2
			default:
				where[v] = 1
			}
		}
		before := checkSeparator(t, g, where)
		w := newNDWork(g, g.n())
		w.refineSeparator(g, where, maxw)
		after := checkSeparator(t, g, where)
		if after[2] > before[2] || after[0] > maxw || after[1] > maxw {
			t.Errorf("thickness %d: separator %d -> %d, sides %d %d (bound %d)", thick, before[2], after[2], after[0], after[1], maxw)
		}
		if thick > 1 && after[2] >= before[2] {
			t.Errorf("thickness %d: separator of %d not thinned", thick, before[2])
		}
	}
}

// TestLeafHalo checks that a leaf is ordered knowing its halo: a path of
// ten nodes whose first node touches a later separator node must be
// eliminated from its free end, without fill, although both ends of the
// path alone have degree one and the smaller index would go first.
func TestLeafHalo(t *testing.T) {
	const n = 10
	root := &ndGraph{xadj: make([]int, n+2), vwgt: make([]int, n+1), tw: 3 * (n + 1)}
	for v := 0; v <= n; v++ {
		var nbrs []int
		switch {
		case v == n: // the separator node
			nbrs = []int{0}
		case v == 0:
			nbrs = []int{1, n}
		case v == n-1:
			nbrs = []int{n - 2}
		default:
			nbrs = []int{v - 1, v + 1}
		}
		root.adj = append(root.adj, nbrs...)
		for range nbrs {
			root.ewgt = append(root.ewgt, 1)
		}
		root.xadj[v+1] = len(root.adj)
		root.vwgt[v] = 3
	}
	part := make([]int, n+1)
	part[n] = 1
	label := make([]int, n+1)
	for i := range label {
		label[i] = i
	}
	w := newNDWork(root, n+1)
	subs, labels := w.split(root, label, part, 2)
	order := make([]int, n+1)
	w.leaf(subs[0], labels[0], order[:n])
	order[n] = n
	nnz := 0
	for _, c := range blockColCounts(root.xadj, root.adj, order) {
		nnz += c
	}
	// No fill: the diagonal plus the n edges.
	if nnz != 2*n+1 {
		t.Errorf("order %v: %d blocks in L, want %d (no fill)", order, nnz, 2*n+1)
	}
	for _, v := range w.rootMark {
		if v != -1 {
			t.Fatal("leaf left marks behind")
		}
	}
	// Minimum degree on the path alone does make fill: the case tests the
	// halo.
	sub := subs[0]
	plain := append(minDegree(sub.n(), sub.xadj, sub.adj, sub.vwgt), n)
	nnz = 0
	for _, c := range blockColCounts(root.xadj, root.adj, plain) {
		nnz += c
	}
	if nnz == 2*n+1 {
		t.Errorf("order %v without the halo has no fill either", plain)
	}
}
