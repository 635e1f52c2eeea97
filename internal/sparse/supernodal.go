package sparse

import (
	"math"
	"runtime"
	"slices"
	"sort"
	stdsync "sync"
	"sync/atomic"
	"time"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
	"gonum.org/v1/gonum/floats"
)

// supernodes is the supernodal layout of L: supernode s holds the
// consecutive columns first[s] .. first[s+1]-1, which share one row
// structure rows[rowPtr[s]:rowPtr[s+1]] (its own columns first, then the
// rows below, increasing). Its values are a dense nr x nc row-major block
// at val[valPtr[s]:], lower trapezoidal (the strict upper triangle of the
// top nc x nc block is not used).
//
// The factorization is left-looking: supernode s gathers the updates of
// every earlier supernode whose rows reach into its columns (each such
// descendant waits in a linked list headed by the next supernode it
// updates, as in CHOLMOD), as one dense product per descendant, then
// factors its own block with a blocked dense Cholesky. Large separators at
// the top of the elimination tree thus run in dense level-3 kernels.
type supernodes struct {
	first  []int
	super  []int // column -> supernode
	rowPtr []int
	rows   []int
	valPtr []int
	val    []float64
	stored int

	// vmap sends entry p of A (in the analysed CSC order) to its place in
	// val: assembling A from a CSC is one scatter, and no copy of A's
	// pattern or values is kept (it would cost 24 bytes per entry of A).
	// The block analysis leaves it nil until a CSC is factored (ensureVmap).
	vmap []int
	// src and shift, while FactorizeBlocks runs: factorNode assembles
	// supernode s from src + shift I itself (assembleNode).
	src   *BlockSym
	shift float64

	// Independent subtrees [lo, hi) of supernodes, factored concurrently,
	// and the remaining supernodes, factored after them in order.
	tasks [][2]int
	top   []int

	// Work space for the numeric factorization.
	head, next []int
	dpos       []int
	work       []*snWork
	errs       []error
	deferred   [][]int

	// The schedule and buffers of the solve, built by the first one.
	plan *solvePlan
}

// Relaxed amalgamation (CHOLMOD's defaults): a column joins the supernode
// of its child when the merged supernode stays small or has few explicit
// zeros. Dense blocks with a few zeros run much faster than many thin ones.
func relaxOK(nc int, zfrac float64) bool {
	return zfrac == 0 || nc <= 4 || (nc <= 16 && zfrac < 0.8) || (nc <= 48 && zfrac < 0.1) || zfrac < 0.05
}

// partitionSupernodes groups the columns of L into relaxed supernodes
// from the elimination tree and the column counts alone (so that the
// scalar and the block analysis, which compute those differently, agree):
// column j+1 joins the current supernode f..j when it is the parent of j
// (then the structure of every column of the merged supernode is inside
// {f..j+1} plus the structure of column j+1) and relaxOK allows it.
func partitionSupernodes(c *Cholesky) *supernodes {
	n := c.n
	sn := &supernodes{super: make([]int, n)}
	sn.first = append(sn.first, 0)
	f, real := 0, 0
	for j := 0; j < n; j++ {
		real += c.colCnt[j]
		if j+1 < n && c.parent[j] == j+1 {
			nc := j + 2 - f
			below := c.colCnt[j+1] - 1
			stored := nc*(nc+1)/2 + nc*below
			r := real + c.colCnt[j+1]
			if relaxOK(nc, float64(stored-r)/float64(stored)) {
				continue
			}
		}
		sn.first = append(sn.first, j+1)
		f, real = j+1, 0
	}
	ns := len(sn.first) - 1
	for s := 0; s < ns; s++ {
		for j := sn.first[s]; j < sn.first[s+1]; j++ {
			sn.super[j] = s
		}
	}
	return sn
}

// supernodeTree returns the supernodal elimination tree: sparent[s] (-1
// for a root) and the children of each supernode as linked lists (chead,
// cnext), children in increasing order.
func supernodeTree(c *Cholesky, sn *supernodes) (sparent, chead, cnext []int) {
	ns := len(sn.first) - 1
	sparent = make([]int, ns)
	chead = make([]int, ns)
	cnext = make([]int, ns)
	for s := range chead {
		chead[s] = -1
	}
	for s := ns - 1; s >= 0; s-- {
		sparent[s] = -1
		if p := c.parent[sn.first[s+1]-1]; p != -1 {
			sparent[s] = sn.super[p]
			cnext[s] = chead[sparent[s]]
			chead[sparent[s]] = s
		}
	}
	return sparent, chead, cnext
}

// finish computes the sizes that follow from the row structures and
// prepares the factorization's schedule and work space.
func (sn *supernodes) finish(sparent, chead, cnext []int) {
	ns := len(sn.first) - 1
	sn.stored = 0
	for s := 0; s < ns; s++ {
		nc := sn.first[s+1] - sn.first[s]
		nr := sn.rowPtr[s+1] - sn.rowPtr[s]
		sn.stored += nc*(nc+1)/2 + (nr-nc)*nc
	}
	// val is allocated by the first factorization, so that Analyze alone
	// (to compare orderings by Flops, say) stays cheap.
	sn.splitTasks(chead, cnext, sparent)
	sn.head = make([]int, ns)
	sn.next = make([]int, ns)
	sn.dpos = make([]int, ns)
}

func newSupernodes(c *Cholesky, a *CSC) *supernodes {
	n := c.n
	sn := partitionSupernodes(c)
	ns := len(sn.first) - 1
	// Lower triangle of C by columns: the transpose of C's upper pattern
	// (needed only while the structures and vmap are built).
	lp := make([]int, n+1)
	for k := 0; k < n; k++ {
		for p := c.cp[k]; p < c.cp[k+1]; p++ {
			lp[c.ci[p]+1]++
		}
	}
	for k := 0; k < n; k++ {
		lp[k+1] += lp[k]
	}
	next := append([]int(nil), lp[:n]...)
	li := make([]int, len(c.ci))
	cmap := make([]int, len(c.ci)) // C entry -> lower entry
	for k := 0; k < n; k++ {
		for p := c.cp[k]; p < c.cp[k+1]; p++ {
			i := c.ci[p]
			q := next[i]
			next[i]++
			li[q] = k
			cmap[p] = q
		}
	}
	// Row structures from the leaves up: the rows of s below its columns
	// are those of A's columns and of its children's structures that lie
	// below s.
	sparent, chead, cnext := supernodeTree(c, sn)
	mark := make([]int, n)
	for i := range mark {
		mark[i] = -1
	}
	sn.rowPtr = make([]int, ns+1)
	sn.valPtr = make([]int, ns+1)
	for s := 0; s < ns; s++ {
		f, l := sn.first[s], sn.first[s+1]-1
		start := len(sn.rows)
		for j := f; j <= l; j++ {
			sn.rows = append(sn.rows, j)
			mark[j] = s
		}
		for j := f; j <= l; j++ {
			for p := lp[j]; p < lp[j+1]; p++ {
				if i := li[p]; i > l && mark[i] != s {
					mark[i] = s
					sn.rows = append(sn.rows, i)
				}
			}
		}
		for ch := chead[s]; ch != -1; ch = cnext[ch] {
			nc := sn.first[ch+1] - sn.first[ch]
			for _, i := range sn.rows[sn.rowPtr[ch]+nc : sn.rowPtr[ch+1]] {
				if i > l && mark[i] != s {
					mark[i] = s
					sn.rows = append(sn.rows, i)
				}
			}
		}
		nc := l - f + 1
		sort.Ints(sn.rows[start+nc:])
		nr := len(sn.rows) - start
		if nr != nc+c.colCnt[l]-1 {
			panic("sparse: supernode structure disagrees with the column counts")
		}
		sn.rowPtr[s+1] = len(sn.rows)
		sn.valPtr[s+1] = sn.valPtr[s] + nr*nc
		// Where each lower entry of columns f..l lands in val (li is
		// overwritten: entry p's row becomes its value offset).
		for r, i := range sn.rows[start:] {
			next[i] = r // next is free scratch now
		}
		for j := f; j <= l; j++ {
			for p := lp[j]; p < lp[j+1]; p++ {
				li[p] = sn.valPtr[s] + next[li[p]]*nc + j - f
			}
		}
	}
	// A's entry p is C's entry amap[p], the lower entry cmap[amap[p]],
	// whose offset li now holds. amap becomes vmap in place.
	sn.vmap = c.amap
	for p, q := range sn.vmap {
		sn.vmap[p] = li[cmap[q]]
	}
	sn.finish(sparent, chead, cnext)
	return sn
}

