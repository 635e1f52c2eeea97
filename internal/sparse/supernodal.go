package sparse

import (
	"math"
	"runtime"
	"sort"
	stdsync "sync"
	"sync/atomic"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
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
	// val: assembling A is one scatter, and no copy of A's pattern or
	// values is kept (it would cost 24 bytes per entry of A).
	vmap []int

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
}

// Relaxed amalgamation (CHOLMOD's defaults): a column joins the supernode
// of its child when the merged supernode stays small or has few explicit
// zeros. Dense blocks with a few zeros run much faster than many thin ones.
func relaxOK(nc int, zfrac float64) bool {
	return zfrac == 0 || nc <= 4 || (nc <= 16 && zfrac < 0.8) || (nc <= 48 && zfrac < 0.1) || zfrac < 0.05
}

func newSupernodes(c *Cholesky, a *CSC) *supernodes {
	n := c.n
	sn := &supernodes{super: make([]int, n)}
	// Partition: column j+1 joins the current supernode f..j when it is
	// the parent of j (then the structure of every column of the merged
	// supernode is inside {f..j+1} plus the structure of column j+1).
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
	// Children lists of the supernodal tree, then row structures from the
	// leaves up: the rows of s below its columns are those of A's columns
	// and of its children's structures that lie below s.
	sparent := make([]int, ns)
	chead := make([]int, ns)
	cnext := make([]int, ns)
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
	return sn
}

// blasThreshold is the flop count above which the dense kernels call
// gonum's BLAS rather than plain loops (call overhead dominates below).
const blasThreshold = 8192

// snWork is the work space of one goroutine of the factorization.
type snWork struct {
	relMap []int
	cbuf   []float64
}

