package sync

import (
	"context"
	"fmt"

	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph/blockmat"
)

// BlockProblem is F seen from one block of poses while every other pose
// is held fixed:
//
//	F_B(X_B) = tr(X_B Q_BB X_B^T) + 2 <X_B, G_B> + const,   G_B = sum_{j not in B} X_j Q_jB,
//
// the subproblem that each agent of a distributed solve lowers in its
// update (sync/distributed), or any block-coordinate scheme over parts of
// a graph. It runs the same manifold operations and the same Riemannian
// trust region as Solve (manifold.go, rtr.go), preconditioned by a sparse
// Cholesky factor of Q_BB, so a part's step is a Newton step of its own
// block.
//
// Its point is the first n blocks of an r x b N Blocks whose other blocks
// are the fixed neighbours (the caller updates them as they change); Q is
// given by its rows at the block, which must be complete there (every
// block of Q's rows 0..n-1; the neighbours' rows are not read). A
// BlockProblem is not safe for concurrent use.
type BlockProblem struct {
	q *sparse.BlockSym // the block's rows of Q, on its numbering
	// qbb is Q_BB as a view of q's first n rows, whose blocks up to
	// ends[i] are Q_BB's (the products stop there: manifold.ends): the
	// rows are held once, and Q_BB is copied out only while its factor
	// is made (bbCopy).
	qbb  *sparse.BlockSym
	ends []int
	n, d int
	pre  *lazyFactor // of Q_BB + sigma I
	// solver and buffers are the trust region's preconditioner solves and
	// vectors, kept from one TrustRegion to the next (rtrBuffers) and let
	// go with the factor.
	solver  *rowSolver
	buffers *rtrBuffers
	// At the current rank: the manifold of the block with its linear
	// term, the products' scratch, the trust region's last radius and the
	// momentum's previous point.
	m      *manifold
	nq, g  *sparse.Blocks
	radius float64
	last   []float64
}

// NewBlockProblem prepares the block of the first n of q's blocks in
// dimension d (q's blocks are d+1 wide for poses, d for rotations).
func NewBlockProblem(q *blockmat.BlockSym, n, d int) (*BlockProblem, error) {
	if n < 1 || n > q.N {
		return nil, fmt.Errorf("sync: a block of %d of %d poses", n, q.N)
	}
	if q.B != d && q.B != d+1 {
		return nil, fmt.Errorf("sync: blocks of size %d in dimension %d", q.B, d)
	}
	p := &BlockProblem{q: q, n: n, d: d, ends: q.LeadingEnds(n), buffers: &rtrBuffers{},
		qbb: &sparse.BlockSym{N: n, B: q.B, RowPtr: q.RowPtr[:n+1], ColIdx: q.ColIdx, Val: q.Val, Diag: q.Diag[:n]}}
	// The order is found at the first factor, from its own copy of Q_BB,
	// and kept for the next: a part under an overlapping subproblem never
	// factors, and made here the order's copy sat on an agent's build.
	var perm []int
	p.pre = &lazyFactor{build: func() (*sparse.Cholesky, error) {
		bb := p.bbCopy()
		if perm == nil {
			perm = sparse.BlockOrder(bb, 0)
		}
		return qFactor(bb, perm, nil).build()
	}}
	return p, nil
}

// bbCopy returns Q_BB as a matrix of its own, as the factor's analysis
// and factorization read it: q's blocks in columns below n.
func (p *BlockProblem) bbCopy() *sparse.BlockSym {
	q, n := p.q, p.n
	bb := sparse.NewBlockBuilder(n, q.B)
	for i := 0; i < n; i++ {
		for k := q.RowPtr[i]; k < q.RowPtr[i+1]; k++ {
			switch j := q.ColIdx[k]; {
			case j == i:
				bb.AddDiag(i, q.Block(k))
			case j > i && j < n:
				bb.AddOff(i, j, q.Block(k))
			}
		}
	}
	return bb.Build()
}

// Reset forgets the trust region's radius and the momentum's previous
// point: the next step starts afresh (a new rank, a point set from
// outside).
func (p *BlockProblem) Reset() {
	p.radius, p.last = 0, nil
}

// ReleaseFactor lets go of the trust region's preconditioner, the factor
// of Q_BB + sigma I, and of the vectors its runs keep, until the next
// TrustRegion makes them again: the same factor and zero vectors, so the
// same steps. A distributed agent calls it when the certificate by parts
// begins, whose own factor and Schur complement set the agent's peak
// memory while these would sit idle.
func (p *BlockProblem) ReleaseFactor() {
	p.pre.chol, p.solver, p.buffers = nil, nil, &rtrBuffers{}
}

