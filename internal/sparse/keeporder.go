package sparse

import (
	"errors"
	"fmt"
)

// ReorderBlocks returns a fill-reducing order of q's blocks (expanded to
// scalars, as BlockOrder's) that keeps an earlier order where a change of
// the graph left it valid: iSAM2's constrained reordering (Kaess et al.
// 2012, "iSAM2: Incremental smoothing and mapping using the Bayes tree"),
// on the block elimination tree.
//
// prev is the block order of the graph before the change (prev[k] = the
// block eliminated k-th, in q's numbering) and prevParent its elimination
// tree by position (the position of prev[k]'s parent, above k, or -1), as
// BlockSymbolic.Tree returns them; q may have blocks prev does not list
// (new vertices). touched marks the old blocks whose rows changed in
// pattern (an end of a new edge); new blocks count as touched.
//
// The touched blocks and their ancestors in the old tree are the affected
// blocks: their columns of L change. Every other old block keeps its place
// and its subtree (no new edge reaches a subtree without a touched block,
// so its columns of L are what they were), and comes first, in prev's
// order. The affected and the new blocks follow, ordered by minimum degree
// on the graph that eliminating the kept blocks leaves (each kept subtree
// hanging from an affected block is one element: the clique of its
// column's structure).
//
// iSAM2 also constrains the touched variables to be eliminated last, so
// that the next change, which usually touches them again, affects a short
// top of the tree. On pose graphs whose new poses close loops all over
// the map (city10000) that constraint made the factor 2.7 to 2.9 times
// costlier than a fresh order's at the median step (4.4 to 5.1 at
// worst), against 1.03 (1.16) without it (BenchmarkReorder in
// sparsebench; the constrained figures came from a variant of this
// function that ordered the touched blocks last, which is not kept), so
// the reordered blocks are ordered by minimum degree alone.
//
// reordered is the number of blocks ordered afresh. The kept order can
// grow costlier than a fresh one (BlockOrder) as the graph grows;
// BlockFactorCost compares them.
func ReorderBlocks(q *BlockSym, prev, prevParent []int, touched []bool) (perm []int, reordered int, err error) {
	if q == nil {
		return nil, 0, errors.New("sparse: ReorderBlocks: nil matrix")
	}
	if err := blockPatternErr(q); err != nil {
		return nil, 0, fmt.Errorf("sparse: ReorderBlocks: %w", err)
	}
	n, nOld := q.N, len(prev)
	if len(prevParent) != nOld || nOld > n || (touched != nil && len(touched) != n) {
		return nil, 0, fmt.Errorf("sparse: ReorderBlocks: %d blocks, an order of %d with %d parents, %d touched marks", n, nOld, len(prevParent), len(touched))
	}
	pos := make([]int, n) // position in prev, -1 for a new block
	for i := range pos {
		pos[i] = -1
	}
	for k, v := range prev {
		if v < 0 || v >= n || pos[v] >= 0 {
			return nil, 0, fmt.Errorf("sparse: ReorderBlocks: prev[%d] = %d is not a block of %d or is repeated", k, v, n)
		}
		if p := prevParent[k]; p != -1 && (p <= k || p >= nOld) {
			return nil, 0, fmt.Errorf("sparse: ReorderBlocks: the parent of position %d is %d", k, p)
		}
		pos[v] = k
	}

	// Affected positions: the touched blocks and their ancestors.
	affected := make([]bool, nOld)
	for v := 0; v < n; v++ {
		k := pos[v]
		if k < 0 || touched == nil || !touched[v] {
			continue
		}
		for ; k != -1 && !affected[k]; k = prevParent[k] {
			affected[k] = true
		}
	}
	// The reordered blocks R (affected, then new), numbered locally.
	local := make([]int, n)
	var rset []int
	for i := range local {
		local[i] = -1
	}
	for k, v := range prev {
		if affected[k] {
			local[v] = len(rset)
			rset = append(rset, v)
		}
	}
	for v := 0; v < n; v++ {
		if pos[v] < 0 {
			local[v] = len(rset)
			rset = append(rset, v)
		}
	}
	nr := len(rset)

	// Each kept block's subtree root (the highest kept ancestor: a kept
	// block's descendants are all kept), from the top down.
	root := make([]int, nOld)
	for k := nOld - 1; k >= 0; k-- {
		if affected[k] {
			continue
		}
		if p := prevParent[k]; p != -1 && !affected[p] {
			root[k] = root[p]
		} else {
			root[k] = k
		}
	}
	// The element of each kept subtree that hangs from an affected block:
	// the reordered blocks adjacent to the subtree (its root's column
	// structure). Subtrees that reach no reordered block stay out.
	var elems [][]int
	stamp := make([]int, nr)
	for i := range stamp {
		stamp[i] = -1
	}
	// Group the kept positions by root (counting sort) so each element is
	// gathered in one pass with one stamp.
	cnt := make([]int, nOld+1)
	for k := 0; k < nOld; k++ {
		if !affected[k] {
			cnt[root[k]+1]++
		}
	}
	for k := 0; k < nOld; k++ {
		cnt[k+1] += cnt[k]
	}
	members := make([]int, cnt[nOld])
	fill := append([]int(nil), cnt[:nOld]...)
	for k := 0; k < nOld; k++ {
		if !affected[k] {
			members[fill[root[k]]] = k
			fill[root[k]]++
		}
	}
	for r := 0; r < nOld; r++ {
		if cnt[r+1] == cnt[r] {
			continue
		}
		var el []int
		for _, k := range members[cnt[r]:cnt[r+1]] {
			v := prev[k]
			for t := q.RowPtr[v]; t < q.RowPtr[v+1]; t++ {
				if u := local[q.ColIdx[t]]; u >= 0 && stamp[u] != r {
					stamp[u] = r
					el = append(el, u)
				}
			}
		}
		if len(el) > 0 {
			elems = append(elems, el)
		}
	}

	// The reordered blocks' own graph.
	xadj := make([]int, nr+1)
	var adj []int
	for a, v := range rset {
		for t := q.RowPtr[v]; t < q.RowPtr[v+1]; t++ {
			if u := local[q.ColIdx[t]]; u >= 0 && u != a {
				adj = append(adj, u)
			}
		}
		xadj[a+1] = len(adj)
	}
	w := make([]int, nr)
	for i := range w {
		w[i] = q.B
	}
	order := make([]int, 0, n)
	for k, v := range prev {
		if !affected[k] {
			order = append(order, v)
		}
	}
	for _, a := range minDegreeElements(nr, xadj, adj, w, elems) {
		order = append(order, rset[a])
	}
	return expandBlockOrder(order, q.B), nr, nil
}

// Tree returns the block order s analysed (in postorder: order[k] is the
// block eliminated k-th) and its elimination tree by position (parent[k]
// the position of order[k]'s parent, -1 for a root): ReorderBlocks' prev
// and prevParent after the graph grows. The slices are s's own.
func (s *BlockSymbolic) Tree() (order, parent []int) { return s.order, s.parent }

// Pattern returns the block pattern s analysed (row pointers and column
// indices, s's own slices): a matrix built on these very slices is
// recognized as s's pattern without comparing them (Analyze).
func (s *BlockSymbolic) Pattern() (rowPtr, colIdx []int) { return s.rowPtr, s.colIdx }

// TrailingClique returns how many of the last blocks of s's order have
// columns of L dense to the end: Cholesky.TrailingClique of any analysis
// from s, in blocks. Any order of those blocks among themselves gives L
// the same pattern.
func (s *BlockSymbolic) TrailingClique() int {
	nb, k := len(s.order), 0
	for j := nb - 1; j >= 0 && s.cnt[j] == nb-j; j-- {
		k++
	}
	return k
}
