package posegraph

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// The limits of scale CheckScale enforces. They are not about what a
// measurement may mean, but about what double precision (about 16
// significant digits, unit roundoff 1.1e-16, largest number 1.8e308) can
// compute with; see CheckScale.
const (
	// MaxMagnitude bounds the magnitudes a graph may hold: each coordinate
	// of an edge's or a vertex's translation, each precision kappa and
	// tau, and tau |t|^2, the translation term's weight on a rotation. The
	// solver multiplies such numbers and squares the products (the
	// objective, the entries of Q, the squared norms of gradients and
	// residuals, the eigensolver's Rayleigh quotients): up to four factors,
	// summed over up to 10^8 terms, which stays below 1e208, far from the
	// overflow at 1.8e308. A translation of 1e200 overflowed to +Inf and
	// surfaced as a failed eigensolver.
	MaxMagnitude = 1e50
	// MinWeight is the smallest precision kappa or tau, for the same
	// reason: products of four stay above 1e-200, clear of the underflow
	// to subnormal numbers below 2.2e-308.
	MinWeight = 1 / MaxMagnitude
	// MaxWeightRatio bounds the contrast of the weights that hold the
	// graph together: a group of vertices whose internal edges weigh up to
	// w may be joined to the rest of the graph by edges of total weight no
	// less than w / MaxWeightRatio, separately for the rotation weights
	// kappa and the translation weights tau. Every sum and Schur
	// complement that involves both loses the light weights' digits next
	// to the heavy ones: eliminating a vertex of a heavy edge w leaves its
	// light edges with an absolute error of about 1.1e-16 w. The sparse
	// Cholesky factorizations of the solver (the chordal initialization,
	// the translations, the certificate) treat a pivot below 1e-13 of the
	// largest diagonal entry as zero (internal/sparse.PivotTol), so at a
	// contrast of 1e13 the graph cannot be factored at all; 1e12 keeps a
	// decade of margin and leaves the light weights about four digits
	// (1.1e-16 x 1e12 = 1.1e-4 relative), which is the least a certificate
	// can work with. Light edges that do not hold anything (a weak loop
	// closure beside strong odometry) do not count: they add to weights
	// that are already there, and the factorizations never see them alone.
	MaxWeightRatio = 1e12
)

// CheckScale checks that g's numbers are within what double precision can
// solve and certify (the constants above): finite magnitudes below
// MaxMagnitude (translations of edges and VERTEX estimates, kappa, tau,
// tau |t|^2), precisions above MinWeight, and a contrast of at most
// MaxWeightRatio between the heaviest edge inside any group of vertices
// and the total weight of the edges that join the group to the rest of
// the graph (for kappa over the pose-pose edges, for tau over all edges,
// landmark observations included).
//
// An error names the record at fault, as FILE:LINE where the graph was read
// from a file (Edge.Line, VertexLines), says what is wrong and what a user
// can do. Validate calls it, so sync.Solve refuses such a graph before it
// starts, whether it was read from a file or built in memory. It assumes
// Validate's structural checks (endpoints in range, finite values).
//
// Within each pose-pose edge, the entries the edge puts on Q's diagonal,
// kappa and kappa + tau |t|^2 on the rotation coordinates and tau on the
// translation ones, must also lie within MaxWeightRatio of each other: the
// factorizations see them side by side in one block, and a light
// coordinate next to a heavy one loses its digits the same way.
//
// The contrast check costs O(m) when the ratio of the largest to the
// smallest weight is within MaxWeightRatio (then no group can exceed it),
// which is the usual case, and O(m log m) otherwise.
//
// CheckScale checks the pose problem; CheckScaleFor(Rotations) leaves out
// everything about translations, which rotation synchronization ignores.
func (g *Graph) CheckScale() error { return g.CheckScaleFor(Poses) }

