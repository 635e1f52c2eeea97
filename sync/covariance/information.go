package covariance

import (
	"math"

	"github.com/bcmsync/bcmsync/internal/smalldense"
	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
)

// generators holds the tangent directions G_k of SO(d): R Exp(w) =
// R (I + sum_k w_k G_k) to first order. In 2-D the one generator is the
// quarter turn; in 3-D G_k = [e_k]_x, so G_k v = e_k x v.
var generators = [2][3][9]float64{
	{{0, -1, 1, 0}},
	{
		{0, 0, 0, 0, 0, -1, 0, 1, 0},
		{0, 0, 1, 0, 0, 0, -1, 0, 0},
		{0, -1, 0, 1, 0, 0, 0, 0, 0},
	},
}

// information returns the Gauss-Newton information J^T J of F/2 at x as a
// block-sparse matrix of PoseDim(d)-square blocks, one per vertex but the
// gauge, and the block of each vertex (-1 for the gauge). A pose block's
// coordinates are (translation, rotation), as in Covariances; a landmark
// uses the first d, and its other coordinates are given the identity,
// which couples them to nothing, so they change no other entry of the
// inverse and the factorization sees a positive definite matrix.
//
// Each edge contributes J_e^T J_e, J_e the Jacobian of its whitened
// residual (the rotation residual sqrt(kappa) vec(R_j - R_i Rt), d^2
// rows, for pose-to-pose edges; the translation residual
// sqrt(tau) (t_j - t_i - R_i tt), d rows) with respect to the
// perturbations (dt_i, w_i, dt_j, w_j), R -> R Exp(w), t -> t + dt:
//
//	d r_R / d w_j,k  =  sqrt(kappa) vec(R_j G_k)
//	d r_R / d w_i,k  = -sqrt(kappa) vec(R_i G_k Rt)
//	d r_t / d dt_j   =  sqrt(tau) I,      d r_t / d dt_i = -sqrt(tau) I
//	d r_t / d w_i,k  = -sqrt(tau) R_i G_k tt
func information(g *posegraph.Graph, x []posegraph.Pose, gauge int) (*sparse.BlockSym, []int) {
	d, n := g.D, g.N()
	p := PoseDim(d)
	nr := p - d // rotation coordinates
	block := make([]int, n)
	nb := 0
	for i := range block {
		if i == gauge {
			block[i] = -1
			continue
		}
		block[i] = nb
		nb++
	}
	bb := sparse.NewBlockBuilder(nb, p)
	bb.Grow(g.M())
	gens := &generators[d-2]
	// J_i and J_j of one edge: up to d^2 + d rows of p columns.
	var ji, jj [12 * 6]float64
	var hii, hjj, hij [36]float64
	for k := range g.Edges {
		e := &g.Edges[k]
		xi, xj := &x[e.I], &x[e.J]
		clear(ji[:])
		clear(jj[:])
		rows := 0
		if !g.IsLandmark(e.J) {
			sk := math.Sqrt(e.Kappa)
			for q := 0; q < nr; q++ {
				mj := smalldense.Mul(&xj.R, &gens[q], d)
				gr := smalldense.Mul(&gens[q], &e.R, d)
				mi := smalldense.Mul(&xi.R, &gr, d)
				for r := 0; r < d*d; r++ {
					jj[r*p+d+q] = sk * mj[r]
					ji[r*p+d+q] = -sk * mi[r]
				}
			}
			rows = d * d
		}
		st := math.Sqrt(e.Tau)
		for a := 0; a < d; a++ {
			jj[(rows+a)*p+a] = st
			ji[(rows+a)*p+a] = -st
		}
		for q := 0; q < nr; q++ {
			// R_i G_k tt = R_i (G_k tt).
			var gt [3]float64
			for a := 0; a < d; a++ {
				for c := 0; c < d; c++ {
					gt[a] += gens[q][a*d+c] * e.T[c]
				}
			}
			for a := 0; a < d; a++ {
				v := 0.0
				for c := 0; c < d; c++ {
					v += xi.R[a*d+c] * gt[c]
				}
				ji[(rows+a)*p+d+q] = -st * v
			}
		}
		rows += d
		atb(hii[:p*p], ji[:rows*p], ji[:rows*p], rows, p)
		atb(hjj[:p*p], jj[:rows*p], jj[:rows*p], rows, p)
		bi, bj := block[e.I], block[e.J]
		if bi >= 0 {
			bb.AddDiag(bi, hii[:p*p])
		}
		if bj >= 0 {
			bb.AddDiag(bj, hjj[:p*p])
		}
		if bi >= 0 && bj >= 0 {
			atb(hij[:p*p], ji[:rows*p], jj[:rows*p], rows, p)
			bb.AddOff(bi, bj, hij[:p*p])
		}
	}
	var pad [36]float64
	for a := d; a < p; a++ {
		pad[a*p+a] = 1
	}
	for i := range block {
		if g.IsLandmark(i) {
			bb.AddDiag(block[i], pad[:p*p])
		}
	}
	return bb.Build(), block
}

// atb sets dst = A^T B for A and B of rows x p, row-major.
func atb(dst, a, b []float64, rows, p int) {
	clear(dst)
	for r := 0; r < rows; r++ {
		ar, br := a[r*p:r*p+p], b[r*p:r*p+p]
		for u, av := range ar {
			if av == 0 {
				continue
			}
			row := dst[u*p : u*p+p]
			for v, bv := range br {
				row[v] += av * bv
			}
		}
	}
}

// unitDiagonal scales m in place to D^{-1/2} m D^{-1/2}, D its diagonal,
// and returns the scale D^{-1/2} per coordinate: translation and rotation
// coordinates then weigh alike in the factorization's pivot test, and the
// covariance is S inv(S m S) S with S = diag(scale). A diagonal entry that
// is not positive is a singular matrix, reported as the factorization
// would.
func unitDiagonal(m *sparse.BlockSym) ([]float64, error) {
	b := m.B
	scale := make([]float64, m.N*b)
	for i := 0; i < m.N; i++ {
		blk := m.Block(m.Diag[i])
		for a := 0; a < b; a++ {
			v := blk[a*b+a]
			if !(v > 0) || math.IsInf(v, 0) {
				return nil, &sparse.NotPositiveDefiniteError{Column: i*b + a, Pivot: v}
			}
			scale[i*b+a] = 1 / math.Sqrt(v)
		}
	}
	sparse.ScaleCongruent(m, scale)
	return scale, nil
}