// blasThreshold is the flop count above which the dense kernels call
// gonum's BLAS rather than plain loops (call overhead dominates below).
const blasThreshold = 8192

// snWork is the work space of one goroutine of the factorization.
type snWork struct {
	relMap []int
	cbuf   []float64
	raised int // pivots changed by FactorizeBlocksModified
}

// factor computes the numeric supernodal factor of a. Independent subtrees
// (sn.tasks) are factored concurrently; the supernodes above them (the
// top of the tree, with the large separators whose dense products gonum
// parallelizes itself) follow in order. A descendant's pending update of a
// supernode outside its subtree is queued per task and linked in task order
// after the join, so the order of every sum, hence every bit of the
// result, is the same on any number of threads.
func (sn *supernodes) factor(c *Cholesky, a *CSC, thr float64) error {
	sn.ensureVmap(c, a)
	sn.assemble(a.Val)
	return sn.factorAssembled(c, thr)
}

// assemble zeroes val and scatters A's values (aval, in the analysed CSC
// order) into it.
func (sn *supernodes) assemble(aval []float64) {
	sn.clearVal()
	val := sn.val
	for p, q := range sn.vmap {
		val[q] = aval[p]
	}
}

// ensureVmap builds vmap for a, whose pattern is the analysed one, when
// the analysis did not (AnalyzeBlocks): entry (i, j) lands in column
// lo = min of their pivots, at the row hi = max of supernode super[lo],
// whose rows are increasing.
func (sn *supernodes) ensureVmap(c *Cholesky, a *CSC) {
	if sn.vmap != nil {
		return
	}
	vmap := make([]int, len(a.RowIdx))
	for j := 0; j < a.N; j++ {
		pj := c.pinv[j]
		for p := a.ColPtr[j]; p < a.ColPtr[j+1]; p++ {
			pi := c.pinv[a.RowIdx[p]]
			lo, hi := min(pi, pj), max(pi, pj)
			s := sn.super[lo]
			f := sn.first[s]
			nc := sn.first[s+1] - f
			row, _ := slices.BinarySearch(sn.rows[sn.rowPtr[s]:sn.rowPtr[s+1]], hi)
			vmap[p] = sn.valPtr[s] + row*nc + lo - f
		}
	}
	sn.vmap = vmap
}

// assembleNode sets supernode s's values ls to those of src + shift I in
// its columns (src and shift as FactorizeBlocks set them). relMap holds
// the local row of each of s's rows. Column q of L is scalar column
// perm[q] of A, entry (j*b+cc) of block row j; A's pattern lies inside
// L's, so every entry below the pivot has a row in s, and the blocks of a
// row of src are contiguous: the reads stay near one another, and the
// writes inside s.
func (sn *supernodes) assembleNode(c *Cholesky, s int, ls []float64, relMap []int) {
	clear(ls)
	m := sn.src
	b := m.B
	f, l := sn.first[s], sn.first[s+1]-1
	nc := l - f + 1
	for q := f; q <= l; q++ {
		j, cc := c.perm[q]/b, c.perm[q]%b
		for k := m.RowPtr[j]; k < m.RowPtr[j+1]; k++ {
			i := m.ColIdx[k]
			// Block (j, i) holds A[(j, cc), (i, a)] = A[(i, a), (j, cc)]
			// in its row cc.
			blk := m.Block(k)[cc*b : cc*b+b]
			pi := c.pinv[i*b : i*b+b]
			for a, v := range blk {
				pr := pi[a]
				if pr < q {
					continue // above the diagonal: column pr holds it
				}
				if pr == q {
					v += sn.shift
				}
				ls[relMap[pr]*nc+q-f] = v
			}
		}
	}
}

// clearVal allocates val on first use and sets it to zero.
func (sn *supernodes) clearVal() {
	if sn.val == nil {
		sn.val = make([]float64, sn.valPtr[len(sn.first)-1])
		return
	}
	clear(sn.val)
}

