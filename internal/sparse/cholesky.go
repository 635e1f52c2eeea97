package sparse

import (
	"errors"
	"fmt"
	"math"
)

// PivotTol is the relative pivot tolerance of the Cholesky factorization: a
// pivot at or below PivotTol times the largest diagonal entry of A (or NaN)
// stops it. Positive definite matrices with lambda_min above that bound
// always pass (every pivot is at least lambda_min); exactly singular ones
// such as an unshifted Q, whose zero pivot comes out as rounding noise of
// about 1e-16..1e-14 max diag, are reported rather than factored into
// garbage.
const PivotTol = 1e-13

// NotPositiveDefiniteError reports that the factorization met a pivot that
// is not positive (or is NaN, or is below PivotTol times the largest
// diagonal entry): the matrix is not positive definite to working
// precision. Column is the original (unpermuted) index of the failing pivot
// and Pivot its value before the square root.
type NotPositiveDefiniteError struct {
	Column int
	Pivot  float64
}

func (e *NotPositiveDefiniteError) Error() string {
	return fmt.Sprintf("sparse: matrix is not positive definite: pivot %g at column %d", e.Pivot, e.Column)
}

// IsNotPositiveDefinite reports whether err is, or wraps, a
// *NotPositiveDefiniteError.
func IsNotPositiveDefinite(err error) bool {
	var e *NotPositiveDefiniteError
	return errors.As(err, &e)
}

// Cholesky is a sparse Cholesky factorization P A P^T = L L^T of a symmetric
// positive definite matrix given by its lower triangle. The symbolic analysis
// (ordering, elimination tree, pattern of L) is done once by NewCholesky;
// Factorize recomputes the numbers for new values on the same pattern.
//
// Solve, SolveMany and Precondition use buffers held by the factor, so one
// Cholesky must not be used by several goroutines at once.
type Cholesky struct {
	n    int
	perm []int   // perm[k] = original index of pivot k
	pinv []int32 // four bytes: see maxOrder

	// The pattern of A it was built for, to check refactorizations: its
	// number of entries and a hash of its column pointers and row indices
	// (a copy would cost 8 bytes per entry of A, which dominates the
	// memory of large, thinly filled problems).
	aNNZ  int
	aHash uint64
	// aHashOf, when not nil, is a block pattern (no values) whose scalar
	// pattern hash aHash is still to be computed: a block analysis
	// leaves it for the first check that needs it (hash).
	aHashOf *BlockSym
	// bsig is the block signature (blockSignature) of a BlockSym known
	// to have that pattern, when bsigOK: FactorizeBlocks checks it
	// instead of hashing every scalar entry.
	bsig   uint64
	bsigOK bool
	// C = upper triangle of P A P^T by columns (its pattern drives the
	// elimination tree and the row patterns of L). The supernodal factor
	// drops ci and amap after the analysis.
	cp, ci []int
	parent []int
	colCnt []int // nonzeros of each column of L, diagonal included
	nnz    int
	// A block analysis (BlockSymbolic) leaves parent and colCnt nil: the
	// scalar tree and counts follow from its block tree bparent and block
	// counts bcnt (block size bb; parentOf, count), which it keeps anyway,
	// and two scalar arrays would be 16 bytes per column beside the factor
	// (96 MB for the Hessian's at a million poses).
	bb            int
	bparent, bcnt []int

	// Simplicial (up-looking) factor: amap sends A's entry p to C's entry
	// amap[p]; L by columns, diagonal first, rows increasing.
	simplicial bool
	cx         []float64
	amap       []int
	lp, li     []int
	lx         []float64

	// Supernodal factor.
	sn *supernodes
	// last describes the matrix the supernodal factor was last made from
	// by FactorizeBlocksFrom, which a later FactorizeBlocksFrom may copy
	// from. Only that call records it (record): the record keeps the
	// matrix's arrays alive, which a factor made by FactorizeBlocks (the
	// certificate's S, the trust region's Hessian) must not do.
	last   factoredFrom
	record bool

	ok bool

	// Modified factorization (FactorizeBlocksModified): finite pivots at or
	// below the threshold and not below -limit become max(|pivot|, floor)
	// (floor > 0) instead of failing, and raised counts those that change.
	floor, limit float64
	raised       int

	// Work space.
	ymany []float64
	x     []float64
	s     []int
	flag  []int
	cnext []int
}

// NewCholesky orders a with AMD, analyses the pattern and factors it. a
// holds the lower triangle (see CSC). If a is not positive definite the
// error is a *NotPositiveDefiniteError.
func NewCholesky(a *CSC) (*Cholesky, error) {
	return NewCholeskyPerm(a, nil)
}