// CheckScaleFor is CheckScale for the problem prob: for Rotations only the
// rotation precisions kappa are checked (their range and contrast), since
// the translations and their precisions tau do not enter the problem.
func (g *Graph) CheckScaleFor(prob Problem) error {
	if prob == Rotations {
		return g.checkRotationScale()
	}
	d := g.D
	for i := range g.IDs {
		if i >= len(g.HasInitial) || !g.HasInitial[i] || i >= len(g.Initial) {
			continue
		}
		for _, v := range g.Initial[i].T[:d] {
			if math.Abs(v) > MaxMagnitude {
				return fmt.Errorf("%s: vertex %d's position has the coordinate %.3g, beyond the %.0e "+
					"that double precision can square and sum with weights without overflow: "+
					"express the positions in a larger unit (km instead of m), or correct the record",
					g.vertexWhere(i), g.IDs[i], v, MaxMagnitude)
			}
		}
	}
	// One pass checks the magnitudes and finds each weight's range; only
	// a range beyond MaxWeightRatio needs the merge tree.
	kLo, kHi, tLo, tHi := math.Inf(1), 0.0, math.Inf(1), 0.0
	edgeHeavy, edgeT2 := -1, 0.0 // the first edge whose own kappa and tau are too far apart
	for k := range g.Edges {
		e := &g.Edges[k]
		t2 := 0.0
		for _, v := range e.T[:d] {
			if math.Abs(v) > MaxMagnitude {
				return fmt.Errorf("%s: the measured translation has the coordinate %.3g, beyond the %.0e "+
					"that double precision can square and multiply by weights without overflow: express the "+
					"translations in a larger unit (km instead of m, which multiplies tau by 1e6), or correct "+
					"the record", g.where(k), v, MaxMagnitude)
			}
			t2 += v * v
		}
		if !(e.Tau >= MinWeight && e.Tau <= MaxMagnitude) {
			return g.weightError(k, "translation precision tau", e.Tau)
		}
		tLo, tHi = min(tLo, e.Tau), max(tHi, e.Tau)
		if !g.IsLandmark(e.J) && !g.IsLandmark(e.I) { // an observation has no rotation: kappa is 0
			if !(e.Kappa >= MinWeight && e.Kappa <= MaxMagnitude) {
				return g.weightError(k, "rotation precision kappa", e.Kappa)
			}
			kLo, kHi = min(kLo, e.Kappa), max(kHi, e.Kappa)
		}
		if lever := e.Tau * t2; lever > MaxMagnitude {
			return fmt.Errorf("%s: tau |t|^2 = %.3g (translation precision tau = %.3g times the squared "+
				"length of the translation) exceeds %.0e: the solver's products of it overflow double "+
				"precision; the translation's precision is off by orders of magnitude, or the translation is",
				g.where(k), lever, e.Tau, MaxMagnitude)
		}
		if edgeHeavy < 0 && !g.IsLandmark(e.J) && !g.IsLandmark(e.I) && edgeContrast(e, t2) > MaxWeightRatio {
			edgeHeavy, edgeT2 = k, t2 // reported after the groups, whose message says more
		}
	}
	if kHi > MaxWeightRatio*kLo {
		if err := g.checkContrast("rotation precision kappa", func(e *Edge) float64 {
			if g.IsLandmark(e.I) || g.IsLandmark(e.J) {
				return 0
			}
			return e.Kappa
		}); err != nil {
			return err
		}
	}
	if tHi > MaxWeightRatio*tLo {
		if err := g.checkContrast("translation precision tau", func(e *Edge) float64 { return e.Tau }); err != nil {
			return err
		}
	}
	if edgeHeavy >= 0 {
		return g.edgeContrastError(edgeHeavy, edgeT2)
	}
	return nil
}

// checkRotationScale is CheckScaleFor(Rotations): kappa's range and
// contrast over the pose-pose edges.
func (g *Graph) checkRotationScale() error {
	kLo, kHi := math.Inf(1), 0.0
	for k := range g.Edges {
		e := &g.Edges[k]
		if g.IsLandmark(e.J) || g.IsLandmark(e.I) {
			continue
		}
		if !(e.Kappa >= MinWeight && e.Kappa <= MaxMagnitude) {
			return g.weightError(k, "rotation precision kappa", e.Kappa)
		}
		kLo, kHi = min(kLo, e.Kappa), max(kHi, e.Kappa)
	}
	if kHi > MaxWeightRatio*kLo {
		return g.checkContrast("rotation precision kappa", func(e *Edge) float64 {
			if g.IsLandmark(e.I) || g.IsLandmark(e.J) {
				return 0
			}
			return e.Kappa
		})
	}
	return nil
}

