package distributed

import (
	"math"

	"github.com/bcmsync/bcmsync/internal/smalldense"
	"github.com/bcmsync/bcmsync/internal/sparse"
)

// newton is an agent's second-order local step: a Riemannian trust-region
// Newton step on the own block, the public poses fixed, with truncated
// conjugate gradients (Steihaug-Toint) preconditioned by a sparse
// Cholesky factor of the own rows' Q_kk. It is the agent-level block
// update of DC2-PGO's RBCD (each agent improves its block with one or a
// few trust-region steps); single-pose BCM sweeps, whose progress along
// long chains is diffusive, remain the first passes of each update.
//
// On St(d, r)^n x R^{r n} with Lambda_i = sym(Y_i^T N_Y,i), N = X Q:
//
//	grad = 2 P_X(N),   Hess[V] = 2 P_X(V Q_kk - [V_Y Lambda, 0]),
//
// P_X projecting each Y part onto the tangent space (V - Y sym(Y^T V)).
type newton struct {
	l                        *local
	chol                     *sparse.Cholesky // of Q_kk + sigma I, own poses only
	n                        int              // own poses
	lam                      []float64        // Lambda_i, d x d each
	grad                     *sparse.Blocks   // own blocks only (public zero) below, n+npub blocks
	eta, hEta, r, z, dlt, hd *sparse.Blocks
	xTry                     *sparse.Blocks
	vec                      []float64 // Cholesky right-hand sides, column-major
	radius                   float64
	maxInner                 int
}

func newNewton(l *local) (*newton, error) {
	nOwn, b := len(l.own), l.b
	bb := sparse.NewBlockBuilder(nOwn, b)
	for i := 0; i < nOwn; i++ {
		for p := l.q.RowPtr[i]; p < l.q.RowPtr[i+1]; p++ {
			j := l.q.ColIdx[p]
			switch {
			case j == i:
				bb.AddDiag(i, l.q.Block(p))
			case j < nOwn && j > i:
				bb.AddOff(i, j, l.q.Block(p))
			}
		}
	}
	qkk := bb.Build()
	chol, err := sparse.AnalyzeBlocks(qkk, sparse.BlockOrder(qkk, 0))
	if err == nil {
		err = chol.FactorizeBlocks(qkk, 1e-9*qkk.MaxDiag())
	}
	if err != nil {
		return nil, err
	}
	return &newton{l: l, chol: chol, n: nOwn, radius: math.Inf(1), maxInner: 200}, nil
}

func (nt *newton) alloc() {
	l := nt.l
	r, b, N := l.x.R, l.b, l.x.N
	if nt.grad != nil && nt.grad.R == r {
		return
	}
	mk := func() *sparse.Blocks { return sparse.NewBlocks(r, b, N) }
	nt.grad, nt.eta, nt.hEta, nt.r, nt.z, nt.dlt, nt.hd, nt.xTry = mk(), mk(), mk(), mk(), mk(), mk(), mk(), mk()
	nt.lam = make([]float64, nt.n*l.d*l.d)
	nt.vec = make([]float64, nt.n*b*r)
}

// ownInner is <A, B> over the own blocks.
func (nt *newton) ownInner(a, b *sparse.Blocks) float64 {
	s := 0.0
	m := nt.n * a.R * a.B
	for k := 0; k < m; k++ {
		s += a.Data[k] * b.Data[k]
	}
	return s
}

// symYtW sets m (d x d) to sym(Y^T W) for the Stiefel parts Y, W (the
// first d columns) of the r x b blocks x and w: the multipliers at a
// gradient, and the normal component a tangent projection removes.
func symYtW(m, x, w []float64, r, b, d int) {
	for a := 0; a < d; a++ {
		for c := 0; c < d; c++ {
			s := 0.0
			for k := 0; k < r; k++ {
				s += x[k*b+a]*w[k*b+c] + x[k*b+c]*w[k*b+a]
			}
			m[a*d+c] = s / 2
		}
	}
}

// project sets v_i to its tangent part at X_i, for every own block.
func (nt *newton) project(v *sparse.Blocks) {
	l := nt.l
	r, b, d := l.x.R, l.b, l.d
	var m [9]float64
	for i := 0; i < nt.n; i++ {
		x, w := l.x.Block(i), v.Block(i)
		symYtW(m[:], x, w, r, b, d)
		for k := 0; k < r; k++ {
			for c := 0; c < d; c++ {
				s := 0.0
				for a := 0; a < d; a++ {
					s += x[k*b+a] * m[a*d+c]
				}
				w[k*b+c] -= s
			}
		}
	}
}