// NewCholeskyPerm is NewCholesky with a given fill-reducing permutation
// (perm[k] = original index of the k-th pivot), for example BlockAMD's;
// nil means AMD.
func NewCholeskyPerm(a *CSC, perm []int) (*Cholesky, error) {
	c, err := Analyze(a, perm)
	if err != nil {
		return nil, err
	}
	if err := c.Factorize(a); err != nil {
		return nil, err
	}
	return c, nil
}

// Analyze does the symbolic part of NewCholeskyPerm only (perm nil means
// AMD): it returns a supernodal factor that is unusable until Factorize
// succeeds. It suits callers that factor many matrices of one pattern, such
// as S + eta I for several eta.
func Analyze(a *CSC, perm []int) (*Cholesky, error) {
	return analyze(a, perm, false)
}

// AnalyzeSimplicial is Analyze for the simplicial up-looking factorization,
// which works one scalar row at a time. It is the simple reference
// implementation; the supernodal one is much faster once fill is large.
func AnalyzeSimplicial(a *CSC, perm []int) (*Cholesky, error) {
	return analyze(a, perm, true)
}

func analyze(a *CSC, perm []int, simplicial bool) (*Cholesky, error) {
	if err := a.Validate(); err != nil {
		return nil, err
	}
	if err := orderErr(a.N); err != nil {
		return nil, err
	}
	if perm == nil {
		perm = AMD(a)
	} else {
		if len(perm) != a.N {
			return nil, fmt.Errorf("sparse: permutation of length %d for a matrix of order %d", len(perm), a.N)
		}
		seen := make([]bool, a.N)
		for k, i := range perm {
			if i < 0 || i >= a.N || seen[i] {
				return nil, fmt.Errorf("sparse: perm[%d] = %d is not a permutation entry", k, i)
			}
			seen[i] = true
		}
		perm = append([]int(nil), perm...)
	}
	c := &Cholesky{n: a.N, perm: perm, simplicial: simplicial}
	c.symbolic(a)
	return c, nil
}

// symbolic builds C = P A P^T (upper), the elimination tree, postorders
// it (same fill, but every subtree becomes a contiguous range, which the
// supernodes need), and counts the nonzeros of L.
func (c *Cholesky) symbolic(a *CSC) {
	n := a.N
	nnz := a.ColPtr[n]
	c.aNNZ = nnz
	c.aHash = patternHash(a)
	c.x = make([]float64, n)
	c.s = make([]int, n)
	c.flag = make([]int, n)
	c.cnext = make([]int, n)
	c.permute(a)
	c.etree()
	post := postorder(c.parent)
	for k, p := range post {
		post[k] = c.perm[p]
	}
	c.perm = post
	c.permute(a)
	c.etree()
	// Column counts from the row patterns (row k of L is the reach of
	// C's column k in the elimination tree).
	c.colCnt = make([]int, n)
	for i := range c.flag {
		c.flag[i] = -1
	}
	for k := 0; k < n; k++ {
		c.colCnt[k]++
		for top := c.ereach(k); top < n; top++ {
			c.colCnt[c.s[top]]++
		}
	}
	c.nnz = 0
	for _, v := range c.colCnt {
		c.nnz += v
	}
	if c.simplicial {
		c.symbolicSimplicial()
	} else {
		c.sn = newSupernodes(c, a)
		// The supernodal factor assembles A through sn.vmap: C's pattern
		// and map are no longer needed.
		c.ci, c.amap = nil, nil
	}
}

// Pattern hashing. The same sequence of values is mixed whether the
// pattern comes from a CSC (patternHash) or is generated from a BlockSym
// (FactorizeBlocks): a column marker, then the row of each entry.
const (
	hashSeed  = 14695981039346656037
	hashPrime = 1099511628211
)

func hashMix(h uint64, v int) uint64 {
	// Each value is scrambled first (splitmix64's finalizer), so that
	// several changed indices do not cancel as they can in plain FNV.
	x := uint64(v)
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return (h ^ x) * hashPrime
}

// colMarker is mixed in at the start of column j; it differs from every
// row index mixed in for an entry.
func colMarker(j int) int { return -1 - j }

// colPtrOK reports whether a's column pointers can be walked: starting at
// 0, nondecreasing, and within RowIdx and Val.
func colPtrOK(a *CSC) bool {
	if a.ColPtr[0] != 0 {
		return false
	}
	for j := 0; j < a.N; j++ {
		if a.ColPtr[j+1] < a.ColPtr[j] {
			return false
		}
	}
	nnz := a.ColPtr[a.N]
	return nnz <= len(a.RowIdx) && nnz <= len(a.Val)
}

// patternHash hashes the pattern of a (its column pointers and row indices).
func patternHash(a *CSC) uint64 {
	h := uint64(hashSeed)
	for j := 0; j < a.N; j++ {
		h = hashMix(h, colMarker(j))
		for _, i := range a.RowIdx[a.ColPtr[j]:a.ColPtr[j+1]] {
			h = hashMix(h, i)
		}
	}
	return h
}

