package sparse

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// A domain-decomposition Cholesky factors a symmetric block matrix A whose
// blocks are split among parts (a distributed run's agents) in the order
// interiors first: a part's interior blocks couple only to its own blocks,
// its boundary blocks may couple to other parts' boundary blocks. With the
// interiors eliminated first,
//
//	A = [A_II A_IB; A_BI A_BB] = L L^T,  L = [L_I 0; A_BI L_I^-T L_B],
//
// where L_I is the block-diagonal factor of the interiors (one factor per
// part, independent of the others) and L_B the factor of the boundary
// system T = A_BB - sum_k A_B,I_k A_I_k^-1 A_I_k,B. Part k's term of that
// sum involves only its own boundary blocks, so each part sends a dense
// matrix over its boundary and nothing else. This is the Cholesky
// factorization of A in that order, split into its independent pieces; its
// pivots are the interior factors' and the boundary factor's, and A is
// positive definite exactly when all of them are positive. The pieces are
// factored by this package's one sparse Cholesky (no second
// factorization): the interiors as they are, the boundary system as a
// sparse block matrix over all boundary blocks.
//
// The pivot test of a factorization of A is relative to A's largest
// diagonal entry (PivotTol). A part sees only its own rows and the
// boundary system has diagonal entries below A's (T_jj = A_jj minus a
// positive quantity when the interiors are positive definite), so each
// piece is factored with its own, smaller threshold, and reports its
// smallest pivot and largest diagonal entry; the test against the global
// threshold is then made where everything is summed (DomainCholesky, or a
// distributed coordinator). A pivot rejected by a piece's smaller
// threshold is rejected by the global one too, so the decision is the one
// a factorization of A in this order with A's own threshold makes.

// SchurPart is one part's share of a domain-decomposition Cholesky: the
// factor of its interior block and the Schur complement of that block on
// its boundary. The part's matrix holds its blocks, the first nInterior of
// them its interior, the others its boundary, with every block between
// them that A has (its principal submatrix of A).
type SchurPart struct {
	b, nI, nB int
	inner     *BlockSym // A_II
	innerSrc  []int     // block position in the part's matrix of each of inner's blocks
	chol      *Cholesky // of A_II (nil without interior)
	// coup[j] lists the interior blocks coupled to boundary block j, with
	// the position of block (nI+j, i) in the part's matrix; coupVal holds
	// copies of those blocks from the last Factorize (for the solves).
	coup    [][]coupling
	coupVal []float64
	// bb lists the positions of blocks (nI+j, nI+j') of the part's matrix.
	bb []bbEntry
	wr *schurReach // W's structure, made by the first Factorize
	// minPivot and maxDiag are the last Factorize's smallest interior
	// pivot (+Inf without interior) and largest |diagonal entry| of the
	// whole part.
	minPivot, maxDiag float64
	minCol            int
}

type coupling struct{ i, k, v int } // interior block, position in the part's matrix, offset in coupVal

type bbEntry struct{ j, jj, k int }

// NewSchurPart analyses a part's matrix a (nInterior interior blocks first;
// a's pattern must be that of every matrix later factored).
func NewSchurPart(a *BlockSym, nInterior int) (*SchurPart, error) {
	if a == nil || nInterior < 0 || nInterior > a.N {
		return nil, errors.New("sparse: NewSchurPart: nil matrix or interior count out of range")
	}
	if err := blockShapeErr(a); err != nil {
		return nil, fmt.Errorf("sparse: NewSchurPart: %w", err)
	}
	b, nI := a.B, nInterior
	p := &SchurPart{b: b, nI: nI, nB: a.N - nI, coup: make([][]coupling, a.N-nI)}
	bb := NewBlockBuilder(nI, b)
	zero := make([]float64, b*b)
	for i := 0; i < a.N; i++ {
		for k := a.RowPtr[i]; k < a.RowPtr[i+1]; k++ {
			j := a.ColIdx[k]
			switch {
			case i < nI && j < nI:
				if j < i {
					bb.AddOff(i, j, zero)
				}
			case i >= nI && j < nI:
				p.coup[i-nI] = append(p.coup[i-nI], coupling{i: j, k: k, v: len(p.coupVal)})
				p.coupVal = append(p.coupVal, zero...)
			case i >= nI && j >= nI:
				p.bb = append(p.bb, bbEntry{j: i - nI, jj: j - nI, k: k})
			}
		}
	}
	if nI > 0 {
		p.inner = bb.Build()
		p.innerSrc = make([]int, len(p.inner.ColIdx))
		for i := 0; i < nI; i++ {
			for k := p.inner.RowPtr[i]; k < p.inner.RowPtr[i+1]; k++ {
				p.innerSrc[k] = a.Find(i, p.inner.ColIdx[k])
			}
		}
		chol, err := AnalyzeBlocks(p.inner, BlockAMD(p.inner, 0))
		if err != nil {
			return nil, fmt.Errorf("sparse: NewSchurPart: analysing the interior: %w", err)
		}
		p.chol = chol
	}
	return p, nil
}

