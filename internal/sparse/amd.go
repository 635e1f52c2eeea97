package sparse

import "math"

// AMD returns a fill-reducing symmetric permutation of the matrix whose lower
// triangle a holds: perm[k] is the original index of the k-th pivot.
//
// It is an approximate minimum degree ordering on the quotient graph
// (eliminated nodes become elements that stand for the cliques they create,
// degrees are the upper bounds of Amestoy, Davis and Duff, elements contained
// in a newer one are absorbed). Consecutive columns with identical patterns
// are first merged into weighted supervariables, which shrinks the graph of
// block-structured matrices by the block size and keeps each block's columns
// together. Matrices that are almost entirely made of b x b blocks (b = 2,
// 3, 4; at least 60% of each touched block present, as in Q) are ordered on
// their block graph directly. The result is deterministic. a must satisfy
// Validate (NewCholesky checks it).
func AMD(a *CSC) []int {
	n := a.N
	if n == 0 {
		return []int{}
	}
	if b := blockSize(a); b > 1 {
		return blockGraphOrder(a, b)
	}
	// Full symmetric adjacency without the diagonal.
	cnt := make([]int, n+1)
	for j := 0; j < n; j++ {
		for p := a.ColPtr[j]; p < a.ColPtr[j+1]; p++ {
			if i := a.RowIdx[p]; i != j {
				cnt[i+1]++
				cnt[j+1]++
			}
		}
	}
	for i := 0; i < n; i++ {
		cnt[i+1] += cnt[i]
	}
	adj := make([]int, cnt[n])
	next := append([]int(nil), cnt[:n]...)
	// Two passes keep every list sorted: first each row's neighbours
	// below it (columns in increasing order), then those above it.
	for j := 0; j < n; j++ {
		for p := a.ColPtr[j]; p < a.ColPtr[j+1]; p++ {
			if i := a.RowIdx[p]; i > j {
				adj[next[i]] = j
				next[i]++
			}
		}
	}
	for j := 0; j < n; j++ {
		for p := a.ColPtr[j]; p < a.ColPtr[j+1]; p++ {
			if i := a.RowIdx[p]; i > j {
				adj[next[j]] = i
				next[j]++
			}
		}
	}
	// Supervariables: column j joins j-1's group when adj(j)+{j} equals
	// adj(j-1)+{j-1}, i.e. both lists agree after removing j-1 from adj(j)
	// and j from adj(j-1). Checking only against the previous column of
	// the group is enough, since equality is transitive.
	group := make([]int, n)
	ng := 0
	for j := 0; j < n; j++ {
		if j > 0 && samePattern(adj[cnt[j-1]:cnt[j]], j-1, adj[cnt[j]:cnt[j+1]], j) {
			group[j] = group[j-1]
			continue
		}
		group[j] = ng
		ng++
	}
	first := make([]int, ng+1)
	for j := n - 1; j >= 0; j-- {
		first[group[j]] = j
	}
	first[ng] = n
	w := make([]int, ng)
	xadj := make([]int, ng+1)
	var gadj []int
	for g := 0; g < ng; g++ {
		j := first[g]
		w[g] = first[g+1] - first[g]
		last := -1
		for _, i := range adj[cnt[j]:cnt[j+1]] {
			if gi := group[i]; gi != g && gi != last {
				gadj = append(gadj, gi)
				last = gi
			}
		}
		xadj[g+1] = len(gadj)
	}
	order := minDegree(ng, xadj, gadj, w)
	perm := make([]int, 0, n)
	for _, g := range order {
		for j := first[g]; j < first[g+1]; j++ {
			perm = append(perm, j)
		}
	}
	return perm
}

// blockSize detects matrices made of dense-ish b x b blocks (b = 4, 3 or
// 2), such as Q from LowerCSC, whose pose blocks lose a few exact zeros:
// if at least 60% of the entries of the b x b blocks the pattern touches
// are present, ordering the block graph costs far less than the scalar
// graph and loses nothing. It returns 1 otherwise.
func blockSize(a *CSC) int {
	n := a.N
	mark := make([]int, n)
	for b := 4; b >= 2; b-- {
		if n%b != 0 || n < 2*b {
			continue
		}
		nb := n / b
		for i := range mark[:nb] {
			mark[i] = -1
		}
		blocks := 0
		for jb := 0; jb < nb; jb++ {
			for j := jb * b; j < (jb+1)*b; j++ {
				for p := a.ColPtr[j]; p < a.ColPtr[j+1]; p++ {
					if ib := a.RowIdx[p] / b; mark[ib] != jb {
						mark[ib] = jb
						blocks++
					}
				}
			}
		}
		// Lower storage of the blocks: nb diagonal triangles plus full
		// off-diagonal blocks.
		capacity := nb*b*(b+1)/2 + (blocks-nb)*b*b
		if float64(a.ColPtr[n]) >= 0.6*float64(capacity) {
			return b
		}
	}
	return 1
}

