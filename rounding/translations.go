package rounding

import (
	"fmt"
	"slices"

	"github.com/bcmsync/bcmsync/internal/graphs"
	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
)

// RecoverTranslations sets poses[i].T to the exact minimizer of F(R, t) over
// the translations for the fixed rotations poses[i].R (docs/design.md section 6,
// step 4). The translation part of F is a weighted least-squares problem
// whose normal equations are the graph Laplacian of the tau weights, one
// copy per coordinate:
//
//	(L_tau ⊗ I_d) t = b,   b_i = sum_{e=(i,j)} -tau_e R_i tt_e + sum_{e=(k,i)} tau_e R_k tt_e.
//
// L_tau is singular (a common shift of all t_i costs nothing), so the anchor
// pose g.Anchor() keeps the translation it has on input and the others are
// solved for by a sparse Cholesky factorization, the d coordinates as d
// right-hand sides of one factorization.
//
// It returns an error if poses does not match the graph or the graph is
// disconnected (then the translations of different components are not
// related by any measurement).
func RecoverTranslations(g *posegraph.Graph, poses []posegraph.Pose) error {
	return recoverTranslations(g, poses, nil)
}

// RecoverTranslationsOrdered is RecoverTranslations with a fill-reducing
// elimination order of the pose graph (order[k] = the pose eliminated
// k-th), as ChordalOrdered takes it; nil means the factorization's own
// AMD, which on a large 3-D graph makes a much denser factor than nested
// dissection.
func RecoverTranslationsOrdered(g *posegraph.Graph, poses []posegraph.Pose, order []int) error {
	if order == nil {
		return recoverTranslations(g, poses, nil)
	}
	return recoverOrdered(g, poses, order, nil)
}

// recoverOrdered is RecoverTranslationsOrdered with order given: the
// grounded system (newGroundedSystem) in that order, analysed from sym
// when there is one.
func recoverOrdered(g *posegraph.Graph, poses []posegraph.Pose, order []int, sym *sparse.BlockSymbolic) error {
	if _, err := reducedOrder(order, g.N(), g.Anchor()); err != nil {
		return fmt.Errorf("%s: translation recovery: %w", source(g), err)
	}
	return recoverWith(g, poses, func() (*translationSystem, error) {
		return newGroundedSystem(g, blockPerm(order, 1), sym, nil, false)
	})
}

// reducedOrder turns an elimination order of the n poses into one of the
// n-1 poses other than drop, numbered as reduced numbers them (the
// anchored systems' unknowns).
func reducedOrder(order []int, n, drop int) ([]int, error) {
	if len(order) != n {
		return nil, fmt.Errorf("elimination order of %d poses for %d", len(order), n)
	}
	seen := make([]bool, n)
	red := make([]int, 0, max(n-1, 0))
	for _, i := range order {
		if i < 0 || i >= n || seen[i] {
			return nil, fmt.Errorf("elimination order is not a permutation of the %d poses (entry %d)", n, i)
		}
		seen[i] = true
		if i != drop {
			red = append(red, reduced(i, drop))
		}
	}
	return red, nil
}

// recoverTranslations is RecoverTranslations with an optional elimination
// order for the reduced Laplacian (nil: the factorization's own AMD).
func recoverTranslations(g *posegraph.Graph, poses []posegraph.Pose, order []int) error {
	return recoverWith(g, poses, func() (*translationSystem, error) {
		return newTranslationSystem(g, order)
	})
}

// recoverWith checks poses and g, and recovers the translations with the
// translation system factor makes.
func recoverWith(g *posegraph.Graph, poses []posegraph.Pose, factor func() (*translationSystem, error)) error {
	if err := checkPoses(g, poses); err != nil {
		return err
	}
	if err := checkGraph(g); err != nil {
		return err
	}
	if g.N() == 1 {
		return nil
	}
	ts, err := factor()
	if err != nil {
		return err
	}
	return ts.recover(g, poses)
}

