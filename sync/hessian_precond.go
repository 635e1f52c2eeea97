package sync

import (
	"math"
	"runtime/debug"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/bcmsync/bcmsync/internal/sparse"
)

// The exact-Hessian preconditioner of the trust region's inner CG.
//
// At rank r, complete each Y_i (r x d, orthonormal columns) to an orthogonal
// W_i = [Y_i  Yperp_i] (r x r). The tangent space of St(d, r) x R^r at X_i is
// {W_i A}, A = [A_Y  a_p] (r x b) with the top d x d part of A_Y skew and
// everything else free, so the matrices V = W_i A_k with A_k running over
//
//	the unit skew matrices (e_a e_c^T - e_c e_a^T)/sqrt 2, a < c < d  d(d-1)/2
//	e_a e_c^T, rows a in d..r-1, columns c in 0..d-1                  (r-d)d
//	e_a e_d^T, rows a in 0..r-1 (poses only: the translation)         r
//
// are an orthonormal basis of it (W_i is orthogonal). For tangent U, V the
// Riemannian Hessian is the bilinear form <U, Hess V> = 2 tr(U S V^T) with
// S = Q - Lambda, so in these coordinates it is a sparse matrix with Q's
// block pattern and k x k blocks
//
//	H_ij[k][l] = 2 tr(W_i A_k S_ij A_l^T W_j^T) = 2 tr(A_k S_ij A_l^T W_j^T W_i).
//
// At r = d the second group is empty and W_i = Y_i: the rotation part is
// the familiar Y_i times a skew matrix. The Cholesky factor of H (plus a tiny
// mu I that lifts the gauge directions, which the caller projects out)
// preconditions tCG exactly: every step becomes a Newton step, and the inner
// iterations drop from hundreds (with the factor of Q + sigma I applied row
// by row, which knows nothing of Lambda or of the Stiefel constraints) to
// one or a few.
//
// The factor of H costs (k/b)^3 times that of Q, and k grows with r: a few
// ranks up, one update takes seconds on the benchmark graphs
// (docs/tuning.md, "Tuning figures"). So at r > d the default is the
// split form. Take the complements Yperp_i from one common frame (the
// trailing eigenvectors of sum_i Y_i Y_i^T, made orthogonal to each Y_i):
// at a rank-deficient point, where the staircase converges when the
// relaxation is exact, Yperp_j^T Y_i = 0 and Yperp_j^T Yperp_i = I, so H
// splits exactly into its span part (the basis matrices supported on rows
// 0..d-1 of A, block size d(d-1)/2 (+ d), as at rank d) and r-d copies of
// 2 S on the complement rows, each with Q's pattern and block size b.
// Elsewhere the neglected coupling makes it an approximation, which tCG
// corrects with a few more inner iterations. Setting exact keeps the full H.
//
// One hessianPrecond serves every rank of the staircase: update rebuilds the
// basis, the pattern and the symbolic factorization when the rank of its
// argument differs from the last one (the staircase only climbs, so a cache
// of one rank suffices).

// basisEntry is one nonzero (row, col, val) of a basis matrix A_k (r x b).
type basisEntry struct {
	row, col int
	val      float64
}

type hessianPrecond struct {
	q    *sparse.BlockSym
	d, b int
	qper []int                 // block ordering of Q, scalar (b per block)
	sym  *sparse.BlockSymbolic // Q's pattern analysed in that order (nil: none)
	mu   float64
	// exact keeps the full coupled Hessian at r > d (tests compare the
	// two forms); by default the split form below is used there.
	exact bool
	// fullAt is the rank at which the full Hessian serves from the next
	// update on: the split form's S did not factor there (see update), or
	// the level was entered by a saddle escape (see central.Optimize);
	// keepSplit turns the first off (tests of the split form).
	fullAt    int
	keepSplit bool

	// Per rank; rebuilt when the rank changes.
	r, k    int
	split   bool
	basis   [][]basisEntry
	terms   []hTerm          // the terms of every entry of a Hessian block (assemble)
	termPtr []int            // entry e's terms are terms[termPtr[e]:termPtr[e+1]]
	h       *sparse.BlockSym // the Hessian in basis coordinates, both triangles (lazy: its pattern only)
	tpos    []int            // tpos[pos] = position of the transposed block
	// lazy: the Hessian is not stored but computed block row by block row
	// where its factorization needs them (rows); hdiag holds its
	// diagonal, lam the multipliers of the last update. A stored Hessian
	// of lazyMin bytes or more is made lazy (see setRank).
	lazy    bool
	lazyMin int
	rows    *sparse.BlockRows
	hdiag   []float64
	lam     []float64
	chol    *sparse.Cholesky
	w       []float64 // W_i, r x r row-major, at w[i*r*r:]
	c       []float64 // coordinates (n k): right-hand side, then solution (Solve works in place)

	// The per-pose loops (completion, assembly, coordinates) run on up to
	// poseChunks(n, threads) goroutines, each with its own scratch (chunks).
	threads int
	works   []*hpWork

	scale float64 // largest diagonal entry of the Hessian at the last update
	shift float64 // diagonal shift of the last successful factor (mu included)
	// raised is the number of pivots the last successful factor raised
	// (see factorShifted): when nonzero, the factor is that of
	// H + shift I + E, E >= 0 diagonal with at most that many nonzeros.
	raised int
	x      *sparse.Blocks
	rung   int // index in shiftLadder of the last successful shift
	// resume makes the next update start the ladder at resumeAt (see
	// resumeFrom); resumed says the current factor was made so, in place
	// of a factor made at rung replaced.
	resume, resumed    bool
	resumeAt, replaced int

	// The split form at r > d: the complement part is preconditioned by
	// 2 S (x) I_{r-d}, factored once per update on Q's pattern.
	s      *sparse.BlockSym // 2 (Q - Lambda)
	schol  *sparse.Cholesky
	sshift float64
	srung  int
	sc, sz []float64 // complement coordinates, r-d rows of n b (row-major)
	uperp  []float64 // common complement, r x (r-d) row-major
	gram   *mat.SymDense

	ok     bool
	failed int // assemblies that were not positive definite even when shifted

	// free marks landmark blocks (nil: none): their Y coordinates have zero
	// rows in H and 2 S and get a decoupled diagonal (see landmarks.go).
	free []bool

	// Totals over the solve, for the trust region's step records:
	// numeric factorizations attempted (failed ones included) and the
	// seconds spent in update.
	factorizations int
	updateSeconds  float64
}