// Boundary is the number of boundary blocks; Interior of interior ones.
func (p *SchurPart) Boundary() int { return p.nB }

// Interior is the number of interior blocks.
func (p *SchurPart) Interior() int { return p.nI }

// Factorize factors a's interior block (with the threshold of a alone) and
// sets t, row-major of order Boundary()*b, to the Schur complement
// A_BB - A_BI A_II^-1 A_IB, computed as A_BB - W^T W with
// W = L_I^-1 P A_IB (by forward solves on each column's reach), exactly
// symmetric. On a failed pivot it returns a
// *NotPositiveDefiniteError whose Column is a's coordinate. MinPivot and
// MaxDiag report what the global test needs.
func (p *SchurPart) Factorize(t []float64, a *BlockSym) error {
	b, nI, nB := p.b, p.nI, p.nB
	m := nB * b
	if len(t) < m*m {
		return fmt.Errorf("sparse: SchurPart.Factorize: %d entries for a Schur complement of order %d", len(t), m)
	}
	p.maxDiag, p.minPivot, p.minCol = 0, math.Inf(1), -1
	for i := 0; i < a.N; i++ {
		blk := a.Block(a.Diag[i])
		for e := 0; e < b; e++ {
			if v := math.Abs(blk[e*b+e]); v > p.maxDiag || math.IsNaN(v) {
				p.maxDiag = v
			}
		}
	}
	for _, cs := range p.coup {
		for _, c := range cs {
			copy(p.coupVal[c.v:c.v+b*b], a.Block(c.k))
		}
	}
	t = t[:m*m]
	clear(t)
	for _, e := range p.bb {
		blk := a.Block(e.k)
		for r := 0; r < b; r++ {
			for c := 0; c < b; c++ {
				t[(e.j*b+r)*m+e.jj*b+c] = blk[r*b+c]
			}
		}
	}
	if nI == 0 {
		return nil
	}
	for k, src := range p.innerSrc {
		copy(p.inner.Block(k), a.Block(src))
	}
	if err := p.chol.FactorizeBlocks(p.inner, 0); err != nil {
		var npd *NotPositiveDefiniteError
		if errors.As(err, &npd) {
			return &NotPositiveDefiniteError{Column: npd.Column, Pivot: npd.Pivot}
		}
		return err
	}
	p.minCol, p.minPivot = p.chol.MinPivot()
	p.complement(t)
	return nil
}