// edgeContrast is the ratio of the largest to the smallest entry pose-pose
// edge e puts on Q's diagonal: kappa and kappa + tau |t|^2 (t2 = |t|^2) on
// the rotation coordinates, tau on the translation ones.
func edgeContrast(e *Edge, t2 float64) float64 {
	return max(e.Kappa+e.Tau*t2, e.Tau) / min(e.Kappa, e.Tau)
}

// edgeContrastError refuses pose-pose edge k, whose edgeContrast exceeds
// MaxWeightRatio.
func (g *Graph) edgeContrastError(k int, t2 float64) error {
	e := &g.Edges[k]
	return fmt.Errorf("%s: the rotation precision kappa = %.3g and the translation precision tau = %.3g "+
		"(tau |t|^2 = %.3g) of this edge put entries %.2g times apart on the diagonal of the problem's "+
		"matrix. Double precision keeps about 16 digits: past a ratio of %.0e the light coordinates keep "+
		"fewer than 4 of theirs next to the heavy ones, too few to factor or certify the problem. Check "+
		"this information matrix (units? a typo?), bring kappa and tau within %.0e of each other, or solve "+
		"the rotations alone (--rotations), which ignores tau", g.where(k), e.Kappa, e.Tau, e.Tau*t2, edgeContrast(e, t2),
		MaxWeightRatio, MaxWeightRatio)
}

// weightError refuses edge k's precision w (named what) outside
// [MinWeight, MaxMagnitude].
func (g *Graph) weightError(k int, what string, w float64) error {
	return fmt.Errorf("%s: %s = %.3g is outside [%.0e, %.0e], the range in which double precision "+
		"can multiply weights without overflow or underflow: the information matrix is off by orders "+
		"of magnitude (its units?); scaling every information matrix of the file by one factor does "+
		"not change the optimum", g.where(k), what, w, MinWeight, MaxMagnitude)
}

// checkContrast checks the weights w(e) (0: the edge does not count)
// against MaxWeightRatio; CheckScale calls it only when the largest weight
// exceeds MaxWeightRatio times the smallest (otherwise no group can).
// Merging vertices along edges from the heaviest
// down (Kruskal's order) builds the merge tree whose nodes are the groups
// to check: the connected components of the edges of weight at least t,
// for every t. A group's cut, the edges with one end in it, is its
// vertices' total incident weight less twice its internal weight, every
// edge whose ends the group holds (the lowest common ancestor of its ends
// in the merge tree is in the group's subtree); the heaviest internal edge
// must not exceed MaxWeightRatio times the cut. In plain floating point
// that difference would cancel the heavy weights' digits and leave the
// light ones' to rounding, so it is summed in double-double arithmetic
// (about 32 digits).
func (g *Graph) checkContrast(what string, weight func(*Edge) float64) error {
	t := newMergeTree(g, weight)
	n := g.N()
	// cut[x] accumulates a group's incident weight less twice its internal
	// weight; heavy[x] is its heaviest internal edge (-1: none).
	cut := make([]doubleDouble, len(t.parent))
	heavy := make([]int, len(t.parent))
	for x := range heavy {
		heavy[x] = -1
	}
	for k, e := range g.Edges {
		w := weight(&e)
		if w <= 0 {
			continue
		}
		cut[e.I].add(w)
		cut[e.J].add(w)
		cut[t.lca[k]].add(-2 * w)
	}
	for x := n; x < len(t.parent); x++ {
		heavy[x] = t.edge[x] // the creating edge is the lightest of the subtree's tree edges...
		for _, c := range t.child[x] {
			cut[x].addDD(cut[c])
			if h := heavy[c]; h >= 0 && weight(&g.Edges[h]) > weight(&g.Edges[heavy[x]]) {
				heavy[x] = h // ...so the heaviest comes from below
			}
		}
	}
	for x := n; x < len(t.parent); x++ {
		p := t.parent[x]
		// A group is a component of the edges of weight >= t only when
		// the edge that joins it to more is lighter than the one that
		// made it (equal weights merge one at a time).
		if p < 0 || weight(&g.Edges[t.edge[p]]) >= weight(&g.Edges[t.edge[x]]) {
			continue
		}
		c := cut[x].hi + cut[x].lo
		if h := weight(&g.Edges[heavy[x]]); c > 0 && h > MaxWeightRatio*c {
			return g.contrastError(what, weight, heavy[x], t.leaves(x), c)
		}
	}
	return nil
}

