package sparse

import (
	"math"
	"runtime"
	"slices"
	"sort"
	stdsync "sync"
	"sync/atomic"
)

// The numeric supernodal factorization (the layout is supernodal.go's):
// assembling A or a BlockSym into the supernodes, the left-looking
// updates, the dense factorization of each supernode with its pivot
// modification (FactorizeBlocksModified), and the split of the tree into
// subtrees factored concurrently. Every sum runs in an order fixed by the
// matrix, so the factor's bits do not depend on the number of threads.

// blasThreshold is the flop count above which the dense kernels call
// gonum's BLAS rather than plain loops (call overhead dominates below).
const blasThreshold = 8192

// maxKeptWork is the largest work space (bytes, all goroutines') that a
// factor keeps for its next factorization. A larger one is let go when
// the factorization ends and made again by the next: at a million poses
// the Hessian's is 170 MB (the row maps, the largest update, the lists of
// pending updates), which the trust region's solves, made next to the
// factor, do not need, and beside a factorization of seconds its
// allocation costs nothing.
var maxKeptWork = 32 << 20 // a variable for tests

// snWork is the work space of one goroutine of the factorization.
type snWork struct {
	// relMap[i] is the local row of row i in the supernode being factored:
	// four bytes, as a supernode's rows are far fewer than 2^31 (the
	// analysis refuses a factor of that order, maxOrder), for one array of
	// the factor's order per thread (48 MB for the Hessian's at a million
	// poses, against 96).
	relMap []int32
	cbuf   []float64
	raised int // pivots changed by FactorizeBlocksModified
	// A block row's values and the work space of the function that
	// computes them (FactorizeRows).
	rowBuf, rowWork []float64
}

