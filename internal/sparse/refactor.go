package sparse

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// A partial numeric refactorization: when a matrix changes only in a few
// block rows (a graph that grew by a few vertices and edges), the columns
// of L whose subtree of the elimination tree holds no changed column are
// the same numbers as before, and need not be computed again. Only the
// supernodes on the paths from the changed columns to the roots are; the
// others are copied from the earlier factor. Recomputing only the top of
// the tree that a change reaches is the idea of iSAM2 (Kaess et al. 2012,
// "iSAM2: Incremental smoothing and mapping using the Bayes tree"), here
// on a left-looking supernodal factor whose order the caller kept
// (ReorderBlocks keeps the unaffected subtrees in their order).
//
// Why a copy is the fresh factorization's value, bit for bit: supernode
// s's values are A's columns of s minus the updates of its descendants,
// summed in the order their link events queue them on s, and every such
// event happens while a supernode of s's subtree is factored, in index
// order, when s and its subtree run in one task of the concurrent
// schedule. So when s's subtree is the same as before (the same
// supernodes with the same row structures, mapped, in the same relative
// order, with the same values of A in their columns) and s runs inside a
// task in both factorizations, its values are the earlier ones. The top of
// the tree (supernodes.top), where updates arrive in the schedule's task
// order, is always computed.

// factoredFrom describes the matrix a factor was last made from by
// FactorizeBlocks: its values (the address of the first, to recognize the
// matrix handed back), the shift and the pivot threshold.
type factoredFrom struct {
	val            *float64
	rowPtr, colIdx *int
	nb             int
	shift, thr     float64
	ok             bool
}

// made reports whether m is the matrix f describes: the same slices
// (FactorizeBlocksFrom's caller promises their values did not change, and
// FactorizeBlocks checked their shape).
func (f *factoredFrom) made(m *BlockSym) bool {
	nnz := 0
	if m.N >= 0 && len(m.RowPtr) == m.N+1 {
		nnz = m.RowPtr[m.N]
	}
	return f.ok && m.N == f.nb && len(m.RowPtr) == m.N+1 && &m.RowPtr[0] == f.rowPtr &&
		len(m.ColIdx) >= nnz && nnz > 0 && &m.ColIdx[0] == f.colIdx &&
		len(m.Val) >= nnz*m.B*m.B && &m.Val[0] == f.val
}

// refactorSource is FactorizeBlocksFrom's earlier factor, its matrix and
// the map of its blocks to the new matrix's, and the counts it returns.
type refactorSource struct {
	prev     *Cholesky
	m        *BlockSym
	blockMap []int
	stats    Refactorization
}

// Refactorization counts what FactorizeBlocksFrom copied: supernodes and
// the flops of their columns (sum of count^2, as Cholesky.Flops), of the
// factor's total.
type Refactorization struct {
	Supernodes, Copied int
	Flops, CopiedFlops float64
	// Permuted counts the copied supernodes whose rows below their
	// columns come in another order than before (their values moved
	// with them).
	Permuted int
}

