package sync

import (
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/bcmsync/bcmsync/internal/smalldense"
	"github.com/bcmsync/bcmsync/internal/sparse"
)

// manifold holds the geometry of St(d, r)^n (x R^r)^n, the search space of
// the rank-r relaxation, and the products with Q the trust region and the
// certificate need. Points and tangent vectors are sparse.Blocks of R = r
// rows and blocks of size b (= d+1 for poses, d for rotations): columns
// 0..d-1 of a block are the Stiefel part Y_i, column d (poses only) the free
// translation p_i.
//
// With a linear term lin (a BlockProblem's: the poses of one block, the
// rest held fixed) the objective is tr(X Q X^T) + 2 <X, lin>: mulQ adds
// lin to X Q, so that N = X Q + lin is half the Euclidean gradient as
// before, and the Hessian, linear in V, uses V Q alone. Fixed neighbours
// break the gauge symmetries (X -> O X, a common translation shift), so
// there is then no gauge to project out.
type manifold struct {
	q          *sparse.BlockSym
	lin        *sparse.Blocks // nil: none
	d, r, b, n int
	threads    int

	h, y  []float64 // r x d scratch for one block
	parts []float64 // removeShift's partial sums, r per reduction range

	// free marks landmark blocks (nil: none; see landmarks.go); xg is
	// gaugePoint's copy of the point.
	free []bool
	xg   *sparse.Blocks
	// makeQ, when set, makes Q for a manifold that holds none (q nil: a
	// run whose parts certify lets Q go, see Run.letQGo), for as long as
	// hold keeps it; mulRows is X Q without Q (Q's rows made a chunk at a
	// time: posegraph.LaplacianRows), for mulQ without hold.
	makeQ   func() *sparse.BlockSym
	mulRows func(dst, x *sparse.Blocks)
	// ends, when set, makes q a view of a larger matrix's first n block
	// rows, of which the blocks up to ends[i] (columns below n) are the
	// manifold's Q (BlockSym.LeadingEnds): a BlockProblem's Q_BB read in
	// its rows of Q, not copied. Only the products read beyond q's
	// diagonal blocks, and they stop at ends.
	ends []int
}

func newManifold(q *sparse.BlockSym, d, r, threads int) *manifold {
	return &manifold{q: q, d: d, r: r, b: q.B, n: q.N, threads: threads,
		h: make([]float64, r*d), y: make([]float64, r*d), free: rotationFreeBlocks(q, d)}
}

// newManifoldWithout is newManifold for a run that holds no Q: n blocks of
// size b, free its landmark blocks; makeQ makes Q (hold), mulRows
// multiplies by it without it.
func newManifoldWithout(makeQ func() *sparse.BlockSym, mulRows func(dst, x *sparse.Blocks), n, b int, free []bool, d, r, threads int) *manifold {
	return &manifold{makeQ: makeQ, mulRows: mulRows, d: d, r: r, b: b, n: n, threads: threads,
		h: make([]float64, r*d), y: make([]float64, r*d), free: free}
}

// hold makes Q, if the manifold holds none, and returns the function that
// lets it go again: a caller that multiplies by Q more than once (a line
// search) makes it once.
func (m *manifold) hold() (release func()) {
	if m.q != nil {
		return func() {}
	}
	m.q = m.makeQ()
	return func() { m.q = nil }
}

func (m *manifold) newBlocks() *sparse.Blocks { return sparse.NewBlocks(m.r, m.b, m.n) }

// mulHeld sets dst = X Q with the Q the manifold holds (no linear term).
func (m *manifold) mulHeld(dst, x *sparse.Blocks) {
	if m.ends != nil {
		m.q.MulBlocksLeading(dst, x, m.ends)
		return
	}
	m.q.MulBlocksParallel(dst, x, m.threads)
}

// mulQ sets dst = X Q (+ lin, when the manifold has a linear term).
func (m *manifold) mulQ(dst, x *sparse.Blocks) {
	if m.q != nil {
		m.mulHeld(dst, x)
	} else {
		m.mulRows(dst, x) // the same bits (a manifold without Q has mulRows)
	}
	if m.lin != nil {
		for k, v := range m.lin.Data {
			dst.Data[k] += v
		}
	}
}