// gradient sets nt.grad and nt.lam at X and returns the local objective
// (the terms of F that involve own poses).
func (nt *newton) gradient() float64 {
	l := nt.l
	r, b, d := l.x.R, l.b, l.d
	f := 0.0
	for i := 0; i < nt.n; i++ {
		g := nt.grad.Block(i)
		l.q.MulBlockRow(g, l.x, i)
		x := l.x.Block(i)
		// f_loc = sum_i <X_i, N_i + G_i>, G_i the public part of N_i.
		f += nt.publicTerm(i)
		for k := range g {
			f += x[k] * g[k]
		}
		symYtW(nt.lam[i*d*d:(i+1)*d*d], x, g, r, b, d)
		for k := range g {
			g[k] *= 2
		}
	}
	nt.project(nt.grad)
	return f
}

// hess sets dst = Hess[v] on the own blocks (v's public blocks are zero).
func (nt *newton) hess(dst, v *sparse.Blocks) {
	l := nt.l
	r, b, d := l.x.R, l.b, l.d
	for i := 0; i < nt.n; i++ {
		w := dst.Block(i)
		l.q.MulBlockRow(w, v, i)
		vi := v.Block(i)
		lam := nt.lam[i*d*d : (i+1)*d*d]
		for k := 0; k < r; k++ {
			for c := 0; c < d; c++ {
				s := 0.0
				for a := 0; a < d; a++ {
					s += vi[k*b+a] * lam[a*d+c]
				}
				w[k*b+c] -= s
			}
		}
		for k := range w {
			w[k] *= 2
		}
	}
	nt.project(dst)
}

// precondition sets dst = P_X((Q_kk + sigma I)^{-1} v) on the own blocks.
func (nt *newton) precondition(dst, v *sparse.Blocks) {
	r, b, n := v.R, v.B, nt.n
	for i := 0; i < n; i++ {
		blk := v.Block(i)
		for a := 0; a < r; a++ {
			copy(nt.vec[a*n*b+i*b:a*n*b+(i+1)*b], blk[a*b:(a+1)*b])
		}
	}
	// (X Q^{-1}) row by row: Q symmetric, so each row of X solves once.
	nt.chol.SolveMany(nt.vec, nt.vec, r)
	for i := 0; i < n; i++ {
		blk := dst.Block(i)
		for a := 0; a < r; a++ {
			copy(blk[a*b:(a+1)*b], nt.vec[a*n*b+i*b:a*n*b+(i+1)*b])
		}
	}
	nt.project(dst)
}

func axpyOwn(n int, alpha float64, x, y *sparse.Blocks) {
	m := n * x.R * x.B
	for k := 0; k < m; k++ {
		y.Data[k] += alpha * x.Data[k]
	}
}

