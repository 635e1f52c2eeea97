package sparse

import (
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// refGraph is a graph whose matrix keeps its values as it grows: a block
// per edge and a diagonal per vertex (4b(degree+1) + base), so that an
// edge or a vertex not touched by a change keeps its bits.
type refGraph struct {
	b     int
	n     int
	edges map[[2]int][]float64 // (i, j), i < j, by vertex id
	base  []float64
}

func newRefGraph(rng *rand.Rand, n, b int, dens float64) *refGraph {
	g := &refGraph{b: b, edges: map[[2]int][]float64{}}
	for v := 0; v < n; v++ {
		g.addVertex(rng)
		if v > 0 {
			g.addEdge(rng, v-1, v)
		}
	}
	for i := 0; i < n; i++ {
		for j := i + 2; j < n; j++ {
			if rng.Float64() < dens {
				g.addEdge(rng, i, j)
			}
		}
	}
	return g
}

func (g *refGraph) clone() *refGraph {
	h := *g
	h.edges = maps.Clone(g.edges)
	h.base = slices.Clone(g.base)
	return &h
}

func (g *refGraph) addVertex(rng *rand.Rand) int {
	g.base = append(g.base, rng.Float64())
	g.n++
	return g.n - 1
}

// addEdge adds a random block between i and j; it reports whether the
// edge is new.
func (g *refGraph) addEdge(rng *rand.Rand, i, j int) bool {
	i, j = min(i, j), max(i, j)
	if _, ok := g.edges[[2]int{i, j}]; ok || i == j {
		return false
	}
	blk := make([]float64, g.b*g.b)
	for k := range blk {
		blk[k] = rng.NormFloat64()
	}
	g.edges[[2]int{i, j}] = blk
	return true
}

// matrix is g's matrix with vertex v at block num[v] (nil: v).
func (g *refGraph) matrix(num []int) *BlockSym {
	if num == nil {
		num = make([]int, g.n)
		for v := range num {
			num[v] = v
		}
	}
	b := g.b
	bb := NewBlockBuilder(g.n, b)
	deg := make([]float64, g.n)
	keys := slices.SortedFunc(maps.Keys(g.edges), func(x, y [2]int) int {
		if x[0] != y[0] {
			return x[0] - y[0]
		}
		return x[1] - y[1]
	})
	for _, e := range keys {
		i, j := num[e[0]], num[e[1]]
		blk := g.edges[e]
		if i > j {
			// Block (j, i) is the transpose.
			tr := make([]float64, b*b)
			for r := 0; r < b; r++ {
				for c := 0; c < b; c++ {
					tr[c*b+r] = blk[r*b+c]
				}
			}
			i, j, blk = j, i, tr
		}
		bb.AddOff(i, j, blk)
		deg[e[0]]++
		deg[e[1]]++
	}
	dia := make([]float64, b*b)
	for v := 0; v < g.n; v++ {
		for a := 0; a < b; a++ {
			dia[a*b+a] = 4*float64(b)*(deg[v]+1) + g.base[v]
		}
		bb.AddDiag(num[v], dia)
	}
	return bb.Build()
}

// refactorStep factors g0's matrix (vertex v at num0[v]) in a fresh order,
// then g1's (a grown or changed g0, v at num1[v]) in the order
// ReorderBlocks keeps (touched: g1's vertices whose rows changed in
// pattern; all of them reordered when fresh), both with
// FactorizeBlocksFrom and afresh, and checks that the two are the same
// bits and solve as gonum's dense Cholesky does.
func refactorStep(t *testing.T, name string, g0, g1 *refGraph, num0, num1 []int, touched []bool, fresh bool) Refactorization {
	t.Helper()
	q0, q1 := g0.matrix(num0), g1.matrix(num1)
	sym0, err := AnalyzeBlockPattern(q0, BlockOrder(q0, 0))
	if err != nil {
		t.Fatal(err)
	}
	c0, err := sym0.Analyze(q0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c0.FactorizeBlocksFrom(q0, 0, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	at := func(num []int, v int) int {
		if num == nil {
			return v
		}
		return num[v]
	}
	bmap := make([]int, g0.n)
	for v := range bmap {
		bmap[at(num0, v)] = at(num1, v)
	}
	prev, parent := sym0.Tree()
	prevIn1 := make([]int, len(prev))
	for k, v := range prev {
		prevIn1[k] = bmap[v]
	}
	perm := BlockOrder(q1, 0)
	if !fresh {
		tq := make([]bool, q1.N)
		for v, tv := range touched {
			tq[at(num1, v)] = tv
		}
		if perm, _, err = ReorderBlocks(q1, prevIn1, slices.Clone(parent), tq); err != nil {
			t.Fatal(err)
		}
	}
	sym1, err := AnalyzeBlockPattern(q1, perm)
	if err != nil {
		t.Fatal(err)
	}
	part, err := sym1.Analyze(q1)
	if err != nil {
		t.Fatal(err)
	}
	st, err := part.FactorizeBlocksFrom(q1, 0, c0, q0, bmap)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	want, err := sym1.Analyze(q1)
	if err != nil {
		t.Fatal(err)
	}
	if err := want.FactorizeBlocks(q1, 0); err != nil {
		t.Fatal(err)
	}
	for k, v := range want.sn.val {
		if math.Float64bits(part.sn.val[k]) != math.Float64bits(v) {
			t.Fatalf("%s: value %d of L is %v, a fresh factorization's %v (%d of %d supernodes copied)", name, k, part.sn.val[k], v, st.Copied, st.Supernodes)
		}
	}
	checkFactor(t, part, q1)
	if st.Supernodes != len(part.sn.first)-1 || st.Copied > st.Supernodes || st.CopiedFlops > st.Flops || st.Flops != part.Flops() {
		t.Fatalf("%s: counts %+v for %d supernodes, %g flops", name, st, len(part.sn.first)-1, part.Flops())
	}
	return st
}

// TestFactorizeBlocksFrom checks the partial refactorization against a
// fresh factorization (bit for bit) and gonum's dense Cholesky on small
// random graphs: new vertices, new edges between old ones, a change deep
// in the tree and at its root, nothing changed and everything changed,
// with the vertices renumbered or not, in a kept order or a fresh one.
func TestFactorizeBlocksFrom(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 29))
	var copied, total, permuted int
	for trial := 0; trial < 24; trial++ {
		b := 1 + trial%3
		g0 := newRefGraph(rng, 12+rng.IntN(30), b, 0.08)
		var num0, num1 []int
		if trial%4 == 3 {
			num0 = rng.Perm(g0.n)
		}
		order := func() []int {
			q := g0.matrix(num0)
			perm := BlockOrder(q, 0)
			sym, _ := AnalyzeBlockPattern(q, perm)
			o, _ := sym.Tree()
			pos := make([]int, g0.n) // vertex -> block -> elimination position
			inv := make([]int, g0.n)
			for v := range inv {
				inv[v] = v
				if num0 != nil {
					inv[num0[v]] = v
				}
			}
			for k, blk := range o {
				pos[k] = inv[blk]
			}
			return pos // the vertices in elimination order
		}()
		leaf, root := order[0], order[len(order)-1]
		type change struct {
			name  string
			apply func(g *refGraph, touched map[int]bool)
			kind  int // 0: some copied, 1: all copied, 2: none copied, -1: any
		}
		changes := []change{
			{"new vertices", func(g *refGraph, tch map[int]bool) {
				for k := 0; k < 1+rng.IntN(4); k++ {
					v := g.addVertex(rng)
					g.addEdge(rng, v-1, v)
					u := rng.IntN(v)
					g.addEdge(rng, u, v)
					tch[v-1], tch[u] = true, true
				}
			}, -1},
			{"new edges between old vertices", func(g *refGraph, tch map[int]bool) {
				for k := 0; k < 1+rng.IntN(3); k++ {
					i, j := rng.IntN(g.n), rng.IntN(g.n)
					if g.addEdge(rng, i, j) {
						tch[i], tch[j] = true, true
					}
				}
			}, -1},
			{"a change deep in the tree", func(g *refGraph, tch map[int]bool) {
				g.base[leaf] += 0.5
			}, 0},
			{"a change at the root", func(g *refGraph, tch map[int]bool) {
				g.base[root] += 0.5
			}, 0},
			{"nothing changed", func(g *refGraph, tch map[int]bool) {}, 1},
			{"everything changed", func(g *refGraph, tch map[int]bool) {
				for v := range g.base {
					g.base[v] += 1
				}
			}, 2},
		}
		for _, ch := range changes {
			g1 := g0.clone()
			tch := map[int]bool{}
			ch.apply(g1, tch)
			touched := make([]bool, g1.n)
			for v := range tch {
				touched[v] = true
			}
			num1 = nil
			if num0 != nil {
				// Renumbered: the old vertices in another order, the new
				// ones after them.
				num1 = append(rng.Perm(g0.n), make([]int, g1.n-g0.n)...)
				for v := g0.n; v < g1.n; v++ {
					num1[v] = v
				}
			}
			for _, fresh := range []bool{false, true} {
				st := refactorStep(t, ch.name, g0, g1, num0, num1, touched, fresh)
				if fresh {
					continue // what a fresh order keeps is its own business
				}
				copied += st.Copied
				total += st.Supernodes
				permuted += st.Permuted
				switch {
				case ch.kind == 1 && st.Copied != st.Supernodes:
					t.Errorf("trial %d, %s: %d of %d supernodes copied, want all", trial, ch.name, st.Copied, st.Supernodes)
				case ch.kind == 2 && st.Copied != 0:
					t.Errorf("trial %d, %s: %d supernodes copied, want none", trial, ch.name, st.Copied)
				case ch.kind == 0 && ch.name == "a change at the root" && st.Copied == 0 && st.Supernodes > 1:
					t.Errorf("trial %d, %s: nothing copied of %d supernodes", trial, ch.name, st.Supernodes)
				case ch.kind == 0 && (st.Copied == st.Supernodes):
					t.Errorf("trial %d, %s: every supernode copied", trial, ch.name)
				}
			}
		}
	}
	if copied < total/4 || permuted == 0 {
		t.Fatalf("only %d of %d supernodes copied, %d with their rows reordered: the cases check little", copied, total, permuted)
	}
	t.Logf("%d of %d supernodes copied, %d with their rows reordered", copied, total, permuted)
}

// TestFactorizeBlocksFromTop checks factors large enough for the
// concurrent schedule: a random graph (one task, its root supernode too
// heavy for a top) and a lattice, whose small separators make independent
// tasks below a sequential top, the part that is always computed.
func TestFactorizeBlocksFromTop(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	g0 := newRefGraph(rng, 600, 3, 0.006)
	g1 := g0.clone()
	touched := make([]bool, g0.n+3)
	for k := 0; k < 3; k++ {
		v := g1.addVertex(rng)
		g1.addEdge(rng, v-1, v)
		touched[v-1] = true
	}
	st := refactorStep(t, "large", g0, g1, nil, nil, touched, false)
	if st.Copied == 0 || st.Permuted == 0 {
		t.Fatalf("%d of %d supernodes copied, %d with their rows reordered", st.Copied, st.Supernodes, st.Permuted)
	}
	t.Logf("%d of %d supernodes copied (%d with their rows reordered), %.3g of %.3g flops", st.Copied, st.Supernodes, st.Permuted, st.CopiedFlops, st.Flops)

	// A 40 x 40 lattice; the step changes one edge's block in a corner and
	// adds a vertex beside it, so that most tasks are copied, the corner's
	// path to the roots is not, and the top must be computed.
	const side = 40
	lat := &refGraph{b: 3, edges: map[[2]int][]float64{}}
	for v := 0; v < side*side; v++ {
		lat.addVertex(rng)
	}
	for r := 0; r < side; r++ {
		for c := 0; c < side; c++ {
			if c+1 < side {
				lat.addEdge(rng, r*side+c, r*side+c+1)
			}
			if r+1 < side {
				lat.addEdge(rng, r*side+c, (r+1)*side+c)
			}
		}
	}
	lat1 := lat.clone()
	delete(lat1.edges, [2]int{0, 1})
	lat1.addEdge(rng, 0, 1)
	v := lat1.addVertex(rng)
	lat1.addEdge(rng, side, v)
	touched = make([]bool, lat1.n)
	touched[0], touched[1], touched[side], touched[v] = true, true, true, true
	q := lat1.matrix(nil)
	sym, err := AnalyzeBlockPattern(q, BlockOrder(q, 0))
	if err != nil {
		t.Fatal(err)
	}
	c, err := sym.Analyze(q)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.sn.top) == 0 || len(c.sn.tasks) < 2 {
		t.Fatalf("the lattice's factor has %d tasks and %d top supernodes: the case checks no concurrent schedule", len(c.sn.tasks), len(c.sn.top))
	}
	st = refactorStep(t, "lattice", lat, lat1, nil, nil, touched, false)
	if st.Copied == 0 || st.Copied == st.Supernodes {
		t.Fatalf("lattice: %d of %d supernodes copied", st.Copied, st.Supernodes)
	}
	t.Logf("lattice: %d of %d supernodes copied (%d with their rows reordered), %.3g of %.3g flops", st.Copied, st.Supernodes, st.Permuted, st.CopiedFlops, st.Flops)
}