// hTerm is a term coef * S[s] * M[m] of an entry of a Hessian block: coef
// the product of two basis values, s and m indices into S_ij (b x b) and
// W_j^T W_i (r x r).
type hTerm struct {
	coef float64
	s, m int
}

// hpWork is one goroutine's scratch for the per-pose loops.
type hpWork struct {
	m    []float64   // r x r: W_j^T W_i
	a, e []float64   // Householder: r x d working copy, one r-vector
	hv   []float64   // the d Householder vectors, r each
	u    []float64   // r x b: W_i^T v_i, then A
	sij  [16]float64 // S_ij
	hb   []float64   // k x k: a diagonal block of the lazy Hessian
}

// chunks returns the number of ranges the per-pose loops split into now
// (it follows GOMAXPROCS when threads is 0) and makes one scratch per range.
func (p *hessianPrecond) chunks() int {
	r, d, b := p.r, p.d, p.b
	c := poseChunks(p.q.N, p.threads)
	for len(p.works) < c {
		p.works = append(p.works, &hpWork{m: make([]float64, r*r), a: make([]float64, r*d),
			e: make([]float64, r), hv: make([]float64, d*r), u: make([]float64, r*b),
			hb: make([]float64, p.k*p.k)})
	}
	return c
}

// shiftLadder lists the diagonal shifts update tries, relative to the
// largest diagonal entry of the Hessian. The smallest shift that factors
// is the best preconditioner, since a shift blurs every eigenvalue below
// it; the rungs were chosen on the synthetic grids, where 1e-5 is the
// smallest that factors at the first steps and lasts (docs/tuning.md,
// "Tuning figures": shiftLadder).
var shiftLadder = []float64{0, 1e-5, 1e-4, 1e-3, 1e-2}

// newHessianPrecond prepares the preconditioner for Q with the block
// ordering perm (a scalar permutation of Q that keeps blocks together, as
// sparse.BlockOrder returns); mu is the diagonal regularization. Nothing
// rank-dependent is built until the first update.
func newHessianPrecond(q *sparse.BlockSym, d int, perm []int, mu float64) *hessianPrecond {
	return &hessianPrecond{q: q, d: d, b: q.B, qper: perm, mu: mu, free: rotationFreeBlocks(q, d), lazyMin: lazyHessianBytes}
}

// lazyHessianBytes is the size of the stored Hessian from which it is
// computed where the factorization assembles it instead (sparse.BlockRows):
// at a million poses it is about a gigabyte, live through the whole trust
// region, which only the factorizations read. Smaller Hessians are
// stored: a factorization that fails and is retried with a shift then
// reads it again instead of computing it again, and each mirrored block
// is copied instead of computed twice.
const lazyHessianBytes = 64 << 20

// freeBeforeFactor is the size of the Hessian's factor (bytes) from which
// its first factorization returns the heap's free memory to the system
// before it allocates the factor: one collection, next to a factorization
// of seconds, for the memory the collector would otherwise keep at the
// solve's peak.
const freeBeforeFactor = 1 << 30

// setRank builds the basis, the pattern of H and its ordering for rank r.
// The symbolic factorization follows in update, on the first assembly.
func (p *hessianPrecond) setRank(r int) {
	d, b, q := p.d, p.b, p.q
	p.r = r
	p.basis = p.basis[:0]
	s := 1 / math.Sqrt2
	for a := 0; a < d; a++ {
		for c := a + 1; c < d; c++ {
			p.basis = append(p.basis, []basisEntry{{a, c, s}, {c, a, -s}})
		}
	}
	p.split = r > d && !p.exact && p.fullAt != r
	rows := r // rows of A the basis spans: all, or Y's span only when split
	if p.split {
		rows = d
	}
	for a := d; a < rows; a++ {
		for c := 0; c < d; c++ {
			p.basis = append(p.basis, []basisEntry{{a, c, 1}})
		}
	}
	if b > d {
		for a := 0; a < rows; a++ {
			p.basis = append(p.basis, []basisEntry{{a, d, 1}})
		}
	}
	k := len(p.basis)
	p.k = k
	// The terms of each entry (kk, ll) of a Hessian block, in the order
	// of the basis entries (assemble), with the products of the basis
	// values made once: they are the same for every block.
	p.terms, p.termPtr = p.terms[:0], append(p.termPtr[:0], 0)
	for _, bk := range p.basis {
		for _, bl := range p.basis {
			for _, ek := range bk {
				for _, el := range bl {
					p.terms = append(p.terms, hTerm{coef: ek.val * el.val, s: ek.col*b + el.col, m: el.row*r + ek.row})
				}
			}
			p.termPtr = append(p.termPtr, len(p.terms))
		}
	}
	// Lazy needs the shared block analysis (which does not read values)
	// and a block ordering; analyze stores the Hessian if that fails.
	p.lazy = p.sym != nil && len(p.qper) > 0 && 8*len(q.ColIdx)*k*k >= p.lazyMin
	p.h = &sparse.BlockSym{N: q.N, B: k, RowPtr: q.RowPtr, ColIdx: q.ColIdx, Diag: q.Diag}
	p.rows, p.hdiag = nil, nil
	if p.lazy {
		p.hdiag = make([]float64, q.N*k)
		p.rows = &sparse.BlockRows{Pattern: p.h, Diagonal: p.hdiag, Row: p.hessianRow, WorkLen: r*r + b*b + k*k}
	} else {
		p.h.Val = make([]float64, len(q.ColIdx)*k*k)
	}
	if p.tpos == nil {
		p.tpos = make([]int, len(q.ColIdx))
		for i := 0; i < q.N; i++ {
			for pos := q.RowPtr[i]; pos < q.RowPtr[i+1]; pos++ {
				j := q.ColIdx[pos]
				p.tpos[pos] = -1
				for t := q.RowPtr[j]; t < q.RowPtr[j+1]; t++ {
					if q.ColIdx[t] == i {
						p.tpos[pos] = t
						break
					}
				}
			}
		}
	}
	p.chol, p.rung, p.resume, p.resumed = nil, 0, false, false
	p.w = make([]float64, q.N*r*r)
	p.works = p.works[:0]
	p.chunks()
	p.c = make([]float64, q.N*k)
	p.schol, p.srung = nil, 0
	if p.split {
		if p.s == nil {
			p.s = p.q.Clone()
		}
		p.sc = make([]float64, (r-d)*q.Dim())
		p.sz = make([]float64, (r-d)*q.Dim())
		p.uperp = make([]float64, r*(r-d))
		p.gram = mat.NewSymDense(r, nil)
	}
}