// lambda sets lam[i] (d x d, row-major, at lam[i*d*d:]) = sym(Y_i^T N_Y,i)
// from N = X Q. These are the Lagrange multipliers of the Stiefel
// constraints and the diagonal blocks of the certificate's Lambda.
func (m *manifold) lambda(lam []float64, x, nq *sparse.Blocks) {
	if c := poseChunks(m.n, m.threads); c == 1 {
		m.lambdaRange(lam, x, nq, 0, m.n)
	} else {
		forChunks(m.n, c, func(_, lo, hi int) { m.lambdaRange(lam, x, nq, lo, hi) })
	}
}

// lambdaRange is lambda on poses lo..hi-1.
func (m *manifold) lambdaRange(lam []float64, x, nq *sparse.Blocks, lo, hi int) {
	d, r, b := m.d, m.r, m.b
	for i := lo; i < hi; i++ {
		xi, ni := x.Block(i), nq.Block(i)
		smalldense.SymAtB(lam[i*d*d:(i+1)*d*d], xi, ni, r, b, d)
	}
}

// traceLambda returns sum_i tr(Lambda_i), the dual bound of a certified point.
func (m *manifold) traceLambda(lam []float64) float64 {
	d, s := m.d, 0.0
	for i := 0; i < m.n; i++ {
		for a := 0; a < d; a++ {
			s += lam[i*d*d+a*d+a]
		}
	}
	return s
}

// proj sets dst to the orthogonal projection of v onto the tangent space at
// x: V_Y - Y sym(Y^T V_Y) on the Stiefel part, p unchanged. dst may be v.
func (m *manifold) proj(dst, x, v *sparse.Blocks) {
	if c := poseChunks(m.n, m.threads); c == 1 {
		m.projRange(dst, x, v, 0, m.n)
	} else {
		forChunks(m.n, c, func(_, lo, hi int) { m.projRange(dst, x, v, lo, hi) })
	}
}

// projRange is proj on poses lo..hi-1.
func (m *manifold) projRange(dst, x, v *sparse.Blocks, lo, hi int) {
	d, r, b := m.d, m.r, m.b
	if is34(d, 3, b) {
		projRange34(dst, x, v, r, lo, hi)
		return
	}
	if is23(d, 2, b) {
		projRange23(dst, x, v, r, lo, hi)
		return
	}
	var sym [9]float64
	for i := lo; i < hi; i++ {
		xi, vi, di := x.Block(i), v.Block(i), dst.Block(i)
		smalldense.SymAtB(sym[:], xi, vi, r, b, d)
		for k := 0; k < r; k++ {
			for c := 0; c < d; c++ {
				s := vi[k*b+c]
				for a := 0; a < d; a++ {
					s -= xi[k*b+a] * sym[a*d+c]
				}
				di[k*b+c] = s
			}
			if b > d {
				di[k*b+d] = vi[k*b+d]
			}
		}
	}
}

// gradient sets g to the Riemannian gradient 2 proj(X Q) given N = X Q and
// returns its norm and the norm of the Euclidean gradient 2 N.
func (m *manifold) gradient(g, x, nq *sparse.Blocks) (norm, euclid float64) {
	m.proj(g, x, nq)
	s, e := 0.0, 0.0
	for k, v := range g.Data {
		g.Data[k] = 2 * v
		s += 4 * v * v
		e += 4 * nq.Data[k] * nq.Data[k]
	}
	return math.Sqrt(s), math.Sqrt(e)
}

// hess sets dst = Hess F(X)[V] = 2 proj(V Q - [V_Y Lambda_i, 0]) = 2 proj(V S),
// using work for V Q.
func (m *manifold) hess(dst, x, v *sparse.Blocks, lam []float64, work *sparse.Blocks) {
	if m.q == nil {
		defer m.hold()()
	}
	m.mulHeld(work, v)
	if c := poseChunks(m.n, m.threads); c == 1 {
		m.subLambda(v, work, lam, 0, m.n)
	} else {
		forChunks(m.n, c, func(_, lo, hi int) { m.subLambda(v, work, lam, lo, hi) })
	}
	m.proj(dst, x, work)
	for k := range dst.Data {
		dst.Data[k] *= 2
	}
}

