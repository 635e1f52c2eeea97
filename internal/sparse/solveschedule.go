package sparse

import (
	"math"
	"runtime"
	"slices"
	"sort"
	stdsync "sync"
	"sync/atomic"
	"time"

	"gonum.org/v1/gonum/floats"
)

// The parallel triangular-solve scheduler: which subtrees of the
// supernodal tree and which chunks of a large supernode's rectangle run
// concurrently (fixed by the matrix, never by the number of goroutines,
// so that a solution's bits do not depend on it), and the helper
// goroutines that take those chunks beside the caller.

// solveSchedule is the schedule of the concurrent solve, built from the
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
type solveSchedule struct {
	tasks  [][2]int // [lo, hi) supernodes, heaviest first
	top    []int    // the other supernodes, increasing
	split  []int    // rows[split[s]:] of supernode s lie outside its task (nr on top)
	locPtr []int    // loc[locPtr[s]:] indexes ext for those rows (task supernodes)
	loc    []int32
	extPtr []int // task t's top columns are ext[extPtr[t]:extPtr[t+1]]
	ext    []int32
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
	s      int     // supernode of a rectangle job
	r0, r1 int     // its rows
	c0, c1 int     // and columns
	idx    []int32 // destination (forward) or source (backward) rows
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

// Jobs of solveSchedule.run.
const (
	jobTaskFwd = iota
	jobTaskBwd
	jobRowsFwd
	jobColsBwd
)

// run does chunks 0..n-1 of job, concurrently when there are several:
// the caller takes chunks, and so do helpers (started if fewer than
// GOMAXPROCS-1 are alive). The chunks of a job write disjoint entries, so
// which goroutine does which does not change the result.
func (p *solveSchedule) run(sn *supernodes, job, n int) {
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
func (p *solveSchedule) help(sn *supernodes) {
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
func (p *solveSchedule) scratch(threads int) {
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

func (p *solveSchedule) work(sn *supernodes) {
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

// rect applies rows [r0, r1) x columns [c0, c1) of supernode s: forward
// (jobRowsFwd) y[idx] -= L[r0:r1, c0:c1] y[cols], or backward (jobColsBwd)
// y[cols] -= L[r0:r1, c0:c1]^T y[idx]. Large ones are cut into chunks of
// rows. Forward chunks write apart; backward ones sum into accumulators of
// their own (at most accChunks), added in chunk order after the join
// (cutting by columns instead would need no sums but makes each row of L
// a few short pieces, measured 10% slower over the whole solve).
func (p *solveSchedule) rect(sn *supernodes, job, s, r0, r1, c0, c1 int, idx []int32) {
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

// newSolveSchedule splits the supernodal tree for the solve. The split of the
// factorization (sn.tasks) weighs flops, nc*nr^2 per supernode, and on a
// 3-D mesh stops at the root, whose dense separator holds most of them;
// the solve costs one pass over L, nc*nr entries per supernode, so it is
// split by entries, as splitTasks splits by flops: the heaviest subtree is
// replaced by its children (its root moving to the top) until none holds
// more than 1/solveSplitParts of the entries. Below splitMin entries it
// does not split (solveK passes solveSplitMin; tests pass less, so that
// small factors take the concurrent path too).
func (sn *supernodes) newSolveSchedule(splitMin float64) *solveSchedule {
	ns := len(sn.first) - 1
	p := &solveSchedule{split: make([]int, ns)}
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
			sparent[s] = int(sn.super[sn.rows[sn.rowPtr[s]+nc]])
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
			h := heaviest(front, work)
			s := front[h]
			if work[s] <= total/solveSplitParts || chead[s] == -1 {
				break
			}
			isTop[s] = true
			front = openUp(front, h, chead, cnext)
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
	pos := make([]int32, sn.n())
	for i := range pos {
		pos[i] = -1
	}
	for t, r := range p.tasks {
		end := sn.first[r[1]]
		start := len(p.ext)
		for s := r[0]; s < r[1]; s++ {
			nc := sn.first[s+1] - sn.first[s]
			rows := sn.rows[sn.rowPtr[s]:sn.rowPtr[s+1]]
			at, _ := slices.BinarySearch(rows[nc:], int32(end))
			p.split[s] = nc + at
			for _, i := range rows[p.split[s]:] {
				if !isTop[int(sn.super[i])] {
					panic("sparse: a subtree of the solve updates a row outside it that is not on top")
				}
				if int(pos[i]) < start {
					pos[i] = int32(len(p.ext))
					p.ext = append(p.ext, i)
				}
			}
		}
		slices.Sort(p.ext[start:])
		if len(p.ext) > math.MaxInt32 {
			// The rows of all tasks together, beyond the four-byte
			// positions (maxOrder bounds each task's, not their sum).
			panic("sparse: the solve schedule's external rows exceed 2^31")
		}
		for j := start; j < len(p.ext); j++ {
			pos[p.ext[j]] = int32(j)
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