// factor computes the numeric supernodal factor of a. Independent subtrees
// (sn.tasks) are factored concurrently; the supernodes above them (the
// top of the tree, with the large separators whose dense products gonum
// parallelizes itself) follow in order. A descendant's pending update of a
// supernode outside its subtree is queued per task and linked in task order
// after the join, so the order of every sum, hence every bit of the
// result, is the same on any number of threads.
func (sn *supernodes) factor(c *Cholesky, aval []float64, thr float64) error {
	sn.assemble(aval)
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
	impl := gonum.Implementation{}
	f, l := sn.first[s], sn.first[s+1]-1
	nc := l - f + 1
	rows := sn.rows[sn.rowPtr[s]:sn.rowPtr[s+1]]
	nr := len(rows)
	ls := sn.val[sn.valPtr[s]:sn.valPtr[s+1]] // holds A's columns f..l (assemble)
	relMap := w.relMap
	for r, i := range rows {
		relMap[i] = r
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
			impl.Dgemm(blas.NoTrans, blas.Trans, m, wd, ncd, 1, ld[p1*ncd:], ncd, ld[p1*ncd:], ncd, 0, cb, wd)
		} else {
			for r := 0; r < m; r++ {
				lr := ld[(p1+r)*ncd : (p1+r+1)*ncd]
				for q := 0; q < wd && q <= r; q++ {
					lq := ld[(p1+q)*ncd : (p1+q+1)*ncd]
					sum := 0.0
					for t, v := range lr {
						sum += v * lq[t]
					}
					cb[r*wd+q] = sum
				}
			}
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
	if j, piv := denseFactor(ls, nr, nc, thr); j >= 0 {
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
// column and the value of the first pivot not above thr, or -1.
func denseFactor(l []float64, nr, nc int, thr float64) (int, float64) {
	impl := gonum.Implementation{}
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
				return j, d
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
			impl.Dtrsm(blas.Right, blas.Lower, blas.Trans, blas.NonUnit, m, kb, 1, l[k*nc+k:], nc, l[(k+kb)*nc+k:], nc)
		} else {
			for i := k + kb; i < nr; i++ {
				ri := l[i*nc+k : i*nc+k+kb]
				for j := 0; j < kb; j++ {
					rj := l[(k+j)*nc+k : (k+j)*nc+k+j]
					sum := ri[j]
					for t, v := range rj {
						sum -= v * ri[t]
					}
					ri[j] = sum / l[(k+j)*nc+k+j]
				}
			}
		}
		// Trailing update of columns k+kb..nc-1, rows k+kb..nr-1:
		// T -= P P^T restricted to the lower trapezoid, with P the rows
		// below the panel. Large updates go to Dgemm by column strips of
		// trailingStrip (gonum's Dgemm runs in parallel, its Dsyrk does
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
				impl.Dgemm(blas.NoTrans, blas.Trans, m-j0, jw, kb, -1, panel[j0*nc:], nc, panel[j0*nc:], nc, 1, l[(k+kb+j0)*nc+k+kb+j0:], nc)
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
	return -1, 0
}

// solve overwrites y (in pivot order) with (L L^T)^{-1} y.
func (sn *supernodes) solve(y []float64) {
	ns := len(sn.first) - 1
	for s := 0; s < ns; s++ {
		f := sn.first[s]
		nc := sn.first[s+1] - f
		rows := sn.rows[sn.rowPtr[s]:sn.rowPtr[s+1]]
		ls := sn.val[sn.valPtr[s]:sn.valPtr[s+1]]
		ys := y[f : f+nc]
		for j := 0; j < nc; j++ {
			sum := ys[j]
			for t, v := range ls[j*nc : j*nc+j] {
				sum -= v * ys[t]
			}
			ys[j] = sum / ls[j*nc+j]
		}
		for r := nc; r < len(rows); r++ {
			sum := 0.0
			for t, v := range ls[r*nc : r*nc+nc] {
				sum += v * ys[t]
			}
			y[rows[r]] -= sum
		}
	}
	for s := ns - 1; s >= 0; s-- {
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
}

// solveMany is solve for k right-hand sides interleaved in y (entry t of
// row i at y[i*k+t]).
func (sn *supernodes) solveMany(y []float64, k int) {
	ns := len(sn.first) - 1
	for s := 0; s < ns; s++ {
		f := sn.first[s]
		nc := sn.first[s+1] - f
		rows := sn.rows[sn.rowPtr[s]:sn.rowPtr[s+1]]
		ls := sn.val[sn.valPtr[s]:sn.valPtr[s+1]]
		ys := y[f*k : (f+nc)*k]
		for j := 0; j < nc; j++ {
			yj := ys[j*k : (j+1)*k]
			for c, v := range ls[j*nc : j*nc+j] {
				yc := ys[c*k : (c+1)*k]
				for t := range yj {
					yj[t] -= v * yc[t]
				}
			}
			d := ls[j*nc+j]
			for t := range yj {
				yj[t] /= d
			}
		}
		for r := nc; r < len(rows); r++ {
			yr := y[rows[r]*k : (rows[r]+1)*k]
			for c, v := range ls[r*nc : r*nc+nc] {
				yc := ys[c*k : (c+1)*k]
				for t := range yr {
					yr[t] -= v * yc[t]
				}
			}
		}
	}
	for s := ns - 1; s >= 0; s-- {
		f := sn.first[s]
		nc := sn.first[s+1] - f
		rows := sn.rows[sn.rowPtr[s]:sn.rowPtr[s+1]]
		ls := sn.val[sn.valPtr[s]:sn.valPtr[s+1]]
		ys := y[f*k : (f+nc)*k]
		for r := nc; r < len(rows); r++ {
			yr := y[rows[r]*k : (rows[r]+1)*k]
			for c, v := range ls[r*nc : r*nc+nc] {
				yc := ys[c*k : (c+1)*k]
				for t := range yc {
					yc[t] -= v * yr[t]
				}
			}
		}
		for j := nc - 1; j >= 0; j-- {
			yj := ys[j*k : (j+1)*k]
			d := ls[j*nc+j]
			for t := range yj {
				yj[t] /= d
			}
			for c, v := range ls[j*nc : j*nc+j] {
				yc := ys[c*k : (c+1)*k]
				for t := range yc {
					yc[t] -= v * yj[t]
				}
			}
		}
	}
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