// factor computes the numeric supernodal factor of a. Independent subtrees
// (sn.tasks, or the finer sn.xtasks) are factored concurrently; the
// supernodes above them (the top of the tree) follow in order, their
// large products split between threads by gemmNT and, on two threads,
// their descendants' updates by rows with a helper goroutine
// (topsplit.go). A descendant's pending update of a supernode outside its
// subtree is linked where it would be on one thread (in task order after
// the join, or for the finer split at its refPos, factorReplay), so the
// order of every sum, hence every bit of the result, is the same on any
// number of threads.
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
		pj := int(c.pinv[j])
		for p := a.ColPtr[j]; p < a.ColPtr[j+1]; p++ {
			pi := int(c.pinv[a.RowIdx[p]])
			lo, hi := min(pi, pj), max(pi, pj)
			s := int(sn.super[lo])
			f := sn.first[s]
			nc := sn.first[s+1] - f
			row, _ := slices.BinarySearch(sn.rows[sn.rowPtr[s]:sn.rowPtr[s+1]], int32(hi))
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
// writes inside s. A block ordering keeps the b columns of a block row
// together, so a row computed by rowFn serves all of them.
func (sn *supernodes) assembleNode(c *Cholesky, s int, ls []float64, w *snWork) {
	clear(ls)
	m, relMap := sn.src, w.relMap
	b := m.B
	f, l := sn.first[s], sn.first[s+1]-1
	nc := l - f + 1
	var row []float64
	last := -1
	for q := f; q <= l; q++ {
		j, cc := c.perm[q]/b, c.perm[q]%b
		if j != last {
			row, last = sn.blockRow(j, w), j
		}
		assembleColumn(ls[q-f:], row[cc*b:], m.ColIdx[m.RowPtr[j]:m.RowPtr[j+1]], c.pinv, relMap, b, q, nc, sn.shift)
	}
}

// assembleColumn is assembleNode's scatter of one scalar column q, row cc
// of block row j: lq is the supernode's values from q's column on, row
// the block row's values from their row cc on, cols its block columns. It
// is a function of its own so that its loops keep their counters in
// registers, which assembleNode's spilled.
func assembleColumn(lq, row []float64, cols []int, pinv, relMap []int32, b, q, nc int, shift float64) {
	bb := b * b
	for t, i := range cols {
		// Block (j, i) holds A[(j, cc), (i, a)] = A[(i, a), (j, cc)]
		// in its row cc.
		blk := row[t*bb : t*bb+b]
		pi := pinv[i*b : i*b+b][:len(blk)]
		for a, v := range blk {
			pr := int(pi[a])
			if pr < q {
				continue // above the diagonal: column pr holds it
			}
			if pr == q {
				v += shift
			}
			lq[int(relMap[pr])*nc] = v
		}
	}
}

// blockRow returns the values of src's block row j: src's own, or those
// rowFn computes into w's buffer.
func (sn *supernodes) blockRow(j int, w *snWork) []float64 {
	m, bb := sn.src, sn.src.B*sn.src.B
	if sn.rowFn == nil {
		return m.Val[m.RowPtr[j]*bb : m.RowPtr[j+1]*bb]
	}
	n := (m.RowPtr[j+1] - m.RowPtr[j]) * bb
	if len(w.rowBuf) < n {
		w.rowBuf = make([]float64, max(n, 2*len(w.rowBuf)))
	}
	if len(w.rowWork) < sn.rowFn.WorkLen {
		w.rowWork = make([]float64, sn.rowFn.WorkLen)
	}
	sn.rowFn.Row(j, w.rowBuf[:n], w.rowWork[:sn.rowFn.WorkLen])
	return w.rowBuf[:n]
}

// clearVal allocates val on first use and sets it to zero.
func (sn *supernodes) clearVal() {
	if sn.val == nil {
		sn.val = getVals(sn.valPtr[len(sn.first)-1])
	}
	clear(sn.val)
}

// factorAssembled factors val in place, which holds A (assemble).
func (sn *supernodes) factorAssembled(c *Cholesky, thr float64) error {
	if ns := len(sn.first) - 1; len(sn.head) != ns {
		sn.head, sn.next, sn.dpos = make([]int, ns), make([]int, ns), make([]int, ns)
	}
	for s := range sn.head {
		sn.head[s] = -1
	}
	threads := min(runtime.GOMAXPROCS(0), len(sn.tasks))
	finer := sn.xtasks != nil && runtime.GOMAXPROCS(0) > 1
	if finer {
		threads = min(runtime.GOMAXPROCS(0), len(sn.xtasks))
	}
	for len(sn.work) < max(threads, 1) {
		sn.work = append(sn.work, &snWork{relMap: make([]int32, c.n)})
	}
	for _, w := range sn.work {
		w.raised = 0
	}
	defer func() {
		c.raised = 0
		kept := 0
		for _, w := range sn.work {
			c.raised += w.raised
			kept += 4*len(w.relMap) + 8*(cap(w.cbuf)+cap(w.rowBuf)+cap(w.rowWork))
		}
		kept += 8 * (len(sn.head) + len(sn.next) + len(sn.dpos))
		if kept >= maxKeptWork {
			sn.work, sn.head, sn.next, sn.dpos = nil, nil, nil, nil
		}
	}()
	if finer {
		return sn.factorReplay(c, thr, threads)
	}
	if len(sn.errs) < len(sn.tasks) {
		sn.errs = make([]error, len(sn.tasks))
		sn.deferred = make([][]int, len(sn.tasks))
	}
	errs, deferred := sn.errs, sn.deferred
	for t := range sn.tasks {
		errs[t], deferred[t] = nil, deferred[t][:0]
	}
	// A failure is the first in task order, the one a single thread meets
	// first: a task stops once a task before it has failed (and only
	// then, so that every task before the first failed one runs whole).
	var least atomic.Int64
	least.Store(math.MaxInt64)
	runTask := func(t int, w *snWork) {
		lo, hi := sn.tasks[t][0], sn.tasks[t][1]
		for s := lo; s < hi && int64(t) <= least.Load(); s++ {
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
				lowerTo(&least, int64(t))
				return
			}
		}
	}
	runTasks(len(sn.tasks), threads, sn.work, runTask)
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
			link(d, int(sn.super[sn.rows[sn.rowPtr[d]+sn.dpos[d]]]))
		}
	}
	sn.startHelper(sn.top)
	defer sn.stopHelper()
	for _, s := range sn.top {
		if err := sn.factorNode(c, s, sn.work[0], thr, link); err != nil {
			return err
		}
	}
	return nil
}