// FactorizeBlocksFrom is FactorizeBlocks(m, shift): the same factor, bit
// for bit, and the same errors, with the supernodes that did not change
// copied from prev, an earlier factor made by FactorizeBlocksFrom of prevM
// with the same shift (prevM's values unchanged since). blockMap[i] is
// the block of m that block i of prevM became, or -1 for one m lacks.
//
// A supernode is copied when its columns and row structure are those of
// a supernode of prev (through blockMap and the two orders), the block
// rows of its columns are prevM's (the same blocks, the same bits), its
// children in the supernodal tree are copied from the children of that
// supernode, and it is factored inside a task of the concurrent schedule
// in both (see the comment at the top of this file). Everything else is
// computed; with nothing to copy this is FactorizeBlocks. When the pivot
// threshold (relative to m's largest diagonal entry) grew, a copied
// supernode's pivots are checked against it, with a margin for the
// rounding of their square roots, and a supernode near it is computed.
//
// A nil prev, or one that holds no factor FactorizeBlocksFrom made
// (released, failed, made by FactorizeBlocks or with a floor), copies
// nothing; a prev whose factor was made from another matrix than prevM,
// or a blockMap that is not an injective map of prevM's blocks to m's, is
// an error. c records m (keeping its arrays alive until c is released or
// factored again) so that a later call may copy from c.
func (c *Cholesky) FactorizeBlocksFrom(m *BlockSym, shift float64, prev *Cholesky, prevM *BlockSym, blockMap []int) (Refactorization, error) {
	c.record = true
	defer func() { c.record = false }()
	if c.simplicial || prev == nil || prev == c || prevM == nil || !prev.ok || !prev.last.ok || prev.simplicial ||
		m == nil || m.N < 0 {
		// Nothing to copy from, or m is not a matrix: FactorizeBlocks
		// factors or refuses it.
		err := c.FactorizeBlocks(m, shift)
		st := Refactorization{}
		if err == nil && !c.simplicial {
			st.Supernodes, st.Flops = len(c.sn.first)-1, c.Flops()
		}
		return st, err
	}
	if prevM.B != m.B || prevM.N*prevM.B != prev.n || !prev.last.made(prevM) {
		return Refactorization{}, errors.New("sparse: FactorizeBlocksFrom: the earlier factor was not made from the earlier matrix given")
	}
	if len(blockMap) != prevM.N {
		return Refactorization{}, fmt.Errorf("sparse: FactorizeBlocksFrom: a block map of %d entries for %d blocks", len(blockMap), prevM.N)
	}
	seen := make([]bool, m.N)
	for i, j := range blockMap {
		if j < -1 || j >= m.N || (j >= 0 && seen[j]) {
			return Refactorization{}, fmt.Errorf("sparse: FactorizeBlocksFrom: block %d maps to %d, out of range or repeated", i, j)
		}
		if j >= 0 {
			seen[j] = true
		}
	}
	from := &refactorSource{prev: prev, m: prevM, blockMap: blockMap}
	err := c.factorizeBlocksFrom(m, nil, shift, 0, 0, from)
	if err != nil {
		return Refactorization{}, err
	}
	return from.stats, nil
}

