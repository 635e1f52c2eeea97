package rounding

import (
	"errors"
	"fmt"

	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
)

// chordalLandmarks is the chordal initialization of a graph with
// landmarks. The rotation-only chordal problem knows nothing of the
// observations, and poses linked only through landmarks would be
// unrelated in it, so the relaxation here is of the whole objective: with
// every R_i relaxed to R^{d x d}, F(X) = tr(X Q X^T) is a linear least
// squares in X = [X_1 ... X_N] (X_i = [R_i t_i], landmarks [. l_k]) with
// pose 0 held at [I 0]. Its normal equations use Q itself (block size
// d+1), grounded at pose 0 as chordalSystem grounds the rotation
// Laplacian, and with the landmarks' rotation coordinates (exactly zero
// rows and columns of Q) given a unit diagonal so they solve to 0. The
// relaxed rotations are then projected to SO(d), the translations and
// landmark positions recovered exactly (RecoverTranslations) and the
// result put in the input's gauge.
//
// When the observations leave some relaxed rotation undetermined (a pose
// that sees fewer than d non-collinear landmarks and has no pose edge),
// the system is singular; it is then solved with a tiny diagonal shift,
// which picks the least-norm relaxed rotation there.
func chordalLandmarks(g *posegraph.Graph, order []int) ([]posegraph.Pose, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	n, d := g.N(), g.D
	b := d + 1
	if order != nil {
		if _, err := reducedOrder(order, n, 0); err != nil {
			return nil, fmt.Errorf("%s: chordal initialization: %w", source(g), err)
		}
	}
	q, rhs := chordalLandmarkSystem(g)
	var perm []int
	if order != nil {
		perm = blockPerm(order, b)
	} else {
		perm = sparse.BlockOrder(q, 0)
	}
	c, err := sparse.AnalyzeBlocks(q, perm)
	if err != nil {
		return nil, fmt.Errorf("%s: chordal initialization: %w", source(g), err)
	}
	s := q.MaxDiag()
	err = c.FactorizeBlocks(q, 0)
	var npd *sparse.NotPositiveDefiniteError
	if errors.As(err, &npd) {
		err = c.FactorizeBlocks(q, 1e-10*s)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: chordal initialization: %w", source(g), err)
	}
	m := n * b
	z := make([]float64, m*d)
	c.SolveMany(z, rhs, d)
	poses := make([]posegraph.Pose, n)
	var rel [9]float64
	for i := 0; i < n; i++ {
		if g.IsLandmark(i) {
			poses[i] = posegraph.Identity(d)
			continue
		}
		for a := 0; a < d; a++ {
			for col := 0; col < d; col++ {
				rel[a*d+col] = z[a*m+i*b+col]
			}
		}
		nearestRotation(poses[i].R[:d*d], rel[:d*d], d)
	}
	return placeTranslations(g, poses, order, nil)
}

// chordalLandmarkSystem returns Q (poses and landmarks, block size d+1)
// grounded at pose 0 (its coupling blocks zeroed, its diagonal block s I)
// with s on the landmarks' rotation diagonals, and the d
// right-hand sides (column-major, N (d+1) x d): s X_0^T for pose 0 and
// -Q_j0 X_0^T for its neighbours j, X_0 = [I 0]. s is Q's largest
// diagonal entry, so the pivots pass the factorization's relative test.
func chordalLandmarkSystem(g *posegraph.Graph) (*sparse.BlockSym, []float64) {
	q := g.Laplacian(posegraph.Poses)
	s := q.MaxDiag()
	rhs := groundAtPose0(q, g.D, s)
	b := q.B
	for i := 1; i < g.N(); i++ {
		// A landmark no edge reaches has no diagonal block to set.
		if !g.IsLandmark(i) || q.ColIdx[q.Diag[i]] != i {
			continue
		}
		blk := q.Block(q.Diag[i])
		for a := 0; a < g.D; a++ {
			blk[a*b+a] = s
		}
	}
	return q, rhs
}