// complement subtracts W^T W from t, W = L_I^-1 P A_IB: the Schur
// complement as the factorization of the whole part in this order
// computes it (the rows of L below the interior are W^T), with the
// rounding of one triangular solve. Boundary blocks with no interior
// neighbour have zero columns and are left out.
//
// W is stored by supernode of L_I (schurReach): column q of W is nonzero
// only on the supernodes its right-hand side's rows reach in the
// elimination tree (the forward solve leaves the other rows exactly
// zero), so W takes nnz of its reach, not n_I b times its columns (a
// dense W was 190 MB for a part of 12,000 interior and 125 boundary
// poses in 3-D). A_IB's columns go through the forward solve schurChunk
// at a time, on the supernodes they reach only; W's values are the same
// however the columns are grouped, equal to a whole forward solve's to the
// bit when the solve's schedule does not split the factor and to rounding
// when it does (TestSchurPartComplement), and W^T W is the sum over the supernodes s of W_s^T W_s, each product by
// the factorization's kernel (gemmNT) and subtracted from t in increasing
// s, as a left-looking factorization subtracts its descendants' updates;
// one triangle of each product is subtracted from both of t's, so t is
// exactly symmetric (as A_BB is).
func (p *SchurPart) complement(t []float64) {
	b, m := p.b, p.nB*p.b
	r := p.reach()
	nc := len(r.bcols) * b
	if nc == 0 {
		return
	}
	w := p.packedW(r)
	prod := make([]float64, r.maxCols*b*r.maxCols*b)
	for s := 0; s+1 < len(r.first); s++ {
		cs := r.cols[r.colPtr[s]:r.colPtr[s+1]]
		if len(cs) == 0 {
			continue
		}
		ms, ns := len(cs)*b, r.first[s+1]-r.first[s]
		ws := w[r.valPtr[s]:r.valPtr[s+1]] // W_s^T, row-major: ms rows of ns
		gemmNT(ms, ms, ns, 1, ws, ns, ws, ns, 0, prod[:ms*ms], ms)
		// One triangle of the product, subtracted from both of t's: t
		// stays as symmetric as A_BB.
		for x1 := 0; x1 < ms; x1++ {
			c1 := r.bcols[cs[x1/b]]*b + x1%b
			for x2 := 0; x2 < x1; x2++ {
				c2 := r.bcols[cs[x2/b]]*b + x2%b
				v := prod[x1*ms+x2]
				t[c1*m+c2] -= v
				t[c2*m+c1] -= v
			}
			t[c1*m+c1] -= prod[x1*ms+x1]
		}
	}
}

// packedW returns W = L_I^-1 P A_IB stored by r (see schurReach), from the
// last Factorize. A group of schurChunk columns at a time, the forward
// solve runs on the supernodes their columns reach only
// (supernodes.forwardNodes), not on the whole of L_I: every group reaches
// the top separators, but not the other groups' subtrees.
func (p *SchurPart) packedW(r *schurReach) []float64 {
	b := p.b
	nc := len(r.bcols) * b
	n := p.nI * b
	w := make([]float64, r.valPtr[len(r.valPtr)-1])
	chunk := min(nc, schurChunk)
	pinv := p.chol.pinv
	y := make([]float64, n*chunk) // interleaved, pivot order; zero outside the last group's reach
	ns := len(r.first) - 1
	mark := make([]int, ns)
	for s := range mark {
		mark[s] = -1
	}
	var nodes []int32
	for q0 := 0; q0 < nc; q0 += chunk {
		k := min(chunk, nc-q0)
		nodes = nodes[:0]
		for q := q0; q < q0+k; q++ {
			jb, e := q/b, q%b
			for x := r.reachPtr[jb]; x < r.reachPtr[jb+1]; x++ {
				if s := r.reachNode[x]; mark[s] != q0 {
					mark[s] = q0
					nodes = append(nodes, s)
				}
			}
			j, t := r.bcols[jb], q-q0
			for _, c := range p.coup[j] {
				blk := p.coupVal[c.v : c.v+b*b] // block (j, i): row e is column e of A_IB's block (i, j)
				for f := 0; f < b; f++ {
					y[int(pinv[c.i*b+f])*k+t] = blk[e*b+f]
				}
			}
		}
		slices.Sort(nodes)
		p.chol.sn.forwardNodes(y[:n*k], k, nodes)
		for q := q0; q < q0+k; q++ {
			jb, e, t := q/b, q%b, q-q0
			for x := r.reachPtr[jb]; x < r.reachPtr[jb+1]; x++ {
				s, pos := int(r.reachNode[x]), int(r.reachPos[x])
				f, l := r.first[s], r.first[s+1]
				dst := w[r.valPtr[s]+(pos*b+e)*(l-f):]
				for i := f; i < l; i++ {
					dst[i-f] = y[i*k+t]
				}
			}
		}
		for _, s := range nodes {
			clear(y[r.first[s]*k : r.first[s+1]*k])
		}
	}
	return w
}

// schurChunk is the number of A_IB's columns SchurPart.Factorize solves
// at a time: the forward solve's own group of right-hand sides
// (manyBlock, the most supernodes.forwardNodes takes), so that its work
// space stays that of one group.
const schurChunk = manyBlock