// reusePlan returns, for each supernode of c, the supernode of from.prev
// it copies or -1 (FactorizeBlocksFrom's rules), and counts them in
// from.stats. thr is this factorization's pivot threshold.
func (c *Cholesky) reusePlan(from *refactorSource, m *BlockSym, shift, thr float64) []int {
	prev, pm, bmap := from.prev, from.m, from.blockMap
	sn, ps := c.sn, prev.sn
	b, bb := m.B, m.B*m.B
	ns, pns := len(sn.first)-1, len(ps.first)-1
	reuse := make([]int, ns)
	for s := range reuse {
		reuse[s] = -1
	}
	st := &from.stats
	st.Supernodes, st.Flops = ns, c.Flops()
	if math.Float64bits(shift) != math.Float64bits(prev.last.shift) {
		return reuse
	}

	// oldOf[j]: the block of prevM that block j of m was, or -1; same[j]:
	// block row j is that block row, block for block and bit for bit.
	oldOf := make([]int, m.N)
	for j := range oldOf {
		oldOf[j] = -1
	}
	for i, j := range bmap {
		if j >= 0 {
			oldOf[j] = i
		}
	}
	same := make([]bool, m.N)
	for j := range same {
		i := oldOf[j]
		if i < 0 || m.RowPtr[j+1]-m.RowPtr[j] != pm.RowPtr[i+1]-pm.RowPtr[i] {
			continue
		}
		k0, t0 := m.RowPtr[j], pm.RowPtr[i]
		orow := pm.ColIdx[t0:pm.RowPtr[i+1]]
		ok := true
		for k, col := range m.ColIdx[k0:m.RowPtr[j+1]] {
			oc := oldOf[col]
			if oc < 0 {
				ok = false
				break
			}
			// Rows keep their order when the numbering does (poses in
			// arrival order): look the block up only when it moved.
			t := k
			if orow[t] != oc {
				var found bool
				if t, found = slices.BinarySearch(orow, oc); !found {
					ok = false
					break
				}
			}
			if bb == 1 {
				ok = math.Float64bits(m.Val[k0+k]) == math.Float64bits(pm.Val[t0+t])
				if !ok {
					break
				}
				continue
			}
			nv := m.Val[(k0+k)*bb : (k0+k+1)*bb]
			ov := pm.Val[(t0+t)*bb : (t0+t+1)*bb]
			for e, v := range nv {
				if math.Float64bits(v) != math.Float64bits(ov[e]) {
					ok = false
					break
				}
			}
			if !ok {
				break
			}
		}
		same[j] = ok
	}

	spar, pspar := superParents(c), superParents(prev)
	pchildren := make([]int, pns)
	for _, p := range pspar {
		if p >= 0 {
			pchildren[p]++
		}
	}
	isTop, pisTop := make([]bool, ns), make([]bool, pns)
	for _, s := range sn.top {
		isTop[s] = true
	}
	for _, s := range ps.top {
		pisTop[s] = true
	}
	// Per supernode of c, from its children (which come first): whether
	// one of them is not copied or copies out of order, how many are
	// copied, the last supernode of prev they copy, and the parent in
	// prev those have (-2 for none yet).
	bad := make([]bool, ns)
	matched := make([]int, ns)
	lastChild := make([]int, ns)
	childParent := make([]int, ns)
	for s := range lastChild {
		lastChild[s], childParent[s] = -1, -2
	}
	// NaN compares false: a NaN threshold checks every copied pivot, and
	// fails where a fresh factorization fails.
	checkPivots := !(thr <= prev.last.thr)
	w := &planWork{mark: make([]int, c.n), pos: make([]int, c.n)}
	for i := range w.mark {
		w.mark[i] = -1
	}
	sn.permAt, sn.rowPerm = make([]int, ns), sn.rowPerm[:0]
	for s := range sn.permAt {
		sn.permAt[s] = -1
	}
	for s := 0; s < ns; s++ {
		o := -1
		if !bad[s] && !isTop[s] {
			o = c.counterpart(prev, s, oldOf, bmap, same, b, w)
		}
		if o >= 0 && (pisTop[o] || matched[s] != pchildren[o] ||
			(matched[s] > 0 && childParent[s] != o)) {
			o = -1
		}
		if o >= 0 && checkPivots && !pivotsAbove(ps, o, thr) {
			o = -1
		}
		reuse[s] = o
		if o >= 0 && w.permuted {
			sn.permAt[s] = len(sn.rowPerm)
			sn.rowPerm = append(sn.rowPerm, w.perm...)
			st.Permuted++
		}
		p := spar[s]
		if p < 0 {
			continue
		}
		switch {
		case o < 0 || o <= lastChild[p] || (childParent[p] != -2 && childParent[p] != pspar[o]):
			bad[p] = true
		default:
			lastChild[p], childParent[p] = o, pspar[o]
			matched[p]++
		}
	}
	for s, o := range reuse {
		if o < 0 {
			continue
		}
		st.Copied++
		for k := sn.first[s]; k < sn.first[s+1]; k++ {
			ck := float64(c.count(k))
			st.CopiedFlops += ck * ck
		}
	}
	return reuse
}