// complete sets w (r x r, row-major) to an orthogonal matrix whose first d
// columns are those of y (r x b, row-major, orthonormal first d columns).
// The other r-d columns are those of the Householder QR factor of Y: they
// are orthonormal and orthogonal to range(Y) to rounding, whatever Y is, and
// depend on Y alone (deterministic, no pivoting choices).
func (p *hessianPrecond) complete(wk *hpWork, w, y []float64) {
	r, d, b := p.r, p.d, p.b
	for t := 0; t < r; t++ {
		copy(w[t*r:t*r+d], y[t*b:t*b+d])
		copy(wk.a[t*d:(t+1)*d], y[t*b:t*b+d])
	}
	if r == d {
		return
	}
	a, hv := wk.a, wk.hv
	// Reflector c maps column c of the working copy, rows c..r-1, onto
	// -sign * its norm * e_c. The vector is stored unnormalized; hv
	// entries above c are zero.
	for c := 0; c < d; c++ {
		v := hv[c*r : (c+1)*r]
		nrm := 0.0
		for t := c; t < r; t++ {
			nrm += a[t*d+c] * a[t*d+c]
		}
		nrm = math.Sqrt(nrm)
		for t := range v {
			v[t] = 0
		}
		if nrm == 0 {
			continue // nothing to reflect; v = 0 is the identity below
		}
		for t := c; t < r; t++ {
			v[t] = a[t*d+c]
		}
		// v = x + sign(x_0) ||x|| e_0 avoids cancellation in v_0.
		v[c] += math.Copysign(nrm, a[c*d+c])
		vv := 0.0
		for t := c; t < r; t++ {
			vv += v[t] * v[t]
		}
		for j := c + 1; j < d; j++ {
			s := 0.0
			for t := c; t < r; t++ {
				s += v[t] * a[t*d+j]
			}
			s *= 2 / vv
			for t := c; t < r; t++ {
				a[t*d+j] -= s * v[t]
			}
		}
		// Scale v so that H = I - v v^T.
		f := math.Sqrt(2 / vv)
		for t := c; t < r; t++ {
			v[t] *= f
		}
	}
	// Column j >= d of Q = H_0 H_1 ... H_{d-1} is Q e_j.
	e := wk.e
	for j := d; j < r; j++ {
		for t := range e {
			e[t] = 0
		}
		e[j] = 1
		for c := d - 1; c >= 0; c-- {
			v := hv[c*r : (c+1)*r]
			s := 0.0
			for t := c; t < r; t++ {
				s += v[t] * e[t]
			}
			for t := c; t < r; t++ {
				e[t] -= s * v[t]
			}
		}
		for t := 0; t < r; t++ {
			w[t*r+j] = e[t]
		}
	}
}

// update assembles and factors the Hessian at x (any rank r >= d) with
// multipliers lam (in the split form: its span part and 2 S). It reports
// whether they were positive definite, H once shifted by at most 1e-2 of
// its largest diagonal entry (see factorShifted), S unshifted; if not, the
// caller falls back to Q.
func (p *hessianPrecond) update(x *sparse.Blocks, lam []float64) bool {
	start := time.Now()
	defer func() { p.updateSeconds += time.Since(start).Seconds() }()
	if x.R != p.r || p.basis == nil {
		p.setRank(x.R)
	}
	r := p.r
	p.x = x
	if p.split {
		p.commonComplement(x)
	}
	p.assembleAt(x, lam)
	first := p.chol == nil
	if first && !p.analyze() {
		return false
	}
	if first && 8*int64(p.chol.StoredNNZ()) >= freeBeforeFactor {
		// The factor is about to become most of the heap: what earlier
		// stages freed (the initialization's factor, the orderings'
		// work) is given back to the system first, or the process holds
		// it beside the factor through the whole trust region, its
		// peak. It is a collection of the whole process, which an
		// embedding program pays too, so it is kept to factors of a
		// gigabyte and more, where it is small beside the factorization.
		debug.FreeOSMemory()
	}
	from := 0
	if p.resume {
		from, p.replaced = p.resumeAt, p.rung
	} else if first && p.chol.Flops() >= shiftFirstFlops {
		from = 1
	}
	p.resumed, p.resume = p.resume, false
	p.shift, p.raised, p.ok = factorShiftedRows(p.h, p.rows, p.chol, p.mu, p.scale, &p.rung, from, len(shiftLadder)-1, true, &p.factorizations)
	if p.ok && p.split {
		p.ok = p.factorS(lam)
		if !p.ok && !p.keepSplit {
			// S is not positive semidefinite: the point is not near a
			// rank-deficient minimum, so the split form's neglected
			// coupling is not small either (the relaxation may not be
			// tight, and its solution has rank r). Q's factor, the
			// fallback, knows nothing of Lambda and took thousands of tCG
			// iterations per level there (docs/tuning.md, "Tuning
			// figures": the full Hessian above rank d).
			// The full Hessian has (k/b)^3 times Q's factor cost but
			// makes every step a Newton step again; it serves the rest
			// of the rank.
			p.fullAt = r
			p.setRank(r)
			return p.updateFull(x, lam)
		}
	}
	if !p.ok {
		p.failed++
	}
	return p.ok
}