// schurReach is the structure of W = L_I^-1 P A_IB by supernode of L_I,
// from the pattern alone (made once, by the first Factorize). The
// right-hand side of boundary block j's columns is nonzero on the rows of
// its interior neighbours, and the forward solve fills, from there, the
// rows of the supernodes on their paths to the root of the supernodal
// elimination tree: j's reach. W's values are stored node by node: for
// supernode s, the columns of the boundary blocks that reach it,
// cols[colPtr[s]:colPtr[s+1]] (increasing), as a row-major block of
// len(cols) b rows (W's columns) by the node's columns
// first[s]..first[s+1]-1 (W's rows, in pivot order), at
// valPtr[s]:valPtr[s+1].
type schurReach struct {
	first          []int   // supernode s holds pivot rows first[s]..first[s+1]-1
	bcols          []int   // boundary blocks with an interior neighbour: W's column blocks
	colPtr, valPtr []int   // per supernode
	cols           []int32 // indices into bcols
	maxCols        int     // the most column blocks reaching one supernode
	// The reach of bcols[jb]: supernodes reachNode[reachPtr[jb]:reachPtr[jb+1]],
	// at position reachPos in each one's cols.
	reachPtr            []int
	reachNode, reachPos []int32
}

// reach returns W's structure, made on first use.
func (p *SchurPart) reach() *schurReach {
	if p.wr != nil {
		return p.wr
	}
	b := p.b
	first, parent := p.chol.sn.first, superParents(p.chol)
	ns := len(first) - 1
	node := make([]int32, p.nI*b) // pivot row -> node
	for s := 0; s < ns; s++ {
		for i := first[s]; i < first[s+1]; i++ {
			node[i] = int32(s)
		}
	}
	pinv := p.chol.pinv
	r := &schurReach{first: first, colPtr: make([]int, ns+1), valPtr: make([]int, ns+1)}
	mark := make([]int, ns)
	for s := range mark {
		mark[s] = -1
	}
	var reachNode []int32
	r.reachPtr = []int{0}
	for j, cs := range p.coup {
		if len(cs) == 0 {
			continue
		}
		jb := len(r.bcols)
		r.bcols = append(r.bcols, j)
		for _, c := range cs {
			for f := 0; f < b; f++ {
				for s := int(node[pinv[c.i*b+f]]); s != -1 && mark[s] != jb; s = parent[s] {
					mark[s] = jb
					reachNode = append(reachNode, int32(s))
					r.colPtr[s+1]++
				}
			}
		}
		r.reachPtr = append(r.reachPtr, len(reachNode))
	}
	for s := 0; s < ns; s++ {
		cnt := r.colPtr[s+1]
		r.maxCols = max(r.maxCols, cnt)
		r.valPtr[s+1] = r.valPtr[s] + cnt*b*(first[s+1]-first[s])
		r.colPtr[s+1] += r.colPtr[s]
	}
	// Columns of each node in increasing jb, as they were found.
	r.cols = make([]int32, len(reachNode))
	r.reachPos = make([]int32, len(reachNode))
	next := append([]int(nil), r.colPtr[:ns]...)
	for jb := range r.bcols {
		for x := r.reachPtr[jb]; x < r.reachPtr[jb+1]; x++ {
			s := reachNode[x]
			r.cols[next[s]] = int32(jb)
			r.reachPos[x] = int32(next[s] - r.colPtr[s])
			next[s]++
		}
	}
	r.reachNode = reachNode
	p.wr = r
	return r
}

// WStats reports the size of W = L_I^-1 P A_IB as the last Factorize
// stored it (by its reach) and as a dense matrix would: its n_I b rows
// times the columns of the boundary blocks with an interior neighbour.
// Both are 0 before the first Factorize or without interior.
func (p *SchurPart) WStats() (stored, dense int) {
	if p.wr == nil {
		return 0, 0
	}
	return p.wr.valPtr[len(p.wr.valPtr)-1], p.nI * p.b * len(p.wr.bcols) * p.b
}

// MinPivot returns the last Factorize's smallest interior pivot and its
// coordinate in the part's matrix (+Inf and -1 without interior).
func (p *SchurPart) MinPivot() (col int, pivot float64) { return p.minCol, p.minPivot }