// blockGraphOrder orders the graph of the b x b blocks of a (the union of
// the entries' patterns) and expands the order.
func blockGraphOrder(a *CSC, b int) []int {
	nb := a.N / b
	mark := make([]int, nb)
	for i := range mark {
		mark[i] = -1
	}
	// Lower block pattern by block columns, then symmetrized.
	var lower [][2]int
	cnt := make([]int, nb+1)
	for jb := 0; jb < nb; jb++ {
		for j := jb * b; j < (jb+1)*b; j++ {
			for p := a.ColPtr[j]; p < a.ColPtr[j+1]; p++ {
				if ib := a.RowIdx[p] / b; ib != jb && mark[ib] != jb {
					mark[ib] = jb
					lower = append(lower, [2]int{ib, jb})
					cnt[ib+1]++
					cnt[jb+1]++
				}
			}
		}
	}
	for i := 0; i < nb; i++ {
		cnt[i+1] += cnt[i]
	}
	adj := make([]int, cnt[nb])
	next := append([]int(nil), cnt[:nb]...)
	for _, e := range lower {
		adj[next[e[0]]] = e[1]
		next[e[0]]++
		adj[next[e[1]]] = e[0]
		next[e[1]]++
	}
	w := make([]int, nb)
	for i := range w {
		w[i] = b
	}
	order := minDegree(nb, cnt, adj, w)
	perm := make([]int, 0, a.N)
	for _, i := range order {
		for c := 0; c < b; c++ {
			perm = append(perm, i*b+c)
		}
	}
	return perm
}

// samePattern reports whether a+{i} equals b+{j} for sorted a (of node i)
// and b (of node j).
func samePattern(a []int, i int, b []int, j int) bool {
	if len(a) != len(b) {
		return false
	}
	p, q := 0, 0
	sawJ, sawI := false, false
	for p < len(a) || q < len(b) {
		if p < len(a) && a[p] == j {
			p++
			sawJ = true
			continue
		}
		if q < len(b) && b[q] == i {
			q++
			sawI = true
			continue
		}
		if p == len(a) || q == len(b) || a[p] != b[q] {
			return false
		}
		p++
		q++
	}
	// i and j must be adjacent, or i is missing from b+{j}.
	return sawI && sawJ
}

// BlockAMD orders the block graph of q (with its first drop block rows and
// columns removed, as in LowerCSC(q, shift, drop)) and expands the block
// order to a scalar permutation for that CSC matrix. Ordering pose blocks
// rather than scalars is cheaper and keeps every block contiguous, which the
// supernodal factorization exploits.
func BlockAMD(q *BlockSym, drop int) []int {
	nb := q.N - drop
	if nb <= 0 {
		return []int{}
	}
	xadj, adj := blockGraph(q, drop)
	w := make([]int, nb)
	for i := range w {
		w[i] = q.B
	}
	return expandBlockOrder(minDegree(nb, xadj, adj, w), q.B)
}

// blockGraph returns the adjacency (xadj, adj) of q's block graph without
// its first drop blocks and without self loops, blocks renumbered from 0.
func blockGraph(q *BlockSym, drop int) (xadj, adj []int) {
	xadj = make([]int, q.N-drop+1)
	for i := drop; i < q.N; i++ {
		for k := q.RowPtr[i]; k < q.RowPtr[i+1]; k++ {
			if j := q.ColIdx[k]; j != i && j >= drop {
				adj = append(adj, j-drop)
			}
		}
		xadj[i-drop+1] = len(adj)
	}
	return xadj, adj
}

// expandBlockOrder turns an order of blocks of size b into the scalar
// permutation that keeps each block's variables together.
func expandBlockOrder(order []int, b int) []int {
	perm := make([]int, 0, len(order)*b)
	for _, i := range order {
		for c := 0; c < b; c++ {
			perm = append(perm, i*b+c)
		}
	}
	return perm
}

// minDegree returns an elimination order of the n nodes of the symmetric
// graph adj[xadj[i]:xadj[i+1]] (no self loops) whose node i stands for w[i]
// scalar variables. Degrees are weighted.
func minDegree(n int, xadj, adj []int, w []int) []int {
	return minDegreeElements(n, xadj, adj, w, nil)
}

