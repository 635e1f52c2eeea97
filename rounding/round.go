package rounding

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/bcmsync/bcmsync/internal/smalldense"
	"github.com/bcmsync/bcmsync/posegraph"
	"github.com/bcmsync/bcmsync/posegraph/blockmat"
)

// Round maps the Y part of a rank-r lifted solution onto SO(d)^n
// (docs/design.md section 6, steps 1 to 3). x is r x (n B) with block size
// B = d (rotations) or B = d+1 (poses, whose last column p_i is ignored) and
// r >= d. The returned poses have zero translations; fill them with
// RecoverTranslations.
//
// The rotations are determined up to one global rotation, like the relaxation
// itself: Round(O x) equals Round(x) times a common rotation for every O in
// O(r).
//
// Round panics if the shape of x does not fit d; that is a programming error,
// not bad data.
func Round(x *blockmat.Blocks, d int) []posegraph.Pose {
	return RoundMasked(x, d, nil)
}

// RoundMasked is Round for a point with landmark blocks: skip[i] marks a
// block whose Stiefel part no cost sees (posegraph.Graph.LandmarkMask), so
// it neither enters Y Y^T nor votes on the reflection, and its pose gets
// R = I. skip nil means no such block.
func RoundMasked(x *blockmat.Blocks, d int, skip []bool) []posegraph.Pose {
	checkShape(x, d, skip)
	return roundWith(x, d, topLeftSingular(x, d, skip), skip, false)
}

// checkShape panics if x, d and skip do not fit together.
func checkShape(x *blockmat.Blocks, d int, skip []bool) {
	if d != 2 && d != 3 {
		panic(fmt.Sprintf("rounding: dimension %d is not 2 or 3", d))
	}
	if x.B != d && x.B != d+1 {
		panic(fmt.Sprintf("rounding: block size %d fits neither d=%d nor d+1", x.B, d))
	}
	if x.R < d {
		panic(fmt.Sprintf("rounding: rank %d is below d=%d", x.R, d))
	}
	if skip != nil && len(skip) != x.N {
		panic(fmt.Sprintf("rounding: mask of %d blocks for %d", len(skip), x.N))
	}
}

// ReadOut is RoundMasked with the point's own translations: each pose's
// T is its block's translation column p_i expressed in the rounding's
// frame, U_d^T p_i (with the same reflection), and is not re-optimized.
// It costs O(n r d) and solves no linear system, for an estimate wanted
// when there is no time left for RecoverTranslations. For a point without
// translation columns (rotations) it is RoundMasked.
func ReadOut(x *blockmat.Blocks, d int, skip []bool) []posegraph.Pose {
	checkShape(x, d, skip)
	return roundWith(x, d, topLeftSingular(x, d, skip), skip, true)
}

// topLeftSingular returns U_d (r x d, row-major): the top d left singular
// vectors of Y = [Y_1 ... Y_n], taken as the top d eigenvectors of the small
// r x r matrix Y Y^T = sum_i Y_i Y_i^T. Forming Y Y^T squares the condition
// number, but only the dominant d-dimensional subspace is wanted and at a
// relaxation optimum it is separated from the rest by a wide gap.
func topLeftSingular(x *blockmat.Blocks, d int, skip []bool) []float64 {
	r := x.R
	g := make([]float64, r*r)
	addGram(g, x, d, skip)
	return TopLeft(g, r, d)
}

// Gram adds a part's share of Y Y^T (r x r, row-major), sum over its
// blocks i not skipped of Y_i Y_i^T, to g: a distributed run's agents each
// add their own blocks, and TopLeft of the sum is the rounding's U_d.
func Gram(g []float64, x *blockmat.Blocks, d int, skip []bool) {
	checkShape(x, d, skip)
	addGram(g, x, d, skip)
}

// addGram adds sum over x's blocks of Y_i Y_i^T to g's upper triangle and
// mirrors it (g symmetric on return when it was on entry).
func addGram(g []float64, x *blockmat.Blocks, d int, skip []bool) {
	r, b := x.R, x.B
	for i := 0; i < x.N; i++ {
		if skip != nil && skip[i] {
			continue
		}
		blk := x.Block(i)
		for p := 0; p < r; p++ {
			yp := blk[p*b : p*b+d]
			for q := p; q < r; q++ {
				yq := blk[q*b : q*b+d]
				s := 0.0
				for c, v := range yp {
					s += v * yq[c]
				}
				g[p*r+q] += s
			}
		}
	}
	for p := 0; p < r; p++ {
		for q := 0; q < p; q++ {
			g[p*r+q] = g[q*r+p]
		}
	}
}