// MaxDiag returns the largest |diagonal entry| of the last factored matrix.
func (p *SchurPart) MaxDiag() float64 { return p.maxDiag }

// SolveInterior sets x_I = A_II^-1 b_I (vectors over the interior
// coordinates), from the last successful Factorize.
func (p *SchurPart) SolveInterior(x, b []float64) {
	if p.nI > 0 {
		p.chol.Solve(x, b)
	}
}

// SubCoupling sets dst_B -= A_BI x_I (dst over the boundary coordinates,
// x over the interior ones), with the last Factorize's values.
func (p *SchurPart) SubCoupling(dst, x []float64) {
	b := p.b
	for j, cs := range p.coup {
		for _, c := range cs {
			blk := p.coupVal[c.v : c.v+b*b]
			for r := 0; r < b; r++ {
				s := 0.0
				for f := 0; f < b; f++ {
					s += blk[r*b+f] * x[c.i*b+f]
				}
				dst[j*b+r] -= s
			}
		}
	}
}

// SubCouplingT sets dst_I -= A_IB x_B (dst over the interior coordinates,
// x over the boundary ones).
func (p *SchurPart) SubCouplingT(dst, x []float64) {
	b := p.b
	for j, cs := range p.coup {
		for _, c := range cs {
			blk := p.coupVal[c.v : c.v+b*b]
			for f := 0; f < b; f++ {
				s := 0.0
				for r := 0; r < b; r++ {
					s += blk[r*b+f] * x[j*b+r]
				}
				dst[c.i*b+f] -= s
			}
		}
	}
}

// BoundarySystem is the coordinator's share of a domain-decomposition
// Cholesky: the sum of the parts' Schur complements and the blocks that
// couple boundary blocks of different parts, and its factor. Its blocks
// are the boundary blocks of every part, numbered 0..n-1.
type BoundarySystem struct {
	b     int
	m     *BlockSym
	nval  int // len(m.Val), for a Reset after Release
	chol  *Cholesky
	parts [][]int
}

// NewBoundarySystem analyses the boundary system of n blocks of size b:
// parts[k] lists part k's boundary blocks in the order of its Schur
// complement (each block in one part), edges the pairs of blocks of
// different parts that A couples, and last is the block the factor
// eliminates last.
func NewBoundarySystem(n, b int, parts [][]int, edges [][2]int, last int) (*BoundarySystem, error) {
	if last < 0 || last >= n {
		return nil, fmt.Errorf("sparse: NewBoundarySystem: last block %d of %d", last, n)
	}
	bb := NewBlockBuilder(n, b)
	zero := make([]float64, b*b)
	seen := make(map[[2]int]bool)
	add := func(i, j int) error {
		if i < 0 || j < 0 || i >= n || j >= n {
			return fmt.Errorf("sparse: NewBoundarySystem: block (%d, %d) of %d", i, j, n)
		}
		if i == j {
			return nil
		}
		if i < j {
			i, j = j, i
		}
		if !seen[[2]int{i, j}] {
			seen[[2]int{i, j}] = true
			bb.AddOff(i, j, zero)
		}
		return nil
	}
	owner := make([]int, n)
	for i := range owner {
		owner[i] = -1
	}
	for k, ps := range parts {
		for x, i := range ps {
			if i < 0 || i >= n || owner[i] >= 0 {
				return nil, fmt.Errorf("sparse: NewBoundarySystem: block %d of part %d is out of range or in two parts", i, k)
			}
			owner[i] = k
			for _, j := range ps[:x] {
				if err := add(i, j); err != nil {
					return nil, err
				}
			}
		}
	}
	for _, e := range edges {
		if err := add(e[0], e[1]); err != nil {
			return nil, err
		}
	}
	m := bb.Build()
	order := BlockAMD(m, 0)
	perm := make([]int, 0, n*b)
	for _, p := range order {
		if p/b != last {
			perm = append(perm, p)
		}
	}
	for a := 0; a < b; a++ {
		perm = append(perm, last*b+a)
	}
	chol, err := AnalyzeBlocks(m, perm)
	if err != nil {
		return nil, fmt.Errorf("sparse: NewBoundarySystem: %w", err)
	}
	return &BoundarySystem{b: b, m: m, nval: len(m.Val), chol: chol, parts: parts}, nil
}