// assembleAt completes every block's basis at x (the common complement's
// in the split form, prepared by commonComplement) and assembles the
// Hessian from them, recording its scale. update and updateFull share it.
func (p *hessianPrecond) assembleAt(x *sparse.Blocks, lam []float64) {
	rr := p.r * p.r
	nc := p.chunks()
	forChunks(p.q.N, nc, func(t, lo, hi int) {
		wk := p.works[t]
		for i := lo; i < hi; i++ {
			if p.split {
				p.completeCommon(wk, p.w[i*rr:(i+1)*rr], x.Block(i))
			} else {
				p.complete(wk, p.w[i*rr:(i+1)*rr], x.Block(i))
			}
		}
	})
	if p.lazy {
		// Only the diagonal now: the factorization computes the rest.
		p.lam = lam
		k := p.k
		forChunks(p.q.N, nc, func(t, lo, hi int) {
			wk := p.works[t]
			for i := lo; i < hi; i++ {
				hb := wk.hb[:k*k]
				p.block(wk.m, wk.sij[:p.b*p.b], hb, lam, i, i, p.q.Diag[i])
				for a := 0; a < k; a++ {
					p.hdiag[i*k+a] = hb[a*k+a]
				}
			}
		})
		p.scale = 0
		for _, v := range p.hdiag {
			if v > p.scale {
				p.scale = v // as BlockSym.MaxDiag
			}
		}
		return
	}
	forChunks(p.q.N, nc, func(t, lo, hi int) {
		p.assemble(p.works[t], lam, lo, hi)
	})
	p.scale = p.h.MaxDiag()
}

// analyze computes the symbolic factorization of the Hessian's pattern; on
// failure it marks the preconditioner failed and reports false.
func (p *hessianPrecond) analyze() bool {
	if p.lazy {
		if c, err := p.sym.Analyze(p.h); err == nil {
			p.chol = c
			return true
		}
		// Not the shared pattern: the scalar analysis reads values.
		p.h, p.lazy, p.rows, p.hdiag = p.rows.Dense(), false, nil, nil
	}
	var c *sparse.Cholesky
	var err error
	if p.sym != nil {
		c, err = p.sym.Analyze(p.h)
	}
	if p.sym == nil || err != nil {
		c, err = sparse.AnalyzeBlocks(p.h, p.scalarPerm())
	}
	if err != nil {
		p.ok = false
		p.failed++
		return false
	}
	p.chol = c
	return true
}

// scalarPerm returns Q's block ordering expanded to k scalars per block,
// an ordering of H (whose block pattern is Q's), or nil to let the
// factorization order H itself. It is made only for an analysis without
// the shared block analysis: kept, it would be 8 bytes per scalar column
// beside the Hessian's factor (48 MB at a million poses).
func (p *hessianPrecond) scalarPerm() []int {
	if len(p.qper) == 0 {
		return nil
	}
	b, k := p.b, p.k
	perm := make([]int, 0, len(p.qper)/b*k)
	for t := 0; t < len(p.qper); t += b {
		i := p.qper[t] / b
		for l := 0; l < k; l++ {
			perm = append(perm, i*k+l)
		}
	}
	return perm
}

// updateFull is update's assembly and factorization of the full Hessian,
// after setRank left the split form.
func (p *hessianPrecond) updateFull(x *sparse.Blocks, lam []float64) bool {
	p.assembleAt(x, lam)
	if !p.analyze() {
		return false
	}
	p.shift, p.raised, p.ok = factorShiftedRows(p.h, p.rows, p.chol, p.mu, p.scale, &p.rung, 0, len(shiftLadder)-1, true, &p.factorizations)
	if !p.ok {
		p.failed++
	}
	return p.ok
}

// release drops what update built for the current rank (the Hessian, its
// factors, the bases and coordinate buffers) and returns the bytes of
// values it let go; the next update rebuilds them, at any rank. The
// trust region is their only user, and a level's certificate and the
// next rank (whose Hessian has another block size) need none of them.
func (p *hessianPrecond) release() int64 {
	var freed int64
	if p.chol != nil {
		freed += 8 * int64(p.chol.StoredNNZ())
	}
	if p.schol != nil {
		freed += 8 * int64(p.schol.StoredNNZ())
	}
	if p.h != nil {
		freed += 8 * int64(len(p.h.Val))
	}
	freed += 8 * int64(len(p.hdiag))
	if freed < releaseCollect {
		// Small enough to keep for the next factorization (of the next
		// level, or of the next solve of a growing graph: Incremental);
		// larger storage goes back to the system at once (solveLevel).
		p.chol.Release()
		p.schol.Release()
	}
	p.basis, p.h, p.chol, p.schol = nil, nil, nil, nil
	p.rows, p.hdiag, p.lam = nil, nil, nil
	p.w, p.c, p.sc, p.sz = nil, nil, nil, nil
	p.works, p.x = nil, nil
	return freed
}

// assemble writes the Hessian's block rows lo..hi-1 (and, for each block
// above the diagonal, its mirror image below: no other row writes that).
func (p *hessianPrecond) assemble(wk *hpWork, lam []float64, lo, hi int) {
	k, q := p.k, p.q
	sij := wk.sij[:p.b*p.b]
	for i := lo; i < hi; i++ {
		for pos := q.RowPtr[i]; pos < q.RowPtr[i+1]; pos++ {
			j := q.ColIdx[pos]
			if j < i && p.tpos[pos] >= 0 {
				continue // mirrored from the upper triangle below
			}
			hb := p.h.Block(pos)
			p.block(wk.m, sij, hb, lam, i, j, pos)
			if t := p.tpos[pos]; t >= 0 && j != i {
				transposeBlock(p.h.Block(t), hb, k)
			}
		}
	}
}