// minDegreeElements is minDegree on a quotient graph that starts with
// elements: elems[e] lists the nodes of a clique that eliminations made
// before this ordering began (ReorderBlocks' kept subtrees), so a clique
// costs its members' lists, not the square of its size. With elems nil it
// is minDegree, order for order.
func minDegreeElements(n int, xadj, adj []int, w []int, elems [][]int) []int {
	const (
		variable = iota
		element
		absorbed
	)
	nn := n + len(elems)
	vadj := make([][]int, nn) // adjacent variables
	eadj := make([][]int, nn) // adjacent elements
	le := make([][]int, nn)   // variables of element e
	lenW := make([]int, nn)   // weight of le[e]
	state := make([]uint8, nn)
	deg := make([]int, nn)
	mark := make([]int, nn)
	wE := make([]int, nn)
	wStamp := make([]int, nn)
	// Dense nodes (AMD's rule: more than max(16, 10 sqrt(n)) neighbours)
	// stay out of the elimination and are ordered last. A hub's neighbour
	// list would otherwise be rescanned each time one of its neighbours is
	// eliminated, which is quadratic on a star (200,000 leaves: 58 s), and
	// a hub is eliminated near the end anyway.
	denseDeg := max(16, int(10*math.Sqrt(float64(n))))
	isDense := make([]bool, n)
	ndense := 0
	for i := 0; i < n; i++ {
		if xadj[i+1]-xadj[i] > denseDeg {
			isDense[i] = true
			ndense++
		}
	}
	total := 0
	// One backing array for the initial neighbour lists (each list's
	// capacity is its own part, so that a later append cannot overwrite
	// the next): a slice per node cost an allocation or more each.
	back := make([]int, 0, len(adj))
	for i := 0; i < n; i++ {
		if isDense[i] {
			continue
		}
		start := len(back)
		for _, v := range adj[xadj[i]:xadj[i+1]] {
			if !isDense[v] {
				back = append(back, v)
				deg[i] += w[v]
			}
		}
		vadj[i] = back[start:len(back):len(back)]
		total += w[i]
	}
	// The given elements: each member's degree gains the rest of the
	// clique (an upper bound, as the degrees are, where cliques overlap).
	for k, members := range elems {
		e := n + k
		state[e] = element
		for _, v := range members {
			if isDense[v] {
				continue
			}
			le[e] = append(le[e], v)
			lenW[e] += w[v]
			eadj[v] = append(eadj[v], e)
		}
		for _, v := range le[e] {
			deg[v] += lenW[e] - w[v]
		}
	}
	if len(elems) > 0 {
		for i := 0; i < n; i++ {
			deg[i] = min(deg[i], total-w[i])
		}
	}
	// Degree buckets: doubly linked lists, so a degree update is O(1).
	head := make([]int, total+1)
	next := make([]int, n)
	prev := make([]int, n)
	for d := range head {
		head[d] = -1
	}
	mindeg := total
	insert := func(i int) {
		d := deg[i]
		next[i], prev[i] = head[d], -1
		if head[d] != -1 {
			prev[head[d]] = i
		}
		head[d] = i
		mindeg = min(mindeg, d)
	}
	remove := func(i int) {
		if prev[i] != -1 {
			next[prev[i]] = next[i]
		} else {
			head[deg[i]] = next[i]
		}
		if next[i] != -1 {
			prev[next[i]] = prev[i]
		}
	}
	for i := n - 1; i >= 0; i-- {
		if !isDense[i] {
			insert(i) // the smallest index ends up first in its bucket
		}
	}
	order := make([]int, 0, n)
	stamp := 0
	nleft := total
	var lpBuf []int
	for len(order) < n-ndense {
		for head[mindeg] == -1 {
			mindeg++
		}
		p := head[mindeg]
		remove(p)
		order = append(order, p)
		nleft -= w[p]
		stamp++
		mark[p] = stamp
		// The new element's variables: p's variable neighbours and the
		// variables of every element adjacent to p, which p absorbs.
		lp := lpBuf[:0] // copied out below: one allocation per element
		lpW := 0
		for _, v := range vadj[p] {
			if state[v] == variable && mark[v] != stamp {
				mark[v] = stamp
				lp = append(lp, v)
				lpW += w[v]
			}
		}
		for _, e := range eadj[p] {
			if state[e] != element {
				continue
			}
			for _, v := range le[e] {
				if state[v] == variable && mark[v] != stamp {
					mark[v] = stamp
					lp = append(lp, v)
					lpW += w[v]
				}
			}
			state[e] = absorbed
			le[e] = nil
		}
		lpBuf = lp
		lp = append([]int(nil), lp...)
		state[p] = element
		le[p], lenW[p] = lp, lpW
		vadj[p], eadj[p] = nil, nil
		// wE[e] = weight of le[e] outside lp, for every element e that
		// touches lp (Amestoy-Davis-Duff).
		for _, i := range lp {
			for _, e := range eadj[i] {
				if state[e] != element {
					continue
				}
				if wStamp[e] != stamp {
					wStamp[e] = stamp
					wE[e] = lenW[e]
				}
				wE[e] -= w[i]
			}
		}
		for _, i := range lp {
			es := eadj[i][:0]
			degE := 0
			for _, e := range eadj[i] {
				if state[e] != element {
					continue
				}
				if wE[e] == 0 {
					// le[e] lies inside lp: aggressive absorption.
					state[e] = absorbed
					le[e] = nil
					continue
				}
				es = append(es, e)
				degE += wE[e]
			}
			eadj[i] = append(es, p)
			vs := vadj[i][:0]
			degV := 0
			for _, v := range vadj[i] {
				// Neighbours inside lp are now reached through p.
				if state[v] == variable && mark[v] != stamp {
					vs = append(vs, v)
					degV += w[v]
				}
			}
			vadj[i] = vs
			d := degV + degE + lpW - w[i]
			if b := deg[i] + lpW - w[i]; b < d {
				d = b
			}
			if b := nleft - w[i]; b < d {
				d = b
			}
			if d < 0 {
				d = 0
			}
			remove(i)
			deg[i] = d
			insert(i)
		}
	}
	for i, dense := range isDense {
		if dense {
			order = append(order, i)
		}
	}
	return order
}
