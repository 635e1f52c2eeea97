package sparse

// BlockOrder returns the fill-reducing ordering of q's block graph
// (without its first drop blocks, as BlockAMD) whose Cholesky factor needs
// fewer flops: BlockAMD's or NestedDissection's, expanded to scalars.
//
// Neither ordering wins everywhere, and size alone does not tell them apart
// (at 10^4 poses minimum degree wins on the lattice, dissection on
// city10000), so both are computed and compared by BlockFlops, a symbolic
// count that costs less than the minimum degree ordering itself.
// Graphs of at most ndLeaf blocks get BlockAMD alone, since nested
// dissection then is minimum degree. Flops of the factor of Q (pose
// blocks), BlockAMD / NestedDissection, measured by BenchmarkOrder in
// internal/sparse/sparsebench:
//
//	datasets.Cube 22^3 (10^4 poses)    1.1e7 / 2.1e7    minimum degree
//	datasets.Cube 46^3 (10^5)          8.4e8 / 8.2e8
//	datasets.Cube 100^3 (10^6)         2.0e11 / 9.6e10  dissection, 2x
//	city10000                          1.2e8 / 8.0e7    dissection
//	torus3D, cubicle                   within 5%
//	sphere2500, parking-garage,        minimum degree, by 17% to 2.3x
//	intel, manhattan, kitti_00 ...     (chains, local closures)
//
// The ordering costs about 5x BlockAMD (1 s and 5 s at 10^6 poses on
// two shared cores), small next to one factorization of a graph where
// dissection wins. The rotation Laplacian behaves the same way.
func BlockOrder(q *BlockSym, drop int) []int {
	nb := q.N - drop
	if nb <= ndLeaf {
		return BlockAMD(q, drop)
	}
	xadj, adj := blockGraph(q, drop)
	amd := BlockAMD(q, drop)
	nd := NestedDissection(q, drop)
	if blockFlops(xadj, adj, nd, q.B) < blockFlops(xadj, adj, amd, q.B) {
		return nd
	}
	return amd
}

// BlockFlops returns the flops of the Cholesky factor of
// q.LowerCSC(shift, drop) under the scalar permutation perm, which must
// keep blocks contiguous (as BlockAMD's and NestedDissection's do): the
// Flops of Analyze(q.LowerCSC(shift, drop), perm), sum over the columns of
// L of count^2. It works on the block graph, computing the elimination
// tree and column counts of the block factor in nearly linear time
// (Gilbert, Ng and Peyton's algorithm), and never forms the factor's
// pattern, so comparing orderings with it is far cheaper than analysing
// each. (LowerCSC keeps every entry of a stored block, so the scalar
// pattern is the block pattern expanded.)
func BlockFlops(q *BlockSym, drop int, perm []int) float64 {
	xadj, adj := blockGraph(q, drop)
	return blockFlops(xadj, adj, perm, q.B)
}

// blockFlops is BlockFlops on the block graph adj[xadj[i]:xadj[i+1]] (no
// self loops) of b x b blocks.
func blockFlops(xadj, adj, perm []int, b int) float64 {
	n := len(xadj) - 1
	order := make([]int, n)
	for k := range order {
		order[k] = perm[k*b] / b
	}
	// Block column k holds cnt[k] blocks; its scalar columns count
	// b*cnt[k], b*cnt[k]-1, ..., b*cnt[k]-b+1 nonzeros.
	f := 0.0
	for _, c := range blockColCounts(xadj, adj, order) {
		for t := 0; t < b; t++ {
			v := float64(b*c - t)
			f += v * v
		}
	}
	return f
}

// blockColCounts returns the number of blocks in each block column of the
// Cholesky factor of the block graph (xadj, adj) ordered by order (order[k]
// = the block eliminated k-th), column k of the result for order[k].
func blockColCounts(xadj, adj, order []int) []int {
	n := len(order)
	// pos[i] is the place of block i in the order.
	pos := make([]int, n)
	for k, i := range order {
		pos[i] = k
	}
	// Elimination tree of the permuted block graph (Liu, path
	// compression).
	parent := make([]int, n)
	anc := make([]int, n)
	for k := 0; k < n; k++ {
		parent[k], anc[k] = -1, -1
		for _, u := range adj[xadj[order[k]]:xadj[order[k]+1]] {
			for i := pos[u]; i != -1 && i < k; {
				next := anc[i]
				anc[i] = k
				if next == -1 {
					parent[i] = k
				}
				i = next
			}
		}
	}
	post := postorder(parent)
	// Column counts: each column j starts with delta 1 if it is a leaf of
	// the tree, and every row subtree's leaves add to delta and its
	// least common ancestors subtract; summing delta up the tree gives
	// the counts.
	first := make([]int, n)
	maxfirst := make([]int, n)
	prevleaf := make([]int, n)
	delta := make([]int, n)
	for i := range first {
		first[i], maxfirst[i], prevleaf[i] = -1, -1, -1
		anc[i] = i
	}
	for k, j := range post {
		if first[j] == -1 {
			delta[j] = 1
		}
		for ; j != -1 && first[j] == -1; j = parent[j] {
			first[j] = k
		}
	}
	for _, j := range post {
		if parent[j] != -1 {
			delta[parent[j]]--
		}
		for _, u := range adj[xadj[order[j]]:xadj[order[j]+1]] {
			i := pos[u]
			// Is j a leaf of row i's subtree (entry (i, j) of L, i > j)?
			if i <= j || first[j] <= maxfirst[i] {
				continue
			}
			maxfirst[i] = first[j]
			prev := prevleaf[i]
			prevleaf[i] = j
			delta[j]++
			if prev == -1 {
				continue
			}
			// Later leaf: the least common ancestor of prev and j.
			q := prev
			for q != anc[q] {
				q = anc[q]
			}
			for s := prev; s != q; {
				next := anc[s]
				anc[s] = q
				s = next
			}
			delta[q]--
		}
		if parent[j] != -1 {
			anc[j] = parent[j]
		}
	}
	for _, j := range post {
		if p := parent[j]; p != -1 {
			delta[p] += delta[j]
		}
	}
	return delta
}