// counterpart returns the supernode of prev with s's columns and row
// structure (through the block maps and the two orders) whose columns'
// block rows did not change (same), or -1. The rows below the columns
// may come in another order (the affected ancestors, which the kept
// order reorders): w.perm then says where each of the counterpart's
// goes.
func (c *Cholesky) counterpart(prev *Cholesky, s int, oldOf, bmap []int, same []bool, b int, w *planWork) int {
	sn, ps := c.sn, prev.sn
	f := sn.first[s]
	i := oldOf[c.perm[f]/b]
	if i < 0 {
		return -1
	}
	q := int(prev.pinv[i*b+c.perm[f]%b])
	o := int(ps.super[q])
	nc, nr := sn.first[s+1]-f, sn.rowPtr[s+1]-sn.rowPtr[s]
	if ps.first[o] != q || ps.first[o+1]-q != nc || ps.rowPtr[o+1]-ps.rowPtr[o] != nr {
		return -1
	}
	for k := f; k < f+nc; k++ {
		if !same[c.perm[k]/b] {
			return -1
		}
	}
	rows, prows := sn.rows[sn.rowPtr[s]:sn.rowPtr[s+1]], ps.rows[ps.rowPtr[o]:ps.rowPtr[o+1]]
	for r, i := range rows {
		w.mark[i], w.pos[i] = s, r
	}
	w.perm, w.permuted = w.perm[:0], false
	for r, pr := range prows {
		oc := prev.perm[pr]
		j := bmap[oc/b]
		if j < 0 {
			return -1
		}
		i := int(c.pinv[j*b+oc%b])
		switch {
		case r < nc && i != int(rows[r]):
			return -1 // the columns themselves, in order
		case r >= nc && (w.mark[i] != s || w.pos[i] < nc):
			return -1
		}
		if r >= nc {
			w.perm = append(w.perm, w.pos[i])
			w.permuted = w.permuted || w.pos[i] != r
		}
	}
	return o
}

// planWork is reusePlan's scratch: a mark and the local row of each row
// of the supernode being matched, and the local row in it of each row
// below the columns of its counterpart (perm), when they are not in the
// same order (permuted).
type planWork struct {
	mark, pos []int
	perm      []int
	permuted  bool
}

// superParents returns the parent of each supernode of c's factor in the
// supernodal elimination tree (-1 for a root).
func superParents(c *Cholesky) []int {
	sn := c.sn
	ns := len(sn.first) - 1
	par := make([]int, ns)
	for s := range par {
		par[s] = -1
		if p := c.parentOf(sn.first[s+1] - 1); p != -1 {
			par[s] = int(sn.super[p])
		}
	}
	return par
}

// pivotsAbove reports whether every pivot of supernode o (its diagonal
// entries squared) is above thr by more than the rounding of a square
// root could hide: the pivot before the square root, which the fresh
// factorization compares with thr, is then above it too.
func pivotsAbove(sn *supernodes, o int, thr float64) bool {
	nc := sn.first[o+1] - sn.first[o]
	for k := 0; k < nc; k++ {
		d := sn.val[sn.valPtr[o]+k*nc+k]
		if !(d*d > thr*(1+1e-9)) {
			return false
		}
	}
	return true
}

// copyNode sets supernode s's values to those of from's supernode
// reuse[s], and hands the descendants queued on s, and s, to link as
// factorNode would: the updates s's ancestors receive arrive in the same
// order as in a factorization that computes s.
func (sn *supernodes) copyNode(s int, link func(d, t int)) {
	o := sn.reuse[s]
	dst, src := sn.val[sn.valPtr[s]:sn.valPtr[s+1]], sn.from.val[sn.from.valPtr[o]:sn.from.valPtr[o+1]]
	if k := sn.permAt[s]; k < 0 {
		copy(dst, src)
	} else {
		nc := sn.first[s+1] - sn.first[s]
		copy(dst[:nc*nc], src[:nc*nc])
		nr := sn.rowPtr[s+1] - sn.rowPtr[s]
		for r, t := range sn.rowPerm[k : k+nr-nc] {
			copy(dst[t*nc:(t+1)*nc], src[(nc+r)*nc:(nc+r+1)*nc])
		}
	}
	l := sn.first[s+1] - 1
	for d := sn.head[s]; d != -1; {
		dnext := sn.next[d]
		drows := sn.rows[sn.rowPtr[d]:sn.rowPtr[d+1]]
		p2 := sn.dpos[d]
		for p2 < len(drows) && int(drows[p2]) <= l {
			p2++
		}
		if p2 < len(drows) {
			sn.dpos[d] = p2
			link(d, int(sn.super[drows[p2]]))
		}
		d = dnext
	}
	nc := l - sn.first[s] + 1
	if sn.rowPtr[s+1]-sn.rowPtr[s] > nc {
		sn.dpos[s] = nc
		link(s, int(sn.super[sn.rows[sn.rowPtr[s]+nc]]))
	}
}
