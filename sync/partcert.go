package sync

import (
	"errors"
	"fmt"
	"math"

	"github.com/bcmsync/bcmsync/internal/graphs"
	"github.com/bcmsync/bcmsync/internal/smalldense"
	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph/blockmat"
)

// The certificate by parts. A part (a distributed run's agent) holds the
// complete rows of Q at its own poses and the blocks of X at its own poses
// and at the other parts' poses it borders: enough to compute its own
// Lambda blocks, its rows of the scaled, shifted, grounded S that the
// certificate factors (buildShifted), the factor of their interior block
// and its Schur complement on its boundary poses (PartCertifier). The
// coordinator sums those complements with the blocks of Q that couple
// boundary poses of different parts and factors the sum (BoundaryProof):
// a Cholesky factorization of that S in the order interiors first
// (sparse.DomainCholesky), whose pivots pass the same test against the
// same threshold as the central factor's. The bound is tr(Lambda) minus
// the shift's cost, tr(Lambda) the sum of the parts' traces of the blocks
// they factored.

// ProofShift is one shift of the certificate's test (what buildShifted
// adds to D S D): Sigma on the rotation diagonal of the anchor only
// (AnchorOnly) or of every pose, plus Mu D_c^2 at every pose's rotation
// coordinate c. Anchor is the global index of the pose whose translation
// diagonal grounds the gauge and which the boundary factor eliminates
// last.
//
// Tau > 0 asks for another matrix, not a proof: D (S + Tau I) D, every
// coordinate shifted by Tau and the gauge not grounded (Sigma, Mu and
// AnchorOnly are then ignored), whose factor the saddle escape by parts
// solves with (parteig.go).
type ProofShift struct {
	Sigma, Mu  float64
	AnchorOnly bool
	Anchor     int
	Tau        float64
}

// PartCertifier is one part's share of the certificate by parts.
type PartCertifier struct {
	q          *sparse.BlockSym // the part's rows: blocks 0..nOwn-1 are complete rows of Q
	ids        []int            // global index of each of q's blocks
	nOwn, d, b int
	scale      []float64 // D at the own poses' coordinates
	free       []bool    // landmarks among the own poses (nil: none)
	order      []int     // own blocks, interior first
	nI         int
	a          *sparse.BlockSym // D S D + shift on the own poses, in order
	src        []int            // position in q of each of a's blocks
	part       *sparse.SchurPart
	lam        []float64 // Lambda at the own poses, from Lambda
	haveLam    bool
	nq         []float64
	schur      []float64
	eig        *eigState // the inverse iteration by parts (parteig.go)
	tauFactor  bool      // the last Factor was of D (S + Tau I) D and succeeded
}

// PartProof is what a part sends the coordinator for one shift: its
// boundary poses (global indices, the order of Schur), D at their
// coordinates, the Schur complement of its interior on them (row-major),
// and its smallest interior pivot and largest |diagonal entry| for the
// global pivot test. Failed: the interior factor met a pivot at or below
// its own threshold, so the test fails (Schur is then nil).
type PartProof struct {
	Boundary          []int
	Scale             []float64
	Schur             []float64
	MinPivot, MaxDiag float64
	Failed            bool
}

// NewPartCertifier prepares a part's share: q holds its rows (blocks
// 0..nOwn-1 its own poses, complete rows of Q; the others the poses of
// other parts it borders), ids the global index of each of q's blocks,
// d the dimension. Its boundary poses are its own poses coupled to
// another part's and the anchor (a global index, which may be another
// part's pose).
func NewPartCertifier(q *blockmat.BlockSym, ids []int, nOwn, d, anchor int) (*PartCertifier, error) {
	if q == nil || len(ids) != q.N || nOwn < 1 || nOwn > q.N {
		return nil, errors.New("sync: NewPartCertifier: rows and indices do not fit")
	}
	b := q.B
	p := &PartCertifier{q: q, ids: ids, nOwn: nOwn, d: d, b: b}
	qs := jacobiScale(q)
	p.scale = qs[:nOwn*b]
	if free := rotationFreeBlocks(q, d); free != nil {
		p.free = free[:nOwn]
	}
	bnd := make([]bool, nOwn)
	for i := 0; i < nOwn; i++ {
		bnd[i] = ids[i] == anchor
		for k := q.RowPtr[i]; k < q.RowPtr[i+1]; k++ {
			if q.ColIdx[k] >= nOwn {
				bnd[i] = true
			}
		}
	}
	for _, inside := range []bool{true, false} {
		for i := 0; i < nOwn; i++ {
			if bnd[i] != inside {
				p.order = append(p.order, i)
			}
		}
		if inside {
			p.nI = len(p.order)
		}
	}
	return p, nil
}