// runTasks runs tasks 0..n-1 on threads goroutines, the caller's one of
// them (goroutine g with work space work[g]), each taking the next task
// when it is done with one: heaviest first, they finish together.
func runTasks(n, threads int, work []*snWork, run func(t int, w *snWork)) {
	var next atomic.Int64
	var wg stdsync.WaitGroup
	for g := 1; g < threads; g++ {
		wg.Add(1)
		go func(w *snWork) {
			defer wg.Done()
			for t := int(next.Add(1)) - 1; t < n; t = int(next.Add(1)) - 1 {
				run(t, w)
			}
		}(work[g])
	}
	for t := int(next.Add(1)) - 1; t < n; t = int(next.Add(1)) - 1 {
		run(t, work[0])
	}
	wg.Wait()
}

// lowerTo sets a to v if v is less.
func lowerTo(a *atomic.Int64, v int64) {
	for cur := a.Load(); v < cur && !a.CompareAndSwap(cur, v); cur = a.Load() {
	}
}

// pendingLink is an update of a supernode outside the task that made it,
// to be linked after the tasks join: descendant d, made while the
// supernode at refPos pos was factored.
type pendingLink struct{ d, pos int32 }

// factorReplay is factorAssembled on the finer split (xtasks, xtop) with
// the sums of splitTasks's: every supernode is factored by the same
// operations, and its descendants' updates are subtracted in the same
// order, as on one thread. On one thread each supernode's list of pending
// updates is built in refPos order (factorNode links every descendant it
// is done with to its next target, at the head). A task's links inside
// its own subtree are made as it goes: every target inside it and every
// descendant of one is in that subtree, in refPos order. The links to
// supernodes above it wait, marked with the refPos of the supernode that
// made them, and the top is factored in refPos order, each supernode
// after the waiting links made before it: the lists come out as on one
// thread. A failure is the one with the least refPos, the one a single
// thread would meet first: a task stops past the least failure so far.
func (sn *supernodes) factorReplay(c *Cholesky, thr float64, threads int) error {
	sn.replays++
	tasks := sn.xtasks
	if len(sn.pending) < len(tasks) {
		sn.pending = make([][]pendingLink, len(tasks))
		sn.errPos = make([]int64, len(tasks))
	}
	if len(sn.errs) < len(tasks) {
		sn.errs = make([]error, len(tasks))
		sn.deferred = make([][]int, len(tasks))
	}
	pending, errs, errPos := sn.pending, sn.errs, sn.errPos
	for t := range tasks {
		pending[t], errs[t] = pending[t][:0], nil
	}
	var least atomic.Int64
	least.Store(math.MaxInt64)
	runTask := func(t int, w *snWork) {
		lo, hi := tasks[t][0], tasks[t][1]
		for s := lo; s < hi; s++ {
			pos := int64(sn.refPos[s])
			if pos > least.Load() {
				return
			}
			err := sn.factorNode(c, s, w, thr, func(d, tgt int) {
				if tgt >= lo && tgt < hi {
					sn.next[d] = sn.head[tgt]
					sn.head[tgt] = d
				} else {
					pending[t] = append(pending[t], pendingLink{int32(d), int32(pos)})
				}
			})
			if err != nil {
				errs[t], errPos[t] = err, pos
				lowerTo(&least, pos)
				return
			}
		}
	}
	runTasks(len(tasks), threads, sn.work, runTask)
	var first error
	firstPos := int64(math.MaxInt64)
	all := sn.pendAll[:0]
	for t := range tasks {
		if errs[t] != nil && errPos[t] < firstPos {
			first, firstPos = errs[t], errPos[t]
		}
		all = append(all, pending[t]...)
	}
	// Within a task the links are in refPos order, and links of one
	// refPos come from one task: a stable sort keeps their order.
	slices.SortStableFunc(all, func(a, b pendingLink) int { return int(a.pos) - int(b.pos) })
	sn.pendAll = all
	link := func(d, tgt int) {
		sn.next[d] = sn.head[tgt]
		sn.head[tgt] = d
	}
	sn.startHelper(sn.xtop)
	defer sn.stopHelper()
	i := 0
	for _, s := range sn.xtop {
		pos := sn.refPos[s]
		if int64(pos) > firstPos {
			break
		}
		for ; i < len(all) && all[i].pos < pos; i++ {
			d := int(all[i].d)
			link(d, int(sn.super[sn.rows[sn.rowPtr[d]+sn.dpos[d]]]))
		}
		if err := sn.factorNode(c, s, sn.work[0], thr, link); err != nil {
			return err
		}
	}
	return first
}