// permute sets pinv and the pattern of C = upper triangle of P A P^T, with
// amap from A's entries to C's.
func (c *Cholesky) permute(a *CSC) {
	n := a.N
	nnz := a.ColPtr[n]
	c.pinv = make([]int32, n)
	for k, i := range c.perm {
		c.pinv[i] = int32(k)
	}
	// Entry (i, j) of A goes to row min, column max of (pinv[i], pinv[j]).
	c.cp = make([]int, n+1)
	for j := 0; j < n; j++ {
		for p := a.ColPtr[j]; p < a.ColPtr[j+1]; p++ {
			pi, pj := int(c.pinv[a.RowIdx[p]]), int(c.pinv[j])
			c.cp[max(pi, pj)+1]++
		}
	}
	for k := 0; k < n; k++ {
		c.cp[k+1] += c.cp[k]
	}
	next := append([]int(nil), c.cp[:n]...)
	c.ci = make([]int, nnz)
	c.amap = make([]int, nnz)
	for j := 0; j < n; j++ {
		for p := a.ColPtr[j]; p < a.ColPtr[j+1]; p++ {
			pi, pj := int(c.pinv[a.RowIdx[p]]), int(c.pinv[j])
			col := max(pi, pj)
			q := next[col]
			next[col]++
			c.ci[q] = min(pi, pj)
			c.amap[p] = q
		}
	}
}

// etree computes the elimination tree of C (Liu's algorithm with path
// compression).
func (c *Cholesky) etree() {
	n := c.n
	c.parent = make([]int, n)
	anc := c.cnext // scratch
	for k := 0; k < n; k++ {
		c.parent[k], anc[k] = -1, -1
		for p := c.cp[k]; p < c.cp[k+1]; p++ {
			for i := c.ci[p]; i != -1 && i < k; {
				inext := anc[i]
				anc[i] = k
				if inext == -1 {
					c.parent[i] = k
				}
				i = inext
			}
		}
	}
}

// postorder returns a depth-first postorder of the forest parent: post[k]
// is the node visited k-th. Children are visited in increasing order.
func postorder(parent []int) []int {
	n := len(parent)
	head := make([]int, n)
	next := make([]int, n)
	for i := range head {
		head[i] = -1
	}
	for j := n - 1; j >= 0; j-- {
		if p := parent[j]; p != -1 {
			next[j] = head[p]
			head[p] = j
		}
	}
	post := make([]int, 0, n)
	stack := make([]int, 0, 64)
	for root := 0; root < n; root++ {
		if parent[root] != -1 {
			continue
		}
		stack = append(stack, root)
		for len(stack) > 0 {
			top := stack[len(stack)-1]
			if child := head[top]; child != -1 {
				head[top] = next[child]
				stack = append(stack, child)
				continue
			}
			stack = stack[:len(stack)-1]
			post = append(post, top)
		}
	}
	return post
}

// symbolicSimplicial lays out L by columns from the column counts and
// fills in its row indices.
func (c *Cholesky) symbolicSimplicial() {
	n := c.n
	c.cx = make([]float64, len(c.ci))
	c.lp = make([]int, n+1)
	for k := 0; k < n; k++ {
		c.lp[k+1] = c.lp[k] + c.colCnt[k]
	}
	c.li = make([]int, c.lp[n])
	c.lx = make([]float64, c.lp[n])
	copy(c.cnext, c.lp[:n])
	for i := range c.flag {
		c.flag[i] = -1
	}
	for k := 0; k < n; k++ {
		c.li[c.cnext[k]] = k
		c.cnext[k]++
		for top := c.ereach(k); top < n; top++ {
			i := c.s[top]
			c.li[c.cnext[i]] = k
			c.cnext[i]++
		}
	}
}

// ereach puts the pattern of row k of L (without the diagonal) in
// c.s[top:n], in topological order, and returns top.
func (c *Cholesky) ereach(k int) int {
	n := c.n
	top := n
	c.flag[k] = k
	for p := c.cp[k]; p < c.cp[k+1]; p++ {
		i := c.ci[p]
		length := 0
		for ; c.flag[i] != k; i = c.parent[i] {
			c.s[length] = i
			length++
			c.flag[i] = k
		}
		for length > 0 {
			top--
			length--
			c.s[top] = c.s[length]
		}
	}
	return top
}