// rows makes the part's rows of D S D in the interior-first order, their
// analysis and the complement's array, which Release lets go of. They are
// made by the first Factor, not by NewPartCertifier: an agent sets its
// certificate up (its boundary poses and cross blocks) before its rounds,
// and these, 14 MB for a part of 12,000 poses in 3-D, would sit under the
// rounds' own peak until the first test.
func (p *PartCertifier) rows() error {
	if p.part != nil {
		return nil
	}
	q, nOwn, b := p.q, p.nOwn, p.b
	at := make([]int, nOwn)
	for x, i := range p.order {
		at[i] = x
	}
	bb := sparse.NewBlockBuilder(nOwn, b)
	zero := make([]float64, b*b)
	for i := 0; i < nOwn; i++ {
		for k := q.RowPtr[i]; k < q.RowPtr[i+1]; k++ {
			if j := q.ColIdx[k]; j < i {
				bb.AddOff(at[i], at[j], zero)
			}
		}
	}
	a := bb.Build()
	src := make([]int, len(a.ColIdx))
	for x := 0; x < nOwn; x++ {
		for k := a.RowPtr[x]; k < a.RowPtr[x+1]; k++ {
			src[k] = q.Find(p.order[x], p.order[a.ColIdx[k]])
		}
	}
	part, err := sparse.NewSchurPart(a, p.nI)
	if err != nil {
		return fmt.Errorf("sync: part certificate: %w", err)
	}
	nb := (nOwn - p.nI) * b
	p.a, p.src, p.part, p.schur = a, src, part, make([]float64, nb*nb)
	return nil
}

// Lambda computes the own poses' Lambda blocks at x (the part's blocks:
// its own poses' and the bordering poses', indexed like q) and returns
// the sum of their traces, the part's share of tr(Lambda).
func (p *PartCertifier) Lambda(x *blockmat.Blocks) float64 {
	r, b, d := x.R, p.b, p.d
	if p.lam == nil {
		p.lam = make([]float64, p.nOwn*d*d)
	}
	if len(p.nq) != r*b {
		p.nq = make([]float64, r*b)
	}
	tr := 0.0
	for i := 0; i < p.nOwn; i++ {
		p.q.MulBlockRow(p.nq, x, i)
		l := p.lam[i*d*d : (i+1)*d*d]
		smalldense.SymAtB(l, x.Block(i), p.nq, r, b, d)
		for a := 0; a < d; a++ {
			tr += l[a*d+a]
		}
	}
	p.haveLam = true
	return tr
}

// Release lets go of what Factor and the inverse iteration made (the
// part's rows of D S D, their interior's analysis and factor, the
// complement, the iteration's vectors) until the next Factor, which makes
// them again, bit for bit: the agent's rounds, which make the Newton
// steps' factor again, need none of it (an escape ends before they
// start), and held, it stacked on that factor. The Lambda blocks stay.
func (p *PartCertifier) Release() {
	p.a, p.src, p.part, p.schur = nil, nil, nil, nil
	p.tauFactor = false
	p.eig = nil
}

// WSize reports the size, in values, of the matrix W = L_I^-1 M_IB the
// last Factor formed its Schur complement from, as it was stored (by the
// reach of its columns in the interior's elimination tree,
// sparse.SchurPart) and as a dense matrix would hold it: the memory the
// certificate by parts costs a part beside its interior factor.
// Both are 0 when the rows are not made (before Factor, after Release).
func (p *PartCertifier) WSize() (stored, dense int) {
	if p.part == nil {
		return 0, 0
	}
	return p.part.WStats()
}

