package sparse

import (
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
	"gonum.org/v1/gonum/floats"
)

// The triangular solves with the supernodal factor, L L^T x = y: the
// work of one supernode (its diagonal triangle and the rectangle below it,
// forward and backward) and of one subtree. solveschedule.go decides which
// of them run concurrently and runs them.

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

// solveK is the solve for k interleaved right-hand sides.
func (sn *supernodes) solveK(y []float64, k int) { sn.solveHalves(y, k, true) }

// forwardK is solveK's forward half only: y = L^-1 y.
func (sn *supernodes) forwardK(y []float64, k int) { sn.solveHalves(y, k, false) }

// solveHalves is the forward solve with L and, when backward, the
// backward solve with L^T.
func (sn *supernodes) solveHalves(y []float64, k int, backward bool) {
	p := sn.solveBegin(y, k)
	if len(p.tasks) > 0 {
		if len(p.buf) < len(p.ext)*k {
			p.buf = make([]float64, len(p.ext)*k)
		}
		p.run(sn, jobTaskFwd, len(p.tasks))
		// The tasks' updates of top rows, in task order.
		for t := range p.extPtr[:len(p.tasks)] {
			for j := p.extPtr[t]; j < p.extPtr[t+1]; j++ {
				yc := y[int(p.ext[j])*k : int(p.ext[j])*k+k]
				for q, v := range p.buf[j*k : j*k+k] {
					yc[q] += v
				}
			}
		}
	}
	for _, s := range p.top {
		sn.forwardTop(s)
	}
	if backward {
		for i := len(p.top) - 1; i >= 0; i-- {
			sn.backwardTop(p.top[i])
		}
		if len(p.tasks) > 0 {
			p.run(sn, jobTaskBwd, len(p.tasks))
		}
	}
	p.solveEnd()
}

// solveBegin sets the schedule (made on the first solve) up for a solve
// of k interleaved right-hand sides in y.
func (sn *supernodes) solveBegin(y []float64, k int) *solveSchedule {
	if k > manyBlock {
		panic("sparse: supernodal solve of more than manyBlock right-hand sides at once")
	}
	if sn.sched == nil {
		sn.sched = sn.newSolveSchedule(solveSplitMin)
	}
	p := sn.sched
	p.y, p.k = y, k
	p.scratch(1)
	return p
}

// solveEnd lets the helpers of a solve go and drops its vector.
func (p *solveSchedule) solveEnd() {
	p.quit.Store(true)
	p.wg.Wait()
	p.quit.Store(false)
	p.y = nil
}

// forwardNodes is forwardK on the supernodes nodes only (increasing): for
// right-hand sides nonzero only on their rows, when nodes holds every
// ancestor of each of them (the rows' reach in the elimination tree), the
// other rows of L^-1 y are zero and no other supernode is touched. Each
// supernode runs as a top supernode would (forwardTop): the bits differ
// from forwardK's, which sums a subtree's updates of the rows above it
// apart, by the rounding of that order.
func (sn *supernodes) forwardNodes(y []float64, k int, nodes []int32) {
	p := sn.solveBegin(y, k)
	for _, s := range nodes {
		sn.forwardTop(int(s))
	}
	p.solveEnd()
}

// forwardTask runs the forward solve of task t.
func (sn *supernodes) forwardTask(t int, tmp []float64) {
	p := sn.sched
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
	p := sn.sched
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
func gather(g []float64, idx []int32, src []float64) {
	g = g[:len(idx)]
	for i, r := range idx {
		g[i] = src[r]
	}
}

// forwardTop runs the forward solve of supernode s, cutting its large
// rectangles into concurrent chunks.
func (sn *supernodes) forwardTop(s int) {
	p := sn.sched
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
	p := sn.sched
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
func (sn *supernodes) forwardTiny(s int, y []float64, split int, loc []int32, buf []float64) {
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
func (sn *supernodes) rowsFwd(s, r0, r1, c0, c1 int, idx []int32, dst, tmp, xbuf []float64) {
	m, w := r1-r0, c1-c0
	if m <= 0 || w <= 0 {
		return
	}
	f, nc := sn.first[s], sn.first[s+1]-sn.first[s]
	k := sn.sched.k
	l := sn.val[sn.valPtr[s]+r0*nc+c0:]
	x := sn.sched.y[(f+c0)*k : (f+c1)*k]
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
			d := dst[int(r)*k : int(r)*k+k]
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
func (sn *supernodes) colsBwd(s, r0, r1, c0, c1 int, idx []int32, src, g, xbuf []float64) {
	m, w := r1-r0, c1-c0
	if m <= 0 || w <= 0 {
		return
	}
	f, k := sn.first[s], sn.sched.k
	x := sn.sched.y[(f+c0)*k : (f+c1)*k]
	sn.colsBwdTo(x, s, r0, r1, c0, c1, idx, src, g, xbuf)
}

// colsBwdTo is colsBwd into x (w*k values) in place of y's columns.
func (sn *supernodes) colsBwdTo(x []float64, s, r0, r1, c0, c1 int, idx []int32, src, g, xbuf []float64) {
	m, w := r1-r0, c1-c0
	nc := sn.first[s+1] - sn.first[s]
	k := sn.sched.k
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
			for q, v := range src[int(r)*k : int(r)*k+k] {
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
	k := sn.sched.k
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
func rowsFwdK(l []float64, ld, m int, x []float64, idx []int32, dst []float64, k int) {
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
		d0 := dst[int(idx[i])*k : int(idx[i])*k+k]
		d1 := dst[int(idx[i+1])*k : int(idx[i+1])*k+k]
		d2 := dst[int(idx[i+2])*k : int(idx[i+2])*k+k]
		d3 := dst[int(idx[i+3])*k : int(idx[i+3])*k+k]
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
		d := dst[int(idx[i])*k : int(idx[i])*k+k]
		for t := range d {
			d[t] -= a[t]
		}
	}
}

// colsBwdK does x -= sum_i l[i*ld : i*ld+w]^T src[idx[i]] for k
// interleaved right-hand sides, four rows of L at a time so that x is
// loaded and stored once for four.
func colsBwdK(l []float64, ld, m int, x []float64, idx []int32, src []float64, k int) {
	w := len(x) / k
	idx = idx[:m]
	i := 0
	for ; i+4 <= m; i += 4 {
		l0 := l[i*ld : i*ld+w]
		l1 := l[(i+1)*ld : (i+1)*ld+w]
		l2 := l[(i+2)*ld : (i+2)*ld+w]
		l3 := l[(i+3)*ld : (i+3)*ld+w]
		s0 := src[int(idx[i])*k : int(idx[i])*k+k]
		s1 := src[int(idx[i+1])*k : int(idx[i+1])*k+k]
		s2 := src[int(idx[i+2])*k : int(idx[i+2])*k+k]
		s3 := src[int(idx[i+3])*k : int(idx[i+3])*k+k]
		for c := range l0 {
			xc := x[c*k : c*k+k]
			v0, v1, v2, v3 := l0[c], l1[c], l2[c], l3[c]
			for t := range xc {
				xc[t] -= v0*s0[t] + v1*s1[t] + v2*s2[t] + v3*s3[t]
			}
		}
	}
	for ; i < m; i++ {
		si := src[int(idx[i])*k : int(idx[i])*k+k]
		for c, v := range l[i*ld : i*ld+w] {
			xc := x[c*k : c*k+k]
			for t := range xc {
				xc[t] -= v * si[t]
			}
		}
	}
}
