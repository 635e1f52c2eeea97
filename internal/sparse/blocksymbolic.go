package sparse

import (
	"errors"
	"fmt"
	"sort"
	"sync"
)

// AnalyzeBlocks is Analyze(LowerCSC(m, 0, 0), perm) computed on m's block
// graph: the same factor, supernode for supernode and bit for bit once
// factored (FactorizeBlocks), without forming the scalar matrix. A
// supernodal analysis works on every scalar entry of A and of L's
// pattern; with dense b x b blocks that is b^2 times the work of the block
// graph, which matters for the trust region's Hessian (b = 6 in 3-D: at a
// million poses its scalar analysis took about 25 s, more than its
// factorization) and the certificate's S (b = 4).
//
// perm must keep each block's scalars together and in their order
// (perm[k*b+t] = perm[k*b] + t, perm[k*b] a multiple of b), as BlockOrder,
// BlockAMD and NestedDissection return, and m's block pattern must be
// symmetric with sorted rows, as BlockBuilder makes it. For any other perm
// (nil included: AMD) or pattern, AnalyzeBlocks calls Analyze on the
// scalar matrix. On the block path it does not read m's values, so unlike
// Analyze it does not refuse non-finite ones; FactorizeBlocks does.
//
// Why the block analysis is exact: with whole dense diagonal blocks and
// blocks kept together in order, the scalar elimination tree is the block
// tree with each block a chain (scalar t of a block is the parent of
// scalar t-1; the last scalar's parent is the first of the parent block),
// its postorder is the block postorder expanded, scalar t of a block whose
// column of L holds c blocks has b c - t nonzeros, and the structure of a
// scalar column below its block is the expanded block structure.
func AnalyzeBlocks(m *BlockSym, perm []int) (*Cholesky, error) {
	if m == nil {
		return nil, errors.New("sparse: AnalyzeBlocks: nil matrix")
	}
	if err := blockShapeErr(m); err != nil {
		return nil, fmt.Errorf("sparse: AnalyzeBlocks: %w", err)
	}
	if err := orderErr(m.N * m.B); err != nil {
		return nil, fmt.Errorf("sparse: AnalyzeBlocks: %w", err)
	}
	if perm == nil || !blockSymOK(m) || !blockPermOK(perm, m.B, m.N) {
		return Analyze(LowerCSC(m, 0, 0), perm)
	}
	return analyzePattern(m, perm).cholesky(m), nil
}

// BlockSymbolic is the part of AnalyzeBlocks that depends on the block
// pattern and the block order only, not on the block size: the
// elimination tree of the blocks, its postorder, the column counts and
// the structure of L in blocks. Matrices with one block graph (the
// chordal system, Q, the Hessian, S: all have the pose graph's) and one
// order share it, and each analysis for one of them (Analyze) then does
// only the work that grows with the block size.
type BlockSymbolic struct {
	rowPtr, colIdx []int // the pattern analysed (m's slices, not copied)
	order          []int // the block eliminated k-th, in postorder
	parent, cnt    []int // block elimination tree and column counts, in that order
	sptr, sidx     []int // blocks of L below the diagonal, column k at sidx[sptr[k]:sptr[k+1]]

	// made is the last analysis Analyze expanded, never factored: a later
	// Analyze of its block size returns its copy (sameAnalysis), sharing
	// its structure, instead of expanding again. A 2-D solve's Hessian (at
	// rank 2), S and Q + sigma I all have blocks of 3, so each step of a
	// replay expanded the same analysis two or three times. Only the last
	// is kept: it shares its structure with the factor analysed last, and
	// keeping the analyses of other block sizes too (a 3-D Hessian's of 6
	// and S's of 4, the Hessian's of each rank) would keep structures alive
	// that the solve has let go of (the last rank's Hessian's).
	mu   sync.Mutex
	made *Cholesky
}

