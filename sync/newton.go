package sync

import (
	"math"

	"github.com/bcmsync/bcmsync/internal/sparse"
)

// At rank r = d each Y_i is a square orthogonal matrix, so the tangent space
// at X has the orthonormal basis V_i = Y_i B_k, with B_k running over the
// d(d-1)/2 unit skew matrices (the rotation part) and, for poses, the d unit
// translation directions. In these coordinates the Riemannian Hessian
// <V, Hess V> = 2 tr(V S V^T), S = Q - Lambda, is a sparse matrix with Q's
// block pattern and k x k blocks
//
//	H_ij[k][l] = 2 tr(B_k S_ij B_l^T Y_j^T Y_i).
//
// Its Cholesky factor preconditions the trust region's inner CG exactly:
// every step becomes a Newton step, and the inner iterations drop from
// hundreds to one or two. At r > d the tangent space is larger and the
// finish falls back to the factor of Q + sigma I.

type basisEntry struct {
	row, col int
	val      float64
}

type hessianPrecond struct {
	q       *sparse.BlockSym
	d, b, k int
	basis   [][]basisEntry
	h       *sparse.BlockSym
	csc     *sparse.CSC
	chol    *sparse.Cholesky
	perm    []int
	mu      float64
	scale   float64 // largest diagonal entry of the Hessian at the last update
	x       *sparse.Blocks
	c, w    []float64
	ok      bool
	failed  int // assemblies that were not positive definite
}

func newHessianPrecond(q *sparse.BlockSym, d int, perm []int, mu float64) *hessianPrecond {
	b := q.B
	var basis [][]basisEntry
	s := 1 / math.Sqrt2
	for a := 0; a < d; a++ {
		for c := a + 1; c < d; c++ {
			basis = append(basis, []basisEntry{{a, c, s}, {c, a, -s}})
		}
	}
	if b > d {
		for a := 0; a < d; a++ {
			basis = append(basis, []basisEntry{{a, d, 1}})
		}
	}
	k := len(basis)
	h := &sparse.BlockSym{N: q.N, B: k, RowPtr: q.RowPtr, ColIdx: q.ColIdx, Diag: q.Diag,
		Val: make([]float64, len(q.ColIdx)*k*k)}
	// The Hessian's block pattern is Q's, and a block ordering of Q is an
	// ordering of H expanded to k scalars per pose.
	hperm := make([]int, 0, q.N*k)
	for p := 0; p < len(perm); p += b {
		i := perm[p] / b
		for t := 0; t < k; t++ {
			hperm = append(hperm, i*k+t)
		}
	}
	return &hessianPrecond{q: q, d: d, b: b, k: k, basis: basis, h: h, perm: hperm, mu: mu,
		c: make([]float64, q.N*k), w: make([]float64, q.N*k)}
}

// update assembles and factors the Hessian at x (rank d) with multipliers
// lam. It reports whether the Hessian (plus mu I) was positive definite: near
// a saddle or far from a minimum it is not, and the caller falls back.
func (p *hessianPrecond) update(x *sparse.Blocks, lam []float64) bool {
	d, b, k := p.d, p.b, p.k
	p.x = x
	var sij [16]float64
	var m [9]float64
	for i := 0; i < p.q.N; i++ {
		yi := x.Block(i)
		for pos := p.q.RowPtr[i]; pos < p.q.RowPtr[i+1]; pos++ {
			j := p.q.ColIdx[pos]
			copy(sij[:b*b], p.q.Block(pos))
			if i == j {
				l := lam[i*d*d : (i+1)*d*d]
				for a := 0; a < d; a++ {
					for c := 0; c < d; c++ {
						sij[a*b+c] -= l[a*d+c]
					}
				}
			}
			// m = Y_j^T Y_i (the identity when i == j).
			yj := x.Block(j)
			for a := 0; a < d; a++ {
				for c := 0; c < d; c++ {
					s := 0.0
					for t := 0; t < d; t++ {
						s += yj[t*b+a] * yi[t*b+c]
					}
					m[a*d+c] = s
				}
			}
			hb := p.h.Block(pos)
			for kk, bk := range p.basis {
				for ll, bl := range p.basis {
					// tr(B_k S B_l^T M) = sum (B_k)_{a,al} S_{al,be} (B_l)_{c,be} M_{c,a}
					s := 0.0
					for _, ek := range bk {
						for _, el := range bl {
							s += ek.val * sij[ek.col*b+el.col] * el.val * m[el.row*d+ek.row]
						}
					}
					hb[kk*k+ll] = 2 * s
				}
			}
		}
	}
	p.scale = 0
	for i := 0; i < p.h.N; i++ {
		blk := p.h.Block(p.h.Diag[i])
		for t := 0; t < k; t++ {
			p.scale = math.Max(p.scale, blk[t*k+t])
		}
	}
	if p.csc == nil {
		p.csc = p.h.LowerCSC(p.mu, 0)
	} else {
		p.h.FillLowerCSC(p.csc, p.mu)
	}
	if p.chol == nil {
		c, err := sparse.Analyze(p.csc, p.perm)
		if err != nil {
			p.ok = false
			return false
		}
		p.chol = c
	}
	// Away from a minimum the Hessian may be indefinite. A shifted one
	// (Levenberg-Marquardt style) is still a good preconditioner, and tCG
	// detects the negative curvature itself; only when even a large shift
	// fails does the caller fall back to Q.
	for _, shift := range []float64{0, 1e-4, 1e-2} {
		if shift > 0 {
			p.h.FillLowerCSC(p.csc, p.mu+shift*p.scale)
		}
		if p.ok = p.chol.Factorize(p.csc) == nil; p.ok {
			break
		}
	}
	if !p.ok {
		p.failed++
	}
	return p.ok
}

// apply sets dst = Hess^{-1} v for a tangent vector v at the point of the
// last successful update.
func (p *hessianPrecond) apply(dst, v *sparse.Blocks) {
	d, b, k := p.d, p.b, p.k
	x := p.x
	for i := 0; i < x.N; i++ {
		yi, vi := x.Block(i), v.Block(i)
		for kk, bk := range p.basis {
			s := 0.0
			for _, e := range bk {
				// (Y_i^T v_i)[row][col]
				t := 0.0
				for r := 0; r < d; r++ {
					t += yi[r*b+e.row] * vi[r*b+e.col]
				}
				s += e.val * t
			}
			p.c[i*k+kk] = s
		}
	}
	p.chol.Solve(p.w, p.c)
	for i := 0; i < x.N; i++ {
		yi, di := x.Block(i), dst.Block(i)
		for t := range di {
			di[t] = 0
		}
		for kk, bk := range p.basis {
			w := p.w[i*k+kk]
			for _, e := range bk {
				for r := 0; r < d; r++ {
					di[r*b+e.col] += yi[r*b+e.row] * e.val * w
				}
			}
		}
	}
}