// Reset zeroes the system before the parts' contributions are added.
func (s *BoundarySystem) Reset() {
	if s.m.Val == nil {
		s.m.Val = make([]float64, s.nval) // Released
		return
	}
	clear(s.m.Val)
}

// Release lets go of the system's values and its factor's (Cholesky.Release),
// keeping the analysis: the next Reset and Factorize make them again.
// Between two certificates the coordinator holds nothing it would solve
// with, and the values of a boundary system of a thousand poses are tens
// of megabytes.
func (s *BoundarySystem) Release() {
	s.m.Val = nil
	s.chol.Release()
}

// AddPart adds part k's Schur complement t (row-major, of order
// len(parts[k])*b).
func (s *BoundarySystem) AddPart(k int, t []float64) {
	b, ps := s.b, s.parts[k]
	m := len(ps) * b
	for x, i := range ps {
		for y, j := range ps {
			blk := s.m.Block(s.m.Find(i, j))
			for r := 0; r < b; r++ {
				for c := 0; c < b; c++ {
					blk[r*b+c] += t[(x*b+r)*m+y*b+c]
				}
			}
		}
	}
}

// AddOff adds blk to block (i, j) and its transpose to (j, i), blocks of
// different parts that NewBoundarySystem was given as an edge.
func (s *BoundarySystem) AddOff(i, j int, blk []float64) error {
	k1, k2 := s.m.Find(i, j), s.m.Find(j, i)
	if i == j || k1 < 0 || k2 < 0 {
		return fmt.Errorf("sparse: BoundarySystem.AddOff: block (%d, %d) is not in the pattern", i, j)
	}
	b := s.b
	d1, d2 := s.m.Block(k1), s.m.Block(k2)
	for r := 0; r < b; r++ {
		for c := 0; c < b; c++ {
			d1[r*b+c] += blk[r*b+c]
			d2[c*b+r] += blk[r*b+c]
		}
	}
	return nil
}

// Factorize factors the system (with its own threshold, see the package's
// note above SchurPart): a *NotPositiveDefiniteError names the failing
// coordinate of the system.
func (s *BoundarySystem) Factorize() error { return s.chol.FactorizeBlocks(s.m, 0) }

// MinPivot returns the factor's smallest pivot and its coordinate.
func (s *BoundarySystem) MinPivot() (col int, pivot float64) { return s.chol.MinPivot() }

// Solve sets x = T^-1 y over the boundary coordinates.
func (s *BoundarySystem) Solve(x, y []float64) { s.chol.Solve(x, y) }

// Blocks is the number of the system's blocks.
func (s *BoundarySystem) Blocks() int { return s.m.N }

// DomainCholesky is a domain-decomposition Cholesky of a whole matrix in
// one process: the parts' matrices are cut out of it, and the parts and
// the boundary system are factored in turn. It is the reference the
// distributed factorization is tested against, and the proof a solver
// that holds the whole matrix can make in a partition's order.
type DomainCholesky struct {
	n, b   int
	ref    float64
	parts  []*SchurPart
	locals []*BlockSym
	src    [][]int // position in the whole matrix of each of a local's blocks
	blocks [][]int // the whole matrix's blocks of each part, in the local order
	bnd    *BoundarySystem
	bndOf  []int // boundary index of each block of the whole matrix, -1 inside
	cross  []crossEntry
	schur  [][]float64
	// Work space of Solve.
	xb, yb []float64
	xi, yi [][]float64
	bk     [][]float64 // per part, over its boundary
	// minPivot is the last Factorize's smallest pivot.
	minPivot float64
}

type crossEntry struct{ i, j, k int } // boundary indices and the position of block (i, j), i > j