// AnalyzeBlockPattern computes the block-level analysis of m's pattern in
// the block order of perm (a scalar permutation of m keeping its blocks
// together, as for AnalyzeBlocks). It fails, where AnalyzeBlocks would
// fall back to the scalar analysis, when m's pattern is not symmetric
// with sorted rows or perm does not keep m's blocks together.
func AnalyzeBlockPattern(m *BlockSym, perm []int) (*BlockSymbolic, error) {
	if m == nil {
		return nil, errors.New("sparse: AnalyzeBlockPattern: nil matrix")
	}
	if err := blockShapeErr(m); err != nil {
		return nil, fmt.Errorf("sparse: AnalyzeBlockPattern: %w", err)
	}
	if !blockSymOK(m) || !blockPermOK(perm, m.B, m.N) {
		return nil, errors.New("sparse: AnalyzeBlockPattern: the pattern is not symmetric with sorted rows, or the order does not keep blocks together")
	}
	return analyzePattern(m, perm), nil
}

// Analyze is AnalyzeBlocks(m, perm) for the perm s was made with
// (expanded to m's block size), m of s's block pattern and any block
// size: the same factor, bit for bit. It fails if m's pattern is not
// s's. m's values are not read and may be nil (a BlockRows' pattern).
func (s *BlockSymbolic) Analyze(m *BlockSym) (*Cholesky, error) {
	if m == nil {
		return nil, errors.New("sparse: BlockSymbolic.Analyze: nil matrix")
	}
	if err := blockPatternErr(m); err != nil {
		return nil, fmt.Errorf("sparse: BlockSymbolic.Analyze: %w", err)
	}
	if !s.samePattern(m) {
		return nil, errors.New("sparse: BlockSymbolic.Analyze: the matrix's block pattern is not the one analysed")
	}
	if err := orderErr(m.N * m.B); err != nil {
		return nil, fmt.Errorf("sparse: BlockSymbolic.Analyze: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.made; c != nil && c.n == m.N*m.B {
		return c.sameAnalysis(), nil
	}
	c := s.cholesky(m)
	s.made = c.sameAnalysis()
	s.made.x = nil // only copied from: never solves
	return c, nil
}

// samePattern reports whether m's block pattern is the one s analysed.
func (s *BlockSymbolic) samePattern(m *BlockSym) bool {
	nb := m.N
	if len(s.order) != nb || len(m.RowPtr) != len(s.rowPtr) {
		return false
	}
	nnz := m.RowPtr[nb]
	if len(s.colIdx) < nnz {
		return false
	}
	if &m.RowPtr[0] == &s.rowPtr[0] && (nnz == 0 || &m.ColIdx[0] == &s.colIdx[0]) {
		return true // the same slices (the Hessian shares Q's)
	}
	for i, v := range m.RowPtr {
		if s.rowPtr[i] != v {
			return false
		}
	}
	for k, v := range m.ColIdx[:nnz] {
		if s.colIdx[k] != v {
			return false
		}
	}
	return true
}

// analyzePattern is AnalyzeBlockPattern for m and perm already checked.
func analyzePattern(m *BlockSym, perm []int) *BlockSymbolic {
	b, nb := m.B, m.N
	xadj, adj := blockGraph(m, 0)

	// Block elimination tree, postorder, and the tree again in postorder
	// (as the scalar analysis does).
	order := make([]int, nb)
	for k := range order {
		order[k] = perm[k*b] / b
	}
	pos := make([]int, nb)
	parentB := blockEtree(xadj, adj, order, pos)
	post := postorder(parentB)
	for k, p := range post {
		post[k] = order[p]
	}
	order = post
	parentB = blockEtree(xadj, adj, order, pos)
	cnt := blockColCounts(xadj, adj, order)

	// Block structures of L below the diagonal, in pivot order, from the
	// leaves up: column K holds A's blocks below K and its children's
	// structures below K (children precede parents in postorder).
	chead := make([]int, nb)
	cnext := make([]int, nb)
	for k := range chead {
		chead[k] = -1
	}
	for k := nb - 1; k >= 0; k-- {
		if p := parentB[k]; p >= 0 {
			cnext[k] = chead[p]
			chead[p] = k
		}
	}
	sptr := make([]int, nb+1)
	for k := 0; k < nb; k++ {
		sptr[k+1] = sptr[k] + cnt[k] - 1
	}
	sidx := make([]int, sptr[nb])
	mark := make([]int, nb)
	for k := range mark {
		mark[k] = -1
	}
	for k := 0; k < nb; k++ {
		mark[k] = k
		top := sptr[k]
		add := func(i int) {
			if i > k && mark[i] != k {
				mark[i] = k
				sidx[top] = i
				top++
			}
		}
		for _, u := range adj[xadj[order[k]]:xadj[order[k]+1]] {
			add(pos[u])
		}
		for ch := chead[k]; ch != -1; ch = cnext[ch] {
			for _, i := range sidx[sptr[ch]:sptr[ch+1]] {
				add(i)
			}
		}
		if top != sptr[k+1] {
			panic("sparse: block structure disagrees with the block column counts")
		}
		sort.Ints(sidx[sptr[k]:top])
	}
	return &BlockSymbolic{rowPtr: m.RowPtr, colIdx: m.ColIdx, order: order, parent: parentB, cnt: cnt, sptr: sptr, sidx: sidx}
}

// cholesky makes the analysis of m (s's pattern, block size m.B) from s:
// the scalar tree, counts and supernodes, which grow with the block size.
func (s *BlockSymbolic) cholesky(m *BlockSym) *Cholesky {
	b, nb := m.B, m.N
	n := nb * b
	order, parentB, cnt, sptr, sidx := s.order, s.parent, s.cnt, s.sptr, s.sidx
	c := &Cholesky{n: n, perm: expandBlockOrder(order, b), pinv: make([]int32, n),
		bb: b, bparent: parentB, bcnt: cnt, x: make([]float64, n)}
	for k, i := range c.perm {
		c.pinv[i] = int32(k)
	}
	// The scalar tree and counts (parentOf, count): within a block each
	// column's parent is the next, and the last column's is the first of
	// the parent block's; column t of a block has t fewer entries than
	// its first.
	for kb := 0; kb < nb; kb++ {
		c.nnz += b*b*cnt[kb] - b*(b-1)/2
	}

	// Supernodes as the scalar analysis makes them; the rows below a
	// supernode's last column l are the rest of l's block, then the
	// expanded structure of that block.
	sn := partitionSupernodes(c)
	ns := len(sn.first) - 1
	sn.rowPtr = make([]int, ns+1)
	sn.valPtr = make([]int, ns+1)
	for s := 0; s < ns; s++ {
		nc := sn.first[s+1] - sn.first[s]
		nr := nc + c.count(sn.first[s+1]-1) - 1
		sn.rowPtr[s+1] = sn.rowPtr[s] + nr
		sn.valPtr[s+1] = sn.valPtr[s] + nr*nc
	}
	sn.rows = make([]int32, 0, sn.rowPtr[ns])
	for s := 0; s < ns; s++ {
		f, l := sn.first[s], sn.first[s+1]-1
		for j := f; j < (l/b+1)*b; j++ {
			sn.rows = append(sn.rows, int32(j))
		}
		lb := l / b
		for _, i := range sidx[sptr[lb]:sptr[lb+1]] {
			for t := 0; t < b; t++ {
				sn.rows = append(sn.rows, int32(i*b+t))
			}
		}
		if len(sn.rows) != sn.rowPtr[s+1] {
			panic("sparse: supernode structure disagrees with the column counts")
		}
	}

	// No vmap: FactorizeBlocks assembles each supernode from m itself
	// (assembleNode), and Factorize on a CSC builds one on first use. The
	// block signature spares FactorizeBlocks a pass over every scalar
	// entry; the scalar pattern's hash, which Factorize checks a CSC
	// against, is computed when that first happens (lowerBlockHash).
	c.aNNZ, c.aHashOf = lowerCSCEntries(m, 0), &BlockSym{N: m.N, B: m.B, RowPtr: m.RowPtr, ColIdx: m.ColIdx}
	c.bsig, c.bsigOK = blockSignature(m), true
	sparent, shead, snext := supernodeTree(c, sn)
	sn.finish(sparent, shead, snext)
	c.sn = sn
	return c
}

// blockEtree returns the elimination tree of the block graph (xadj, adj)
// eliminated in order (parent[k] for the k-th block, -1 for a root; Liu's
// algorithm with path compression) and sets pos to the inverse of order.
func blockEtree(xadj, adj, order, pos []int) []int {
	n := len(order)
	for k, i := range order {
		pos[i] = k
	}
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
	return parent
}

// lowerBlockHash returns the number of entries of LowerCSC(m, ., 0) and
// the hash of their pattern (patternHash of that CSC), visiting the
// entries in LowerCSC's order without forming it.
func lowerBlockHash(m *BlockSym) (nnz int, h uint64) {
	b := m.B
	h = hashSeed
	for j := 0; j < m.N; j++ {
		for cc := 0; cc < b; cc++ {
			h = hashMix(h, colMarker(j*b+cc))
			for k := m.RowPtr[j]; k < m.RowPtr[j+1]; k++ {
				i := m.ColIdx[k]
				if i < j {
					continue
				}
				a0 := 0
				if i == j {
					a0 = cc
				}
				for a := a0; a < b; a++ {
					h = hashMix(h, i*b+a)
				}
				nnz += b - a0
			}
		}
	}
	return nnz, h
}

// blockSignature hashes m's block pattern (order, block size, row
// pointers, column indices): equal signatures mean equal scalar patterns,
// for a pass over the blocks instead of the b^2 times longer one over
// their entries.
func blockSignature(m *BlockSym) uint64 {
	h := hashMix(hashMix(hashSeed, m.N), m.B)
	for j := 0; j < m.N; j++ {
		h = hashMix(h, colMarker(j))
		for _, i := range m.ColIdx[m.RowPtr[j]:m.RowPtr[j+1]] {
			h = hashMix(h, i)
		}
	}
	return h
}

// lowerCSCEntries is the number of entries of LowerCSC(m, shift, drop).
func lowerCSCEntries(m *BlockSym, drop int) int {
	b, nnz := m.B, 0
	for j := drop; j < m.N; j++ {
		for k := m.RowPtr[j]; k < m.RowPtr[j+1]; k++ {
			switch i := m.ColIdx[k]; {
			case i == j:
				nnz += b * (b + 1) / 2
			case i > j:
				nnz += b * b
			}
		}
	}
	return nnz
}

// blockPermOK reports whether perm is a permutation of nb blocks of b
// scalars that keeps each block together and in order.
func blockPermOK(perm []int, b, nb int) bool {
	if b <= 0 || len(perm) != nb*b {
		return false
	}
	seen := make([]bool, nb)
	for k := 0; k < nb; k++ {
		p0 := perm[k*b]
		if p0 < 0 || p0%b != 0 || p0/b >= nb || seen[p0/b] {
			return false
		}
		seen[p0/b] = true
		for t := 1; t < b; t++ {
			if perm[k*b+t] != p0+t {
				return false
			}
		}
	}
	return true
}

// blockShapeErr reports what makes m unreadable as a block matrix: sizes,
// row pointers or column indices out of range.
func blockShapeErr(m *BlockSym) error {
	if err := blockPatternErr(m); err != nil {
		return err
	}
	if nnz := m.RowPtr[m.N]; len(m.Val) < nnz*m.B*m.B {
		return fmt.Errorf("%d blocks but %d values", nnz, len(m.Val))
	}
	return nil
}

// blockPatternErr is blockShapeErr for the pattern alone: the values are
// not checked.
func blockPatternErr(m *BlockSym) error {
	nb := m.N
	if nb < 0 || m.B <= 0 {
		return fmt.Errorf("block matrix of %d blocks of size %d", nb, m.B)
	}
	if len(m.RowPtr) != nb+1 || m.RowPtr[0] != 0 {
		return fmt.Errorf("%d row pointers for %d block rows", len(m.RowPtr), nb)
	}
	for i := 0; i < nb; i++ {
		if m.RowPtr[i+1] < m.RowPtr[i] {
			return fmt.Errorf("row pointers decrease at block row %d", i)
		}
	}
	nnz := m.RowPtr[nb]
	if len(m.ColIdx) < nnz {
		return fmt.Errorf("%d blocks but %d column indices", nnz, len(m.ColIdx))
	}
	for k, j := range m.ColIdx[:nnz] {
		if j < 0 || j >= nb {
			return fmt.Errorf("column index %d at position %d out of range", j, k)
		}
	}
	return nil
}

// blockSymOK reports whether m's block pattern (shape already checked) is
// what the block analysis assumes: every row sorted, without repeats and
// with its diagonal block, and the pattern symmetric ((i, j) stored iff
// (j, i) is). LowerCSC reads only the upper blocks, so for any other m the
// scalar analysis is the reference and AnalyzeBlocks defers to it.
func blockSymOK(m *BlockSym) bool {
	nb := m.N
	nnz := m.RowPtr[nb]
	// The transpose's rows (tptr, tidx) by counting; then row i of m and
	// row i of its transpose must hold the same set.
	tptr := make([]int, nb+1)
	for _, j := range m.ColIdx[:nnz] {
		tptr[j+1]++
	}
	for i := 0; i < nb; i++ {
		tptr[i+1] += tptr[i]
	}
	tidx := make([]int, nnz)
	next := append([]int(nil), tptr[:nb]...)
	for i := 0; i < nb; i++ {
		for _, j := range m.ColIdx[m.RowPtr[i]:m.RowPtr[i+1]] {
			tidx[next[j]] = i
			next[j]++
		}
	}
	mark := make([]int, nb)
	for i := range mark {
		mark[i] = -1
	}
	for i := 0; i < nb; i++ {
		row := m.ColIdx[m.RowPtr[i]:m.RowPtr[i+1]]
		if len(row) != tptr[i+1]-tptr[i] {
			return false
		}
		diag := false
		for t, j := range row {
			if t > 0 && j <= row[t-1] {
				return false // unsorted or repeated
			}
			mark[j] = i
			diag = diag || j == i
		}
		if !diag {
			return false
		}
		for _, j := range tidx[tptr[i]:tptr[i+1]] {
			if mark[j] != i {
				return false
			}
		}
	}
	return true
}

// sameAnalysis returns a Cholesky with c's analysis (the order, the trees,
// the supernodes and the factorization's schedule), which it shares with c
// and never changes, and its own values and work space, none made yet: a
// factorization of either is then what a fresh analysis's would be, bit
// for bit, and neither disturbs the other. c must be a block analysis
// (BlockSymbolic.cholesky's), not yet factored.
func (c *Cholesky) sameAnalysis() *Cholesky {
	sn := c.sn
	return &Cholesky{
		n: c.n, perm: c.perm, pinv: c.pinv,
		aNNZ: c.aNNZ, aHashOf: c.aHashOf, bsig: c.bsig, bsigOK: c.bsigOK,
		nnz: c.nnz, bb: c.bb, bparent: c.bparent, bcnt: c.bcnt,
		x: make([]float64, c.n),
		sn: &supernodes{
			first: sn.first, super: sn.super, rowPtr: sn.rowPtr, rows: sn.rows, valPtr: sn.valPtr,
			stored: sn.stored, tasks: sn.tasks, top: sn.top,
			xtasks: sn.xtasks, xtop: sn.xtop, refPos: sn.refPos,
		},
	}
}
