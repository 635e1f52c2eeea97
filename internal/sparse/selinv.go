package sparse

import (
	"errors"
	"slices"
)

// SelectedInverse holds the entries of A^{-1} on the pattern of a
// supernodal Cholesky factor of A (P A P^T = L L^T): every entry (i, j)
// for which L, in pivot order, stores (max, min) of the pivots of i and j.
// That pattern holds every entry of A, so in particular every diagonal
// block of a block matrix, and it is closed under what the recurrence
// below needs, which is why the entries on it can be computed without the
// rest of the inverse (Takahashi, Fagan and Chin, 1973; Erisman and
// Tinney, 1975).
//
// With Z = A^{-1} (in pivot order) and a supernode of columns J whose rows
// below the diagonal block are R, L's columns J are [L_JJ; L_RJ], and
// Z L = L^{-T}, upper triangular, gives
//
//	Z_RJ = -Z_RR U,                         U = L_RJ L_JJ^{-1}
//	Z_JJ = (L_JJ L_JJ^T)^{-1} - U^T Z_RJ
//
// Z_RR involves only rows of later supernodes, whose columns' structures
// contain R (the rows of a column below it form a clique in L's graph), so
// sweeping the supernodes from the last to the first computes Z on the
// whole pattern, at two to three times the cost of the factorization, in dense
// products per supernode: no column of the inverse is ever formed.
//
// A SelectedInverse does not share storage with its factor: refactoring
// the Cholesky afterwards leaves it valid.
type SelectedInverse struct {
	c *Cholesky
	// z holds the entries of Z in supernode s's rows and columns at
	// z[valPtr[s]:valPtr[s+1]] (the places of its values in the factor),
	// but transposed, nc x nr row-major: row c is column first[s]+c of Z
	// over the supernode's rows, so that the sweep writes Z_RJ^T, the
	// product it forms, in place, and a gather reads a column of Z
	// contiguously. The diagonal nc x nc block is stored whole.
	z []float64
}

// SelectedInverse computes A^{-1} on the pattern of the factor (see the
// type). The factor must be a successful supernodal one (Analyze or
// AnalyzeBlocks, then Factorize or FactorizeBlocks, not the modified
// variant, whose factor is of another matrix).
func (c *Cholesky) SelectedInverse() (*SelectedInverse, error) {
	switch {
	case c.simplicial:
		return nil, errors.New("sparse: SelectedInverse needs a supernodal factor (Analyze, not AnalyzeSimplicial)")
	case !c.ok:
		return nil, errors.New("sparse: SelectedInverse: the factorization failed or was not done")
	case c.raised > 0:
		return nil, errors.New("sparse: SelectedInverse: the factor is of a modified matrix (raised pivots)")
	}
	sn := c.sn
	ns := len(sn.first) - 1
	maxNC, maxM := 0, 0
	for s := 0; s < ns; s++ {
		nc := sn.first[s+1] - sn.first[s]
		maxNC = max(maxNC, nc)
		maxM = max(maxM, sn.rowPtr[s+1]-sn.rowPtr[s]-nc)
	}
	w := selinvWork{
		zrr: make([]float64, maxM*maxM),
		ut:  make([]float64, maxNC*maxM),
		wt:  make([]float64, maxNC*maxNC),
		pos: make([]int, maxM),
	}
	si := &SelectedInverse{c: c, z: make([]float64, len(sn.val))}
	for s := ns - 1; s >= 0; s-- {
		si.node(s, &w)
	}
	return si, nil
}

// selinvWork is the dense work space of the sweep, sized for the largest
// supernode.
type selinvWork struct {
	zrr, ut, wt []float64
	pos         []int
}