// factorNode assembles supernode s, applies the updates of the descendants
// queued on it, factors it, and hands every descendant (and s itself) whose
// rows reach further up to link with its next target.
func (sn *supernodes) factorNode(c *Cholesky, s int, w *snWork, thr float64, link func(d, t int)) error {
	if sn.reuse != nil && sn.reuse[s] >= 0 {
		sn.copyNode(s, link)
		return nil
	}
	f, l := sn.first[s], sn.first[s+1]-1
	nc := l - f + 1
	rows := sn.rows[sn.rowPtr[s]:sn.rowPtr[s+1]]
	nr := len(rows)
	ls := sn.val[sn.valPtr[s]:sn.valPtr[s+1]] // holds A's columns f..l (assemble)
	relMap := w.relMap
	for r, i := range rows {
		relMap[i] = int32(r)
	}
	if sn.src != nil {
		sn.assembleNode(c, s, ls, w)
	}
	// Updates from descendants.
	if sn.helper != nil && sn.splitUpdates(s, relMap, ls, w, link) {
		goto factor
	}
	for d := sn.head[s]; d != -1; {
		dnext := sn.next[d]
		drows := sn.rows[sn.rowPtr[d]:sn.rowPtr[d+1]]
		ncd := sn.first[d+1] - sn.first[d]
		nrd := len(drows)
		ld := sn.val[sn.valPtr[d]:sn.valPtr[d+1]]
		p1 := sn.dpos[d]
		p2 := p1
		for p2 < nrd && int(drows[p2]) <= l {
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
		scatterUpdate(ls, cb, drows[p1:p1+m], relMap, m, wd, nc, f)
		if p2 < nrd {
			sn.dpos[d] = p2
			link(d, int(sn.super[drows[p2]]))
		}
		d = dnext
	}
factor:
	j, piv, raised := denseFactor(ls, nr, nc, thr, c.floor, c.limit)
	w.raised += raised
	if j >= 0 {
		return &NotPositiveDefiniteError{Column: c.perm[f+j], Pivot: piv}
	}
	if nr > nc {
		sn.dpos[s] = nc
		link(s, int(sn.super[rows[nc]]))
	}
	return nil
}

// scatterUpdate subtracts a descendant's update cb (m x wd, the lower part
// of its top wd x wd square) from supernode s's values ls (nc columns from
// column f): row r of cb goes to the local row relMap[rows[r]], columns
// rows[0..min(wd, r+1)-1]. When those columns are consecutive (whole
// blocks of a pose, the common case) each row of cb is one run of s's row,
// subtracted without a column index per entry; the same subtractions
// either way. It is a function of its own so that its loops keep their
// counters in registers, which factorNode's spilled.
func scatterUpdate(ls, cb []float64, rows, relMap []int32, m, wd, nc, f int) {
	scatterRows(ls, cb, rows, relMap, 0, m, wd, nc, f)
}

// scatterRows is scatterUpdate of cb's rows r0..r1-1.
func scatterRows(ls, cb []float64, rows, relMap []int32, r0, r1, wd, nc, f int) {
	if wd > 0 && int(rows[wd-1])-int(rows[0]) == wd-1 {
		c0 := int(rows[0]) - f
		for r := r0; r < r1; r++ {
			w := min(wd, r+1)
			tr := int(relMap[rows[r]])*nc + c0
			lr := ls[tr : tr+w]
			for q, v := range cb[r*wd : r*wd+w][:len(lr)] {
				lr[q] -= v
			}
		}
		return
	}
	for r := r0; r < r1; r++ {
		w := min(wd, r+1)
		tr := int(relMap[rows[r]]) * nc
		lr := ls[tr : tr+nc]
		cols := rows[:w]
		for q, v := range cb[r*wd : r*wd+w] {
			lr[int(cols[q])-f] -= v
		}
	}
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
		if j, d := panelFactor(l, nc, k, kb, thr, floor, limit, &raised); j >= 0 {
			return j, d, raised
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
		trailingSmall(l, panel, nc, k, kb, m, nt)
	}
	return -1, 0, raised
}

// panelFactor is denseFactor's unblocked Cholesky of the diagonal block of
// the panel of kb columns from column k (raised counts the pivots it
// changes). It returns the local column and value of a pivot that fails,
// or -1. It is a function of its own so that its loops keep their
// counters in registers: inside denseFactor they were spilled to the
// stack on every term.
func panelFactor(l []float64, nc, k, kb int, thr, floor, limit float64, raised *int) (col int, pivot float64) {
	for j := k; j < k+kb; j++ {
		rj := l[j*nc+k : j*nc+j]
		d := l[j*nc+j]
		for _, v := range rj {
			d -= v * v
		}
		if !(d > thr) || math.IsInf(d, 0) {
			if !raisable(d, floor, limit) {
				return j, d
			}
			if nd := max(math.Abs(d), floor); nd != d {
				d = nd
				*raised++
			}
		}
		d = math.Sqrt(d)
		l[j*nc+j] = d
		for i := j + 1; i < k+kb; i++ {
			ri := l[i*nc+k : i*nc+j]
			sum := l[i*nc+j]
			for t, v := range ri[:len(rj)] {
				sum -= v * rj[t]
			}
			l[i*nc+j] = sum / d
		}
	}
	return -1, 0
}

// trailingSmall is denseFactor's trailing update below a small panel
// (below blasThreshold): the m x nt lower trapezoid from row and column
// k+kb less the products of the rows of panel (kb columns, stride nc).
func trailingSmall(l, panel []float64, nc, k, kb, m, nt int) {
	for i := 0; i < m; i++ {
		ri := panel[i*nc : i*nc+kb]
		for j := 0; j < nt && j <= i; j++ {
			rj := panel[j*nc : j*nc+kb][:len(ri)]
			sum := 0.0
			for t, v := range ri {
				sum += v * rj[t]
			}
			l[(k+kb+i)*nc+k+kb+j] -= sum
		}
	}
}

// raisable reports whether a rejected pivot d may be raised: a modified
// factorization is asked for (floor > 0) and d is finite and not below
// -limit (NaN and Inf mean the input or the elimination broke down).
func raisable(d, floor, limit float64) bool {
	return floor > 0 && d >= -limit && !math.IsInf(d, 0)
}

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
			h := heaviest(front, work)
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
			front = openUp(front, h, chead, cnext)
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
	sn.splitFiner(front, work, size, chead, cnext)
}