// hessianRow is the lazy Hessian's sparse.BlockRows.Row: block row i,
// each block exactly as assemble makes it (a block below the diagonal is
// the transpose of the one above, computed again).
func (p *hessianPrecond) hessianRow(i int, dst, work []float64) {
	r, b, k, q := p.r, p.b, p.k, p.q
	m, sij, tmp := work[:r*r], work[r*r:r*r+b*b], work[r*r+b*b:r*r+b*b+k*k]
	base := q.RowPtr[i]
	for pos := base; pos < q.RowPtr[i+1]; pos++ {
		j := q.ColIdx[pos]
		hb := dst[(pos-base)*k*k : (pos-base+1)*k*k]
		if t := p.tpos[pos]; j < i && t >= 0 {
			p.block(m, sij, tmp, p.lam, j, i, t)
			transposeBlock(hb, tmp, k)
			continue
		}
		p.block(m, sij, hb, p.lam, i, j, pos)
	}
}

// transposeBlock sets dst (k x k) to the transpose of src.
func transposeBlock(dst, src []float64, k int) {
	for kk := 0; kk < k; kk++ {
		for ll := 0; ll < k; ll++ {
			dst[ll*k+kk] = src[kk*k+ll]
		}
	}
}

// block sets hb (k x k) to the Hessian's block (i, j), Q's block at pos,
// with scratch m (r x r) and sij (b x b).
func (p *hessianPrecond) block(m, sij, hb, lam []float64, i, j, pos int) {
	d, b, k, r := p.d, p.b, p.k, p.r
	rr := r * r
	wi := p.w[i*rr : (i+1)*rr]
	copy(sij, p.q.Block(pos))
	if i == j {
		l := lam[i*d*d : (i+1)*d*d]
		for a := 0; a < d; a++ {
			for c := 0; c < d; c++ {
				sij[a*b+c] -= l[a*d+c]
			}
		}
	}
	// m = W_j^T W_i (the identity when i == j; computed anyway so
	// the blocks are exactly those of the formula).
	wj := p.w[j*rr : (j+1)*rr]
	for a := 0; a < r; a++ {
		for c := 0; c < r; c++ {
			s := 0.0
			for t := 0; t < r; t++ {
				s += wj[t*r+a] * wi[t*r+c]
			}
			m[a*r+c] = s
		}
	}
	// tr(A_k S A_l^T M) = sum (A_k)_{a,c} S_{c,c'} (A_l)_{a',c'} M_{a',a},
	// over the terms setRank listed for each entry (k, l).
	for e := range hb {
		s := 0.0
		for _, t := range p.terms[p.termPtr[e]:p.termPtr[e+1]] {
			s += t.coef * sij[t.s] * m[t.m]
		}
		hb[e] = 2 * s
	}
	if i == j && p.free != nil && p.free[i] {
		freeDiagonal(hb, p.basis, k, d, 2*sij[d*b+d])
	}
}

// refactorAfter is the number of inner tCG iterations with the current
// factor beyond which the next step refactors the Hessian. A fresh factor
// makes tCG converge in 1 to 3 iterations; a stale one takes more, and
// refactoring pays only when those extra iterations cost more than a
// factorization. The costs are counted, not timed, so that a solve does not
// depend on the machine's load: a factorization costs Flops() (the sum of
// squared column counts), an iteration a solve with the factor (4 flops per
// stored entry of L, including the split form's second factor) plus a
// Hessian product (about 2 r flops per entry of Q).
//
// refactorFlopRatio turns the flop ratio into a threshold. The dense
// kernels of a factorization run more flops per second than the
// memory-bound solves, so break-even lies below the flop ratio; and a
// stale factor degrades from step to step, so refactoring well before
// break-even is cheaper. The ratio keeps the threshold a few iterations on
// the benchmark graphs, where refactoring after freshInner was tuned, and
// raises it to tens on the 10^6-pose grids, whose factorizations cost
// hundreds of solves (docs/tuning.md, "Tuning figures":
// refactorFlopRatio).
func (p *hessianPrecond) refactorAfter() int {
	const fresh = freshInner
	if p.chol == nil {
		return fresh
	}
	factor, iter := p.flops()
	return fresh + int(factor/(refactorFlopRatio*iter))
}

// flops returns the counted costs of a factorization and of an inner
// iteration (see refactorAfter); p.chol must be analysed.
func (p *hessianPrecond) flops() (factor, iter float64) {
	factor = p.chol.Flops()
	solve := 4 * float64(p.chol.StoredNNZ())
	if p.split && p.schol != nil {
		factor += p.schol.Flops()
		solve += 4 * float64(p.schol.StoredNNZ()) * float64(p.r-p.d)
	}
	return factor, solve + 2*float64(len(p.q.Val))*float64(p.r)
}

// factorIterations is a factorization's cost in inner iterations at
// break-even (refactorBreakEven), or 0 before the first.
func (p *hessianPrecond) factorIterations() float64 {
	if p.chol == nil {
		return 0
	}
	factor, iter := p.flops()
	return factor / (refactorBreakEven * iter)
}

// refactorBreakEven is the ratio of the counted flops (refactorAfter) at
// which a factorization costs as much as the inner iterations it saves:
// an iteration's flop costs about three of a factorization's, whose dense
// kernels run more flops per instruction than the solves and the
// Hessian products. Measured by instruction counts on the whole process
// (docs/tuning.md, "Trust-region work, issue 27"): cubicle's last step
// with the kept factor, 10 inner iterations against a factorization and
// 2, ran 435M instructions fewer (flop ratio 49.9); parking-garage's, 16
// against a factorization and 3, 109M more (ratio 6.6).
const refactorBreakEven = 3.0

// raiseFloor is the least value, relative to the largest diagonal entry,
// to which the modified factorization raises a failing pivot (see
// factorShifted). It is not the ladder's first rung: near a minimum the
// pivot that fails is the gauge directions' (lifted by mu only), and
// raising it to 1e-5 instead of 1e-4 of the diagonal left a small SE(3)
// test graph stalled at a relative gradient of 1.3e-10.
const raiseFloor = 1e-4