// NewDomainCholesky analyses m split by part (part[i] is block i's part,
// 0..K-1). A block is a boundary block when m couples it to another
// part's block or when extra[i] is true (extra may be nil); last, which
// must be a boundary block (it is made one), is eliminated last.
func NewDomainCholesky(m *BlockSym, part []int, extra []bool, last int) (*DomainCholesky, error) {
	if m == nil || len(part) != m.N || last < 0 || last >= m.N {
		return nil, errors.New("sparse: NewDomainCholesky: nil matrix, or a partition or last block that does not fit it")
	}
	K := 0
	for _, k := range part {
		if k < 0 {
			return nil, fmt.Errorf("sparse: NewDomainCholesky: part %d", k)
		}
		K = max(K, k+1)
	}
	bnd := make([]bool, m.N)
	bnd[last] = true
	for i := 0; i < m.N; i++ {
		if extra != nil && extra[i] {
			bnd[i] = true
		}
		for k := m.RowPtr[i]; k < m.RowPtr[i+1]; k++ {
			if part[m.ColIdx[k]] != part[i] {
				bnd[i] = true
			}
		}
	}
	d := &DomainCholesky{n: m.N, b: m.B, bndOf: make([]int, m.N)}
	d.blocks = make([][]int, K)
	for _, inside := range []bool{true, false} {
		for i := 0; i < m.N; i++ {
			if bnd[i] != inside {
				d.blocks[part[i]] = append(d.blocks[part[i]], i)
			}
		}
	}
	nb := 0
	bparts := make([][]int, K)
	for i := range d.bndOf {
		d.bndOf[i] = -1
	}
	for k, bl := range d.blocks {
		for _, i := range bl {
			if bnd[i] {
				d.bndOf[i] = nb
				bparts[k] = append(bparts[k], nb)
				nb++
			}
		}
	}
	var edges [][2]int
	for i := 0; i < m.N; i++ {
		for k := m.RowPtr[i]; k < m.RowPtr[i+1]; k++ {
			j := m.ColIdx[k]
			if j < i && part[j] != part[i] {
				edges = append(edges, [2]int{d.bndOf[i], d.bndOf[j]})
				d.cross = append(d.cross, crossEntry{d.bndOf[i], d.bndOf[j], k})
			}
		}
	}
	var err error
	if d.bnd, err = NewBoundarySystem(nb, m.B, bparts, edges, d.bndOf[last]); err != nil {
		return nil, err
	}
	local := make([]int, m.N)
	for k, bl := range d.blocks {
		for x, i := range bl {
			local[i] = x
		}
		bb := NewBlockBuilder(len(bl), m.B)
		zero := make([]float64, m.B*m.B)
		nI := 0
		for x, i := range bl {
			if !bnd[i] {
				nI++
			}
			for p := m.RowPtr[i]; p < m.RowPtr[i+1]; p++ {
				if j := m.ColIdx[p]; part[j] == k && local[j] < x {
					bb.AddOff(x, local[j], zero)
				}
			}
		}
		a := bb.Build()
		src := make([]int, len(a.ColIdx))
		for x := range bl {
			for p := a.RowPtr[x]; p < a.RowPtr[x+1]; p++ {
				src[p] = m.Find(bl[x], bl[a.ColIdx[p]])
			}
		}
		sp, err := NewSchurPart(a, nI)
		if err != nil {
			return nil, err
		}
		d.parts, d.locals, d.src = append(d.parts, sp), append(d.locals, a), append(d.src, src)
		nbk := sp.Boundary() * m.B
		d.schur = append(d.schur, make([]float64, nbk*nbk))
		d.xi, d.yi = append(d.xi, make([]float64, nI*m.B)), append(d.yi, make([]float64, nI*m.B))
		d.bk = append(d.bk, make([]float64, nbk))
	}
	d.xb, d.yb = make([]float64, nb*m.B), make([]float64, nb*m.B)
	return d, nil
}

