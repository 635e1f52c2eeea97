package sparse

import (
	"runtime"
	"sort"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// The top of the elimination tree (sn.top, or sn.xtop) is factored one
// supernode after another, and most of a top supernode's time goes to
// subtracting its descendants' updates, which gemmNT splits between
// threads only when one product is large. There a second goroutine takes
// the rows of the supernode from a split row on: both go through the
// descendants in the list's order, each computing and subtracting the
// updates' rows that fall in its own rows, so every entry receives the
// same subtractions in the same order as on one goroutine, and every
// update's row is computed by the same kernel with the same sums (the
// kernel is chosen from the whole update's shape).

// splitUpdateFlops is the update work (the sum over a supernode's
// descendants of m*wd*ncd) from which a top supernode's updates are split
// between two goroutines: some 50 us of work here, beside which the two
// channel operations of a handoff are small (not tuned further).
const splitUpdateFlops = 1 << 18

// topHelper is the second goroutine of the top of the tree, started once
// per factorization (startHelper) and handed one supernode's rows at a
// time.
type topHelper struct {
	jobs chan topJob
	done chan struct{}
	w    *snWork
}

// topJob asks the helper for the updates of supernode s, values ls, at
// its local rows lo..hi-1, from the descendants in list (relMap maps a
// row of the matrix to its local row in s; the caller filled it).
type topJob struct {
	s      int
	list   []int
	lo, hi int
	relMap []int32
	ls     []float64
}

// startHelper starts the helper when a second thread is there and the
// top has a supernode with enough update work to split: an estimate from
// its size, as the work depends on the descendants linked to it.
func (sn *supernodes) startHelper(top []int) {
	sn.helper = nil
	// With more than two threads gemmNT splits a large update between
	// all of them, which beats the helper's two halves: the helper is for
	// two (the same bits either way, as a split by rows changes no sum).
	if runtime.GOMAXPROCS(0) != 2 || !hasFMA() {
		return
	}
	worth := false
	for _, s := range top {
		nc := sn.first[s+1] - sn.first[s]
		nr := sn.rowPtr[s+1] - sn.rowPtr[s]
		if nc*nr*nr >= splitUpdateFlops {
			worth = true
			break
		}
	}
	if !worth {
		return
	}
	if len(sn.work) < 2 {
		sn.work = append(sn.work, &snWork{relMap: make([]int32, len(sn.super))})
	}
	// done holds one reply, so that the helper ends (on the closed jobs)
	// even if the main goroutine never takes it, as when it panics.
	h := &topHelper{jobs: make(chan topJob), done: make(chan struct{}, 1), w: sn.work[1]}
	sn.helper = h
	go func() {
		for j := range h.jobs {
			sn.updateRows(j.s, j.list, j.lo, j.hi, j.relMap, j.ls, h.w)
			h.done <- struct{}{}
		}
	}()
}

// stopHelper ends the helper, if any.
func (sn *supernodes) stopHelper() {
	if sn.helper != nil {
		close(sn.helper.jobs)
		sn.helper = nil
	}
}

// descRows returns where descendant d's rows in supernode s (last column
// l) begin and end: p1 (its pending position) and p2.
func (sn *supernodes) descRows(d, l int) (drows []int32, p1, p2 int) {
	drows = sn.rows[sn.rowPtr[d]:sn.rowPtr[d+1]]
	p1 = sn.dpos[d]
	p2 = p1
	for p2 < len(drows) && int(drows[p2]) <= l {
		p2++
	}
	return drows, p1, p2
}

// splitUpdates subtracts the updates of supernode s's descendants with
// the helper, when they are work enough, and links each descendant to
// its next target, as factorNode's loop does. It reports whether it did;
// if not, it changed nothing.
func (sn *supernodes) splitUpdates(s int, relMap []int32, ls []float64, w *snWork, link func(d, t int)) bool {
	l := sn.first[s+1] - 1
	nr := sn.rowPtr[s+1] - sn.rowPtr[s]
	list := sn.topList[:0]
	work := 0
	for d := sn.head[s]; d != -1; d = sn.next[d] {
		drows, p1, p2 := sn.descRows(d, l)
		work += (len(drows) - p1) * (p2 - p1) * (sn.first[d+1] - sn.first[d])
		list = append(list, d)
	}
	sn.topList = list
	if work < splitUpdateFlops || nr < 2 {
		return false
	}
	// Split the rows where half of the work is on each side: row r of
	// d's update, which lands on s's local row relMap[its row], costs wd
	// products of ncd terms in the kernel, which computes whole tiles,
	// and min(wd, r+1) in smallUpdate.
	if cap(sn.rowWork) < nr {
		sn.rowWork = make([]int, nr)
	}
	rw := sn.rowWork[:nr]
	clear(rw)
	total := 0
	for _, d := range list {
		drows, p1, p2 := sn.descRows(d, l)
		ncd, wd := sn.first[d+1]-sn.first[d], p2-p1
		whole := (len(drows)-p1)*wd*ncd >= blasThreshold
		for r, i := range drows[p1:] {
			c := wd * ncd
			if !whole && r < wd {
				c = (r + 1) * ncd
			}
			rw[relMap[i]] += c
			total += c
		}
	}
	r, sum := 0, 0
	for ; r < nr-1 && 2*(sum+rw[r]) <= total; r++ {
		sum += rw[r]
	}
	r = max(r, 1)
	sn.splits++
	h := sn.helper
	h.jobs <- topJob{s: s, list: list, lo: r, hi: nr, relMap: relMap, ls: ls}
	sn.updateRows(s, list, 0, r, relMap, ls, w)
	<-h.done
	for _, d := range list {
		drows, _, p2 := sn.descRows(d, l)
		if p2 < len(drows) {
			sn.dpos[d] = p2
			link(d, int(sn.super[drows[p2]]))
		}
	}
	return true
}

// updateRows subtracts from the local rows lo..hi-1 of supernode s
// (values ls) the updates of the descendants in list, in order. Each
// update's rows are computed as factorNode computes the whole update:
// by smallUpdate below blasThreshold, by gonum's Dgemm where gemmNT calls
// it (thin shapes; computed whole here, as Dgemm may group a product's
// sums by the product's size), by the kernel otherwise.
func (sn *supernodes) updateRows(s int, list []int, lo, hi int, relMap []int32, ls []float64, w *snWork) {
	f, l := sn.first[s], sn.first[s+1]-1
	nc := l - f + 1
	for _, d := range list {
		drows, p1, p2 := sn.descRows(d, l)
		ncd := sn.first[d+1] - sn.first[d]
		m, wd := len(drows)-p1, p2-p1
		rs := drows[p1:]
		r0 := sort.Search(m, func(r int) bool { return int(relMap[rs[r]]) >= lo })
		r1 := r0 + sort.Search(m-r0, func(r int) bool { return int(relMap[rs[r0+r]]) >= hi })
		if r0 == r1 {
			continue
		}
		if need := m * wd; len(w.cbuf) < need {
			w.cbuf = make([]float64, need)
		}
		cb := w.cbuf[:m*wd]
		a := sn.val[sn.valPtr[d]+p1*ncd : sn.valPtr[d+1]]
		switch {
		case m*wd*ncd < blasThreshold:
			smallUpdateRows(cb, a, r0, r1, wd, ncd)
		case gemmUsesDgemm(m, wd):
			if lo == 0 {
				sn.thin++
			}
			gonum.Implementation{}.Dgemm(blas.NoTrans, blas.Trans, m, wd, ncd, 1, a, ncd, a, ncd, 0, cb, wd)
		default:
			clear(cb[r0*wd : r1*wd])
			gemmRows(0, r1-r0, wd, ncd, 1, a[r0*ncd:], ncd, a, ncd, cb[r0*wd:], wd)
		}
		scatterRows(ls, cb, rs, relMap, r0, r1, wd, nc, f)
	}
}