// subLambda sets work_i -= [V_Y,i Lambda_i, 0] on poses lo..hi-1.
func (m *manifold) subLambda(v, work *sparse.Blocks, lam []float64, lo, hi int) {
	d, r, b := m.d, m.r, m.b
	if is34(d, 3, b) {
		subLambda34(v, work, lam, r, lo, hi)
		return
	}
	if is23(d, 2, b) {
		subLambda23(v, work, lam, r, lo, hi)
		return
	}
	for i := lo; i < hi; i++ {
		vi, wi := v.Block(i), work.Block(i)
		l := lam[i*d*d : (i+1)*d*d]
		for k := 0; k < r; k++ {
			for c := 0; c < d; c++ {
				s := 0.0
				for a := 0; a < d; a++ {
					s += vi[k*b+a] * l[a*d+c]
				}
				wi[k*b+c] -= s
			}
		}
	}
}

// retract sets dst = R_X(V): the polar factor of Y_i + V_Y,i on each
// Stiefel part (the closest point of St(d, r)), p_i + V_p,i on the rest.
func (m *manifold) retract(dst, x, v *sparse.Blocks) {
	if c := poseChunks(m.n, m.threads); c == 1 {
		m.retractRange(dst, x, v, 0, m.n)
	} else {
		forChunks(m.n, c, func(_, lo, hi int) { m.retractRange(dst, x, v, lo, hi) })
	}
}

// retractRange is retract on poses lo..hi-1.
func (m *manifold) retractRange(dst, x, v *sparse.Blocks, lo, hi int) {
	d, r, b := m.d, m.r, m.b
	var hs, ys [64]float64 // ranks up to 21 in 3-D without allocating
	h, y := hs[:], ys[:]
	if r*d > len(hs) {
		h, y = make([]float64, r*d), make([]float64, r*d)
	}
	h, y = h[:r*d], y[:r*d]
	for i := lo; i < hi; i++ {
		xi, vi, di := x.Block(i), v.Block(i), dst.Block(i)
		for k := 0; k < r; k++ {
			for c := 0; c < d; c++ {
				h[k*d+c] = xi[k*b+c] + vi[k*b+c]
			}
			if b > d {
				di[k*b+d] = xi[k*b+d] + vi[k*b+d]
			}
		}
		smalldense.Polar(y, h, r, d)
		for k := 0; k < r; k++ {
			copy(di[k*b:k*b+d], y[k*d:(k+1)*d])
		}
	}
}

func inner(a, b *sparse.Blocks) float64 {
	s := 0.0
	for k, v := range a.Data {
		s += v * b.Data[k]
	}
	return s
}

// axpy sets y += alpha x.
func axpy(alpha float64, x, y *sparse.Blocks) {
	for k, v := range x.Data {
		y.Data[k] += alpha * v
	}
}

func copyBlocks(dst, src *sparse.Blocks) { copy(dst.Data, src.Data) }

func zeroBlocks(x *sparse.Blocks) {
	for k := range x.Data {
		x.Data[k] = 0
	}
}

// removeShift removes from v its component along the common translation
// shift (p_i += c for all i), a null direction of the Hessian for poses.
// The preconditioner (Q + sigma I)^{-1} magnifies it by 1/sigma, and a
// null direction costs nothing in the trust-region model, so left in, it
// would swallow the step.
func (m *manifold) removeShift(v *sparse.Blocks) {
	if m.b == m.d || m.lin != nil {
		return
	}
	r := m.r
	ranges := reduceRanges(m.n)
	m.parts = growZero(m.parts, ranges*r)
	if c := min(poseChunks(m.n, m.threads), ranges); c == 1 {
		for t := 0; t < ranges; t++ {
			m.shiftSums(m.parts[t*r:(t+1)*r], v, t)
		}
	} else {
		forChunks(ranges, c, func(_, lo, hi int) {
			for t := lo; t < hi; t++ {
				m.shiftSums(m.parts[t*r:(t+1)*r], v, t)
			}
		})
	}
	mean := m.h[:r] // r x d scratch, r <= r d
	sumRanges(mean, m.parts, ranges)
	for k := range mean {
		mean[k] /= float64(m.n)
	}
	if c := poseChunks(m.n, m.threads); c == 1 {
		m.subtractShift(v, mean, 0, m.n)
	} else {
		forChunks(m.n, c, func(_, lo, hi int) { m.subtractShift(v, mean, lo, hi) })
	}
}