// heaviest returns the index in front of the subtree with the most work
// (the first of equals): the one the splits of the tree open next.
func heaviest(front []int, work []float64) int {
	h := 0
	for i, s := range front {
		if work[s] > work[front[h]] {
			h = i
		}
	}
	return h
}

// openUp replaces front[h] by its children in the supernodal tree
// (chead, cnext), the step by which the splits descend it.
func openUp(front []int, h int, chead, cnext []int) []int {
	s := front[h]
	front = append(front[:h], front[h+1:]...)
	for ch := chead[s]; ch != -1; ch = cnext[ch] {
		front = append(front, ch)
	}
	return front
}

// splitFiner makes the execution split (xtasks, xtop, refPos) when the
// split of splitTasks leaves one subtree with more than half of its
// tasks' work, so that two goroutines could not share them: it moves the
// heaviest subtree's root to the top, as splitTasks does, until no
// subtree holds more than half of the rest, without splitTasks's cap on
// the top's work (here the top is what was a single goroutine's work
// anyway). On a torus or a sphere the root separator alone holds more
// than a third of the estimated work, so splitTasks keeps the whole tree
// as one task; this runs its two or three large subtrees concurrently.
// The order of the sums stays splitTasks's (refPos, factorAssembled).
func (sn *supernodes) splitFiner(front []int, work []float64, size []int, chead, cnext []int) {
	sn.xtasks, sn.xtop, sn.refPos = nil, nil, nil
	ns := len(sn.first) - 1
	own := func(s int) float64 {
		nc := float64(sn.first[s+1] - sn.first[s])
		nr := float64(sn.rowPtr[s+1] - sn.rowPtr[s])
		return nc * nr * nr
	}
	rest := 0.0
	for _, s := range front {
		rest += work[s]
	}
	if rest < 1e6 {
		return
	}
	front = slices.Clone(front)
	var moved []int
	for {
		h := heaviest(front, work)
		s := front[h]
		if 2*work[s] <= rest || chead[s] == -1 {
			break
		}
		rest -= own(s)
		moved = append(moved, s)
		front = openUp(front, h, chead, cnext)
	}
	if len(moved) == 0 {
		return
	}
	sn.refPos = make([]int32, ns)
	pos := int32(0)
	for _, t := range sn.tasks {
		for s := t[0]; s < t[1]; s++ {
			sn.refPos[s] = pos
			pos++
		}
	}
	for _, s := range sn.top {
		sn.refPos[s] = pos
		pos++
	}
	sort.Ints(front)
	for _, s := range front {
		sn.xtasks = append(sn.xtasks, [2]int{s - size[s] + 1, s + 1})
	}
	sort.SliceStable(sn.xtasks, func(i, j int) bool { return work[sn.xtasks[i][1]-1] > work[sn.xtasks[j][1]-1] })
	sn.xtop = append(slices.Clone(sn.top), moved...)
	slices.SortFunc(sn.xtop, func(a, b int) int { return int(sn.refPos[a]) - int(sn.refPos[b]) })
}

