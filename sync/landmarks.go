package sync

import (
	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
)

// Landmarks (posegraph's landmarks.go) are blocks of Q whose rotation rows
// and columns are exactly zero: no cost sees their Stiefel part Y. The
// solver keeps one block size and treats those coordinates as absent:
//
//   - the trust region works on tangent vectors whose landmark Y parts are
//     zero (manifold.maskFree, applied with the gauge projection), and its
//     gauge directions Omega X are taken with the landmark Y parts of X
//     zeroed, since rotating the poses and landmark positions alone is
//     already a symmetry of F;
//   - the Hessian preconditioner gives the landmark Y coordinates, whose
//     rows of H are zero, a decoupled positive diagonal;
//   - the certificate does the same in S + eta D_Y: a coordinate whose row
//     and column of S vanish does not change whether S is positive
//     semidefinite, and since F does not depend on a landmark's Y, weak
//     duality needs the shift eta only on the poses' Y, so the bound is
//     tr(Lambda) - eta d (number of poses) (Lambda_i = 0 for a landmark);
//   - the rounding leaves landmark blocks out of Y Y^T and the determinant
//     vote.
//
// The pose-only path never sees any of this: every hook tests a nil mask.

// rotationFreeBlocks returns the mask of the blocks of q (block size d+1)
// whose d x d rotation part of the diagonal block is zero, or nil if there
// is none (or q has no translation part). Q is positive semidefinite, so a
// zero diagonal block means zero rows and columns: exactly the landmarks,
// or the one pose of a graph without edges (a graph of one block is a
// pose: a landmark needs a pose to see it), which stays a pose.
func rotationFreeBlocks(q *sparse.BlockSym, d int) []bool {
	b := q.B
	if b == d || q.N == 1 {
		return nil
	}
	var free []bool
	for i := 0; i < q.N; i++ {
		blk := q.Block(q.Diag[i])
		zero := true
		for a := 0; a < d && zero; a++ {
			for c := 0; c < d; c++ {
				if blk[a*b+c] != 0 {
					zero = false
					break
				}
			}
		}
		if zero {
			if free == nil {
				free = make([]bool, q.N)
			}
			free[i] = true
		}
	}
	return free
}

// countFree returns the number of set entries of a mask.
func countFree(free []bool) int {
	c := 0
	for _, f := range free {
		if f {
			c++
		}
	}
	return c
}

// maskFree zeroes the Y parts of v's landmark blocks.
func (m *manifold) maskFree(v *sparse.Blocks) {
	if m.free == nil {
		return
	}
	r, b, d := m.r, m.b, m.d
	for i, f := range m.free {
		if !f {
			continue
		}
		vi := v.Block(i)
		for a := 0; a < r; a++ {
			clear(vi[a*b : a*b+d])
		}
	}
}

// gaugePoint returns x for the gauge projection: x itself without
// landmarks, else a copy (kept in m.xg) with the landmarks' Y parts zeroed;
// nil when fixed neighbours leave no gauge (a linear term).
func (m *manifold) gaugePoint(x *sparse.Blocks) *sparse.Blocks {
	if m.lin != nil {
		return nil
	}
	if m.free == nil {
		return x
	}
	if m.xg == nil || m.xg.R != x.R {
		m.xg = sparse.NewBlocks(x.R, x.B, x.N)
	}
	copy(m.xg.Data, x.Data)
	m.maskFree(m.xg)
	return m.xg
}

// freeDiagonal gives a landmark's diagonal block hb (k x k) of the
// Hessian in basis coordinates the value v on the diagonal of every basis
// matrix on the Stiefel part (columns below d): those rows and columns of
// H are exactly zero, and a positive diagonal decouples them.
func freeDiagonal(hb []float64, basis [][]basisEntry, k, d int, v float64) {
	for kk, bk := range basis {
		if bk[0].col < d {
			hb[kk*k+kk] = v
		}
	}
}

// observations counts g's edges that observe a landmark.
func observations(g *posegraph.Graph) int {
	if !g.HasLandmarks() {
		return 0
	}
	c := 0
	for k := range g.Edges {
		if g.IsLandmark(g.Edges[k].J) {
			c++
		}
	}
	return c
}