// raiseLimit is how far below zero, relative to the largest diagonal
// entry, a pivot of the modified factorization may fall and still be
// raised (to its magnitude) rather than fail the attempt (see
// factorShifted). Raising k pivots makes the factor that of H + E with E
// diagonal of rank k, so tCG preconditioned by it takes about k more
// iterations than with the exact factor, whatever the size of E. A
// raise does move the pivots after it: raising d < 0 to |d| flips the
// sign of its column's update, so later pivots fall by a_jk^2/|d| where
// they would have risen by it; the limit is what catches a fall that
// grows (on a 10,648-pose lattice a pivot after two raises fell to -3.0
// times the diagonal, and the attempt fails as before). The Hessians near a minimum that are not yet positive
// definite have their negative pivot in the last columns of the
// elimination, its value 1 to 2 percent of the diagonal below zero
// (sphere2500's first Hessian, -1.06e-2; smallGrid3D's, -1.85e-2). With
// the ladder's top rung as the limit (1e-2, the rule before) those
// attempts failed after the whole factorization, and the ladder made
// another one (two on smallGrid3D), shifted, which blurs every small
// eigenvalue (docs/tuning.md, "Trust-region work, issue 27"). Pivot
// growth still fails: on a 10,648-pose lattice the first Hessian's last
// columns raise two pivots (the first -4.5e-2 of the diagonal) and the
// next falls to -3.0 times the diagonal, and the ladder shifts as before.
const raiseLimit = 1e-1

// freshInner: see refactorAfter.
const freshInner = 3

// staleFactor decides when the trust region refactors the Hessian. A
// factor is refactored when the inner iterations beyond a fresh factor's
// (freshInner), summed over the steps since it was made, exceed the
// budget refactorAfter() - freshInner. Summing matters where the budget is
// large (the 10^6-pose grid, where one factor served several steps each
// under the threshold: docs/tuning.md, "Tuning figures":
// staleFactor). On the benchmark graphs and the smaller grids no factor
// serves two steps that each stay under the threshold and together exceed
// it, and their paths are the same either way.
type staleFactor struct{ excess int }

// factored notes a new factorization.
func (s *staleFactor) factored() { s.excess = 0 }

// step adds a step's inner iterations and reports whether the next step
// should refactor, given the threshold after (refactorAfter's value).
func (s *staleFactor) step(inner, after int) bool {
	s.excess += max(0, inner-freshInner)
	return s.excess > after-freshInner
}

// resumeShift is the shift, relative to the largest diagonal entry, from
// which a factor is refactored at the next accepted point whatever the
// inner iterations. A shift that large blurs the Hessian's low modes, and
// the step after it moves far, where the kept factor costs more inner
// iterations than a new one (docs/tuning.md, "Tuning figures":
// resumeShift). See resumeFrom for where the ladder starts then.
const resumeShift = 1e-4

// resumeFrom returns the rung from which the next accepted point refactors
// the Hessian, or -1 for none (the usual rule, staleFactor, decides), after
// an accepted step with a factor made at rung (an index into shiftLadder);
// resumed says that factor was itself made by this rule, in place of a
// factor made at rung prev. A factor shifted by resumeShift or more is
// refactored from one rung below its own; so is a factor this rule made
// that is still shifted but landed below the one it replaced, so that the
// shifts step down the ladder one point at a time until a factor is exact
// (from rung 0 the modified factorization is tried first), and a Hessian
// that keeps needing the same shift is kept as the usual rule says (with
// no such condition, parking-garage from a random start refactored at
// almost every accepted step). Consecutive points need similar shifts, and
// a lower rung that fails costs less than a stale shifted factor; starting
// each resumed ladder at the factor's own rung, or from rung 0, were
// slower on the 10^6-pose grid (docs/tuning.md, "Tuning figures":
// resumeFrom). No benchmark graph's first factor needs 1e-4 after BCM's
// five sweeps (smallGrid3D's did before raiseLimit); smallGrid3D's needs
// 1e-3 after one (TestShiftedFactorServesOnePoint).
func resumeFrom(rung int, resumed bool, prev int) int {
	switch {
	case resumed && rung > 0 && rung < prev, !resumed && shiftLadder[rung] >= resumeShift:
		return rung - 1
	}
	return -1
}

// shiftFirstFlops is the factorization cost (Flops) from which the first
// factorization of a trust-region run skips the modified attempt and
// starts the shift ladder at its first shifted rung. The first Hessian,
// after BCM's five sweeps, failed the modified factorization and factored
// at 1e-5 on the synthetic lattices of 97,336, 250,047 and 10^6 poses
// (docs/tuning.md, "Tuning figures": shiftFirstFlops); where a
// factorization costs tens of inner iterations the failed attempt is the
// dearest part of the first step, and a shifted factor that a modified
// one would have beaten costs a few inner iterations at most. Below the
// threshold (every benchmark graph but torus3D, whose first Hessian costs
// 1.27e9; their first factors are not all shifted) the modified attempt
// is always made.
const shiftFirstFlops = 1e9

// refactorFlopRatio: see refactorAfter.
const refactorFlopRatio = 20.0

