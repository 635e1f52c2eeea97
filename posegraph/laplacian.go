package posegraph

import (
	"github.com/bcmsync/bcmsync/posegraph/blockmat"
)

// Problem selects what is synchronized.
type Problem int

const (
	// Poses is SE(d) synchronization: blocks of size d+1, [Y_i p_i].
	Poses Problem = iota
	// Rotations is SO(d) synchronization: blocks of size d, translations ignored.
	Rotations
)

func (p Problem) String() string {
	if p == Rotations {
		return "SO(d)"
	}
	return "SE(d)"
}

// BlockSize is the size of one block of Q for this problem in dimension d.
func (p Problem) BlockSize(d int) int {
	if p == Rotations {
		return d
	}
	return d + 1
}

// Laplacian assembles the connection Laplacian Q (docs/design.md section 3), so
// that F(X) = tr(X Q X^T) for the lifted variable X = [X_1 ... X_n]. For
// Poses the blocks are (d+1) x (d+1):
//
//	Q_ii += [[kappa I + tau t t^T, tau t], [tau t^T, tau]]
//	Q_jj += diag(kappa I, tau)
//	Q_ij += -[[kappa R, tau t], [0, tau]]
//
// and for Rotations d x d: Q_ii += kappa I, Q_jj += kappa I, Q_ij += -kappa R.
//
// A landmark observation is an edge with kappa = 0 and R = I, so the same
// formulas give its block exactly: a landmark's rotation rows and columns
// of Q are zero (landmarks.go).
func (g *Graph) Laplacian(p Problem) *blockmat.BlockSym {
	d := g.D
	b := p.BlockSize(d)
	bb := blockmat.NewBlockBuilder(g.N(), b)
	bb.Grow(len(g.Edges))
	di := make([]float64, b*b)
	dj := make([]float64, b*b)
	off := make([]float64, b*b)
	for k := range g.Edges {
		e := &g.Edges[k]
		edgeBlocks(e, p, d, di, dj, off)
		bb.AddDiag(e.I, di)
		bb.AddDiag(e.J, dj)
		bb.AddOff(e.I, e.J, off)
	}
	return bb.Build()
}

// edgeBlocks sets di, dj and off (b x b, b = p.BlockSize(d)) to edge e's
// terms of Q's blocks (i, i), (j, j) and (i, j) (Laplacian).
func edgeBlocks(e *Edge, p Problem, d int, di, dj, off []float64) {
	b := p.BlockSize(d)
	for k := range di {
		di[k], dj[k], off[k] = 0, 0, 0
	}
	for a := 0; a < d; a++ {
		di[a*b+a] = e.Kappa
		dj[a*b+a] = e.Kappa
		for c := 0; c < d; c++ {
			off[a*b+c] = -e.Kappa * e.R[a*d+c]
		}
	}
	if p == Poses {
		for a := 0; a < d; a++ {
			// Fill both triangles from one product so Q is
			// symmetric to the bit: solvers read either triangle.
			for c := 0; c <= a; c++ {
				v := e.Tau * e.T[a] * e.T[c]
				di[a*b+c] += v
				if c != a {
					di[c*b+a] += v
				}
			}
			di[a*b+d] = e.Tau * e.T[a]
			di[d*b+a] = e.Tau * e.T[a]
			off[a*b+d] = -e.Tau * e.T[a]
		}
		di[d*b+d] = e.Tau
		dj[d*b+d] = e.Tau
		off[d*b+d] = -e.Tau
	}
}

// Cost evaluates F edge by edge (docs/design.md section 1, no factor 1/2):
//
//	F = sum_e kappa ||R_j - R_i R_e||_F^2 + tau ||t_j - t_i - R_i t_e||^2.
//
// For Rotations only the first sum is taken. With g.RawRotations each edge
// also adds kappa (d - ||R_e||_F^2), zero for an exact rotation, so that F
// is tr(X Q X^T) for Q = Laplacian(p) whenever the poses' rotations are in
// SO(d): Q's diagonal blocks hold kappa I, where the edge formula expanded
// would put kappa R_e R_e^T. This is the value SE-Sync reports.
func (g *Graph) Cost(x []Pose, p Problem) float64 {
	f := 0.0
	for k := range g.Edges {
		e := &g.Edges[k]
		rot, trans := g.edgeTerms(e, x, p, g.RawRotations)
		f += e.Kappa * rot
		if p == Poses {
			f += e.Tau * trans
		}
	}
	return f
}

// EdgeCost returns edge e's term of F at x by the edge formula of Cost,
//
//	kappa ||R_j - R_i R_e||_F^2 + tau ||t_j - t_i - R_i t_e||^2
//
// (the first part alone for Rotations), without the constant
// kappa (d - ||R_e||_F^2) that Cost adds under RawRotations: no estimate
// changes it, so a per-edge view such as a colour scale should not show
// it. e must be one of g's edges, or index x alike.
func (g *Graph) EdgeCost(e *Edge, x []Pose, p Problem) float64 {
	rot, trans := g.edgeTerms(e, x, p, false)
	c := e.Kappa * rot
	if p == Poses {
		c += e.Tau * trans
	}
	return c
}

// edgeTerms returns ||R_j - R_i R_e||_F^2 (plus d - ||R_e||_F^2 when raw)
// and, for Poses, ||t_j - t_i - R_i t_e||^2: the two unweighted parts of
// an edge's term, shared by Cost and EdgeCost so that both add them in
// the same order.
func (g *Graph) edgeTerms(e *Edge, x []Pose, p Problem, raw bool) (rot, trans float64) {
	d := g.D
	ri, rj := &x[e.I].R, &x[e.J].R
	for a := 0; a < d; a++ {
		for c := 0; c < d; c++ {
			v := rj[a*d+c]
			for k := 0; k < d; k++ {
				v -= ri[a*d+k] * e.R[k*d+c]
			}
			rot += v * v
		}
	}
	if raw {
		rot += float64(d)
		for _, v := range e.R[:d*d] {
			rot -= v * v
		}
	}
	if p == Poses {
		for a := 0; a < d; a++ {
			v := x[e.J].T[a] - x[e.I].T[a]
			for k := 0; k < d; k++ {
				v -= ri[a*d+k] * e.T[k]
			}
			trans += v * v
		}
	}
	return rot, trans
}

// Lift returns the r x (b n) block matrix X with X_i = [R_i t_i] (or R_i for
// Rotations) in its top d rows and zeros below; r >= d.
func (g *Graph) Lift(x []Pose, p Problem, r int) *blockmat.Blocks {
	d := g.D
	b := p.BlockSize(d)
	out := blockmat.NewBlocks(r, b, len(x))
	for i := range x {
		blk := out.Block(i)
		for a := 0; a < d; a++ {
			for c := 0; c < d; c++ {
				blk[a*b+c] = x[i].R[a*d+c]
			}
			if p == Poses {
				blk[a*b+d] = x[i].T[a]
			}
		}
	}
	return out
}

// TraceCost returns tr(X Q X^T) = sum_i <X_i, (X Q)_i>, using work (same
// shape as x) for X Q.
func TraceCost(q *blockmat.BlockSym, x, work *blockmat.Blocks) float64 {
	q.MulBlocks(work, x)
	return dotBlocks(x, work)
}

// dotBlocks returns <x, y>, the entries' products summed in order.
func dotBlocks(x, y *blockmat.Blocks) float64 {
	s := 0.0
	for k, v := range x.Data {
		s += v * y.Data[k]
	}
	return s
}