// factorAssembled factors val in place, which holds A (assemble).
func (sn *supernodes) factorAssembled(c *Cholesky, thr float64) error {
	for s := range sn.head {
		sn.head[s] = -1
	}
	threads := min(runtime.GOMAXPROCS(0), len(sn.tasks))
	for len(sn.work) < max(threads, 1) {
		sn.work = append(sn.work, &snWork{relMap: make([]int, c.n)})
	}
	for _, w := range sn.work {
		w.raised = 0
	}
	defer func() {
		c.raised = 0
		for _, w := range sn.work {
			c.raised += w.raised
		}
	}()
	if len(sn.errs) < len(sn.tasks) {
		sn.errs = make([]error, len(sn.tasks))
		sn.deferred = make([][]int, len(sn.tasks))
	}
	errs, deferred := sn.errs, sn.deferred
	for t := range sn.tasks {
		errs[t], deferred[t] = nil, deferred[t][:0]
	}
	var stop atomic.Bool
	runTask := func(t int, w *snWork) {
		lo, hi := sn.tasks[t][0], sn.tasks[t][1]
		for s := lo; s < hi && !stop.Load(); s++ {
			err := sn.factorNode(c, s, w, thr, func(d, tgt int) {
				if tgt >= lo && tgt < hi {
					sn.next[d] = sn.head[tgt]
					sn.head[tgt] = d
				} else {
					deferred[t] = append(deferred[t], d)
				}
			})
			if err != nil {
				errs[t] = err
				stop.Store(true)
				return
			}
		}
	}
	if threads <= 1 {
		for t := range sn.tasks {
			runTask(t, sn.work[0])
		}
	} else {
		var next atomic.Int64
		var wg stdsync.WaitGroup
		for g := 0; g < threads; g++ {
			wg.Add(1)
			go func(w *snWork) {
				defer wg.Done()
				for {
					t := int(next.Add(1)) - 1
					if t >= len(sn.tasks) {
						return
					}
					runTask(t, w)
				}
			}(sn.work[g])
		}
		wg.Wait()
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	link := func(d, tgt int) {
		sn.next[d] = sn.head[tgt]
		sn.head[tgt] = d
	}
	for t := range sn.tasks {
		for _, d := range deferred[t] {
			link(d, sn.super[sn.rows[sn.rowPtr[d]+sn.dpos[d]]])
		}
	}
	for _, s := range sn.top {
		if err := sn.factorNode(c, s, sn.work[0], thr, link); err != nil {
			return err
		}
	}
	return nil
}

// factorNode assembles supernode s, applies the updates of the descendants
// queued on it, factors it, and hands every descendant (and s itself) whose
// rows reach further up to link with its next target.
func (sn *supernodes) factorNode(c *Cholesky, s int, w *snWork, thr float64, link func(d, t int)) error {
	f, l := sn.first[s], sn.first[s+1]-1
	nc := l - f + 1
	rows := sn.rows[sn.rowPtr[s]:sn.rowPtr[s+1]]
	nr := len(rows)
	ls := sn.val[sn.valPtr[s]:sn.valPtr[s+1]] // holds A's columns f..l (assemble)
	relMap := w.relMap
	for r, i := range rows {
		relMap[i] = r
	}
	if sn.src != nil {
		sn.assembleNode(c, s, ls, relMap)
	}
	// Updates from descendants.
	for d := sn.head[s]; d != -1; {
		dnext := sn.next[d]
		drows := sn.rows[sn.rowPtr[d]:sn.rowPtr[d+1]]
		ncd := sn.first[d+1] - sn.first[d]
		nrd := len(drows)
		ld := sn.val[sn.valPtr[d]:sn.valPtr[d+1]]
		p1 := sn.dpos[d]
		p2 := p1
		for p2 < nrd && drows[p2] <= l {
			p2++
		}
		m, wd := nrd-p1, p2-p1
		if need := m * wd; len(w.cbuf) < need {
			w.cbuf = make([]float64, need)
		}
		cb := w.cbuf[:m*wd]
		// cb = L_d[p1:, :] * L_d[p1:p2, :]^T (only the lower part of the
		// top wd x wd square is used).
		if m*wd*ncd >= blasThreshold {
			gemmNT(m, wd, ncd, 1, ld[p1*ncd:], ncd, ld[p1*ncd:], ncd, 0, cb, wd)
		} else {
			smallUpdate(cb, ld[p1*ncd:(p1+m)*ncd], m, wd, ncd)
		}
		for r := 0; r < m; r++ {
			tr := relMap[drows[p1+r]] * nc
			cr := cb[r*wd : r*wd+wd]
			for q := 0; q < wd && q <= r; q++ {
				ls[tr+drows[p1+q]-f] -= cr[q]
			}
		}
		if p2 < nrd {
			sn.dpos[d] = p2
			link(d, sn.super[drows[p2]])
		}
		d = dnext
	}
	j, piv, raised := denseFactor(ls, nr, nc, thr, c.floor, c.limit)
	w.raised += raised
	if j >= 0 {
		return &NotPositiveDefiniteError{Column: c.perm[f+j], Pivot: piv}
	}
	if nr > nc {
		sn.dpos[s] = nc
		link(s, sn.super[rows[nc]])
	}
	return nil
}

// panelWidth is the block size of the dense Cholesky of a supernode, and
// trailingStrip the column width of its trailing-update products.
const (
	panelWidth    = 64
	trailingStrip = 256
)

// denseFactor overwrites the nr x nc row-major trapezoid l (nr >= nc) with
// its Cholesky factor: the top nc x nc block becomes lower triangular L11
// and the rows below L21 = A21 L11^{-T}. It is a right-looking blocked
// algorithm: panels of panelWidth columns are factored by plain loops, the
// rows below a panel by a triangular solve, and the trailing columns of the
// supernode are updated by a rank-panelWidth product. It returns the local
// column and the value of the first pivot not above thr, or -1, and the
// number of pivots changed: with floor > 0 a finite pivot not above thr
// and not below -limit becomes max(|pivot|, floor) instead of failing
// (see Cholesky.FactorizeBlocksModified).
func denseFactor(l []float64, nr, nc int, thr, floor, limit float64) (col int, pivot float64, raised int) {
	for k := 0; k < nc; k += panelWidth {
		kb := min(panelWidth, nc-k)
		// Unblocked Cholesky of the panel's diagonal block.
		for j := k; j < k+kb; j++ {
			rj := l[j*nc+k : j*nc+j]
			d := l[j*nc+j]
			for _, v := range rj {
				d -= v * v
			}
			if !(d > thr) || math.IsInf(d, 0) {
				if !raisable(d, floor, limit) {
					return j, d, raised
				}
				if nd := max(math.Abs(d), floor); nd != d {
					d = nd
					raised++
				}
			}
			d = math.Sqrt(d)
			l[j*nc+j] = d
			for i := j + 1; i < k+kb; i++ {
				ri := l[i*nc+k : i*nc+j]
				sum := l[i*nc+j]
				for t, v := range ri {
					sum -= v * rj[t]
				}
				l[i*nc+j] = sum / d
			}
		}
		m := nr - k - kb
		if m == 0 {
			continue
		}
		// Rows below the panel: B = B L_kk^{-T}.
		if m*kb*kb >= blasThreshold {
			trsmRT(m, kb, l[k*nc+k:], nc, l[(k+kb)*nc+k:], nc)
		} else {
			trsmRTLeaf(m, kb, l[k*nc+k:], nc, l[(k+kb)*nc+k:], nc)
		}
		// Trailing update of columns k+kb..nc-1, rows k+kb..nr-1:
		// T -= P P^T restricted to the lower trapezoid, with P the rows
		// below the panel. Large updates go to Dgemm by column strips of
		// trailingStrip (gemmNT runs in parallel, gonum's Dsyrk does
		// not), each strip starting at its diagonal so little of the upper
		// triangle is computed.
		nt := nc - k - kb
		if nt == 0 {
			continue
		}
		panel := l[(k+kb)*nc+k:]
		if m*nt*kb >= blasThreshold {
			for j0 := 0; j0 < nt; j0 += trailingStrip {
				jw := min(trailingStrip, nt-j0)
				gemmNT(m-j0, jw, kb, -1, panel[j0*nc:], nc, panel[j0*nc:], nc, 1, l[(k+kb+j0)*nc+k+kb+j0:], nc)
			}
			continue
		}
		for i := 0; i < m; i++ {
			ri := panel[i*nc : i*nc+kb]
			for j := 0; j < nt && j <= i; j++ {
				rj := panel[j*nc : j*nc+kb]
				sum := 0.0
				for t, v := range ri {
					sum += v * rj[t]
				}
				l[(k+kb+i)*nc+k+kb+j] -= sum
			}
		}
	}
	return -1, 0, raised
}

// raisable reports whether a rejected pivot d may be raised: a modified
// factorization is asked for (floor > 0) and d is finite and not below
// -limit (NaN and Inf mean the input or the elimination broke down).
func raisable(d, floor, limit float64) bool {
	return floor > 0 && d >= -limit && !math.IsInf(d, 0)
}

// solve overwrites y (in pivot order) with (L L^T)^{-1} y.
func (sn *supernodes) solve(y []float64) { sn.solveK(y, 1) }

// solveMany is solve for k <= manyBlock right-hand sides interleaved in y
// (entry t of row i at y[i*k+t]).
func (sn *supernodes) solveMany(y []float64, k int) { sn.solveK(y, k) }

// Tuning of the solve, measured on 3-D block grids (BenchmarkSolveGrid).
// Every choice depends on the matrix only, never on the number of threads,
// so the bits of a solution do not depend on the thread count.
const (
	// solveSplitMin is the number of entries of L's supernodes (val) from
	// which the solve splits the tree into concurrent subtrees; below it
	// two threads gain nothing (measured on 3-D block grids, split on two
	// threads against unsplit: 2.8e5 entries 3% slower, 4.8e5 5% faster,
	// 7.8e5 15%, 1.7e6 20%).
	solveSplitMin = 1 << 19
	// solveSplitParts bounds the subtrees: the split goes on until none
	// holds more than 1/solveSplitParts of the entries.
	solveSplitParts = 16
	// rectPar is the number of entries of a dense rectangle of one
	// supernode (its rows below the diagonal block, or a panel's trailing
	// rows) from which it is cut into chunks of about rectChunk entries
	// (at most accChunks in the backward solve) that run concurrently.
	rectPar   = 1 << 15
	rectChunk = 1 << 14
	accChunks = 8
	// triPanel is the panel width of the blocked triangular solves of a
	// supernode with at least triBlocked columns: each panel's triangle is
	// solved in order, and the rectangle it updates runs in chunks.
	triPanel   = 128
	triBlocked = 4 * triPanel
)

// solvePlan is the schedule of the concurrent solve, built from the
// structure of L on the first solve. The forward solve runs the subtrees
// (tasks) concurrently. A task writes its own columns of y directly; its
// updates of rows outside it, which can only be columns of supernodes on
// top (they are ancestors of the task's root, and every ancestor of a
// task root is on top), go to a buffer of its own, indexed compactly by
// the top columns it touches (ext). The buffers are added into y in task
// order, then the top supernodes run in order. The backward solve runs the
// top first, then the tasks concurrently: they only read finished values
// of their ancestors and write their own columns. Large rectangles of top
// supernodes are cut into chunks fixed by their size. The order of every
// sum is thus fixed by the matrix, whatever the number of goroutines.
type solvePlan struct {
	tasks  [][2]int // [lo, hi) supernodes, heaviest first
	top    []int    // the other supernodes, increasing
	split  []int    // rows[split[s]:] of supernode s lie outside its task (nr on top)
	locPtr []int    // loc[locPtr[s]:] indexes ext for those rows (task supernodes)
	loc    []int
	extPtr []int // task t's top columns are ext[extPtr[t]:extPtr[t+1]]
	ext    []int
	buf    []float64 // len(ext) * k accumulators
	acc    []float64 // accChunks blocks of columns of a backward rectangle
	maxNr  int       // rows of the tallest supernode
	maxNc  int       // columns of the widest

	// Scratch: tmp holds a value per row of a top supernode (one
	// right-hand side; chunks use disjoint parts), wtmp[g] is goroutine
	// g's, for a supernode of a task or a transposed block of columns.
	tmp  []float64
	wtmp [][]float64

	// The job that the goroutines share (see run).
	job    int
	s      int   // supernode of a rectangle job
	r0, r1 int   // its rows
	c0, c1 int   // and columns
	idx    []int // destination (forward) or source (backward) rows
	y      []float64
	k      int
	nchunk int
	next   atomic.Int64 // next chunk to take
	ids    atomic.Int64 // next goroutine id (indexes wtmp)

	// Helpers: goroutines that take chunks beside the caller. A new
	// goroutine needs microseconds to start, as long as several chunks
	// take, so a helper stays through the solve, yielding while it waits
	// for the next job, and exits when none came for helperIdle. open is
	// the number of the job they may join (0: none), active counts those
	// inside it.
	gen    int64
	open   atomic.Int64
	active atomic.Int64
	alive  atomic.Int64
	quit   atomic.Bool
	wg     stdsync.WaitGroup
	helper func()
}

// helperIdle is how long a helper waits for a job before it exits.
const helperIdle = 50 * time.Microsecond

// Jobs of solvePlan.run.
const (
	jobTaskFwd = iota
	jobTaskBwd
	jobRowsFwd
	jobColsBwd
)

// solveK is the solve for k interleaved right-hand sides.
func (sn *supernodes) solveK(y []float64, k int) {
	if k > manyBlock {
		panic("sparse: supernodal solve of more than manyBlock right-hand sides at once")
	}
	if sn.plan == nil {
		sn.plan = sn.newSolvePlan(solveSplitMin)
	}
	p := sn.plan
	p.y, p.k = y, k
	p.scratch(1)
	if len(p.tasks) > 0 {
		if len(p.buf) < len(p.ext)*k {
			p.buf = make([]float64, len(p.ext)*k)
		}
		p.run(sn, jobTaskFwd, len(p.tasks))
		// The tasks' updates of top rows, in task order.
		for t := range p.extPtr[:len(p.tasks)] {
			for j := p.extPtr[t]; j < p.extPtr[t+1]; j++ {
				yc := y[p.ext[j]*k : p.ext[j]*k+k]
				for q, v := range p.buf[j*k : j*k+k] {
					yc[q] += v
				}
			}
		}
	}
	for _, s := range p.top {
		sn.forwardTop(s)
	}
	for i := len(p.top) - 1; i >= 0; i-- {
		sn.backwardTop(p.top[i])
	}
	if len(p.tasks) > 0 {
		p.run(sn, jobTaskBwd, len(p.tasks))
	}
	p.quit.Store(true)
	p.wg.Wait()
	p.quit.Store(false)
	p.y = nil
}

// run does chunks 0..n-1 of job, concurrently when there are several:
// the caller takes chunks, and so do helpers (started if fewer than
// GOMAXPROCS-1 are alive). The chunks of a job write disjoint entries, so
// which goroutine does which does not change the result.
func (p *solvePlan) run(sn *supernodes, job, n int) {
	p.job, p.nchunk = job, n
	p.next.Store(0)
	p.ids.Store(0)
	threads := min(runtime.GOMAXPROCS(0), n)
	p.scratch(threads)
	if threads > 1 {
		if p.helper == nil {
			// Kept, so that starting a goroutine allocates nothing.
			p.helper = func() { p.help(sn) }
		}
		for p.alive.Load() < int64(threads-1) {
			p.alive.Add(1)
			p.wg.Add(1)
			go p.helper()
		}
	}
	p.gen++
	p.open.Store(p.gen)
	p.work(sn)
	// Close the job, then wait for the helpers that joined it.
	p.open.Store(0)
	for p.active.Load() != 0 {
		runtime.Gosched()
	}
}

// help is a helper's loop: join each job opened while it is alive.
func (p *solvePlan) help(sn *supernodes) {
	defer p.wg.Done()
	var last int64
	idle := time.Now()
	for !p.quit.Load() {
		if g := p.open.Load(); g != 0 && g != last {
			// Joining counts only if the job is still open after the
			// count went up: run then waits for this helper.
			p.active.Add(1)
			if p.open.Load() == g {
				p.work(sn)
			}
			p.active.Add(-1)
			last = g
			idle = time.Now()
			continue
		}
		if time.Since(idle) > helperIdle {
			break
		}
		runtime.Gosched()
	}
	p.alive.Add(-1)
}

// scratch makes sure that wtmp holds a buffer for each of threads
// goroutines, large enough for k right-hand sides (it allocates only when
// the number of threads or k grows).
func (p *solvePlan) scratch(threads int) {
	need := max(p.maxNr, p.maxNc*p.k)
	for len(p.wtmp) < threads {
		p.wtmp = append(p.wtmp, nil)
	}
	for i, w := range p.wtmp {
		if len(w) < need {
			p.wtmp[i] = make([]float64, need)
		}
	}
}

func (p *solvePlan) work(sn *supernodes) {
	id := int(p.ids.Add(1)) - 1
	if id >= len(p.wtmp) {
		return // a helper left from a job with more chunks
	}
	for {
		i := int(p.next.Add(1)) - 1
		if i >= p.nchunk {
			return
		}
		switch p.job {
		case jobTaskFwd:
			sn.forwardTask(i, p.wtmp[id])
		case jobTaskBwd:
			sn.backwardTask(i, p.wtmp[id])
		case jobRowsFwd:
			a := p.r0 + (p.r1-p.r0)*i/p.nchunk
			b := p.r0 + (p.r1-p.r0)*(i+1)/p.nchunk
			sn.rowsFwd(p.s, a, b, p.c0, p.c1, p.idx[a-p.r0:b-p.r0], p.y, p.tmp[a-p.r0:], p.wtmp[id])
		case jobColsBwd:
			a := p.r0 + (p.r1-p.r0)*i/p.nchunk
			b := p.r0 + (p.r1-p.r0)*(i+1)/p.nchunk
			wk := (p.c1 - p.c0) * p.k
			acc := p.acc[i*wk : (i+1)*wk]
			clear(acc)
			sn.colsBwdTo(acc, p.s, a, b, p.c0, p.c1, p.idx[a-p.r0:b-p.r0], p.y, p.tmp[a-p.r0:], p.wtmp[id])
		}
	}
}

// forwardTask runs the forward solve of task t.
func (sn *supernodes) forwardTask(t int, tmp []float64) {
	p := sn.plan
	k, y := p.k, p.y
	clear(p.buf[p.extPtr[t]*k : p.extPtr[t+1]*k])
	for s := p.tasks[t][0]; s < p.tasks[t][1]; s++ {
		nc := sn.first[s+1] - sn.first[s]
		rows := sn.rows[sn.rowPtr[s]:sn.rowPtr[s+1]]
		if k == 1 && nc*len(rows) <= tinyNode {
			loc := p.loc[p.locPtr[s] : p.locPtr[s]+len(rows)-p.split[s]]
			sn.forwardTiny(s, y, p.split[s], loc, p.buf)
			continue
		}
		sn.triFwd(s, 0, nc, y, tmp)
		sn.rowsFwd(s, nc, p.split[s], 0, nc, rows[nc:p.split[s]], y, tmp, tmp)
		loc := p.loc[p.locPtr[s] : p.locPtr[s]+len(rows)-p.split[s]]
		sn.rowsFwd(s, p.split[s], len(rows), 0, nc, loc, p.buf, tmp, tmp)
	}
}

// backwardTask runs the backward solve of task t.
func (sn *supernodes) backwardTask(t int, tmp []float64) {
	p := sn.plan
	for s := p.tasks[t][1] - 1; s >= p.tasks[t][0]; s-- {
		nc := sn.first[s+1] - sn.first[s]
		rows := sn.rows[sn.rowPtr[s]:sn.rowPtr[s+1]]
		if p.k == 1 && nc*len(rows) <= tinyNode {
			sn.backwardTiny(s, p.y)
			continue
		}
		if p.k == 1 {
			gather(tmp, rows[nc:], p.y)
		}
		sn.colsBwd(s, nc, len(rows), 0, nc, rows[nc:], p.y, tmp, tmp)
		sn.triBwd(s, 0, nc, p.y, tmp)
	}
}

// gather sets g[i] = src[idx[i]].
func gather(g []float64, idx []int, src []float64) {
	g = g[:len(idx)]
	for i, r := range idx {
		g[i] = src[r]
	}
}

// forwardTop runs the forward solve of supernode s, cutting its large
// rectangles into concurrent chunks.
func (sn *supernodes) forwardTop(s int) {
	p := sn.plan
	nc := sn.first[s+1] - sn.first[s]
	rows := sn.rows[sn.rowPtr[s]:sn.rowPtr[s+1]]
	if p.k == 1 && nc*len(rows) <= tinyNode {
		sn.forwardTiny(s, p.y, len(rows), nil, nil)
		return
	}
	if nc < triBlocked {
		sn.triFwd(s, 0, nc, p.y, p.wtmp[0])
	} else {
		for c := 0; c < nc; c += triPanel {
			w := min(triPanel, nc-c)
			sn.triFwd(s, c, c+w, p.y, p.wtmp[0])
			p.rect(sn, jobRowsFwd, s, c+w, nc, c, c+w, rows[c+w:nc])
		}
	}
	p.rect(sn, jobRowsFwd, s, nc, len(rows), 0, nc, rows[nc:])
}

// backwardTop is the backward solve of supernode s (see forwardTop).
func (sn *supernodes) backwardTop(s int) {
	p := sn.plan
	nc := sn.first[s+1] - sn.first[s]
	rows := sn.rows[sn.rowPtr[s]:sn.rowPtr[s+1]]
	if p.k == 1 && nc*len(rows) <= tinyNode {
		sn.backwardTiny(s, p.y)
		return
	}
	p.rect(sn, jobColsBwd, s, nc, len(rows), 0, nc, rows[nc:])
	if nc < triBlocked {
		sn.triBwd(s, 0, nc, p.y, p.wtmp[0])
		return
	}
	for c := (nc - 1) / triPanel * triPanel; c >= 0; c -= triPanel {
		w := min(triPanel, nc-c)
		sn.triBwd(s, c, c+w, p.y, p.wtmp[0])
		p.rect(sn, jobColsBwd, s, c, c+w, 0, c, rows[c:c+w])
	}
}

// tinyNode is the number of entries (nc*nr) up to which a supernode is
// solved (one right-hand side) by forwardTiny and backwardTiny: the
// general path's calls per supernode cost a third more than the work on
// the supernodes of a couple of columns that 2-D problems have by the
// thousand.
const tinyNode = 256

// forwardTiny is the forward solve of the small supernode s for one
// right-hand side in plain loops: its triangle, then its rows below, rows
// [nc, split) into y and rows [split, nr) into buf at loc.
func (sn *supernodes) forwardTiny(s int, y []float64, split int, loc []int, buf []float64) {
	f := sn.first[s]
	nc := sn.first[s+1] - f
	rows := sn.rows[sn.rowPtr[s]:sn.rowPtr[s+1]]
	ls := sn.val[sn.valPtr[s]:sn.valPtr[s+1]]
	ys := y[f : f+nc]
	for j := range ys {
		sum := ys[j]
		for t, v := range ls[j*nc : j*nc+j] {
			sum -= v * ys[t]
		}
		ys[j] = sum / ls[j*nc+j]
	}
	for r := nc; r < len(rows); r++ {
		var sum float64
		for t, v := range ls[r*nc : r*nc+nc] {
			sum += v * ys[t]
		}
		if r < split {
			y[rows[r]] -= sum
		} else {
			buf[loc[r-split]] -= sum
		}
	}
}

// backwardTiny is the backward solve of the small supernode s (see
// forwardTiny).
func (sn *supernodes) backwardTiny(s int, y []float64) {
	f := sn.first[s]
	nc := sn.first[s+1] - f
	rows := sn.rows[sn.rowPtr[s]:sn.rowPtr[s+1]]
	ls := sn.val[sn.valPtr[s]:sn.valPtr[s+1]]
	ys := y[f : f+nc]
	for r := nc; r < len(rows); r++ {
		yr := y[rows[r]]
		for t, v := range ls[r*nc : r*nc+nc] {
			ys[t] -= v * yr
		}
	}
	for j := nc - 1; j >= 0; j-- {
		ys[j] /= ls[j*nc+j]
		yj := ys[j]
		for t, v := range ls[j*nc : j*nc+j] {
			ys[t] -= v * yj
		}
	}
}

// rect applies rows [r0, r1) x columns [c0, c1) of supernode s: forward
// (jobRowsFwd) y[idx] -= L[r0:r1, c0:c1] y[cols], or backward (jobColsBwd)
// y[cols] -= L[r0:r1, c0:c1]^T y[idx]. Large ones are cut into chunks of
// rows. Forward chunks write apart; backward ones sum into accumulators of
// their own (at most accChunks), added in chunk order after the join
// (cutting by columns instead would need no sums but makes each row of L
// a few short pieces, measured 10% slower over the whole solve).
func (p *solvePlan) rect(sn *supernodes, job, s, r0, r1, c0, c1 int, idx []int) {
	m, w := r1-r0, c1-c0
	if m <= 0 || w <= 0 {
		return
	}
	if job == jobColsBwd && p.k == 1 {
		gather(p.tmp, idx, p.y)
	}
	n := 1
	if m*w >= rectPar {
		n = min(m*w/rectChunk, m/4)
		if job == jobColsBwd {
			n = min(n, accChunks)
		}
	}
	if n <= 1 {
		if job == jobRowsFwd {
			sn.rowsFwd(s, r0, r1, c0, c1, idx, p.y, p.tmp, p.wtmp[0])
		} else {
			sn.colsBwd(s, r0, r1, c0, c1, idx, p.y, p.tmp, p.wtmp[0])
		}
		return
	}
	p.s, p.r0, p.r1, p.c0, p.c1, p.idx = s, r0, r1, c0, c1, idx
	if job == jobColsBwd && len(p.acc) < n*w*p.k {
		p.acc = make([]float64, accChunks*p.maxNc*p.k)
	}
	p.run(sn, job, n)
	p.idx = nil
	if job == jobColsBwd {
		// The chunks' sums, in chunk order.
		k := p.k
		f := sn.first[s]
		x := p.y[(f+c0)*k : (f+c1)*k]
		for i := 0; i < n; i++ {
			floats.Add(x, p.acc[i*w*k:(i+1)*w*k])
		}
	}
}

// wideRow is the width from which a row of L goes through gonum's
// assembly dot or axpy on its own (floats.Dot, floats.AddScaled): one
// stream through memory, about 20 GB/s against 7..14 for Dgemv (which
// interleaves four rows) and for plain loops; with 5 right-hand sides,
// transposed to run the same kernels, 2-3 times the plain 4-row loops.
// Narrower rows go four at a time, through Dgemv for one right-hand side
// (call overhead dominates below about 24).
const wideRow = 24

// smallRect is the number of entries below which a narrow rectangle goes
// through plain loops rather than Dgemv, whose checks and scatter cost
// more than they save on the tiny supernodes of sparse 2-D problems.
const smallRect = 256

// rowsFwd does dst[idx[r-r0]] -= L[r, c0:c1] y[cols c0:c1] for rows r0 <=
// r < r1 of supernode s (k interleaved right-hand sides). tmp (a value per
// row) and xbuf (w*k values) are scratch.
func (sn *supernodes) rowsFwd(s, r0, r1, c0, c1 int, idx []int, dst, tmp, xbuf []float64) {
	m, w := r1-r0, c1-c0
	if m <= 0 || w <= 0 {
		return
	}
	f, nc := sn.first[s], sn.first[s+1]-sn.first[s]
	k := sn.plan.k
	l := sn.val[sn.valPtr[s]+r0*nc+c0:]
	x := sn.plan.y[(f+c0)*k : (f+c1)*k]
	idx = idx[:m]
	switch {
	case k == 1 && w >= wideRow:
		for i, r := range idx {
			dst[r] -= floats.Dot(l[i*nc:i*nc+w], x)
		}
	case k == 1 && m*w < smallRect:
		for i, r := range idx {
			var sum float64
			for c, v := range l[i*nc : i*nc+w] {
				sum += v * x[c]
			}
			dst[r] -= sum
		}
	case k == 1:
		tmp = tmp[:m]
		gonum.Implementation{}.Dgemv(blas.NoTrans, m, w, 1, l, nc, x, 1, 0, tmp, 1)
		for i, v := range tmp {
			dst[idx[i]] -= v
		}
	case w >= wideRow:
		// Each right-hand side contiguous, so that the dots run in
		// assembly; the row of L is reread from L1 for each.
		xt := xbuf[:w*k]
		transpose(xt, x, w, k)
		for i, r := range idx {
			li := l[i*nc : i*nc+w]
			d := dst[r*k : r*k+k]
			for q := range d {
				d[q] -= floats.Dot(li, xt[q*w:q*w+w])
			}
		}
	default:
		rowsFwdK(l, nc, m, x, idx, dst, k)
	}
}

// colsBwd does y[cols c0:c1] -= L[r0:r1, c0:c1]^T src[idx] for supernode s;
// for a single right-hand side g holds src[idx] gathered. xbuf (w*k
// values) is scratch.
func (sn *supernodes) colsBwd(s, r0, r1, c0, c1 int, idx []int, src, g, xbuf []float64) {
	m, w := r1-r0, c1-c0
	if m <= 0 || w <= 0 {
		return
	}
	f, k := sn.first[s], sn.plan.k
	x := sn.plan.y[(f+c0)*k : (f+c1)*k]
	sn.colsBwdTo(x, s, r0, r1, c0, c1, idx, src, g, xbuf)
}

// colsBwdTo is colsBwd into x (w*k values) in place of y's columns.
func (sn *supernodes) colsBwdTo(x []float64, s, r0, r1, c0, c1 int, idx []int, src, g, xbuf []float64) {
	m, w := r1-r0, c1-c0
	nc := sn.first[s+1] - sn.first[s]
	k := sn.plan.k
	l := sn.val[sn.valPtr[s]+r0*nc+c0:]
	switch {
	case k == 1 && w >= wideRow:
		for i, v := range g[:m] {
			floats.AddScaled(x, -v, l[i*nc:i*nc+w])
		}
	case k == 1 && m*w < smallRect:
		for i, v := range g[:m] {
			for c, lv := range l[i*nc : i*nc+w] {
				x[c] -= lv * v
			}
		}
	case k == 1:
		gonum.Implementation{}.Dgemv(blas.Trans, m, w, -1, l, nc, g[:m], 1, 1, x, 1)
	case w >= wideRow:
		xt := xbuf[:w*k]
		transpose(xt, x, w, k)
		for i, r := range idx[:m] {
			li := l[i*nc : i*nc+w]
			for q, v := range src[r*k : r*k+k] {
				floats.AddScaled(xt[q*w:q*w+w], -v, li)
			}
		}
		transpose(x, xt, k, w)
	default:
		colsBwdK(l, nc, m, x, idx, src, k)
	}
}

// transpose sets dst (c x r) to the transpose of src (r x c), both
// row-major.
func transpose(dst, src []float64, r, c int) {
	for i := 0; i < r; i++ {
		for j, v := range src[i*c : i*c+c] {
			dst[j*r+i] = v
		}
	}
}

// triFwd solves the diagonal triangle of columns [c0, c1) of supernode s
// in place (forward). xbuf (w*k values) is scratch.
func (sn *supernodes) triFwd(s, c0, c1 int, y, xbuf []float64) { sn.tri(s, c0, c1, y, xbuf, false) }

// triBwd is triFwd for the transposed triangle (backward).
func (sn *supernodes) triBwd(s, c0, c1 int, y, xbuf []float64) { sn.tri(s, c0, c1, y, xbuf, true) }

// tri is triFwd (backward false) and triBwd. One right-hand side, or each
// of several on wide triangles (after a transpose), goes through triFwd1
// or triBwd1; several on narrow triangles are solved together.
func (sn *supernodes) tri(s, c0, c1 int, y, xbuf []float64, backward bool) {
	f, nc := sn.first[s], sn.first[s+1]-sn.first[s]
	k := sn.plan.k
	l := sn.val[sn.valPtr[s]+c0*nc+c0:]
	x := y[(f+c0)*k : (f+c1)*k]
	w := c1 - c0
	one := triFwd1
	if backward {
		one = triBwd1
	}
	if k == 1 {
		one(l, nc, x)
		return
	}
	if w >= wideRow {
		xt := xbuf[:w*k]
		transpose(xt, x, w, k)
		for q := 0; q < k; q++ {
			one(l, nc, xt[q*w:q*w+w])
		}
		transpose(x, xt, k, w)
		return
	}
	if !backward {
		for j := 0; j < w; j++ {
			xj := x[j*k : j*k+k]
			for c, v := range l[j*nc : j*nc+j] {
				xc := x[c*k : c*k+k]
				for t := range xj {
					xj[t] -= v * xc[t]
				}
			}
			d := l[j*nc+j]
			for t := range xj {
				xj[t] /= d
			}
		}
		return
	}
	for j := w - 1; j >= 0; j-- {
		xj := x[j*k : j*k+k]
		d := l[j*nc+j]
		for t := range xj {
			xj[t] /= d
		}
		for c, v := range l[j*nc : j*nc+j] {
			xc := x[c*k : c*k+k]
			for t := range xc {
				xc[t] -= v * xj[t]
			}
		}
	}
}

// triFwd1 solves L x = b in place for the lower triangle of l (row
// stride ld) and one right-hand side. Long rows go through gonum's
// assembly dot; Dtrsv would be plain loops with one sum, several times
// slower.
func triFwd1(l []float64, ld int, x []float64) {
	for j := range x {
		lj := l[j*ld : j*ld+j]
		var sum float64
		if j >= wideRow {
			sum = floats.Dot(lj, x[:j])
		} else {
			for t, v := range lj {
				sum += v * x[t]
			}
		}
		x[j] = (x[j] - sum) / l[j*ld+j]
	}
}

// triBwd1 solves L^T x = b in place (see triFwd1).
func triBwd1(l []float64, ld int, x []float64) {
	for j := len(x) - 1; j >= 0; j-- {
		x[j] /= l[j*ld+j]
		xj := x[j]
		lj := l[j*ld : j*ld+j]
		if j >= wideRow {
			floats.AddScaled(x[:j], -xj, lj)
			continue
		}
		for t, v := range lj {
			x[t] -= v * xj
		}
	}
}

// rowsFwdK does dst[idx[i]] -= l[i*ld : i*ld+w] x for i < m and k
// interleaved right-hand sides (x holds w rows of k), four rows of L at a
// time so that x is loaded once for four.
func rowsFwdK(l []float64, ld, m int, x []float64, idx []int, dst []float64, k int) {
	w := len(x) / k
	idx = idx[:m]
	i := 0
	for ; i+4 <= m; i += 4 {
		l0 := l[i*ld : i*ld+w]
		l1 := l[(i+1)*ld : (i+1)*ld+w]
		l2 := l[(i+2)*ld : (i+2)*ld+w]
		l3 := l[(i+3)*ld : (i+3)*ld+w]
		var a0, a1, a2, a3 [manyBlock]float64
		for c := range l0 {
			xc := x[c*k : c*k+k]
			v0, v1, v2, v3 := l0[c], l1[c], l2[c], l3[c]
			for t, v := range xc {
				a0[t] += v0 * v
				a1[t] += v1 * v
				a2[t] += v2 * v
				a3[t] += v3 * v
			}
		}
		d0 := dst[idx[i]*k : idx[i]*k+k]
		d1 := dst[idx[i+1]*k : idx[i+1]*k+k]
		d2 := dst[idx[i+2]*k : idx[i+2]*k+k]
		d3 := dst[idx[i+3]*k : idx[i+3]*k+k]
		for t := range d0 {
			d0[t] -= a0[t]
			d1[t] -= a1[t]
			d2[t] -= a2[t]
			d3[t] -= a3[t]
		}
	}
	for ; i < m; i++ {
		var a [manyBlock]float64
		for c, v := range l[i*ld : i*ld+w] {
			for t, xv := range x[c*k : c*k+k] {
				a[t] += v * xv
			}
		}
		d := dst[idx[i]*k : idx[i]*k+k]
		for t := range d {
			d[t] -= a[t]
		}
	}
}

// colsBwdK does x -= sum_i l[i*ld : i*ld+w]^T src[idx[i]] for k
// interleaved right-hand sides, four rows of L at a time so that x is
// loaded and stored once for four.
func colsBwdK(l []float64, ld, m int, x []float64, idx []int, src []float64, k int) {
	w := len(x) / k
	idx = idx[:m]
	i := 0
	for ; i+4 <= m; i += 4 {
		l0 := l[i*ld : i*ld+w]
		l1 := l[(i+1)*ld : (i+1)*ld+w]
		l2 := l[(i+2)*ld : (i+2)*ld+w]
		l3 := l[(i+3)*ld : (i+3)*ld+w]
		s0 := src[idx[i]*k : idx[i]*k+k]
		s1 := src[idx[i+1]*k : idx[i+1]*k+k]
		s2 := src[idx[i+2]*k : idx[i+2]*k+k]
		s3 := src[idx[i+3]*k : idx[i+3]*k+k]
		for c := range l0 {
			xc := x[c*k : c*k+k]
			v0, v1, v2, v3 := l0[c], l1[c], l2[c], l3[c]
			for t := range xc {
				xc[t] -= v0*s0[t] + v1*s1[t] + v2*s2[t] + v3*s3[t]
			}
		}
	}
	for ; i < m; i++ {
		si := src[idx[i]*k : idx[i]*k+k]
		for c, v := range l[i*ld : i*ld+w] {
			xc := x[c*k : c*k+k]
			for t := range xc {
				xc[t] -= v * si[t]
			}
		}
	}
}

// newSolvePlan splits the supernodal tree for the solve. The split of the
// factorization (sn.tasks) weighs flops, nc*nr^2 per supernode, and on a
// 3-D mesh stops at the root, whose dense separator holds most of them;
// the solve costs one pass over L, nc*nr entries per supernode, so it is
// split by entries, as splitTasks splits by flops: the heaviest subtree is
// replaced by its children (its root moving to the top) until none holds
// more than 1/solveSplitParts of the entries. Below splitMin entries it
// does not split (solveK passes solveSplitMin; tests pass less, so that
// small factors take the concurrent path too).
func (sn *supernodes) newSolvePlan(splitMin float64) *solvePlan {
	ns := len(sn.first) - 1
	p := &solvePlan{split: make([]int, ns)}
	// The parent of supernode s holds its first row below its columns
	// (the elimination-tree parent of its last column); supernodes are in
	// postorder, so the subtree of s is the range (s-size[s], s].
	sparent := make([]int, ns)
	chead := make([]int, ns)
	cnext := make([]int, ns)
	size := make([]int, ns)
	work := make([]float64, ns)
	for s := range chead {
		chead[s] = -1
	}
	total := 0.0
	for s := ns - 1; s >= 0; s-- {
		nc := sn.first[s+1] - sn.first[s]
		nr := sn.rowPtr[s+1] - sn.rowPtr[s]
		p.split[s] = nr
		p.maxNr = max(p.maxNr, nr)
		p.maxNc = max(p.maxNc, nc)
		sparent[s] = -1
		if nr > nc {
			sparent[s] = sn.super[sn.rows[sn.rowPtr[s]+nc]]
			cnext[s] = chead[sparent[s]]
			chead[sparent[s]] = s
		}
	}
	for s := 0; s < ns; s++ {
		nc := sn.first[s+1] - sn.first[s]
		nr := sn.rowPtr[s+1] - sn.rowPtr[s]
		work[s] += float64(nc * nr)
		size[s]++
		if q := sparent[s]; q >= 0 {
			work[q] += work[s]
			size[q] += size[s]
		} else {
			total += work[s]
		}
	}
	isTop := make([]bool, ns)
	var front []int
	if total >= splitMin {
		for s := 0; s < ns; s++ {
			if sparent[s] < 0 {
				front = append(front, s)
			}
		}
		for {
			h := 0
			for i, s := range front {
				if work[s] > work[front[h]] {
					h = i
				}
			}
			s := front[h]
			if work[s] <= total/solveSplitParts || chead[s] == -1 {
				break
			}
			isTop[s] = true
			front = append(front[:h], front[h+1:]...)
			for ch := chead[s]; ch != -1; ch = cnext[ch] {
				front = append(front, ch)
			}
		}
	}
	if len(front) < 2 {
		// One subtree: the whole solve runs in order.
		front = front[:0]
		for s := range isTop {
			isTop[s] = true
		}
	}
	sort.Ints(front)
	for _, s := range front {
		p.tasks = append(p.tasks, [2]int{s - size[s] + 1, s + 1})
	}
	sort.SliceStable(p.tasks, func(i, j int) bool { return work[p.tasks[i][1]-1] > work[p.tasks[j][1]-1] })
	for s := 0; s < ns; s++ {
		if isTop[s] {
			p.top = append(p.top, s)
		}
	}
	// The rows of each task outside its columns, and the top columns they
	// are: ext lists each task's distinct ones, increasing.
	p.tmp = make([]float64, p.maxNr)
	p.locPtr = make([]int, ns)
	p.extPtr = make([]int, len(p.tasks)+1)
	pos := make([]int, sn.n())
	for i := range pos {
		pos[i] = -1
	}
	for t, r := range p.tasks {
		end := sn.first[r[1]]
		start := len(p.ext)
		for s := r[0]; s < r[1]; s++ {
			nc := sn.first[s+1] - sn.first[s]
			rows := sn.rows[sn.rowPtr[s]:sn.rowPtr[s+1]]
			p.split[s] = nc + sort.SearchInts(rows[nc:], end)
			for _, i := range rows[p.split[s]:] {
				if !isTop[sn.super[i]] {
					panic("sparse: a subtree of the solve updates a row outside it that is not on top")
				}
				if pos[i] < start {
					pos[i] = len(p.ext)
					p.ext = append(p.ext, i)
				}
			}
		}
		sort.Ints(p.ext[start:])
		for j := start; j < len(p.ext); j++ {
			pos[p.ext[j]] = j
		}
		p.extPtr[t+1] = len(p.ext)
		for s := r[0]; s < r[1]; s++ {
			p.locPtr[s] = len(p.loc)
			for _, i := range sn.rows[sn.rowPtr[s]+p.split[s] : sn.rowPtr[s+1]] {
				p.loc = append(p.loc, pos[i])
			}
		}
	}
	return p
}

// n is the order of L.
func (sn *supernodes) n() int { return len(sn.super) }

// splitTasks chooses the independent subtrees for concurrent
// factorization: starting from the roots, it keeps replacing the heaviest
// subtree by its children (the root moving to the sequential top) until no
// subtree holds more than an eighth of the work, the top holds a third, or
// the heaviest is a leaf. Work is estimated as nc*nr^2 per supernode. The
// split depends on the matrix only, not on the number of threads, which is
// what keeps results bitwise reproducible.
func (sn *supernodes) splitTasks(chead, cnext, sparent []int) {
	ns := len(sn.first) - 1
	work := make([]float64, ns) // subtree work
	size := make([]int, ns)     // subtree size in supernodes
	total := 0.0
	for s := 0; s < ns; s++ {
		nc := float64(sn.first[s+1] - sn.first[s])
		nr := float64(sn.rowPtr[s+1] - sn.rowPtr[s])
		work[s] += nc * nr * nr
		size[s]++
		if p := sparent[s]; p >= 0 {
			work[p] += work[s]
			size[p] += size[s]
		} else {
			total += work[s]
		}
	}
	var front []int
	for s := 0; s < ns; s++ {
		if sparent[s] < 0 {
			front = append(front, s)
		}
	}
	isTop := make([]bool, ns)
	topWork := 0.0
	// Below this much work, threads cost more than they save.
	if total >= 1e6 {
		for {
			h := 0
			for i, s := range front {
				if work[s] > work[front[h]] {
					h = i
				}
			}
			s := front[h]
			if work[s] <= total/8 || chead[s] == -1 {
				break
			}
			nc := float64(sn.first[s+1] - sn.first[s])
			nr := float64(sn.rowPtr[s+1] - sn.rowPtr[s])
			if topWork+nc*nr*nr > total/3 {
				break
			}
			topWork += nc * nr * nr
			isTop[s] = true
			front = append(front[:h], front[h+1:]...)
			for ch := chead[s]; ch != -1; ch = cnext[ch] {
				front = append(front, ch)
			}
		}
	}
	sort.Ints(front)
	sn.tasks = sn.tasks[:0]
	for _, s := range front {
		sn.tasks = append(sn.tasks, [2]int{s - size[s] + 1, s + 1})
	}
	// Heaviest first, so the goroutines finish together.
	sort.SliceStable(sn.tasks, func(i, j int) bool { return work[sn.tasks[i][1]-1] > work[sn.tasks[j][1]-1] })
	sn.top = sn.top[:0]
	for s := 0; s < ns; s++ {
		if isTop[s] {
			sn.top = append(sn.top, s)
		}
	}
}

// smallUpdate sets the lower part of the top wd x wd square and the rows
// below it of cb (m x wd) to the products of the rows of l (m x ncd): cb[r][q]
// = sum_t l[r][t] l[q][t], q <= r, summed over t in order. It is the
// update of a small supernode by a small descendant, the bulk of the
// factorization on 2-D graphs, so the widths that blocks of 2 to 6 make
// have loops of their own, with the same sums in the same order.
func smallUpdate(cb, l []float64, m, wd, ncd int) {
	switch ncd {
	case 3:
		for r := 0; r < m; r++ {
			lr := l[r*3 : r*3+3 : r*3+3]
			for q := 0; q < wd && q <= r; q++ {
				lq := l[q*3 : q*3+3 : q*3+3]
				sum := 0.0
				sum += lr[0] * lq[0]
				sum += lr[1] * lq[1]
				sum += lr[2] * lq[2]
				cb[r*wd+q] = sum
			}
		}
	case 4:
		for r := 0; r < m; r++ {
			lr := l[r*4 : r*4+4 : r*4+4]
			for q := 0; q < wd && q <= r; q++ {
				lq := l[q*4 : q*4+4 : q*4+4]
				sum := 0.0
				sum += lr[0] * lq[0]
				sum += lr[1] * lq[1]
				sum += lr[2] * lq[2]
				sum += lr[3] * lq[3]
				cb[r*wd+q] = sum
			}
		}
	case 6:
		for r := 0; r < m; r++ {
			lr := l[r*6 : r*6+6 : r*6+6]
			for q := 0; q < wd && q <= r; q++ {
				lq := l[q*6 : q*6+6 : q*6+6]
				sum := 0.0
				sum += lr[0] * lq[0]
				sum += lr[1] * lq[1]
				sum += lr[2] * lq[2]
				sum += lr[3] * lq[3]
				sum += lr[4] * lq[4]
				sum += lr[5] * lq[5]
				cb[r*wd+q] = sum
			}
		}
	default:
		for r := 0; r < m; r++ {
			lr := l[r*ncd : (r+1)*ncd]
			for q := 0; q < wd && q <= r; q++ {
				lq := l[q*ncd : (q+1)*ncd]
				sum := 0.0
				for t, v := range lr {
					sum += v * lq[t]
				}
				cb[r*wd+q] = sum
			}
		}
	}
}