// factorShifted factors h + (mu + shift) I with the smallest shift of the
// ladder, up to rung maxRung, that makes it positive definite. Away from a
// minimum the Hessian may be indefinite. A slightly shifted one
// (Levenberg-Marquardt style) is still a good preconditioner, and tCG
// detects the negative curvature itself; beyond 1e-2 of the diagonal the
// caller does better with Q's factor. (The modified attempt may raise a
// few pivots down to raiseLimit, 1e-1: a change of rank k costs tCG about
// k iterations, where a shift that large would blur every small
// eigenvalue.) The unshifted matrix is always tried
// first (near a minimum it is the exact Newton system); then, since
// consecutive points need similar shifts, the ladder resumes one rung below
// the last success, which saves most failed factorizations.
//
// With modify, the unshifted attempt is a modified factorization
// (sparse.Cholesky.FactorizeBlocksModified): pivots that fail but are not
// below -raiseLimit of the largest diagonal entry are raised to at least
// raiseFloor of it. A Hessian near a minimum but not yet positive definite
// thus factors in one pass, exact but for a few raised pivots, where it
// took a failed factorization and a shifted one; the shift also blurs
// every small eigenvalue, which tCG pays for in iterations (the benchmark
// graphs whose first Hessian factors this way: docs/tuning.md,
// "Tuning figures": factorShifted). A pivot below the limit means strong
// indefiniteness or pivot growth (the first step on the synthetic grids,
// where a shift of 1e-5 suffices all the same), and the ladder goes on as
// before. It returns the shift, the number of raised pivots and
// whether a factor was made, and adds the factorizations it attempted to
// *attempts. With from > 0 the ladder starts at rung from instead, with
// no modified attempt (see resumeFrom).
func factorShifted(h *sparse.BlockSym, chol *sparse.Cholesky, mu, scale float64, rung *int, from, maxRung int, modify bool, attempts *int) (shift float64, raised int, ok bool) {
	return factorShiftedRows(h, nil, chol, mu, scale, rung, from, maxRung, modify, attempts)
}

// factorShiftedRows is factorShifted for h, or for rows when not nil (the
// Hessian computed as it is factored; h is then its pattern).
func factorShiftedRows(h *sparse.BlockSym, rows *sparse.BlockRows, chol *sparse.Cholesky, mu, scale float64, rung *int, from, maxRung int, modify bool, attempts *int) (shift float64, raised int, ok bool) {
	for t := from; t <= maxRung; t++ {
		if t == 1 && from == 0 {
			t = max(*rung-1, 1)
		}
		*attempts++
		shift = mu + shiftLadder[t]*scale
		var err error
		raised = 0
		floor, limit := raiseFloor*scale, raiseLimit*scale
		switch {
		case t == 0 && modify && scale > 0 && rows != nil:
			raised, err = chol.FactorizeRowsModified(rows, shift, floor, limit)
		case t == 0 && modify && scale > 0:
			raised, err = chol.FactorizeBlocksModified(h, shift, floor, limit)
		case rows != nil:
			err = chol.FactorizeRows(rows, shift)
		default:
			err = chol.FactorizeBlocks(h, shift)
		}
		if err == nil {
			*rung = t
			return shift, raised, true
		}
	}
	return 0, 0, false
}

// factorS factors 2 S = 2 (Q - Lambda) (shifted as needed), the Hessian of
// the complement part in the split form.
func (p *hessianPrecond) factorS(lam []float64) bool {
	d, b := p.d, p.b
	for t, v := range p.q.Val {
		p.s.Val[t] = 2 * v
	}
	for i := 0; i < p.q.N; i++ {
		blk := p.s.Block(p.s.Diag[i])
		l := lam[i*d*d : (i+1)*d*d]
		for a := 0; a < d; a++ {
			for c := 0; c < d; c++ {
				blk[a*b+c] -= 2 * l[a*d+c]
			}
		}
		if p.free != nil && p.free[i] {
			for a := 0; a < d; a++ {
				blk[a*b+a] = blk[d*b+d]
			}
		}
	}
	if p.schol == nil {
		c, err := analyzeWith(p.sym, p.s, p.qper)
		if err != nil {
			return false
		}
		p.schol = c
	}
	// S is positive semidefinite only near a global minimum of the rank-d
	// problem (it is the certificate). Elsewhere a shifted S made a poor
	// preconditioner, worse than Q's factor, which is used until S factors
	// unshifted (docs/tuning.md, "Tuning figures": factorS).
	var ok bool
	p.sshift, _, ok = factorShifted(p.s, p.schol, p.mu, p.s.MaxDiag(), &p.srung, 0, 0, false, &p.factorizations)
	return ok
}

// commonComplement sets uperp to the r-d trailing eigenvectors of
// sum_i Y_i Y_i^T: the directions of R^r the Stiefel blocks use least. At
// a rank-deficient point (every Y_i in one d-dimensional subspace, where
// the staircase converges when the relaxation is exact) they are exactly
// orthogonal to every Y_i.
func (p *hessianPrecond) commonComplement(x *sparse.Blocks) {
	r, d, b := p.r, p.d, p.b
	g := p.gram
	for a := 0; a < r; a++ {
		for c := a; c < r; c++ {
			s := 0.0
			for i := 0; i < x.N; i++ {
				if p.free != nil && p.free[i] {
					continue // a landmark's Y is not part of the solution
				}
				y := x.Block(i)
				for t := 0; t < d; t++ {
					s += y[a*b+t] * y[c*b+t]
				}
			}
			g.SetSym(a, c, s)
		}
	}
	var es mat.EigenSym
	es.Factorize(g, true)
	var u mat.Dense
	es.VectorsTo(&u)
	// Eigenvalues ascend: the first r-d vectors span the complement.
	for a := 0; a < r; a++ {
		for c := 0; c < r-d; c++ {
			p.uperp[a*(r-d)+c] = u.At(a, c)
		}
	}
}