// Factorize recomputes the numeric factor for a matrix with the pattern the
// factor was built for and new values. On failure the factor is unusable
// (Solve fills its output with NaN) until a successful Factorize.
func (c *Cholesky) Factorize(a *CSC) error {
	c.ok = false
	c.raised = 0
	if a == nil {
		return errors.New("sparse: Factorize: nil matrix")
	}
	if a.N != c.n || len(a.ColPtr) != a.N+1 || a.ColPtr[a.N] != c.aNNZ || !colPtrOK(a) || patternHash(a) != c.hash() {
		return fmt.Errorf("sparse: Factorize: matrix of order %d with %d entries does not match the analysed pattern", a.N, len(a.RowIdx))
	}
	// Pivots at or below this are rejected: a positive definite matrix
	// has every pivot >= lambda_min, and a singular one (Q itself, say)
	// leaves rounding noise of ~1e-15 max diag where the zero pivot is.
	thr := 0.0
	for j := 0; j < a.N; j++ {
		thr = math.Max(thr, math.Abs(a.Val[a.ColPtr[j]]))
	}
	thr *= PivotTol
	if math.IsInf(thr, 0) || math.IsNaN(thr) {
		c.floor = 0 // every pivot would fail the threshold: nothing to raise
	}
	var err error
	if c.simplicial {
		for p, q := range c.amap {
			c.cx[q] = a.Val[p]
		}
		err = c.numeric(thr)
	} else {
		err = c.sn.factor(c, a, thr)
	}
	if err != nil {
		return err
	}
	c.ok = true
	return nil
}

// FactorizeBlocks is Factorize(LowerCSC(m, shift, 0)) without building that
// CSC: the factor must have been analysed on a matrix with m's block
// structure (LowerCSC(anything, 0) of m or of a matrix with the same
// pattern). A caller that refactors one block structure with new values
// (the certificate's S + eta D, the trust region's Hessian) then keeps no
// scalar copy of the matrix, which at a million poses saves gigabytes.
func (c *Cholesky) FactorizeBlocks(m *BlockSym, shift float64) error {
	return c.factorizeBlocks(m, nil, shift, 0, 0)
}

// BlockRows is a symmetric block matrix whose values are not stored but
// computed one block row at a time, where the factorization assembles the
// supernodes that hold that row: FactorizeRows factors it with no copy of
// the matrix beside the factor. The trust region's Hessian in tangent
// coordinates is one: at a million poses it has 36 values per block of Q,
// about a gigabyte, which only the factorization reads.
type BlockRows struct {
	// Pattern gives the order, block size and block pattern (N, B,
	// RowPtr, ColIdx, Diag); its values are not read and may be nil.
	Pattern *BlockSym
	// Diagonal holds the N*B diagonal entries, entry (i, a) at i*B+a:
	// they set the pivot threshold as the stored matrix's would.
	Diagonal []float64
	// Row writes the values of block row i (its blocks in Pattern's
	// order, B*B each, row-major) to dst. It is called concurrently by
	// the factorization's goroutines, each with its own work of WorkLen
	// values, and must write the same values whenever it is called for
	// the same row: a row may be computed more than once.
	Row     func(i int, dst, work []float64)
	WorkLen int
}

// Dense returns m's values as a stored BlockSym (Row for every block row;
// Val newly allocated, the pattern's slices shared).
func (m *BlockRows) Dense() *BlockSym {
	p := m.Pattern
	bb := p.B * p.B
	out := &BlockSym{N: p.N, B: p.B, RowPtr: p.RowPtr, ColIdx: p.ColIdx, Diag: p.Diag,
		Val: make([]float64, p.RowPtr[p.N]*bb)}
	work := make([]float64, m.WorkLen)
	for i := 0; i < p.N; i++ {
		m.Row(i, out.Val[p.RowPtr[i]*bb:p.RowPtr[i+1]*bb], work)
	}
	return out
}

// FactorizeRows is FactorizeBlocks(m.Dense(), shift) without storing
// m.Dense(): the same factor, bit for bit, for a factor analysed on m's
// pattern.
func (c *Cholesky) FactorizeRows(m *BlockRows, shift float64) error {
	if err := rowsErr(m); err != nil {
		c.ok, c.raised = false, 0
		return fmt.Errorf("sparse: FactorizeRows: %w", err)
	}
	return c.factorizeBlocks(m.Pattern, m, shift, 0, 0)
}

// FactorizeRowsModified is FactorizeBlocksModified(m.Dense(), shift,
// floor, limit) without storing m.Dense(), as FactorizeRows.
func (c *Cholesky) FactorizeRowsModified(m *BlockRows, shift, floor, limit float64) (raised int, err error) {
	if err := rowsErr(m); err != nil {
		c.ok, c.raised = false, 0
		return 0, fmt.Errorf("sparse: FactorizeRowsModified: %w", err)
	}
	return c.factorizeModified(m.Pattern, m, shift, floor, limit)
}