// Factor builds the part's rows of D S D plus the shift sh (with the last
// Lambda's blocks) and factors their interior block.
func (p *PartCertifier) Factor(sh ProofShift) (*PartProof, error) {
	if !p.haveLam {
		return nil, errors.New("sync: PartCertifier.Factor before Lambda")
	}
	if err := p.rows(); err != nil {
		return nil, err
	}
	b, d := p.b, p.d
	a := p.a
	for k, s := range p.src {
		copy(a.Block(k), p.q.Block(s))
	}
	scale := make([]float64, p.nOwn*b) // in a's order
	for x, i := range p.order {
		copy(scale[x*b:(x+1)*b], p.scale[i*b:(i+1)*b])
		blk := a.Block(a.Diag[x])
		l := p.lam[i*d*d : (i+1)*d*d]
		for r := 0; r < d; r++ {
			for c := 0; c < d; c++ {
				blk[r*b+c] -= l[r*d+c]
			}
		}
	}
	sparse.ScaleCongruent(a, scale)
	s := shift{anchor: sh.AnchorOnly, sigma: sh.Sigma, mu: sh.Mu}
	p.tauFactor = false
	for x, i := range p.order {
		blk := a.Block(a.Diag[x])
		if sh.Tau > 0 {
			for c := 0; c < b; c++ {
				sc := scale[x*b+c]
				blk[c*b+c] += sh.Tau * sc * sc
			}
			continue
		}
		shiftDiagBlock(blk, scale[x*b:(x+1)*b], s, p.ids[i] == sh.Anchor, p.free != nil && p.free[i], d)
	}
	pr := &PartProof{Scale: scale[p.nI*b:]}
	for _, i := range p.order[p.nI:] {
		pr.Boundary = append(pr.Boundary, p.ids[i])
	}
	err := p.part.Factorize(p.schur, a)
	pr.MaxDiag = p.part.MaxDiag()
	if err != nil {
		if sparse.IsNotPositiveDefinite(err) {
			pr.Failed = true
			return pr, nil
		}
		return nil, err
	}
	_, pr.MinPivot = p.part.MinPivot()
	pr.Schur = p.schur
	p.tauFactor = sh.Tau > 0
	return pr, nil
}

// CrossBlocks returns the blocks of Q between the part's own poses and
// other parts' poses, as CrossBlock records by global index, each with
// I > J once for the whole run: a part lists those whose larger index is
// its own.
func (p *PartCertifier) CrossBlocks() []CrossBlock {
	var out []CrossBlock
	for i := 0; i < p.nOwn; i++ {
		for k := p.q.RowPtr[i]; k < p.q.RowPtr[i+1]; k++ {
			j := p.q.ColIdx[k]
			if j >= p.nOwn && p.ids[i] > p.ids[j] {
				out = append(out, CrossBlock{I: p.ids[i], J: p.ids[j], Block: append([]float64(nil), p.q.Block(k)...)})
			}
		}
	}
	return out
}

// CrossBlock is block (I, J) of Q, I and J poses of different parts.
type CrossBlock struct {
	I, J  int
	Block []float64
}

// BoundaryProof is the coordinator's share of the certificate by parts:
// the boundary system and its factor. It holds the boundary poses' blocks
// only.
type BoundaryProof struct {
	b     int
	sys   *sparse.BoundarySystem
	index map[int]int // global pose -> boundary block
	parts [][]int
	cross []CrossBlock
	// scale is D at the boundary coordinates, from the parts' proofs.
	scale []float64
	// MinPivot is the last successful Factor's smallest pivot over every
	// piece.
	MinPivot float64
}

// NewBoundaryProof analyses the boundary system: parts[k] lists part k's
// boundary poses (global indices, the order of its PartProof), cross the
// blocks of Q between poses of different parts, anchor the pose to
// eliminate last (a boundary pose).
func NewBoundaryProof(b int, parts [][]int, cross []CrossBlock, anchor int) (*BoundaryProof, error) {
	index, local, err := graphs.NumberParts(parts)
	if err != nil {
		return nil, fmt.Errorf("sync: boundary poses: %w", err)
	}
	bp := &BoundaryProof{b: b, index: index, parts: local, cross: cross}
	last, ok := bp.index[anchor]
	if !ok {
		return nil, fmt.Errorf("sync: the anchor %d is not a boundary pose", anchor)
	}
	edges := make([][2]int, len(cross))
	for k, c := range cross {
		i, oki := bp.index[c.I]
		j, okj := bp.index[c.J]
		if !oki || !okj || len(c.Block) != b*b {
			return nil, fmt.Errorf("sync: cross block (%d, %d) is not between boundary poses", c.I, c.J)
		}
		edges[k] = [2]int{i, j}
	}
	if bp.sys, err = sparse.NewBoundarySystem(len(bp.index), b, bp.parts, edges, last); err != nil {
		return nil, err
	}
	bp.scale = make([]float64, len(bp.index)*b)
	return bp, nil
}