// mergeTree is the tree of Kruskal's merges: leaves 0..n-1 are the
// vertices; node n+k is the group made by the k-th merge, of its two
// children by the edge edge[n+k]. lca[e] is the lowest node that holds
// both ends of edge e (for an edge that does not count, either end).
type mergeTree struct {
	parent []int    // -1 for a root
	child  [][2]int // of internal nodes
	edge   []int    // of internal nodes: the edge that made them
	lca    []int
}

func newMergeTree(g *Graph, weight func(*Edge) float64) *mergeTree {
	n := g.N()
	order := make([]int, 0, len(g.Edges))
	for k := range g.Edges {
		if weight(&g.Edges[k]) > 0 {
			order = append(order, k)
		}
	}
	slices.SortFunc(order, func(a, b int) int {
		if c := cmpDesc(weight(&g.Edges[a]), weight(&g.Edges[b])); c != 0 {
			return c
		}
		return a - b // ties in file order, so the message does not depend on the sort
	})
	t := &mergeTree{parent: make([]int, n, 2*n), child: make([][2]int, n, 2*n), edge: make([]int, n, 2*n), lca: make([]int, len(g.Edges))}
	uf := make([]int, n)  // union-find over vertices
	top := make([]int, n) // per union-find root: its group's node
	for i := range uf {
		uf[i], top[i], t.parent[i], t.edge[i] = i, i, -1, -1
	}
	find := func(i int) int {
		for uf[i] != i {
			uf[i] = uf[uf[i]]
			i = uf[i]
		}
		return i
	}
	for k := range t.lca {
		t.lca[k] = g.Edges[k].I
	}
	var pending []int // edges within a group when they come: their lca is found below
	for _, k := range order {
		e := &g.Edges[k]
		a, b := find(e.I), find(e.J)
		if a == b {
			pending = append(pending, k)
			continue
		}
		x := len(t.parent)
		t.parent = append(t.parent, -1)
		t.child = append(t.child, [2]int{top[a], top[b]})
		t.edge = append(t.edge, k)
		t.parent[top[a]], t.parent[top[b]] = x, x
		uf[b] = a
		top[a] = x
		t.lca[k] = x
	}
	t.offlineLCA(g, pending)
	return t
}

// offlineLCA sets lca for the edges ks by Tarjan's offline algorithm: a
// depth-first walk of the tree that merges each finished subtree into its
// parent's set; when the walk finishes a vertex, the other end of each of
// its edges that is already finished lies in the set whose ancestor is
// their lowest common ancestor.
func (t *mergeTree) offlineLCA(g *Graph, ks []int) {
	n := g.N()
	at := make([][]int, n) // the pending edges at each vertex
	for _, k := range ks {
		e := &g.Edges[k]
		at[e.I] = append(at[e.I], k)
		at[e.J] = append(at[e.J], k)
	}
	set := make([]int, len(t.parent))
	anc := make([]int, len(t.parent))
	done := make([]bool, n)
	for x := range set {
		set[x], anc[x] = x, x
	}
	find := func(x int) int {
		for set[x] != x {
			set[x] = set[set[x]]
			x = set[x]
		}
		return x
	}
	type frame struct{ x, next int }
	var stack []frame
	for root := range t.parent {
		if t.parent[root] >= 0 {
			continue
		}
		stack = append(stack[:0], frame{root, 0})
		for len(stack) > 0 {
			f := &stack[len(stack)-1]
			if f.x >= n && f.next < 2 {
				c := t.child[f.x][f.next]
				f.next++
				stack = append(stack, frame{c, 0})
				continue
			}
			x := f.x
			stack = stack[:len(stack)-1]
			if x < n {
				done[x] = true
				for _, k := range at[x] {
					e := &g.Edges[k]
					other := e.I + e.J - x
					if done[other] {
						t.lca[k] = anc[find(other)]
					}
				}
			}
			if len(stack) > 0 {
				p := stack[len(stack)-1].x
				rp, rx := find(p), find(x)
				set[rx] = rp
				anc[rp] = p
			}
		}
	}
}

