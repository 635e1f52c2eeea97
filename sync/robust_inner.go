package sync

import (
	"context"
	"fmt"
	"time"

	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
	"github.com/bcmsync/bcmsync/rounding"
)

// gncSolver makes GNC's weighted solves cheap: one local solve of the
// rank-r relaxation at fixed rank, warm-started from the last one's point,
// with no staircase, no certificate and no rounding.
//
// Every weighted problem has the same edges, only their weights change, so
// Q keeps one sparsity pattern, with the edges of weight 0 as explicit
// zeros: the fill-reducing order, the manifold and the Hessian
// preconditioner, whose symbolic factorization is the costly part of a
// small solve, are made once, and each solve only refills Q's values (the
// preconditioner reads them at every factorization).
//
// The rank stays where the first solve put it (Options.Rank0, raised to
// RobustOptions.InnerRank): GNC needs the estimates of a landscape with few
// spurious minima, not a proof, and the lifted point keeps what the higher
// rank buys from one weighted problem to the next. Each edge's weight comes
// from its term at the lifted point, kappa ||Y_j - Y_i R_e||^2 +
// tau ||p_j - p_i - Y_i t_e||^2, which is its term of F at rank d.
type gncSolver struct {
	g       *posegraph.Graph
	prob    posegraph.Problem
	d, r    int
	threads int
	q       *sparse.BlockSym // the weighted Laplacian, refilled per solve
	perm    []int            // Q's block ordering
	order   []int            // the same ordering by pose
	m       *manifold
	hp      *hessianPrecond
	x       *sparse.Blocks // the lifted estimate
	scaled  posegraph.Graph
}

// newGNCSolver prepares the weighted solves of g at rank r.
func newGNCSolver(g *posegraph.Graph, prob posegraph.Problem, r, threads int) *gncSolver {
	s := &gncSolver{g: g, prob: prob, d: g.D, r: r, threads: threads}
	s.scaled = *g
	s.scaled.Edges = append([]posegraph.Edge(nil), g.Edges...)
	s.q = g.Laplacian(prob)
	s.perm = sparse.BlockOrder(s.q, 0)
	s.order = make([]int, s.q.N)
	for k := range s.order {
		s.order[k] = s.perm[k*s.q.B] / s.q.B
	}
	s.m = newManifold(s.q, s.d, r, threads)
	s.hp = newHessianPrecond(s.q, s.d, s.perm, 1e-9*s.q.MaxDiag())
	s.hp.threads = threads
	return s
}

// start lifts poses to the solver's rank (with the seeded perturbation of
// the extra rows that lets a higher rank be used) as the next solve's
// starting point.
func (s *gncSolver) start(poses []posegraph.Pose, seed uint64) {
	s.x = s.g.Lift(centered(poses, s.d), s.prob, s.r)
	if s.r > s.d {
		perturbRows(s.x, s.d, seed)
	}
}

// solve runs the trust region on the problem weighted by w (the weights of
// g's edges, 0 allowed) from the current point, to the relative gradient
// tol or maxIter steps.
func (s *gncSolver) solve(ctx context.Context, w []float64, tol float64, maxIter int, deadline time.Time) (rtrResult, error) {
	for k := range s.scaled.Edges {
		e, o := &s.scaled.Edges[k], &s.g.Edges[k]
		e.Kappa, e.Tau = w[k]*o.Kappa, w[k]*o.Tau
	}
	q := s.scaled.Laplacian(s.prob)
	if len(q.Val) != len(s.q.Val) {
		return rtrResult{}, fmt.Errorf("robust: the weighted Laplacian changed its pattern")
	}
	copy(s.q.Val, q.Val)
	// The row solver's factor of Q + sigma I (the fallback when the
	// Hessian does not factor) is of this solve's Q.
	pre := newRowSolver(qFactor(s.q, s.perm, nil))
	return rtr(ctx, s.m, s.x, pre, s.hp, rtrOptions{GradTol: tol, MaxIter: maxIter, Deadline: deadline})
}

// costs writes each edge's term at the lifted point into dst and returns
// it (see gncSolver). The rotation part of a landmark observation is zero
// (kappa = 0).
func (s *gncSolver) costs(dst []float64) []float64 {
	g, x, d := s.g, s.x, s.d
	if cap(dst) < g.M() {
		dst = make([]float64, g.M())
	}
	dst = dst[:g.M()]
	r, b := x.R, x.B
	for k := range g.Edges {
		e := &g.Edges[k]
		xi, xj := x.Block(e.I), x.Block(e.J)
		rot, trans := 0.0, 0.0
		for a := 0; a < r; a++ {
			yi, yj := xi[a*b:a*b+d], xj[a*b:a*b+d]
			if e.Kappa != 0 {
				for c := 0; c < d; c++ {
					v := yj[c]
					for l := 0; l < d; l++ {
						v -= yi[l] * e.R[l*d+c]
					}
					rot += v * v
				}
			}
			if s.prob == posegraph.Poses {
				v := xj[a*b+d] - xi[a*b+d]
				for l := 0; l < d; l++ {
					v -= yi[l] * e.T[l]
				}
				trans += v * v
			}
		}
		dst[k] = e.Kappa*rot + e.Tau*trans
	}
	return dst
}

// round returns the lifted point rounded onto SO(d)^n, with translations
// optimal for the graph wg (same vertices as g) and in g's gauge.
func (s *gncSolver) round(wg *posegraph.Graph) ([]posegraph.Pose, error) {
	return roundEstimate(wg, s.x, s.d, s.prob, rounding.NewPlan(wg, s.order, nil))
}

// qFactor returns the lazily made factor of Q + sigma I, sigma 1e-9 of Q's
// largest diagonal entry (it only lifts the common translation), in the
// block ordering perm (sym, if not nil, its block analysis of Q's
// pattern): the trust region's fallback preconditioner and the
// eigensolver's.
func qFactor(q *sparse.BlockSym, perm []int, sym *sparse.BlockSymbolic) *lazyFactor {
	scale := q.MaxDiag()
	return &lazyFactor{build: func() (*sparse.Cholesky, error) {
		c, err := analyzeWith(sym, q, perm)
		if err == nil {
			err = c.FactorizeBlocks(q, 1e-9*scale)
		}
		if err != nil {
			return nil, fmt.Errorf("factoring the preconditioner Q + sigma I: %w", err)
		}
		return c, nil
	}}
}