// translationSystem is the factored translation system of a graph: the
// tau-weighted Laplacian with the anchor pose's row and column removed.
type translationSystem struct {
	chol   *sparse.Cholesky
	anchor int
	// grounded: the system of all n poses with the anchor's unknown
	// decoupled (newGroundedSystem), whose solves pass through xb and
	// rb; otherwise the n-1 unknowns without the anchor.
	grounded bool
	xb, rb   []float64
	// lap is the grounded system's matrix, kept (unchanged) so that the
	// next graph's system can copy the factor's unchanged supernodes
	// (Plan.RefactorFrom); reuse counts what this one copied.
	lap   *sparse.BlockSym
	reuse sparse.Refactorization
}

// groundedSource is an earlier grounded system whose factor a new one may
// copy from (sparse.Cholesky.FactorizeBlocksFrom): poseMap[i] is the pose
// of the new graph that its pose i became, or -1.
type groundedSource struct {
	ts      *translationSystem
	poseMap []int
}

// newTranslationSystem factors the translation system of g (connected,
// more than one pose) in the given elimination order of its unknowns
// (nil: the factorization's own AMD).
func newTranslationSystem(g *posegraph.Graph, order []int) (*translationSystem, error) {
	anchor := g.Anchor()
	lap := laplacianCSC(g, anchor)
	var c *sparse.Cholesky
	var err error
	if order != nil {
		c, err = sparse.NewCholeskyPerm(lap, order)
	} else {
		c, err = sparse.NewCholesky(lap)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: translation recovery: %w", source(g), err)
	}
	return &translationSystem{chol: c, anchor: anchor}, nil
}