// Blocks is the number of boundary poses.
func (bp *BoundaryProof) Blocks() int { return len(bp.index) }

// Release lets go of the boundary system's values and factor until the
// next Factor (sparse.BoundarySystem.Release): after a test, which no
// solve follows, a coordinator need not hold them through the rounds,
// the rounding and the outputs.
func (bp *BoundaryProof) Release() { bp.sys.Release() }

// Factor sums the parts' proofs (in the parts' order) and the scaled cross
// blocks and factors the sum. It reports whether every pivot of every
// piece is above sparse.PivotTol times the largest |diagonal entry| of the
// whole matrix, the central factor's test.
func (bp *BoundaryProof) Factor(proofs []*PartProof) (bool, error) {
	if len(proofs) != len(bp.parts) {
		return false, fmt.Errorf("sync: %d part proofs for %d parts", len(proofs), len(bp.parts))
	}
	b := bp.b
	ref, minPiv := 0.0, math.Inf(1)
	for k, pr := range proofs {
		if len(pr.Boundary) != len(bp.parts[k]) || len(pr.Scale) != len(pr.Boundary)*b {
			return false, fmt.Errorf("sync: part %d's proof names %d boundary poses, want %d", k, len(pr.Boundary), len(bp.parts[k]))
		}
		for x, i := range pr.Boundary {
			if j, ok := bp.index[i]; !ok || j != bp.parts[k][x] {
				return false, fmt.Errorf("sync: part %d's proof names pose %d out of order", k, i)
			}
			copy(bp.scale[bp.parts[k][x]*b:], pr.Scale[x*b:(x+1)*b])
		}
		ref = math.Max(ref, pr.MaxDiag)
		if math.IsNaN(pr.MaxDiag) {
			return false, nil
		}
	}
	thr := ref * sparse.PivotTol
	for _, pr := range proofs {
		if pr.Failed || !(pr.MinPivot > thr) {
			return false, nil
		}
		minPiv = math.Min(minPiv, pr.MinPivot)
	}
	bp.sys.Reset()
	for k, pr := range proofs {
		if m := len(pr.Boundary) * b; len(pr.Schur) != m*m {
			return false, fmt.Errorf("sync: part %d's Schur complement has %d entries, want %d", k, len(pr.Schur), m*m)
		}
		bp.sys.AddPart(k, pr.Schur)
	}
	blk := make([]float64, b*b)
	for _, c := range bp.cross {
		i, j := bp.index[c.I], bp.index[c.J]
		si, sj := bp.scale[i*b:(i+1)*b], bp.scale[j*b:(j+1)*b]
		for r := 0; r < b; r++ {
			for e := 0; e < b; e++ {
				blk[r*b+e] = c.Block[r*b+e] * si[r] * sj[e]
			}
		}
		if err := bp.sys.AddOff(i, j, blk); err != nil {
			return false, err
		}
	}
	err := bp.sys.Factorize()
	if sparse.IsNotPositiveDefinite(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if _, piv := bp.sys.MinPivot(); !(piv > thr) {
		return false, nil
	} else {
		minPiv = math.Min(minPiv, piv)
	}
	bp.MinPivot = minPiv
	return true, nil
}

// Boundary returns the part's boundary poses (global indices), in the
// order of its PartProof.
func (p *PartCertifier) Boundary() []int {
	out := make([]int, 0, p.nOwn-p.nI)
	for _, i := range p.order[p.nI:] {
		out = append(out, p.ids[i])
	}
	return out
}

// BoundaryWeights returns, for each boundary pose, what a unit shift on
// its rotation coordinates of D S D costs the bound (sum of 1/D_c^2 over
// them; 0 for a landmark): the coordinator anchors the gauge at the
// lightest, as the central certificate does among its last pivots.
func (p *PartCertifier) BoundaryWeights() []float64 {
	b, d := p.b, p.d
	out := make([]float64, 0, p.nOwn-p.nI)
	for _, i := range p.order[p.nI:] {
		w := 0.0
		if p.free == nil || !p.free[i] {
			for a := 0; a < d; a++ {
				s := p.scale[i*b+a]
				w += 1 / (s * s)
			}
		}
		out = append(out, w)
	}
	return out
}