// Factorize factors m (the analysed pattern): every part's interior and
// Schur complement, then the boundary system, each pivot tested against
// PivotTol times m's largest |diagonal entry| as a factorization of m
// would. A failure is a *NotPositiveDefiniteError naming m's coordinate.
func (d *DomainCholesky) Factorize(m *BlockSym) error {
	if m.N != d.n || m.B != d.b {
		return errors.New("sparse: DomainCholesky.Factorize: matrix does not match the analysed one")
	}
	b := d.b
	d.ref, d.minPivot = 0, math.Inf(1)
	for k, sp := range d.parts {
		a := d.locals[k]
		for p, s := range d.src[k] {
			copy(a.Block(p), m.Block(s))
		}
		if err := sp.Factorize(d.schur[k], a); err != nil {
			var npd *NotPositiveDefiniteError
			if errors.As(err, &npd) {
				npd.Column = d.blocks[k][npd.Column/b]*b + npd.Column%b
			}
			return err
		}
		d.ref = math.Max(d.ref, sp.MaxDiag())
	}
	thr := d.ref * PivotTol
	for k, sp := range d.parts {
		if col, piv := sp.MinPivot(); col >= 0 && !(piv > thr) {
			return &NotPositiveDefiniteError{Column: d.blocks[k][col/b]*b + col%b, Pivot: piv}
		} else if col >= 0 {
			d.minPivot = math.Min(d.minPivot, piv)
		}
	}
	d.bnd.Reset()
	for k := range d.parts {
		d.bnd.AddPart(k, d.schur[k])
	}
	for _, e := range d.cross {
		if err := d.bnd.AddOff(e.i, e.j, m.Block(e.k)); err != nil {
			return err
		}
	}
	err := d.bnd.Factorize()
	col, piv := -1, 0.0
	var npd *NotPositiveDefiniteError
	switch {
	case errors.As(err, &npd):
		col, piv = npd.Column, npd.Pivot
	case err != nil:
		return err
	default:
		col, piv = d.bnd.MinPivot()
	}
	if err != nil || !(piv > thr) {
		return &NotPositiveDefiniteError{Column: d.boundaryCoord(col), Pivot: piv}
	}
	d.minPivot = math.Min(d.minPivot, piv)
	return nil
}

// boundaryCoord maps a coordinate of the boundary system to m's.
func (d *DomainCholesky) boundaryCoord(c int) int {
	for i, x := range d.bndOf {
		if x == c/d.b {
			return i*d.b + c%d.b
		}
	}
	return -1
}

// MinPivot returns the last successful Factorize's smallest pivot.
func (d *DomainCholesky) MinPivot() float64 { return d.minPivot }

// MaxDiag returns the largest |diagonal entry| of the last factored matrix,
// the scale of the pivot test.
func (d *DomainCholesky) MaxDiag() float64 { return d.ref }

// BoundaryBlocks is the number of blocks of the boundary system.
func (d *DomainCholesky) BoundaryBlocks() int { return d.bnd.Blocks() }

// Solve sets x = m^-1 y with the last successful factor, by block
// elimination: each part's interior solve, the boundary system's, then
// each interior's again. x and y may alias.
func (d *DomainCholesky) Solve(x, y []float64) {
	b := d.b
	clear(d.yb)
	for k, sp := range d.parts {
		bl, yi := d.blocks[k], d.yi[k]
		nI := sp.Interior()
		for t, i := range bl[:nI] {
			copy(yi[t*b:(t+1)*b], y[i*b:(i+1)*b])
		}
		for _, i := range bl[nI:] {
			copy(d.yb[d.bndOf[i]*b:], y[i*b:(i+1)*b])
		}
		sp.SolveInterior(d.xi[k], yi)
	}
	for k, sp := range d.parts {
		// The boundary right-hand side of part k: y_B - A_BI A_II^-1 y_I.
		nI := sp.Interior()
		yk := d.bk[k]
		clear(yk)
		sp.SubCoupling(yk, d.xi[k])
		for t, i := range d.blocks[k][nI:] {
			bi := d.bndOf[i]
			for e := 0; e < b; e++ {
				d.yb[bi*b+e] += yk[t*b+e]
			}
		}
	}
	d.bnd.Solve(d.xb, d.yb)
	for k, sp := range d.parts {
		nI := sp.Interior()
		bl, yi := d.blocks[k], d.yi[k]
		xk := d.bk[k]
		for t, i := range bl[nI:] {
			copy(xk[t*b:(t+1)*b], d.xb[d.bndOf[i]*b:])
		}
		sp.SubCouplingT(yi, xk)
		sp.SolveInterior(d.xi[k], yi)
		for t, i := range bl[:nI] {
			copy(x[i*b:(i+1)*b], d.xi[k][t*b:(t+1)*b])
		}
		for t, i := range bl[nI:] {
			copy(x[i*b:(i+1)*b], xk[t*b:(t+1)*b])
		}
	}
}