// rowsErr reports what makes m unusable as a BlockRows.
func rowsErr(m *BlockRows) error {
	switch {
	case m == nil || m.Pattern == nil:
		return errors.New("nil matrix")
	case m.Row == nil:
		return errors.New("no row function")
	case m.WorkLen < 0:
		return fmt.Errorf("work length %d", m.WorkLen)
	}
	if err := blockPatternErr(m.Pattern); err != nil {
		return err
	}
	if n := m.Pattern.N * m.Pattern.B; len(m.Diagonal) != n {
		return fmt.Errorf("%d diagonal entries for order %d", len(m.Diagonal), n)
	}
	return nil
}

// FactorizeBlocksModified is FactorizeBlocks for a matrix that may be
// mildly indefinite, as a preconditioner wants it: a pivot at or below the
// rejection threshold (see PivotTol) but not below -limit is raised to
// max(|pivot|, floor) instead of failing. The factor is then that of
// m + shift I + E, with E >= 0 diagonal (in pivot order) and nonzero only
// at the raised pivots. It returns how many pivots were changed (the
// count, like the factor, does not depend on the number of threads). 0
// means the factor is that of m + shift I exactly, bit for bit the one
// FactorizeBlocks makes when that succeeds; FactorizeBlocks would refuse
// a pivot in (floor, threshold], which this keeps as it is, so a caller
// that wants "raised == 0" to mean positive definite passes a floor above
// PivotTol times the largest diagonal entry. A pivot below -limit, NaN or
// infinite, or an infinite diagonal entry, fails with a
// *NotPositiveDefiniteError as in FactorizeBlocks, and then the count is
// 0. floor and limit must be positive and finite; otherwise nothing is
// factored, and the factor is unusable as after any failure.
//
// Raising only the failing pivots keeps the factor exact on the rest of
// the spectrum, where a uniform shift large enough to make an indefinite
// matrix factor blurs every small eigenvalue it passes (the Riemannian
// Hessian near but not at a minimum: see sync's trust region). The limit
// is the safeguard: an accepted tiny positive pivot makes the entries
// below it, and then the later pivots, grow without bound, and such a
// factor is worth nothing; the caller should then shift instead.
func (c *Cholesky) FactorizeBlocksModified(m *BlockSym, shift, floor, limit float64) (raised int, err error) {
	return c.factorizeModified(m, nil, shift, floor, limit)
}

// factorizeModified is FactorizeBlocksModified of m, or of rows when not
// nil (m is then its pattern).
func (c *Cholesky) factorizeModified(m *BlockSym, rows *BlockRows, shift, floor, limit float64) (raised int, err error) {
	if !(floor > 0) || math.IsInf(floor, 0) || !(limit > 0) || math.IsInf(limit, 0) {
		c.ok, c.raised = false, 0
		return 0, fmt.Errorf("sparse: FactorizeBlocksModified: floor %g and limit %g must be positive and finite", floor, limit)
	}
	if err := c.factorizeBlocks(m, rows, shift, floor, limit); err != nil {
		// Parallel tasks stop at arbitrary points after a failure: a
		// partial count would depend on the schedule.
		c.raised = 0
		return 0, err
	}
	return c.raised, nil
}

// factorizeBlocks factors m + shift I, or rows + shift I when rows is not
// nil (m is then rows.Pattern, already checked).
func (c *Cholesky) factorizeBlocks(m *BlockSym, rows *BlockRows, shift, floor, limit float64) error {
	return c.factorizeBlocksFrom(m, rows, shift, floor, limit, nil)
}