// at returns the block's part of x (aliasing x's first n blocks) and
// prepares the manifold at x's rank with the linear term of x's fixed
// blocks.
func (p *BlockProblem) at(x *blockmat.Blocks) *sparse.Blocks {
	r, b := x.R, x.B
	xb := &sparse.Blocks{R: r, B: b, N: p.n, Data: x.Data[:p.n*r*b]}
	if p.m == nil || p.m.r != r {
		p.m = newManifold(p.qbb, p.d, r, 1)
		p.m.ends = p.ends
		p.m.lin = sparse.NewBlocks(r, b, p.n)
		p.nq, p.g = nil, nil // made on first use: the trust region has its own
		p.Reset()
	}
	// G_i = sum_j X_j Q_ji over the fixed blocks j of row i (Q_ji is the
	// transpose of the stored Q_ij).
	q, lin := p.q, p.m.lin
	clear(lin.Data)
	for i := 0; i < p.n; i++ {
		gi := lin.Block(i)
		for k := q.RowPtr[i]; k < q.RowPtr[i+1]; k++ {
			j := q.ColIdx[k]
			if j < p.n {
				continue
			}
			xj, qij := x.Block(j), q.Block(k)
			for a := 0; a < r; a++ {
				for c := 0; c < b; c++ {
					s := 0.0
					for e := 0; e < b; e++ {
						s += xj[a*b+e] * qij[c*b+e]
					}
					gi[a*b+c] += s
				}
			}
		}
	}
	return xb
}

// scratch makes the products' scratch at the manifold's rank, after at:
// the statistics and the momentum use it, the trust region does not (an
// agent's overlapping subproblem only takes steps).
func (p *BlockProblem) scratch() {
	if p.nq == nil {
		p.nq, p.g = p.m.newBlocks(), p.m.newBlocks()
	}
}

// TrustRegion takes up to steps steps of Solve's trust region on x's
// block, the other blocks of x fixed, each solving its model by at most
// maxInner truncated-CG iterations (0: the trust region's default), and
// returns the steps taken. The radius carries over from one call to the
// next until Reset. F does not increase.
func (p *BlockProblem) TrustRegion(ctx context.Context, x *blockmat.Blocks, steps, maxInner int) (int, error) {
	if steps <= 0 {
		return 0, nil
	}
	xb := p.at(x)
	if p.solver == nil {
		// kept, as its right-hand sides (made at its first solve and
		// overwritten by each) are
		p.solver = newRowSolver(p.pre)
	}
	rr, err := rtr(ctx, p.m, xb, p.solver, nil, rtrOptions{MaxIter: steps, MaxInner: maxInner, Radius: p.radius, buffers: p.buffers})
	p.radius = rr.Radius
	return rr.Iterations, err
}

// Stats returns the block's shares of F, sum_{i in B} <X_i, (X Q)_i>, of
// ||grad F||^2 and of ||2 X Q||^2: over the blocks of a partition of the
// poses the shares add up to F and to the squared norms.
func (p *BlockProblem) Stats(x *blockmat.Blocks) (f, grad2, norm2 float64) {
	xb := p.at(x)
	p.scratch()
	p.m.mulQ(p.nq, xb)
	g, e := p.m.gradient(p.g, xb, p.nq)
	return inner(xb, p.nq), g * g, e * e
}

// MomentumInner returns <grad F(X)_B, X_B - X_prev> at x, X_prev the
// block as the last Momentum call recorded it (0 before one): the block's
// share of the gradient test for restarting accelerated descent
// (O'Donoghue and Candes 2015, "Adaptive restart for accelerated gradient
// schemes"). A positive sum over the blocks of a partition says the
// motion since X_prev, momentum included, points uphill at the new point.
// Unlike a rise of F, it stays measurable where F's change falls below
// F's rounding error, near the optimum.
func (p *BlockProblem) MomentumInner(x *blockmat.Blocks) float64 {
	xb := p.at(x)
	p.scratch()
	if len(p.last) != len(xb.Data) {
		return 0
	}
	p.m.mulQ(p.nq, xb)
	p.m.gradient(p.g, xb, p.nq)
	s := 0.0
	for k, v := range p.g.Data {
		s += v * (xb.Data[k] - p.last[k])
	}
	return s
}

// Cost returns F_B at x: F less tr(X_F Q_FF X_F^T), F's part in the fixed
// poses alone, which the block's steps do not change (so F_B may be
// negative).
func (p *BlockProblem) Cost(x *blockmat.Blocks) float64 {
	xb := p.at(x)
	p.scratch()
	p.m.mulQ(p.nq, xb)
	return inner(xb, p.nq) + inner(xb, p.m.lin)
}

// Momentum moves the block by the momentum step of accelerated
// block-coordinate descent, X <- R_X(beta (X - X_prev)) (the retraction of
// the manifold), and keeps X as it was as the next X_prev; beta = 0, or
// the first call after Reset, only records X.
func (p *BlockProblem) Momentum(x *blockmat.Blocks, beta float64) {
	xb := p.at(x)
	p.scratch()
	if len(p.last) != len(xb.Data) || beta == 0 {
		p.last = append(p.last[:0], xb.Data...)
		return
	}
	v := p.g
	for k, xk := range xb.Data {
		v.Data[k] = beta * (xk - p.last[k])
	}
	copy(p.last, xb.Data)
	p.m.retract(xb, xb, v)
}