// completeCommon is complete for the split form: the last r-d columns of
// w are the common complement made orthogonal to Y_i (Gram-Schmidt, twice),
// so that W_j^T W_i has the identity in its complement part at a
// rank-deficient point. A candidate that lies mostly in range(Y_i) is
// skipped for the next standard basis vector.
func (p *hessianPrecond) completeCommon(wk *hpWork, w, y []float64) {
	r, d, b := p.r, p.d, p.b
	for t := 0; t < r; t++ {
		copy(w[t*r:t*r+d], y[t*b:t*b+d])
	}
	e := wk.e
	col := d
	for cand := 0; col < r && cand < 2*r-d; cand++ {
		for t := 0; t < r; t++ {
			if cand < r-d {
				e[t] = p.uperp[t*(r-d)+cand]
			} else {
				e[t] = 0
			}
		}
		if cand >= r-d {
			e[cand-(r-d)] = 1
		}
		for pass := 0; pass < 2; pass++ {
			for c := 0; c < col; c++ {
				s := 0.0
				for t := 0; t < r; t++ {
					s += w[t*r+c] * e[t]
				}
				for t := 0; t < r; t++ {
					e[t] -= s * w[t*r+c]
				}
			}
		}
		nrm := 0.0
		for _, v := range e {
			nrm += v * v
		}
		nrm = math.Sqrt(nrm)
		if nrm < 0.25 {
			continue
		}
		for t := 0; t < r; t++ {
			w[t*r+col] = e[t] / nrm
		}
		col++
	}
	if col < r {
		p.complete(wk, w, y) // cannot happen for r <= 16; Householder never fails
	}
}

// coords sets c[i*k+l] = <v_i, W_i A_l>, the coordinates of the tangent
// vector v in the basis of the last update; in the split form also
// sc[(a-d)*n*b + i*b + col] = (W_i^T v_i)[a][col] for the complement rows
// a >= d.
func (p *hessianPrecond) coords(c, sc []float64, v *sparse.Blocks) {
	if nc := p.chunks(); nc == 1 {
		p.coordsRange(p.works[0].u, c, sc, v, 0, v.N)
	} else {
		forChunks(v.N, nc, func(t, lo, hi int) { p.coordsRange(p.works[t].u, c, sc, v, lo, hi) })
	}
}

func (p *hessianPrecond) coordsRange(u, c, sc []float64, v *sparse.Blocks, lo, hi int) {
	r, d, b, k := p.r, p.d, p.b, p.k
	rr, dim := r*r, v.N*b
	if is34(d, r, b) && k == 6 {
		coordsRange34(c, p.w, v, lo, hi)
		return
	}
	if is23(d, r, b) && !p.split {
		coordsRange23(c, p.w, v, r, lo, hi)
		return
	}
	for i := lo; i < hi; i++ {
		wi, vi := p.w[i*rr:(i+1)*rr], v.Block(i)
		// u = W_i^T v_i
		for a := 0; a < r; a++ {
			for col := 0; col < b; col++ {
				s := 0.0
				for t := 0; t < r; t++ {
					s += wi[t*r+a] * vi[t*b+col]
				}
				u[a*b+col] = s
			}
		}
		ci := c[i*k : (i+1)*k]
		for l, bl := range p.basis {
			s := 0.0
			for _, e := range bl {
				s += e.val * u[e.row*b+e.col]
			}
			ci[l] = s
		}
		if p.split {
			for a := d; a < r; a++ {
				copy(sc[(a-d)*dim+i*b:(a-d)*dim+(i+1)*b], u[a*b:(a+1)*b])
			}
		}
	}
}

// vector sets dst_i = W_i (sum_l z[i*k+l] A_l + the complement rows of sz),
// the tangent vector with coordinates z (and sz).
func (p *hessianPrecond) vector(dst *sparse.Blocks, z, sz []float64) {
	if nc := p.chunks(); nc == 1 {
		p.vectorRange(p.works[0].u, dst, z, sz, 0, dst.N)
	} else {
		forChunks(dst.N, nc, func(t, lo, hi int) { p.vectorRange(p.works[t].u, dst, z, sz, lo, hi) })
	}
}

func (p *hessianPrecond) vectorRange(u []float64, dst *sparse.Blocks, z, sz []float64, lo, hi int) {
	r, d, b, k := p.r, p.d, p.b, p.k
	rr, dim := r*r, dst.N*b
	if is34(d, r, b) && k == 6 {
		vectorRange34(dst, p.w, z, lo, hi)
		return
	}
	if is23(d, r, b) && !p.split {
		vectorRange23(dst, p.w, z, r, lo, hi)
		return
	}
	for i := lo; i < hi; i++ {
		wi, di := p.w[i*rr:(i+1)*rr], dst.Block(i)
		for t := range u {
			u[t] = 0
		}
		zi := z[i*k : (i+1)*k]
		for l, bl := range p.basis {
			for _, e := range bl {
				u[e.row*b+e.col] += e.val * zi[l]
			}
		}
		if p.split {
			for a := d; a < r; a++ {
				copy(u[a*b:(a+1)*b], sz[(a-d)*dim+i*b:(a-d)*dim+(i+1)*b])
			}
		}
		for t := 0; t < r; t++ {
			for col := 0; col < b; col++ {
				s := 0.0
				for a := 0; a < r; a++ {
					s += wi[t*r+a] * u[a*b+col]
				}
				di[t*b+col] = s
			}
		}
	}
}

// apply sets dst to the preconditioned v, a tangent vector at the point of
// the last successful update: coordinates, solve, back to a tangent
// vector. In the full form the solve is with H + shift I; in the split form
// with the span part of H and, row by row, with 2 S on the complement.
// dst may be v.
func (p *hessianPrecond) apply(dst, v *sparse.Blocks) {
	p.coords(p.c, p.sc, v)
	// In place: Solve reads all of its right-hand side before it writes
	// the solution, and a second vector of n k coordinates is 48 MB at a
	// million poses, live through the trust region.
	p.chol.Solve(p.c, p.c)
	if p.split {
		p.schol.SolveMany(p.sz, p.sc, p.r-p.d)
	}
	p.vector(dst, p.c, p.sz)
}

// restartAfter is the number of inner iterations after which a factor kept
// from an earlier point is replaced (rtr restarts tCG with a fresh one):
// four times the budget refactorAfter gives it, and at least 20. A point
// far from the one factored (a long step on a corridor, whose translations
// swing with every rotation) can make the kept factor a poor
// preconditioner, where a fresh one needs an iteration or two
// (docs/tuning.md, "Tuning figures": restartAfter). Near the minimum,
// where factors are kept, tCG stays well below this.
func restartAfter(p *hessianPrecond) int {
	return max(4*p.refactorAfter(), 20)
}