// factorizeBlocksFrom is factorizeBlocks, copying from an earlier factor
// the supernodes from says are unchanged (FactorizeBlocksFrom; from nil:
// none).
func (c *Cholesky) factorizeBlocksFrom(m *BlockSym, rows *BlockRows, shift, floor, limit float64, from *refactorSource) error {
	c.floor, c.limit = floor, limit
	defer func() { c.floor, c.limit = 0, 0 }()
	c.ok = false
	c.raised = 0
	c.last = factoredFrom{}
	if m == nil {
		return errors.New("sparse: FactorizeBlocks: nil matrix")
	}
	if rows == nil {
		if err := blockShapeErr(m); err != nil {
			return fmt.Errorf("sparse: FactorizeBlocks: %w", err)
		}
	}
	b := m.B
	if m.N*b != c.n {
		return fmt.Errorf("sparse: FactorizeBlocks: matrix of order %d does not match the analysed order %d", m.N*b, c.n)
	}
	if c.simplicial {
		if rows != nil {
			m = rows.Dense()
		}
		return c.Factorize(LowerCSC(m, shift, 0))
	}
	if !c.bsigOK || blockSignature(m) != c.bsig {
		if nnz, h := lowerBlockHash(m); nnz != c.aNNZ || h != c.hash() {
			return fmt.Errorf("sparse: FactorizeBlocks: matrix of order %d with %d lower entries does not match the analysed pattern", c.n, nnz)
		}
		c.bsig, c.bsigOK = blockSignature(m), true
	}
	thr := 0.0
	if rows != nil {
		for _, v := range rows.Diagonal {
			thr = math.Max(thr, math.Abs(v+shift))
		}
	} else {
		for j := 0; j < m.N; j++ {
			blk := m.Block(m.Diag[j])
			for a := 0; a < b; a++ {
				thr = math.Max(thr, math.Abs(blk[a*b+a]+shift))
			}
		}
	}
	if math.IsInf(thr, 0) || math.IsNaN(thr) {
		c.floor = 0 // every pivot would fail the threshold: nothing to raise
	}
	// Each supernode is assembled from m where it is factored
	// (assembleNode), by the goroutine that factors it and while its
	// values are in cache: one scatter of A into the whole factor in A's
	// order wrote to random places in gigabytes (a cache and TLB miss
	// per entry, a second per factorization at a million poses).
	sn := c.sn
	if sn.val == nil {
		sn.val = getVals(sn.valPtr[len(sn.first)-1]) // assembleNode clears what it uses
	}
	sn.src, sn.rowFn, sn.shift = m, rows, shift
	defer func() { sn.src, sn.rowFn = nil, nil }()
	if from != nil {
		sn.reuse, sn.from = c.reusePlan(from, m, shift, thr*PivotTol), from.prev.sn
		defer func() { sn.reuse, sn.from, sn.permAt = nil, nil, nil }()
	}
	if err := sn.factorAssembled(c, thr*PivotTol); err != nil {
		return err
	}
	c.ok = true
	if c.record && rows == nil && floor == 0 && m.RowPtr[m.N] > 0 {
		c.last = factoredFrom{val: &m.Val[0], rowPtr: &m.RowPtr[0], colIdx: &m.ColIdx[0], nb: m.N,
			shift: shift, thr: thr * PivotTol, ok: true}
	}
	return nil
}

// numeric is the up-looking factorization: row k of L solves a triangular
// system with the rows above it, then the pivot is what is left of the
// diagonal.
func (c *Cholesky) numeric(thr float64) error {
	n := c.n
	x, s := c.x, c.s
	lp, li, lx := c.lp, c.li, c.lx
	for i := range c.flag {
		c.flag[i] = -1
	}
	copy(c.cnext, lp[:n])
	for k := 0; k < n; k++ {
		top := c.ereach(k)
		for p := c.cp[k]; p < c.cp[k+1]; p++ {
			x[c.ci[p]] = c.cx[p]
		}
		d := x[k]
		x[k] = 0
		for ; top < n; top++ {
			i := s[top]
			lki := x[i] / lx[lp[i]]
			x[i] = 0
			end := c.cnext[i]
			rows := li[lp[i]+1 : end]
			vals := lx[lp[i]+1 : end]
			for t, r := range rows {
				x[r] -= vals[t] * lki
			}
			d -= lki * lki
			lx[end] = lki
			c.cnext[i]++
		}
		if !(d > thr) || math.IsInf(d, 0) {
			if !raisable(d, c.floor, c.limit) {
				return &NotPositiveDefiniteError{Column: c.perm[k], Pivot: d}
			}
			if nd := max(math.Abs(d), c.floor); nd != d {
				d = nd
				c.raised++
			}
		}
		lx[c.cnext[k]] = math.Sqrt(d)
		c.cnext[k]++
	}
	return nil
}

// N is the order of the factored matrix.
func (c *Cholesky) N() int { return c.n }

// NNZ is the number of structural nonzeros of L, diagonal included (the
// supernodal factor stores a few explicit zeros more, see StoredNNZ).
func (c *Cholesky) NNZ() int { return c.nnz }

// StoredNNZ is the number of entries the factor stores: NNZ plus the
// explicit zeros of relaxed supernodes.
func (c *Cholesky) StoredNNZ() int {
	if c.simplicial {
		return c.nnz
	}
	return c.sn.stored
}

// Supernodes is the number of supernodes (0 for a simplicial factor).
func (c *Cholesky) Supernodes() int {
	if c.simplicial {
		return 0
	}
	return len(c.sn.first) - 1
}

// Perm returns the fill-reducing permutation (perm[k] = original index of
// the k-th pivot). It aliases the factor's storage.
func (c *Cholesky) Perm() []int { return c.perm }

// Solve sets x = A^{-1} b. x and b may alias. After the first solve (which
// builds the concurrent schedule) it does not allocate. Like
// gonum's routines it panics on vectors shorter than the order, a
// programming error.
func (c *Cholesky) Solve(x, b []float64) {
	n := c.n
	if len(x) < n || len(b) < n {
		panic(fmt.Sprintf("sparse: Solve with vectors of length %d and %d for order %d", len(x), len(b), n))
	}
	y := c.x
	if !c.ok {
		for i := range x[:n] {
			x[i] = math.NaN()
		}
		return
	}
	for k, i := range c.perm {
		y[k] = b[i]
	}
	if c.simplicial {
		c.solvePerm(y)
	} else {
		c.sn.solve(y)
	}
	for k, i := range c.perm {
		x[i] = y[k]
	}
	for k := range y {
		y[k] = 0 // the factorization expects a clean work vector
	}
}