// leaves returns the vertices of node x's subtree.
func (t *mergeTree) leaves(x int) []int {
	var out []int
	stack := []int{x}
	for len(stack) > 0 {
		y := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if t.edge[y] < 0 {
			out = append(out, y)
			continue
		}
		stack = append(stack, t.child[y][0], t.child[y][1])
	}
	slices.Sort(out)
	return out
}

func cmpDesc(a, b float64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}

// doubleDouble is an unevaluated sum hi + lo of two float64s, |lo| <= half
// an ulp of hi: about 106 bits, so that sums of weights spanning many
// decades cancel without losing the light ones.
type doubleDouble struct{ hi, lo float64 }

// add adds b exactly to hi (Knuth's TwoSum) and carries the error into lo.
func (d *doubleDouble) add(b float64) {
	s := d.hi + b
	bb := s - d.hi
	err := (d.hi - (s - bb)) + (b - bb)
	lo := d.lo + err
	d.hi = s + lo
	d.lo = lo - (d.hi - s)
}

func (d *doubleDouble) addDD(b doubleDouble) {
	d.add(b.hi)
	d.add(b.lo)
}

// contrastError describes the group of vertices group: its heaviest edge,
// its size and the edges that join it to the rest.
func (g *Graph) contrastError(what string, weight func(*Edge) float64, heavy int, group []int, cut float64) error {
	in := make([]bool, g.N())
	var ids []string
	for k, i := range group {
		in[i] = true
		if k < 6 {
			ids = append(ids, fmt.Sprint(g.IDs[i]))
		}
	}
	size := len(group)
	if size > 6 {
		ids[5] = "..."
	}
	var lines, edges []string
	count := 0
	for k := range g.Edges {
		e := &g.Edges[k]
		if w := weight(e); w > 0 && in[e.I] != in[e.J] {
			if count < 3 {
				if l := e.Line; l > 0 {
					lines = append(lines, fmt.Sprint(l))
				} else {
					edges = append(edges, fmt.Sprint(k))
				}
			}
			count++
		}
	}
	across := ""
	switch {
	case len(lines) == 1:
		across = "line " + lines[0]
	case len(lines) > 1:
		across = "lines " + strings.Join(lines, ", ")
	case len(edges) == 1:
		across = "edge " + edges[0]
	default:
		across = "edges " + strings.Join(edges, ", ")
	}
	if count > 3 {
		across += fmt.Sprintf(" and %d more", count-3)
	}
	h := weight(&g.Edges[heavy])
	return fmt.Errorf("%s: %s = %.3g here is %.2g times the total %.3g of the edges that join its group of "+
		"%d vertices (ids %s) to the rest of the graph (%s). Double precision keeps about 16 digits: past a "+
		"ratio of %.0e the joining edges keep fewer than 4 of theirs next to this edge, too few to factor or "+
		"certify the problem. Check these information matrices (units? a typo?), or bring them within %.0e "+
		"of each other", g.where(heavy), what, h, h/cut, cut, size, strings.Join(ids, ", "), across,
		MaxWeightRatio, MaxWeightRatio)
}

// vertexWhere names vertex i in a message: "FILE:LINE" of its VERTEX
// record, or "FILE: vertex ID".
func (g *Graph) vertexWhere(i int) string {
	if len(g.VertexLines) == g.N() && g.VertexLines[i] > 0 {
		return fmt.Sprintf("%s:%d", g.src(), g.VertexLines[i])
	}
	return fmt.Sprintf("%s: vertex %d", g.src(), g.IDs[i])
}