// TopLeft returns U_d (r x d, row-major), the top d eigenvectors of the
// symmetric r x r matrix g = Y Y^T (Gram), in descending order.
func TopLeft(g []float64, r, d int) []float64 {
	var eig mat.EigenSym
	ud := make([]float64, r*d)
	if !eig.Factorize(mat.NewSymDense(r, g), true) {
		// Only non-finite input gets here; propagate it rather than invent rotations.
		for k := range ud {
			ud[k] = math.NaN()
		}
		return ud
	}
	var v mat.Dense
	eig.VectorsTo(&v)
	// Eigenvalues come in ascending order: the top d are the last d columns.
	// Keep them in descending order so the flip in roundWith acts on the
	// weakest of the d directions.
	for c := 0; c < d; c++ {
		col := r - 1 - c
		for p := 0; p < r; p++ {
			ud[p*d+c] = v.At(p, col)
		}
	}
	return ud
}

// roundWith performs steps 2 and 3 of the rounding for a given basis U_d
// (r x d, row-major, orthonormal columns).
// With translations (and a translation column in x) each pose's T is
// U_d^T p_i, reflected with the rotations.
func roundWith(x *blockmat.Blocks, d int, ud []float64, skip []bool, translations bool) []posegraph.Pose {
	out, positive, voters := Project(x, d, ud, skip)
	// U_d is determined only up to O(d); a reflection would make most R^_i
	// improper. Flipping the last row of U_d^T (the weakest direction) is
	// the reflection that fixes the majority.
	Finish(out, x, d, ud, skip, 2*positive < voters, translations)
	return out
}

// Project is the rounding's step 2 on a part's blocks (all of x's blocks
// for a whole point): R^_i = U_d^T Y_i for every block not skipped
// (identity for a skipped one), and the votes for the reflection, how many
// R^_i have a positive determinant among how many. A distributed run's
// agents each project their own blocks; the coordinator adds the votes,
// and flip = 2 positive < voters over all of them.
func Project(x *blockmat.Blocks, d int, ud []float64, skip []bool) (out []posegraph.Pose, positive, voters int) {
	checkShape(x, d, skip)
	r, b, n := x.R, x.B, x.N
	out = make([]posegraph.Pose, n)
	for i := 0; i < n; i++ {
		if skip != nil && skip[i] {
			out[i] = posegraph.Identity(d)
			continue
		}
		voters++
		blk := x.Block(i)
		rh := &out[i].R
		// R^_i = U_d^T Y_i.
		for a := 0; a < d; a++ {
			for c := 0; c < d; c++ {
				s := 0.0
				for p := 0; p < r; p++ {
					s += ud[p*d+a] * blk[p*b+c]
				}
				rh[a*d+c] = s
			}
		}
		if posegraph.Det(rh[:], d) > 0 {
			positive++
		}
	}
	return out, positive, voters
}

// Finish is the rounding's step 3 on Project's output: the reflection
// (flip) and the nearest rotation of every block not skipped; with
// translations each pose's T is U_d^T p_i, reflected with the rotations.
func Finish(out []posegraph.Pose, x *blockmat.Blocks, d int, ud []float64, skip []bool, flip, translations bool) {
	r, b := x.R, x.B
	for i := range out {
		if translations && b > d {
			blk := x.Block(i)
			t := &out[i].T
			for a := 0; a < d; a++ {
				s := 0.0
				for p := 0; p < r; p++ {
					s += ud[p*d+a] * blk[p*b+d]
				}
				t[a] = s
			}
			if flip {
				t[d-1] = -t[d-1]
			}
		}
		if skip != nil && skip[i] {
			continue
		}
		rh := &out[i].R
		if flip {
			for c := 0; c < d; c++ {
				rh[(d-1)*d+c] = -rh[(d-1)*d+c]
			}
		}
		nearestRotation(rh[:d*d], rh[:d*d], d)
	}
}

// nearestRotation writes into dst the rotation closest to src in the
// Frobenius norm: with src = U S V^T, dst = U diag(1, .., 1, det(U V^T)) V^T
// (the allocation-free Jacobi kernel of internal/smalldense). For
// rank-deficient src any such product is a nearest rotation. dst may alias
// src. Non-finite input gives NaN output rather than an invented rotation.
func nearestRotation(dst, src []float64, d int) {
	for _, v := range src[:d*d] {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			for k := range dst[:d*d] {
				dst[k] = math.NaN()
			}
			return
		}
	}
	smalldense.NearestRotation(dst[:d*d], src[:d*d], d)
}

// NearestRotation returns the rotation in SO(d) closest in the Frobenius norm
// to the d x d row-major matrix m (d = 2 or 3).
func NearestRotation(m []float64, d int) [9]float64 {
	var out [9]float64
	nearestRotation(out[:d*d], m, d)
	return out
}