// TestFactorizeBlocksFromThreshold checks that a copied pivot the grown
// pivot threshold rejects fails as in a fresh factorization.
func TestFactorizeBlocksFromThreshold(t *testing.T) {
	// Two components: vertex 0 alone with a small diagonal, and a chain.
	mk := func(big float64) *BlockSym {
		bb := NewBlockBuilder(4, 1)
		bb.AddDiag(0, []float64{1e-12})
		bb.AddDiag(1, []float64{2})
		bb.AddDiag(2, []float64{2})
		bb.AddDiag(3, []float64{big})
		bb.AddOff(1, 2, []float64{-1})
		bb.AddOff(2, 3, []float64{-1})
		return bb.Build()
	}
	q0, q1 := mk(2), mk(1e3)
	perm := BlockOrder(q0, 0)
	c0, err := AnalyzeBlocks(q0, perm)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c0.FactorizeBlocksFrom(q0, 0, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	c1, err := AnalyzeBlocks(q1, perm)
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := AnalyzeBlocks(q1, perm)
	if err != nil {
		t.Fatal(err)
	}
	want := fresh.FactorizeBlocks(q1, 0)
	_, got := c1.FactorizeBlocksFrom(q1, 0, c0, q0, []int{0, 1, 2, 3})
	if want == nil || got == nil || got.Error() != want.Error() {
		t.Fatalf("error %v, a fresh factorization's %v", got, want)
	}
}

// TestFactorizeBlocksFromErrors checks the refused inputs and those that
// copy nothing.
func TestFactorizeBlocksFromErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	g := newRefGraph(rng, 20, 2, 0.1)
	q := g.matrix(nil)
	perm := BlockOrder(q, 0)
	c0, _ := AnalyzeBlocks(q, perm)
	if _, err := c0.FactorizeBlocksFrom(q, 0, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	id := make([]int, q.N)
	for i := range id {
		id[i] = i
	}
	other := g.matrix(nil) // the same values, another matrix
	c1, _ := AnalyzeBlocks(q, perm)
	for _, tc := range []struct {
		name string
		m    *BlockSym
		bmap []int
	}{
		{"short map", q, id[:3]},
		{"repeated block", q, append([]int{1}, id[1:]...)},
		{"block out of range", q, append(slices.Clone(id[:q.N-1]), q.N)},
		{"another earlier matrix", other, id},
	} {
		if _, err := c1.FactorizeBlocksFrom(q, 0, c0, tc.m, tc.bmap); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
	// A shift other than the earlier factor's, or no earlier factor:
	// nothing copied, the factor right.
	for _, tc := range []struct {
		name  string
		prev  *Cholesky
		shift float64
	}{{"other shift", c0, 1}, {"no earlier factor", nil, 0}} {
		st, err := c1.FactorizeBlocksFrom(q, tc.shift, tc.prev, q, id)
		if err != nil || st.Copied != 0 {
			t.Fatalf("%s: %d copied, error %v", tc.name, st.Copied, err)
		}
	}
	if _, err := c1.FactorizeBlocksFrom(nil, 0, c0, q, id); err == nil {
		t.Error("nil matrix: no error")
	}
	if _, err := c1.FactorizeBlocksFrom(&BlockSym{N: -1, B: 2}, 0, c0, q, id); err == nil {
		t.Error("negative order: no error")
	}
	st, err := c1.FactorizeBlocksFrom(q, 0, c0, q, id)
	if err != nil || st.Copied != st.Supernodes {
		t.Fatalf("the same matrix: %d of %d copied, error %v", st.Copied, st.Supernodes, err)
	}
	checkFactor(t, c1, q)
	c0.Release()
	st, err = c1.FactorizeBlocksFrom(q, 0, c0, q, id)
	if err != nil || st.Copied != 0 {
		t.Fatalf("released earlier factor: %d copied, error %v", st.Copied, err)
	}
}

// Only FactorizeBlocksFrom records the matrix a factor was made from (the
// record keeps the matrix's arrays alive): a factor made by FactorizeBlocks,
// or released, gives nothing to copy, and a later factorization of the
// same matrix computes every supernode.
func TestFactorizeBlocksFromRecordsOnlyItself(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	g := newRefGraph(rng, 20, 2, 0.1)
	q := g.matrix(nil)
	perm := BlockOrder(q, 0)
	id := make([]int, q.N)
	for i := range id {
		id[i] = i
	}
	for _, c := range []struct {
		name    string
		prepare func(c0 *Cholesky) error
		copied  bool
	}{
		{"FactorizeBlocksFrom", func(c0 *Cholesky) error { _, err := c0.FactorizeBlocksFrom(q, 0, nil, nil, nil); return err }, true},
		{"FactorizeBlocks", func(c0 *Cholesky) error { return c0.FactorizeBlocks(q, 0) }, false},
		{"released", func(c0 *Cholesky) error {
			_, err := c0.FactorizeBlocksFrom(q, 0, nil, nil, nil)
			c0.Release()
			return err
		}, false},
	} {
		c0, _ := AnalyzeBlocks(q, perm)
		if err := c.prepare(c0); err != nil {
			t.Fatal(err)
		}
		if got := c0.last.ok; got != c.copied {
			t.Errorf("%s: source recorded %v, want %v", c.name, got, c.copied)
		}
		c1, _ := AnalyzeBlocks(q, perm)
		st, err := c1.FactorizeBlocksFrom(q, 0, c0, q, id)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if (st.Copied > 0) != c.copied {
			t.Errorf("%s: %d of %d supernodes copied, want copies %v", c.name, st.Copied, st.Supernodes, c.copied)
		}
	}
}