// shiftSums adds to sum[k] the translations of row k of v over the poses
// of reduction range t (see reduceChunk).
func (m *manifold) shiftSums(sum []float64, v *sparse.Blocks, t int) {
	d, r, b := m.d, m.r, m.b
	for i := t * reduceChunk; i < min((t+1)*reduceChunk, m.n); i++ {
		vi := v.Block(i)
		for k := 0; k < r; k++ {
			sum[k] += vi[k*b+d]
		}
	}
}

// subtractShift subtracts mean[k] from the translations of row k of v on
// poses lo..hi-1.
func (m *manifold) subtractShift(v *sparse.Blocks, mean []float64, lo, hi int) {
	d, r, b := m.d, m.r, m.b
	for i := lo; i < hi; i++ {
		vi := v.Block(i)
		for k := 0; k < r; k++ {
			vi[k*b+d] -= mean[k]
		}
	}
}

// gauge projects out the directions Omega X (Omega skew r x r): F is
// invariant under X -> O X, so at a critical point these span a null space
// of the Hessian. The trust region's model sees no curvature along them, but
// the retraction does (it rescales translations), so a preconditioned CG
// that drifts into them proposes steps that look free and are not.
type gauge struct {
	r int
	// threads for the per-pose loop of remove (0: GOMAXPROCS).
	threads int
	u       []float64 // eigenvectors of G = X X^T, row-major r x r (column k is vector k)
	ev      []float64 // eigenvalues of G
	b, w    []float64 // r x r scratch
	parts   []float64 // xxT's partial sums
	x       *sparse.Blocks
}

func newGauge(r int) *gauge {
	return &gauge{r: r, u: make([]float64, r*r), ev: make([]float64, r), b: make([]float64, r*r), w: make([]float64, r*r)}
}

// setPoint prepares the projection at x (nil: there is no gauge, and
// remove leaves vectors as they are).
func (gg *gauge) setPoint(x *sparse.Blocks) {
	r := gg.r
	gg.x = x
	if x == nil {
		return
	}
	g := mat.NewSymDense(r, nil)
	xxT(gg.w, x, x, gg.threads, &gg.parts)
	for a := 0; a < r; a++ {
		for c := a; c < r; c++ {
			g.SetSym(a, c, gg.w[a*r+c])
		}
	}
	var es mat.EigenSym
	es.Factorize(g, true)
	es.Values(gg.ev)
	var u mat.Dense
	es.VectorsTo(&u)
	for a := 0; a < r; a++ {
		for c := 0; c < r; c++ {
			gg.u[a*r+c] = u.At(a, c)
		}
	}
}

// xxT sets out (r x r, row-major) = A B^T for block matrices of r rows,
// summed over the poses by reduction ranges (see reduceChunk) on up to
// poseChunks(n, threads) goroutines; parts is the scratch for the
// ranges' partial sums, grown as needed.
func xxT(out []float64, a, b *sparse.Blocks, threads int, parts *[]float64) {
	r, n := a.R, a.N
	w := r * r
	ranges := reduceRanges(n)
	*parts = growZero(*parts, ranges*w)
	p := *parts
	if c := min(poseChunks(n, threads), ranges); c == 1 {
		for t := 0; t < ranges; t++ {
			xxTRange(p[t*w:(t+1)*w], a, b, t*reduceChunk, min((t+1)*reduceChunk, n))
		}
	} else {
		forChunks(ranges, c, func(_, lo, hi int) {
			for t := lo; t < hi; t++ {
				xxTRange(p[t*w:(t+1)*w], a, b, t*reduceChunk, min((t+1)*reduceChunk, n))
			}
		})
	}
	sumRanges(out[:w], p, ranges)
}