// newGroundedSystem factors the translation system of g (connected, more
// than one pose) in order, an elimination order of all its poses, as the
// tau-weighted Laplacian of all n poses with the anchor's row and column
// replaced by a diagonal entry alone: its unknown is decoupled, and the
// others' factor is the anchored system's (the anchor's row of L is
// exactly zero, so its entries add exact zeros). Its block pattern, one
// scalar per pose, is Q's, so sym (if not nil, the block analysis of Q's
// pattern in order) serves it as it serves every other factorization of
// a solve, where the anchored system needed a scalar analysis of its own
// (0.69G of a 37G city10000 replay's instructions; 0.17G now, docs/online.md).
// With from, the factor copies from the earlier system's what did not
// change (the same factor, bit for bit). With keep, the system keeps its
// matrix, and its factor the record of it, for a later one to copy from.
func newGroundedSystem(g *posegraph.Graph, order []int, sym *sparse.BlockSymbolic, from *groundedSource, keep bool) (*translationSystem, error) {
	n, anchor := g.N(), g.Anchor()
	var lap *sparse.BlockSym
	if sym != nil {
		lap = groundedOn(g, sym)
	}
	if lap == nil {
		lap = groundedBuilt(g)
	}
	// The anchor's diagonal: the largest of the others, so that the
	// pivot tolerance, relative to the largest diagonal entry, is the
	// anchored system's.
	diag := func(i int) *float64 { return &lap.Val[lap.Diag[i]] }
	big := 0.0
	for i := 0; i < n; i++ {
		if i != anchor {
			big = max(big, *diag(i))
		}
	}
	if big == 0 {
		big = 1
	}
	*diag(anchor) = big
	var c *sparse.Cholesky
	var err error
	if sym != nil {
		c, err = sym.Analyze(lap)
	}
	if sym == nil || err != nil {
		c, err = sparse.AnalyzeBlocks(lap, order)
	}
	var reuse sparse.Refactorization
	if err == nil {
		if keep || from != nil {
			var prev *sparse.Cholesky
			var prevM *sparse.BlockSym
			var poseMap []int
			if from != nil && from.ts.grounded && from.ts.lap != nil {
				prev, prevM, poseMap = from.ts.chol, from.ts.lap, from.poseMap
			}
			reuse, err = c.FactorizeBlocksFrom(lap, 0, prev, prevM, poseMap)
		} else {
			err = c.FactorizeBlocks(lap, 0)
			reuse = sparse.Refactorization{Supernodes: c.Supernodes(), Flops: c.Flops()}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: translation recovery: %w", source(g), err)
	}
	if !keep {
		// Garbage once factored: a solve that no later plan copies from
		// does not hold its matrix.
		lap = nil
	}
	return &translationSystem{chol: c, anchor: anchor, grounded: true, lap: lap, reuse: reuse}, nil
}

// groundedBuilt is the grounded Laplacian of g (newGroundedSystem, the
// anchor's diagonal still zero) built block by block.
func groundedBuilt(g *posegraph.Graph) *sparse.BlockSym {
	anchor := g.Anchor()
	bb := sparse.NewBlockBuilder(g.N(), 1)
	bb.Grow(len(g.Edges))
	var one, zero [1]float64
	for _, e := range g.Edges {
		// A self-loop adds nothing: t_i - t_i does not depend on t.
		if e.I == e.J {
			continue
		}
		// Every edge's block is stored (Q has it), the anchor's as zeros.
		one[0] = -e.Tau
		if e.I == anchor || e.J == anchor {
			bb.AddOff(e.I, e.J, zero[:])
		} else {
			bb.AddOff(e.I, e.J, one[:])
		}
		for _, v := range [2]int{e.I, e.J} {
			if v != anchor {
				one[0] = e.Tau
				bb.AddDiag(v, one[:])
			}
		}
	}
	return bb.Build()
}

// groundedOn is groundedBuilt on the pattern sym analysed (Q's, whose
// blocks are g's vertices and edges), sharing its slices, or nil if g's
// edges do not fit it. Each value is summed in the order of g's edges,
// as the builder sums them.
func groundedOn(g *posegraph.Graph, sym *sparse.BlockSymbolic) *sparse.BlockSym {
	n, anchor := g.N(), g.Anchor()
	rowPtr, colIdx := sym.Pattern()
	if len(rowPtr) != n+1 {
		return nil
	}
	lap := &sparse.BlockSym{N: n, B: 1, RowPtr: rowPtr, ColIdx: colIdx, Val: make([]float64, rowPtr[n])}
	at := func(i, j int) int {
		row := colIdx[rowPtr[i]:rowPtr[i+1]]
		k, ok := slices.BinarySearch(row, j)
		if !ok {
			return -1
		}
		return rowPtr[i] + k
	}
	lap.Diag = make([]int, n)
	for i := range lap.Diag {
		if lap.Diag[i] = at(i, i); lap.Diag[i] < 0 {
			return nil
		}
	}
	for _, e := range g.Edges {
		if e.I == e.J {
			continue
		}
		ij, ji := at(e.I, e.J), at(e.J, e.I)
		if ij < 0 || ji < 0 {
			return nil
		}
		if e.I != anchor && e.J != anchor {
			lap.Val[ij] -= e.Tau
			lap.Val[ji] -= e.Tau
		}
		for _, v := range [2]int{e.I, e.J} {
			if v != anchor {
				lap.Val[lap.Diag[v]] += e.Tau
			}
		}
	}
	return lap
}

// recover sets the translations of poses (rotations given) to the exact
// minimizer of F with the anchor's translation held.
func (ts *translationSystem) recover(g *posegraph.Graph, poses []posegraph.Pose) error {
	n, d, anchor := g.N(), g.D, ts.anchor
	// Right-hand side, column-major (n x d) over all poses first; the
	// anchor's row is dropped below after moving its known value over.
	rhs := make([]float64, n*d)
	for _, e := range g.Edges {
		ri := &poses[e.I].R
		for a := 0; a < d; a++ {
			s := 0.0
			for k := 0; k < d; k++ {
				s += ri[a*d+k] * e.T[k]
			}
			s *= e.Tau
			rhs[a*n+e.I] -= s
			rhs[a*n+e.J] += s
		}
	}
	// With t_anchor fixed, the couplings L_{i,anchor} t_anchor move to the
	// right-hand side: L_{i,anchor} = -tau for each edge at the anchor.
	ta := poses[anchor].T
	for _, e := range g.Edges {
		var other int
		switch anchor {
		case e.I:
			other = e.J
		case e.J:
			other = e.I
		default:
			continue
		}
		for a := 0; a < d; a++ {
			rhs[a*n+other] += e.Tau * ta[a]
		}
	}
	// The unknowns: all n poses, the anchor's decoupled with a zero
	// right-hand side (grounded), or the n-1 others.
	m, at := n-1, func(i int) int { return reduced(i, anchor) }
	if ts.grounded {
		m, at = n, func(i int) int { return i }
	}
	b := make([]float64, m*d)
	for a := 0; a < d; a++ {
		for i := 0; i < n; i++ {
			if i != anchor {
				b[a*m+at(i)] = rhs[a*n+i]
			}
		}
	}
	x := make([]float64, m*d)
	ts.chol.SolveMany(x, b, d)
	for i := 0; i < n; i++ {
		if i == anchor {
			continue
		}
		k := at(i)
		for a := 0; a < d; a++ {
			poses[i].T[a] = x[a*m+k]
		}
	}
	return nil
}

// solve solves the anchored system L x = rhs for the n-1 poses other
// than the anchor, in pose order (pose i at i, or at i-1 after the
// anchor).
func (ts *translationSystem) solve(x, rhs []float64) {
	if !ts.grounded {
		ts.chol.Solve(x, rhs)
		return
	}
	n, anchor := len(rhs)+1, ts.anchor
	if len(ts.rb) != n {
		ts.rb, ts.xb = make([]float64, n), make([]float64, n)
	}
	copy(ts.rb, rhs[:anchor])
	ts.rb[anchor] = 0
	copy(ts.rb[anchor+1:], rhs[anchor:])
	ts.chol.Solve(ts.xb, ts.rb)
	copy(x[:anchor], ts.xb[:anchor])
	copy(x[anchor:], ts.xb[anchor+1:])
}

// reduced is the index of pose i in the system with pose drop removed.
func reduced(i, drop int) int {
	if i > drop {
		return i - 1
	}
	return i
}

// laplacianCSC returns the lower triangle of the scalar graph Laplacian with
// edge weights tau, pose drop's row and column removed, in the CSC form the
// Cholesky factorization takes. Parallel edges are summed.
func laplacianCSC(g *posegraph.Graph, drop int) *sparse.CSC {
	n := g.N() - 1
	diag := make([]float64, n)
	type entry struct {
		row int
		val float64
	}
	// Count off-diagonal entries per column (the smaller reduced index).
	count := make([]int, n+1)
	for _, e := range g.Edges {
		// A self-loop adds nothing: t_i - t_i does not depend on t.
		if e.I == drop || e.J == drop || e.I == e.J {
			continue
		}
		i, j := reduced(e.I, drop), reduced(e.J, drop)
		count[min(i, j)+1]++
	}
	for j := 0; j < n; j++ {
		count[j+1] += count[j]
	}
	off := make([]entry, count[n])
	fill := append([]int(nil), count[:n]...)
	for _, e := range g.Edges {
		if e.I == e.J {
			continue
		}
		if e.I != drop {
			diag[reduced(e.I, drop)] += e.Tau
		}
		if e.J != drop {
			diag[reduced(e.J, drop)] += e.Tau
		}
		if e.I == drop || e.J == drop {
			continue
		}
		i, j := reduced(e.I, drop), reduced(e.J, drop)
		c := min(i, j)
		off[fill[c]] = entry{row: max(i, j), val: -e.Tau}
		fill[c]++
	}
	a := &sparse.CSC{
		N:      n,
		ColPtr: make([]int, n+1),
		RowIdx: make([]int, 0, n+len(off)),
		Val:    make([]float64, 0, n+len(off)),
	}
	for j := 0; j < n; j++ {
		col := off[count[j]:count[j+1]]
		// Columns hold a pose's few neighbours: insertion sort, no allocation.
		for p := 1; p < len(col); p++ {
			for q := p; q > 0 && col[q].row < col[q-1].row; q-- {
				col[q], col[q-1] = col[q-1], col[q]
			}
		}
		a.RowIdx = append(a.RowIdx, j)
		a.Val = append(a.Val, diag[j])
		for k, en := range col {
			if k > 0 && en.row == col[k-1].row {
				a.Val[len(a.Val)-1] += en.val
				continue
			}
			a.RowIdx = append(a.RowIdx, en.row)
			a.Val = append(a.Val, en.val)
		}
		a.ColPtr[j+1] = len(a.RowIdx)
	}
	return a
}

// ToGauge applies to all poses the one rigid motion that takes pose
// g.Anchor() to its input estimate g.Initial[anchor] (the identity if it has
// none): R_i <- R_M R_i, t_i <- R_M t_i + t_M (landmarks: positions only,
// R stays I). F is invariant under it, so
// this only chooses which of the equivalent solutions is reported.
func ToGauge(g *posegraph.Graph, poses []posegraph.Pose) {
	d, a := g.D, g.Anchor()
	if a >= len(poses) {
		return
	}
	target := posegraph.Identity(d)
	if a < len(g.HasInitial) && g.HasInitial[a] && a < len(g.Initial) {
		target = g.Initial[a]
	}
	cur := poses[a]
	// M = target * cur^{-1}: R_M = R_target R_cur^T, t_M = t_target - R_M t_cur.
	var rm [9]float64
	var tm [3]float64
	for p := 0; p < d; p++ {
		for q := 0; q < d; q++ {
			s := 0.0
			for k := 0; k < d; k++ {
				s += target.R[p*d+k] * cur.R[q*d+k]
			}
			rm[p*d+q] = s
		}
	}
	for p := 0; p < d; p++ {
		s := 0.0
		for k := 0; k < d; k++ {
			s += rm[p*d+k] * cur.T[k]
		}
		tm[p] = target.T[p] - s
	}
	for i := range poses {
		old := poses[i]
		for p := 0; p < d; p++ {
			for q := 0; q < d; q++ {
				s := 0.0
				for k := 0; k < d; k++ {
					s += rm[p*d+k] * old.R[k*d+q]
				}
				poses[i].R[p*d+q] = s
			}
			s := tm[p]
			for k := 0; k < d; k++ {
				s += rm[p*d+k] * old.T[k]
			}
			poses[i].T[p] = s
		}
	}
	// The anchor is exactly its target, not just to rounding.
	poses[a] = target
	// A landmark has a position only; its R stays the identity.
	for i := range poses {
		if g.IsLandmark(i) {
			poses[i].R = posegraph.Identity(d).R
		}
	}
}

func source(g *posegraph.Graph) string {
	if g.Source == "" {
		return "graph"
	}
	return g.Source
}

// where names edge k's origin: file:line if known.
func where(g *posegraph.Graph, k int) string {
	if l := g.Edges[k].Line; l > 0 {
		return fmt.Sprintf("%s:%d", source(g), l)
	}
	return source(g)
}

func checkPoses(g *posegraph.Graph, poses []posegraph.Pose) error {
	if g.D != 2 && g.D != 3 {
		return fmt.Errorf("%s: dimension %d is not 2 or 3", source(g), g.D)
	}
	if len(poses) != g.N() {
		return fmt.Errorf("%s: %d poses given for a graph of %d", source(g), len(poses), g.N())
	}
	if g.N() == 0 {
		return fmt.Errorf("%s: graph has no poses", source(g))
	}
	return nil
}

// checkGraph checks what the linear solves need: endpoints in range, no
// self-loops, one connected component.
func checkGraph(g *posegraph.Graph) error {
	for k, e := range g.Edges {
		if e.I < 0 || e.I >= g.N() || e.J < 0 || e.J >= g.N() {
			return fmt.Errorf("%s: edge %d (%d, %d) has an endpoint outside 0..%d", source(g), k, e.I, e.J, g.N()-1)
		}
		if e.I == e.J {
			return fmt.Errorf("%s: edge %d goes from pose %d to itself", where(g, k), k, e.I)
		}
	}
	if connected(g) {
		return nil
	}
	// Rare: spend the maps of Components only to describe the problem.
	if comps := g.Components(); len(comps) > 1 {
		sizes := make([]int, len(comps))
		for i, c := range comps {
			sizes[i] = len(c)
		}
		return &posegraph.DisconnectedError{Source: g.Source, Sizes: sizes}
	}
	return nil
}

// connected reports whether the graph has one connected component, by
// union-find over the edges.
func connected(g *posegraph.Graph) bool {
	parts := g.N()
	u := graphs.NewUnionFind(parts)
	for _, e := range g.Edges {
		if u.Union(e.I, e.J) {
			parts--
		}
	}
	return parts == 1
}