// solvePerm overwrites y with (L L^T)^{-1} y.
func (c *Cholesky) solvePerm(y []float64) {
	lp, li, lx := c.lp, c.li, c.lx
	n := c.n
	for j := 0; j < n; j++ {
		yj := y[j] / lx[lp[j]]
		y[j] = yj
		rows := li[lp[j]+1 : lp[j+1]]
		vals := lx[lp[j]+1 : lp[j+1]]
		for t, r := range rows {
			y[r] -= vals[t] * yj
		}
	}
	for j := n - 1; j >= 0; j-- {
		s := y[j]
		rows := li[lp[j]+1 : lp[j+1]]
		vals := lx[lp[j]+1 : lp[j+1]]
		for t, r := range rows {
			s -= vals[t] * y[r]
		}
		y[j] = s / lx[lp[j]]
	}
}

// SolveMany solves A X = B for nrhs right-hand sides stored column-major
// (column k at b[k*n:(k+1)*n]). x and b may alias. After the first solve
// with as many right-hand sides it does not allocate, up to a work space of
// maxKeptMany bytes; a larger factor makes its work space once per call.
func (c *Cholesky) SolveMany(x, b []float64, nrhs int) {
	n := c.n
	if nrhs < 0 || len(x) < n*nrhs || len(b) < n*nrhs {
		panic(fmt.Sprintf("sparse: SolveMany with %d right-hand sides in slices of length %d and %d for order %d", nrhs, len(x), len(b), n))
	}
	if c.simplicial || !c.ok || nrhs == 1 {
		for k := 0; k < nrhs; k++ {
			c.Solve(x[k*n:(k+1)*n], b[k*n:(k+1)*n])
		}
		return
	}
	c.manyGroups(x, b, nrhs, true)
}

// manyGroups is SolveMany's supernodal path (backward) and ForwardMany's
// (not backward: the forward half only, the result left in pivot order):
// up to manyBlock columns at a time, interleaved (row i of the block at
// y[i*k:]) so that L is read once per group.
func (c *Cholesky) manyGroups(x, b []float64, nrhs int, backward bool) {
	n := c.n
	buf := c.ymany
	for k0 := 0; k0 < nrhs; k0 += manyBlock {
		k := min(manyBlock, nrhs-k0)
		if len(buf) < n*k {
			if 8*n*manyBlock <= maxKeptMany {
				c.ymany = make([]float64, n*manyBlock)
				buf = c.ymany
			} else {
				buf = make([]float64, n*k)
			}
		}
		y := buf[:n*k]
		for t := 0; t < k; t++ {
			bt := b[(k0+t)*n : (k0+t+1)*n]
			for p, i := range c.perm {
				y[p*k+t] = bt[i]
			}
		}
		if backward {
			c.sn.solveMany(y, k)
		} else {
			c.sn.forwardK(y, k)
		}
		for t := 0; t < k; t++ {
			xt := x[(k0+t)*n : (k0+t+1)*n]
			if backward {
				for p, i := range c.perm {
					xt[i] = y[p*k+t]
				}
				continue
			}
			for p := range xt {
				xt[p] = y[p*k+t]
			}
		}
	}
}

// ForwardMany sets w = L^-1 P b for nrhs right-hand sides stored
// column-major (column k at b[k*n:(k+1)*n]; w's entries in pivot order):
// the forward half of SolveMany. Its Gram matrix W^T W is B^T A^-1 B,
// computed as a Cholesky factorization computes a Schur complement (a
// domain-decomposition factor's Schur complement is A_BB - W^T W with
// B = A_IB, with the rounding of one triangular solve, not of two).
// w and b may not alias.
func (c *Cholesky) ForwardMany(w, b []float64, nrhs int) {
	n := c.n
	if nrhs < 0 || len(w) < n*nrhs || len(b) < n*nrhs {
		panic(fmt.Sprintf("sparse: ForwardMany with %d right-hand sides in slices of length %d and %d for order %d", nrhs, len(w), len(b), n))
	}
	if !c.ok {
		for i := range w[:n*nrhs] {
			w[i] = math.NaN()
		}
		return
	}
	if c.simplicial {
		lp, li, lx := c.lp, c.li, c.lx
		for t := 0; t < nrhs; t++ {
			y := w[t*n : (t+1)*n]
			for k, i := range c.perm {
				y[k] = b[t*n+i]
			}
			for j := 0; j < n; j++ {
				yj := y[j] / lx[lp[j]]
				y[j] = yj
				rows := li[lp[j]+1 : lp[j+1]]
				vals := lx[lp[j]+1 : lp[j+1]]
				for q, r := range rows {
					y[r] -= vals[q] * yj
				}
			}
		}
		return
	}
	c.manyGroups(w, b, nrhs, false)
}

