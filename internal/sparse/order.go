package sparse

// BlockOrder returns the fill-reducing ordering of q's block graph
// (without its first drop blocks, as BlockAMD) whose Cholesky factor is
// cheaper to compute: BlockAMD's or NestedDissection's, expanded to
// scalars.
//
// Neither ordering wins everywhere, and size alone does not tell them apart
// (at 10^4 poses minimum degree wins on the lattice, dissection on
// city10000), so both are computed and their factors compared by
// BlockFactorCost, a symbolic count that costs a fraction of the minimum
// degree ordering itself. The cost of a factorization is taken as
// flops + ndNNZFlops * nnz(L): the supernodal factorization's time was
// fitted as flops / (4.2 GFlop/s) + 22 ns * nnz(L) on the graphs below
// (two shared cores), so at nearly equal flops the sparser factor wins.
// Graphs of at most ndLeaf blocks get BlockAMD alone, since nested
// dissection then is minimum degree.
//
// Dissection is tried only when BlockAMD's factor would cost at least
// ndWorthCost: ND's ordering takes 2.5 to 7 times as long as BlockAMD's and
// saves at most tens of percent of a factorization, so on a factor that
// takes well under a second (every benchmark graph, and the 10^5-pose
// grid) the extra ordering time would exceed what it saves over the few
// factorizations of a solve.
//
// Flops and nonzeros per pose of the factor of Q (pose blocks), BlockAMD
// against NestedDissection, and the ordering chosen, measured by
// BenchmarkOrder and BenchmarkOrderFactor in internal/sparse/sparsebench
// (ordering times, and times of one numeric factorization, two shared
// cores):
//
//	graph                            BlockAMD               ND                     chosen
//	datasets.Cube 22^3 (10^4 poses)  1.1e7, 52;   4 ms      1.3e7, 54;   33 ms     BlockAMD
//	datasets.Cube 46^3 (10^5)        8.4e8, 73;   87 ms     7.0e8, 73;   266 ms    BlockAMD (gate; factor 0.25 s, ND's 0.22)
//	datasets.Cube 100^3 (10^6)       2.0e11, 163; 1.4 s     9.4e10, 131; 3.4 s     ND (factor 16 s, not 32)
//	city10000                        1.2e8, 117;  16 ms     7.3e7, 101;  57 ms     BlockAMD (gate; factor 40 ms, ND's 30)
//	torus3D                          3.8e8, 282;  8 ms      3.4e8, 288;  28 ms     BlockAMD (gate)
//	cubicle                          2.7e8, 266;  8 ms      2.3e8, 261;  35 ms     BlockAMD (gate)
//	sphere2500                       1.3e8, 285             1.5e8, 312             BlockAMD
//	parking-garage, intel, MIT,      ND 1% to 22% more flops                       BlockAMD
//	manhattan, kitti_00, CSAIL, ...
//
// The rotation Laplacian behaves the same way.
func BlockOrder(q *BlockSym, drop int) []int {
	return blockOrder(q, drop, ndWorthCost)
}

// ndWorthCost is the factor cost (flops + ndNNZFlops nnz(L), about 1 s of
// factorization) from which BlockOrder tries nested dissection.
const ndWorthCost = 5e9

// blockOrder is BlockOrder trying dissection from a factor cost of worth.
func blockOrder(q *BlockSym, drop int, worth float64) []int {
	nb := q.N - drop
	if nb <= ndLeaf {
		return BlockAMD(q, drop)
	}
	xadj, adj := blockGraph(q, drop)
	cost := func(perm []int) float64 {
		nnz, flops := blockFactorCost(xadj, adj, perm, q.B)
		return flops + ndNNZFlops*float64(nnz)
	}
	amd := BlockAMD(q, drop)
	ca := cost(amd)
	if ca < worth {
		return amd
	}
	if nd := NestedDissection(q, drop); cost(nd) < ca {
		return nd
	}
	return amd
}

// ndNNZFlops is the cost of a nonzero of L in flops, in BlockOrder's
// model of the factorization's time (fitted: 92).
const ndNNZFlops = 100

// BlockFactorCost returns the number of nonzeros and the flops of the
// Cholesky factor of LowerCSC(q, shift, drop) under the scalar permutation
// perm, which must keep blocks contiguous (as BlockAMD's and
// NestedDissection's do): NNZ and Flops of Analyze(LowerCSC(q, shift,
// drop), perm). It works on the block graph, computing the elimination
// tree and column counts of the block factor in nearly linear time
// (Gilbert, Ng and Peyton's algorithm), and never forms the factor's
// pattern, so comparing orderings with it is far cheaper than analysing
// each. (LowerCSC keeps every entry of a stored block, so the scalar
// pattern is the block pattern expanded.)
func BlockFactorCost(q *BlockSym, drop int, perm []int) (nnz int, flops float64) {
	xadj, adj := blockGraph(q, drop)
	return blockFactorCost(xadj, adj, perm, q.B)
}

// blockFactorCost is BlockFactorCost on the block graph
// adj[xadj[i]:xadj[i+1]] (no self loops) of b x b blocks.
func blockFactorCost(xadj, adj, perm []int, b int) (nnz int, flops float64) {
	n := len(xadj) - 1
	order := make([]int, n)
	for k := range order {
		order[k] = perm[k*b] / b
	}
	// Block column k holds cnt[k] blocks; its scalar columns count
	// b*cnt[k], b*cnt[k]-1, ..., b*cnt[k]-b+1 nonzeros.
	for _, c := range blockColCounts(xadj, adj, order) {
		for t := 0; t < b; t++ {
			v := b*c - t
			nnz += v
			flops += float64(v) * float64(v)
		}
	}
	return nnz, flops
}

// blockColCounts returns the number of blocks in each block column of the
// Cholesky factor of the block graph (xadj, adj) ordered by order (order[k]
// = the block eliminated k-th), column k of the result for order[k].
func blockColCounts(xadj, adj, order []int) []int {
	n := len(order)
	// pos[i] is the place of block i in the order.
	pos := make([]int, n)
	parent := blockEtree(xadj, adj, order, pos)
	anc := make([]int, n)
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