// smallUpdate sets the lower part of the top wd x wd square and the rows
// below it of cb (m x wd) to the products of the rows of l (m x ncd): cb[r][q]
// = sum_t l[r][t] l[q][t], q <= r, summed over t in order. It is the
// update of a small supernode by a small descendant, the bulk of the
// factorization on 2-D graphs, so the widths that blocks of 2 to 6 make
// have loops of their own, with the same sums in the same order. Each
// loop makes two entries of a row a turn, which loads the row's terms
// once for both (smallUpdate's own instructions on parking-garage 63.3M
// to 55.2M); each sum is still added term by term in order.
func smallUpdate(cb, l []float64, m, wd, ncd int) { smallUpdateRows(cb, l, 0, m, wd, ncd) }

// smallUpdateRows is smallUpdate of rows r0..r1-1 of cb.
func smallUpdateRows(cb, l []float64, r0, r1, wd, ncd int) {
	switch ncd {
	case 3:
		for r := r0; r < r1; r++ {
			lr := l[r*3 : r*3+3 : r*3+3]
			qn := min(wd, r+1)
			cr := cb[r*wd : r*wd+qn]
			q := 0
			for ; q+1 < qn; q += 2 {
				lq := l[q*3 : q*3+6 : q*3+6]
				s0, s1 := 0.0, 0.0
				s0 += lr[0] * lq[0]
				s1 += lr[0] * lq[3]
				s0 += lr[1] * lq[1]
				s1 += lr[1] * lq[4]
				s0 += lr[2] * lq[2]
				s1 += lr[2] * lq[5]
				cr[q], cr[q+1] = s0, s1
			}
			if q < qn {
				lq := l[q*3 : q*3+3 : q*3+3]
				sum := 0.0
				sum += lr[0] * lq[0]
				sum += lr[1] * lq[1]
				sum += lr[2] * lq[2]
				cr[q] = sum
			}
		}
	case 4:
		for r := r0; r < r1; r++ {
			lr := l[r*4 : r*4+4 : r*4+4]
			qn := min(wd, r+1)
			cr := cb[r*wd : r*wd+qn]
			q := 0
			for ; q+1 < qn; q += 2 {
				lq := l[q*4 : q*4+8 : q*4+8]
				s0, s1 := 0.0, 0.0
				s0 += lr[0] * lq[0]
				s1 += lr[0] * lq[4]
				s0 += lr[1] * lq[1]
				s1 += lr[1] * lq[5]
				s0 += lr[2] * lq[2]
				s1 += lr[2] * lq[6]
				s0 += lr[3] * lq[3]
				s1 += lr[3] * lq[7]
				cr[q], cr[q+1] = s0, s1
			}
			if q < qn {
				lq := l[q*4 : q*4+4 : q*4+4]
				sum := 0.0
				sum += lr[0] * lq[0]
				sum += lr[1] * lq[1]
				sum += lr[2] * lq[2]
				sum += lr[3] * lq[3]
				cr[q] = sum
			}
		}
	case 6:
		for r := r0; r < r1; r++ {
			lr := l[r*6 : r*6+6 : r*6+6]
			qn := min(wd, r+1)
			cr := cb[r*wd : r*wd+qn]
			q := 0
			for ; q+1 < qn; q += 2 {
				lq := l[q*6 : q*6+12 : q*6+12]
				s0, s1 := 0.0, 0.0
				s0 += lr[0] * lq[0]
				s1 += lr[0] * lq[6]
				s0 += lr[1] * lq[1]
				s1 += lr[1] * lq[7]
				s0 += lr[2] * lq[2]
				s1 += lr[2] * lq[8]
				s0 += lr[3] * lq[3]
				s1 += lr[3] * lq[9]
				s0 += lr[4] * lq[4]
				s1 += lr[4] * lq[10]
				s0 += lr[5] * lq[5]
				s1 += lr[5] * lq[11]
				cr[q], cr[q+1] = s0, s1
			}
			if q < qn {
				lq := l[q*6 : q*6+6 : q*6+6]
				sum := 0.0
				sum += lr[0] * lq[0]
				sum += lr[1] * lq[1]
				sum += lr[2] * lq[2]
				sum += lr[3] * lq[3]
				sum += lr[4] * lq[4]
				sum += lr[5] * lq[5]
				cr[q] = sum
			}
		}
	default:
		for r := r0; r < r1; r++ {
			lr := l[r*ncd : (r+1)*ncd]
			qn := min(wd, r+1)
			cr := cb[r*wd : r*wd+qn]
			q := 0
			for ; q+1 < qn; q += 2 {
				lq0 := l[q*ncd : (q+1)*ncd][:len(lr)]
				lq1 := l[(q+1)*ncd : (q+2)*ncd][:len(lr)]
				s0, s1 := 0.0, 0.0
				for t, v := range lr {
					s0 += v * lq0[t]
					s1 += v * lq1[t]
				}
				cr[q], cr[q+1] = s0, s1
			}
			if q < qn {
				lq := l[q*ncd : (q+1)*ncd][:len(lr)]
				sum := 0.0
				for t, v := range lr {
					sum += v * lq[t]
				}
				cr[q] = sum
			}
		}
	}
}