// node computes Z in supernode s's columns from Z in later supernodes.
func (si *SelectedInverse) node(s int, w *selinvWork) {
	sn := si.c.sn
	f := sn.first[s]
	nc := sn.first[s+1] - f
	rows := sn.rows[sn.rowPtr[s]:sn.rowPtr[s+1]]
	nr := len(rows)
	m := nr - nc
	ls := sn.val[sn.valPtr[s]:sn.valPtr[s+1]]
	// zs is nc x nr: [Z_JJ  Z_RJ^T] (Z_JJ is symmetric).
	zs := si.z[sn.valPtr[s]:sn.valPtr[s+1]]

	// Wt = L_JJ^{-T} (upper triangular) = I L_JJ^{-T}, by the
	// factorization's own triangular solve.
	wt := w.wt[:nc*nc]
	clear(wt)
	for k := 0; k < nc; k++ {
		wt[k*nc+k] = 1
	}
	trsmRT(nc, nc, ls, nc, wt, nc)
	// Z_JJ starts as (L_JJ L_JJ^T)^{-1} = Wt Wt^T.
	gemmNT(nc, nc, nc, 1, wt, nc, wt, nc, 0, zs, nr)
	if m > 0 {
		// Ut = U^T = L_JJ^{-T} L_RJ^T = Wt L_RJ^T (nc x m).
		ut := w.ut[:nc*m]
		gemmNT(nc, m, nc, 1, wt, nc, ls[nc*nc:], nc, 0, ut, m)
		zrr := w.zrr[:m*m]
		si.gather(zrr, rows[nc:], w.pos[:m])
		// Z_RJ^T = -U^T Z_RR = -Ut Z_RR^T (Z_RR is symmetric), in place.
		gemmNT(nc, m, m, -1, ut, m, zrr, m, 0, zs[nc:], nr)
		// Z_JJ -= U^T Z_RJ = Ut (Z_RJ^T)^T. (B and C interleave in zs
		// but share no entry.)
		gemmNT(nc, nc, m, -1, ut, m, zs[nc:], nr, 1, zs, nr)
	}
	// Make the diagonal block exactly symmetric (the products leave it
	// symmetric to rounding only): its upper triangle mirrors the lower.
	for a := 0; a < nc; a++ {
		for c := 0; c < a; c++ {
			zs[c*nr+a] = zs[a*nr+c]
		}
	}
}

// gather fills the m x m matrix dst with Z_RR for the rows r (pivot
// order, increasing), all of which lie in later supernodes, whose Z is
// known. The rows of r that fall in one supernode t come together (t's
// columns are consecutive), and every row of r from there on lies in t's
// row structure, so one forward walk over t's rows places them.
func (si *SelectedInverse) gather(dst []float64, r []int32, pos []int) {
	sn := si.c.sn
	m := len(r)
	for b := 0; b < m; {
		t := int(sn.super[r[b]])
		ft, lt := sn.first[t], sn.first[t+1]
		nct := lt - ft
		trows := sn.rows[sn.rowPtr[t]:sn.rowPtr[t+1]]
		nrt := len(trows)
		zt := si.z[sn.valPtr[t]:sn.valPtr[t+1]]
		e := b
		p := nct
		for a := b; a < m; a++ {
			ra := int(r[a])
			if ra < lt {
				pos[a] = ra - ft // t's own columns come first, in order
				e = a + 1
				continue
			}
			for p < len(trows) && int(trows[p]) < ra {
				p++
			}
			if p == len(trows) || int(trows[p]) != ra {
				panic("sparse: SelectedInverse: a row structure is not closed (a supernode's rows are missing from an ancestor's)")
			}
			pos[a] = p
		}
		for c := b; c < e; c++ {
			zcol := zt[(int(r[c])-ft)*nrt : (int(r[c])-ft+1)*nrt] // column r[c] of Z
			for a := c; a < m; a++ {
				v := zcol[pos[a]]
				dst[a*m+c] = v
				dst[c*m+a] = v
			}
		}
		b = e
	}
}

// N is the order of the inverted matrix.
func (si *SelectedInverse) N() int { return si.c.n }

// At returns entry (i, j) of A^{-1} (original indices) and true when it
// lies on the factor's pattern, else 0 and false: the entry is then not
// computed (Cholesky.Solve with a unit vector gives any column whole).
// Every entry of A's own pattern, the diagonal first of all, is on it.
func (si *SelectedInverse) At(i, j int) (float64, bool) {
	c := si.c
	sn := c.sn
	pi, pj := int(c.pinv[i]), int(c.pinv[j])
	lo, hi := min(pi, pj), max(pi, pj)
	s := int(sn.super[lo])
	rows := sn.rows[sn.rowPtr[s]:sn.rowPtr[s+1]]
	row, ok := slices.BinarySearch(rows, int32(hi))
	if !ok {
		return 0, false
	}
	return si.z[sn.valPtr[s]+(lo-sn.first[s])*len(rows)+row], true
}

// Submatrix writes the k x k block of A^{-1} in the rows and columns idx
// (original indices, k = len(idx)) into dst, row-major, and reports
// whether every entry of it lies on the factor's pattern; when one does
// not, dst is left partly written and false is returned.
func (si *SelectedInverse) Submatrix(dst []float64, idx []int) bool {
	k := len(idx)
	for a, i := range idx {
		for b := 0; b <= a; b++ {
			v, ok := si.At(i, idx[b])
			if !ok {
				return false
			}
			dst[a*k+b], dst[b*k+a] = v, v
		}
	}
	return true
}