// maxOrder is the largest order of a matrix the analyses accept: the
// factorization's row maps (snWork.relMap) hold four-byte integers. A
// variable for tests.
var maxOrder = math.MaxInt32

// orderErr is the error for a matrix of order n beyond maxOrder.
func orderErr(n int) error {
	if n > maxOrder {
		return fmt.Errorf("sparse: a matrix of order %d is beyond the factorization's limit of %d rows", n, maxOrder)
	}
	return nil
}

// parentOf is the parent of column j in the elimination tree of L (-1: a
// root).
func (c *Cholesky) parentOf(j int) int {
	if c.parent != nil {
		return c.parent[j]
	}
	b := c.bb
	kb := j / b
	switch {
	case j-kb*b < b-1:
		return j + 1
	case c.bparent[kb] >= 0:
		return c.bparent[kb] * b
	}
	return -1
}

// count is the number of nonzeros of column j of L, its diagonal
// included.
func (c *Cholesky) count(j int) int {
	if c.colCnt != nil {
		return c.colCnt[j]
	}
	b := c.bb
	kb := j / b
	return b*c.bcnt[kb] - (j - kb*b)
}

// manyBlock is the number of right-hand sides SolveMany treats together.
const manyBlock = 8

// maxKeptMany is the largest work space (bytes) of SolveMany and
// ForwardMany that the factor keeps for its next call. A larger one is
// made for the call and let go: a translation system at a million poses
// would keep 64 MB through the whole solve for the two calls that
// recover translations (the chordal initialization and the rounding).
const maxKeptMany = 16 << 20

// PreconditionMany applies the factor to k vectors stored column-major:
// it is SolveMany, and lets LOBPCG precondition its whole block at once.
func (c *Cholesky) PreconditionMany(dst, r []float64, k int) { c.SolveMany(dst, r, k) }

// Precondition is Solve, so a factor (for example of Q + sigma I) serves
// as a preconditioner for PCG and LOBPCG.
func (c *Cholesky) Precondition(dst, r []float64) { c.Solve(dst, r) }

// Flops is the number of floating-point operations of the numeric
// factorization, sum over the columns of L of count^2 (the classic
// measure; relaxed supernodes do a little more).
func (c *Cholesky) Flops() float64 {
	f := 0.0
	for j := 0; j < c.n; j++ {
		v := c.count(j)
		f += float64(v) * float64(v)
	}
	return f
}

// MinPivot returns the smallest pivot L_kk^2 of the factorization and its
// original column. Every pivot of a positive definite A is at least
// lambda_min(A), so a pivot tiny against the diagonal of A flags a matrix
// that is singular to working precision.
func (c *Cholesky) MinPivot() (col int, pivot float64) {
	col, pivot = -1, math.Inf(1)
	for k := 0; k < c.n; k++ {
		var d float64
		if c.simplicial {
			d = c.lx[c.lp[k]]
		} else {
			s := int(c.sn.super[k])
			f := c.sn.first[s]
			nc := c.sn.first[s+1] - f
			d = c.sn.val[c.sn.valPtr[s]+(k-f)*nc+(k-f)]
		}
		if d*d < pivot {
			col, pivot = c.perm[k], d*d
		}
	}
	return col, pivot
}

// LastPivot returns the original index of the factor's last pivot, the
// row and column its ordering eliminates last. A caller that wants one
// coordinate's Schur complement, everything else eliminated first, shifts
// there (sync's certificate grounds its gauge at the last pivot's pose).
func (c *Cholesky) LastPivot() int { return c.perm[c.n-1] }

// TrailingClique returns how many of the last pivots have columns of L
// that are dense to the end: the trailing block of L is a full triangle,
// so any order of those pivots among themselves gives L the same pattern
// (their rows are all coupled already). With a block ordering, a pose
// block wholly inside it can be made the last pivot at no cost in fill.
func (c *Cholesky) TrailingClique() int {
	k := 0
	for j := c.n - 1; j >= 0 && c.count(j) == c.n-j; j-- {
		k++
	}
	return k
}

// Pivot returns the original index of the factor's k-th pivot (0 <= k < n,
// in elimination order): LastPivot is Pivot(n-1). A caller that must
// ground at a coordinate of some kind walks back from the last.
func (c *Cholesky) Pivot(k int) int { return c.perm[k] }

// hash returns the hash of the analysed scalar pattern (aHash), computing
// it first if a block analysis left it to be.
func (c *Cholesky) hash() uint64 {
	if c.aHashOf != nil {
		_, c.aHash = lowerBlockHash(c.aHashOf)
		c.aHashOf = nil
	}
	return c.aHash
}