// xxTRange adds A_i B_i^T (r x r) to out for the poses lo..hi-1.
func xxTRange(out []float64, a, b *sparse.Blocks, lo, hi int) {
	r, bs := a.R, a.B
	if is34(3, r, bs) {
		xxTRange34(out, a, b, lo, hi)
		return
	}
	if is23(2, r, bs) {
		xxTRange23(out, a, b, r, lo, hi)
		return
	}
	for i := lo; i < hi; i++ {
		ai, bi := a.Block(i), b.Block(i)
		for p := 0; p < r; p++ {
			ap := ai[p*bs : (p+1)*bs]
			for q := 0; q < r; q++ {
				bq := bi[q*bs : (q+1)*bs]
				s := 0.0
				for c, v := range ap {
					s += v * bq[c]
				}
				out[p*r+q] += s
			}
		}
	}
}

// remove sets v -= Omega X with Omega the skew matrix minimizing
// ||v - Omega X||: the normal equations are Omega G + G Omega = 2 skew(v X^T),
// diagonal in G's eigenbasis.
func (gg *gauge) remove(v *sparse.Blocks) {
	if gg.x == nil {
		return
	}
	r := gg.r
	xxT(gg.w, v, gg.x, gg.threads, &gg.parts) // v X^T
	for a := 0; a < r; a++ {
		for c := 0; c < r; c++ {
			gg.b[a*r+c] = gg.w[a*r+c] - gg.w[c*r+a] // 2 skew(v X^T)
		}
	}
	// Omega' = U^T B U, divided entrywise by (ev_a + ev_c).
	rot := func(dst, src []float64, transposeU bool) {
		// dst = U^T src U (transposeU) or U src U^T.
		for a := 0; a < r; a++ {
			for c := 0; c < r; c++ {
				s := 0.0
				for k := 0; k < r; k++ {
					for l := 0; l < r; l++ {
						if transposeU {
							s += gg.u[k*r+a] * src[k*r+l] * gg.u[l*r+c]
						} else {
							s += gg.u[a*r+k] * src[k*r+l] * gg.u[c*r+l]
						}
					}
				}
				dst[a*r+c] = s
			}
		}
	}
	rot(gg.w, gg.b, true)
	top := gg.ev[r-1]
	for a := 0; a < r; a++ {
		for c := 0; c < r; c++ {
			den := gg.ev[a] + gg.ev[c]
			if den <= 1e-12*top {
				gg.w[a*r+c] = 0
			} else {
				gg.w[a*r+c] /= den
			}
		}
	}
	rot(gg.b, gg.w, false) // Omega
	x := gg.x
	if c := poseChunks(x.N, gg.threads); c == 1 {
		gg.removeRange(v, 0, x.N)
	} else {
		forChunks(x.N, c, func(_, lo, hi int) { gg.removeRange(v, lo, hi) })
	}
}

// removeRange subtracts Omega X_i (Omega in gg.b) from v_i on poses lo..hi-1.
func (gg *gauge) removeRange(v *sparse.Blocks, lo, hi int) {
	r, x := gg.r, gg.x
	bs := x.B
	if is34(3, r, bs) {
		removeRange34(v, x, (*[9]float64)(gg.b[:9]), lo, hi)
		return
	}
	if is23(2, r, bs) {
		removeRange23(v, x, gg.b, r, lo, hi)
		return
	}
	for i := lo; i < hi; i++ {
		xi, vi := x.Block(i), v.Block(i)
		for p := 0; p < r; p++ {
			for c := 0; c < bs; c++ {
				s := 0.0
				for q := 0; q < r; q++ {
					s += gg.b[p*r+q] * xi[q*bs+c]
				}
				vi[p*bs+c] -= s
			}
		}
	}
}