// step takes one trust-region step; it reports whether F decreased.
func (nt *newton) step() bool {
	nt.alloc()
	l := nt.l
	f0 := nt.gradient()
	gg := nt.ownInner(nt.grad, nt.grad)
	if gg == 0 {
		return false
	}
	// Steihaug-Toint tCG in the preconditioner's norm.
	m := nt.n * l.x.R * l.b
	clear(nt.eta.Data[:m])
	clear(nt.hEta.Data[:m])
	copy(nt.r.Data[:m], nt.grad.Data[:m])
	nt.precondition(nt.z, nt.r)
	rz := nt.ownInner(nt.r, nt.z)
	for k := 0; k < m; k++ {
		nt.dlt.Data[k] = -nt.z.Data[k]
	}
	r0 := math.Sqrt(gg)
	ePe, ePd, dPd := 0.0, 0.0, rz
	d2 := nt.radius * nt.radius
	boundary := false
	for j := 0; j < nt.maxInner; j++ {
		nt.hess(nt.hd, nt.dlt)
		dHd := nt.ownInner(nt.dlt, nt.hd)
		alpha := rz / dHd
		ePeNew := ePe + 2*alpha*ePd + alpha*alpha*dPd
		if dHd <= 0 || ePeNew >= d2 {
			tau := (-ePd + math.Sqrt(ePd*ePd+dPd*(d2-ePe))) / dPd
			axpyOwn(nt.n, tau, nt.dlt, nt.eta)
			axpyOwn(nt.n, tau, nt.hd, nt.hEta)
			boundary = true
			break
		}
		axpyOwn(nt.n, alpha, nt.dlt, nt.eta)
		axpyOwn(nt.n, alpha, nt.hd, nt.hEta)
		ePe = ePeNew
		axpyOwn(nt.n, alpha, nt.hd, nt.r)
		rr := math.Sqrt(nt.ownInner(nt.r, nt.r))
		if rr <= r0*math.Min(r0, 0.1) {
			break
		}
		nt.precondition(nt.z, nt.r)
		rzNew := nt.ownInner(nt.r, nt.z)
		beta := rzNew / rz
		rz = rzNew
		for k := 0; k < m; k++ {
			nt.dlt.Data[k] = -nt.z.Data[k] + beta*nt.dlt.Data[k]
		}
		ePd = beta * (ePd + alpha*dPd)
		dPd = rz + beta*beta*dPd
	}
	model := -(nt.ownInner(nt.grad, nt.eta) + 0.5*nt.ownInner(nt.eta, nt.hEta))
	// Retract: Y <- polar(Y + eta_Y), p <- p + eta_p.
	copy(nt.xTry.Data, l.x.Data)
	nt.retract()
	x := l.x
	l.x = nt.xTry
	f1 := nt.localCost()
	l.x = x
	rho := (f0 - f1) / model
	stepNorm := math.Sqrt(nt.ownInner(nt.eta, nt.eta))
	if !(model > 0) || !(f1 < f0) || rho < 0.1 {
		nt.radius = 0.25 * math.Sqrt(math.Max(ePe, 1e-300))
		if math.IsInf(nt.radius, 0) || nt.radius == 0 {
			nt.radius = 0.25 * stepNorm
		}
		return false
	}
	copy(l.x.Data, nt.xTry.Data)
	switch {
	case rho < 0.25:
		nt.radius = 0.25 * math.Sqrt(ePe)
	case rho > 0.75 && boundary:
		nt.radius *= 2
	}
	return true
}

// retract moves nt.xTry (a copy of X) along nt.eta.
func (nt *newton) retract() {
	l := nt.l
	r, b, d := l.x.R, l.b, l.d
	for i := 0; i < nt.n; i++ {
		x, e := nt.xTry.Block(i), nt.eta.Block(i)
		for k := range x {
			x[k] += e[k]
		}
		for k := 0; k < r; k++ {
			copy(l.h[k*d:(k+1)*d], x[k*b:k*b+d])
		}
		smalldense.Polar(l.y, l.h, r, d)
		for k := 0; k < r; k++ {
			copy(x[k*b:k*b+d], l.y[k*d:(k+1)*d])
		}
	}
}

// localCost is the terms of F that involve own poses, at l.x.
func (nt *newton) localCost() float64 {
	l := nt.l
	f := 0.0
	g := l.nrow
	for i := 0; i < nt.n; i++ {
		l.q.MulBlockRow(g, l.x, i)
		x := l.x.Block(i)
		for k := range g {
			f += x[k] * g[k]
		}
		f += nt.publicTerm(i)
	}
	return f
}

// publicTerm returns <X_i, G_i> for own block i, G_i = sum_j X_j Q_ji over
// the public (other agents') blocks j: the part of the local objective
// that couples block i to the poses this agent does not own.
func (nt *newton) publicTerm(i int) float64 {
	l := nt.l
	r, b := l.x.R, l.b
	x := l.x.Block(i)
	f := 0.0
	for p := l.q.RowPtr[i]; p < l.q.RowPtr[i+1]; p++ {
		j := l.q.ColIdx[p]
		if j < nt.n {
			continue
		}
		xj, qb := l.x.Block(j), l.q.Block(p)
		for a := 0; a < r; a++ {
			for c := 0; c < b; c++ {
				s := 0.0
				for e := 0; e < b; e++ {
					s += xj[a*b+e] * qb[c*b+e] // (X_j Q_ji)_{ac}, Q_ji = Q_ij^T
				}
				f += x[a*b+c] * s
			}
		}
	}
	return f
}
