package rounding

import (
	"errors"
	"fmt"
	"sort"

	"github.com/bcmsync/bcmsync/internal/graphs"
	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
	"github.com/bcmsync/bcmsync/posegraph/blockmat"
)

// Rounding by parts. A distributed run's agents each hold their own
// blocks of the point: each adds its share of Y Y^T (Gram), the
// coordinator takes U_d of the sum (TopLeft), each projects its blocks
// (Project), the coordinator adds the reflection votes, and each finishes
// its rotations (Finish). The translations, the exact minimizer of F with
// the rotations given and the anchor's translation held, solve the
// tau-Laplacian without the anchor's row and column: by parts as the
// certificate factors (sparse.SchurPart, sparse.BoundarySystem), each
// part factoring the interior block of its own poses and reducing its
// right-hand sides to its boundary poses (PartTranslations), the
// coordinator solving the boundary system (BoundaryTranslations) and
// sending each part its boundary values back.

// PartTranslations is one part's share of the translation recovery.
type PartTranslations struct {
	d       int
	anchor  int
	own     []int // the part's poses (global), the anchor left out, interior first
	nI      int
	at      map[int]int // global pose -> index in own
	edges   []posegraph.Edge
	a       *sparse.BlockSym // L on own, scalar blocks
	part    *sparse.SchurPart
	schur   []float64
	y       []float64 // the reduced right-hand sides' interior solves, column-major (nI x d)
	rhs     []float64 // right-hand sides over own, column-major (len(own) x d)
	crossIJ [][2]int
	crossV  []float64
}

// NewPartTranslations prepares a part's share: own its poses (global
// indices), edges every edge with an end among them (global indices, as
// the part holds them), anchor the pose whose translation is held (it may
// be another part's). A pose is a boundary pose when an edge couples it
// to another part's pose other than the anchor.
func NewPartTranslations(own []int, edges []posegraph.Edge, anchor, d int) (*PartTranslations, error) {
	mine := map[int]bool{}
	for _, i := range own {
		mine[i] = true
	}
	bnd := map[int]bool{}
	for _, e := range edges {
		if !mine[e.I] && !mine[e.J] {
			return nil, fmt.Errorf("rounding: edge (%d, %d) has no end in the part", e.I, e.J)
		}
		if e.I == e.J {
			continue
		}
		if mine[e.I] && !mine[e.J] && e.J != anchor {
			bnd[e.I] = true
		}
		if mine[e.J] && !mine[e.I] && e.I != anchor {
			bnd[e.J] = true
		}
	}
	pt := &PartTranslations{d: d, anchor: anchor, at: map[int]int{}, edges: edges}
	sorted := append([]int(nil), own...)
	sort.Ints(sorted)
	for _, inside := range []bool{true, false} {
		for _, i := range sorted {
			if i != anchor && bnd[i] != inside {
				pt.at[i] = len(pt.own)
				pt.own = append(pt.own, i)
			}
		}
		if inside {
			pt.nI = len(pt.own)
		}
	}
	n := len(pt.own)
	bb := sparse.NewBlockBuilder(n, 1)
	seen := map[[2]int]int{}
	for _, e := range edges {
		if e.I == e.J {
			continue
		}
		x, okx := pt.at[e.I]
		y, oky := pt.at[e.J]
		if okx {
			bb.AddDiag(x, []float64{e.Tau})
		}
		if oky {
			bb.AddDiag(y, []float64{e.Tau})
		}
		switch {
		case okx && oky && x != y:
			bb.AddOff(x, y, []float64{-e.Tau})
		case okx && !mine[e.J] && e.J != anchor && e.I > e.J,
			oky && !mine[e.I] && e.I != anchor && e.J > e.I:
			// A coupling to another part's pose, listed by the part
			// that owns the larger index.
			key := [2]int{max(e.I, e.J), min(e.I, e.J)}
			k, ok := seen[key]
			if !ok {
				k = len(pt.crossV)
				seen[key] = k
				pt.crossIJ = append(pt.crossIJ, key)
				pt.crossV = append(pt.crossV, 0)
			}
			pt.crossV[k] -= e.Tau
		}
	}
	if n == 0 {
		return pt, nil
	}
	pt.a = bb.Build()
	var err error
	if pt.part, err = sparse.NewSchurPart(pt.a, pt.nI); err != nil {
		return nil, fmt.Errorf("rounding: translations by parts: %w", err)
	}
	nb := n - pt.nI
	pt.schur = make([]float64, nb*nb)
	pt.y = make([]float64, pt.nI*d)
	pt.rhs = make([]float64, n*d)
	return pt, nil
}

// Boundary returns the part's boundary poses (global), in the order of
// its Schur complement and of Reduce's and Back's boundary vectors.
func (pt *PartTranslations) Boundary() []int { return pt.own[pt.nI:] }

// Cross returns the couplings of the Laplacian between the part's poses
// and other parts' (the anchor aside), each once over the run: (I, J) with
// I > J the part's own, and the entry -sum tau.
func (pt *PartTranslations) Cross() ([][2]int, []float64) { return pt.crossIJ, pt.crossV }

// Reduce factors the part's interior block and reduces its right-hand
// sides (from the rotations of its poses and of the other ends of its
// edges, rot by global index, and the anchor's translation ta) to its
// boundary: it returns the Schur complement (row-major) and the reduced
// right-hand sides z_B = b_B - L_BI L_II^-1 b_I, column-major (boundary x
// d).
func (pt *PartTranslations) Reduce(rot func(i int) [9]float64, ta [3]float64) (schur, z []float64, err error) {
	d, n := pt.d, len(pt.own)
	if n == 0 {
		return nil, nil, nil
	}
	clear(pt.rhs)
	for _, e := range pt.edges {
		ri := rot(e.I)
		for a := 0; a < d; a++ {
			s := 0.0
			for k := 0; k < d; k++ {
				s += ri[a*d+k] * e.T[k]
			}
			s *= e.Tau
			if x, ok := pt.at[e.I]; ok {
				pt.rhs[a*n+x] -= s
			}
			if y, ok := pt.at[e.J]; ok {
				pt.rhs[a*n+y] += s
			}
		}
		// The held anchor's couplings move to the right-hand side.
		for _, pair := range [2][2]int{{e.I, e.J}, {e.J, e.I}} {
			if pair[0] == pt.anchor && pair[1] != pt.anchor {
				if x, ok := pt.at[pair[1]]; ok {
					for a := 0; a < d; a++ {
						pt.rhs[a*n+x] += e.Tau * ta[a]
					}
				}
			}
		}
	}
	if err := pt.part.Factorize(pt.schur, pt.a); err != nil {
		return nil, nil, fmt.Errorf("rounding: translations by parts: %w", err)
	}
	nI, nb := pt.nI, n-pt.nI
	z = make([]float64, nb*d)
	for a := 0; a < d; a++ {
		col := pt.rhs[a*n : (a+1)*n]
		pt.part.SolveInterior(pt.y[a*nI:(a+1)*nI], col[:nI])
		zc := z[a*nb : (a+1)*nb]
		copy(zc, col[nI:])
		pt.part.SubCoupling(zc, pt.y[a*nI:(a+1)*nI])
	}
	return pt.schur, z, nil
}

// Back returns the translations of the part's poses (the anchor's
// excepted) from the boundary values xB (column-major, boundary x d) that
// the coordinator solved: x_I = L_II^-1 (b_I - L_IB x_B).
func (pt *PartTranslations) Back(xB []float64) map[int][3]float64 {
	d, n, nI := pt.d, len(pt.own), pt.nI
	nb := n - nI
	out := make(map[int][3]float64, n)
	if n == 0 {
		return out // the anchor alone
	}
	xi := make([]float64, nI)
	for a := 0; a < d; a++ {
		bi := append([]float64(nil), pt.rhs[a*n:a*n+nI]...)
		pt.part.SubCouplingT(bi, xB[a*nb:(a+1)*nb])
		pt.part.SolveInterior(xi, bi)
		for t, i := range pt.own[:nI] {
			v := out[i]
			v[a] = xi[t]
			out[i] = v
		}
		for t, i := range pt.own[nI:] {
			v := out[i]
			v[a] = xB[a*nb+t]
			out[i] = v
		}
	}
	return out
}

// BoundaryTranslations is the coordinator's share of the translation
// recovery: the boundary system of the parts' Schur complements and the
// couplings between parts.
type BoundaryTranslations struct {
	d     int
	sys   *sparse.BoundarySystem // nil without boundary poses
	index map[int]int
	parts [][]int
	cross []crossEntry
}

type crossEntry struct {
	i, j int
	v    float64
}

// NewBoundaryTranslations analyses the boundary system: parts[k] is part
// k's Boundary(), cross and vals every part's Cross().
func NewBoundaryTranslations(parts [][]int, cross [][2]int, vals []float64, d int) (*BoundaryTranslations, error) {
	index, local, err := graphs.NumberParts(parts)
	if err != nil {
		return nil, fmt.Errorf("rounding: boundary poses: %w", err)
	}
	bt := &BoundaryTranslations{d: d, index: index, parts: local}
	if len(cross) != len(vals) {
		return nil, errors.New("rounding: couplings and values do not match")
	}
	edges := make([][2]int, 0, len(cross))
	for k, c := range cross {
		i, oki := bt.index[c[0]]
		j, okj := bt.index[c[1]]
		if !oki || !okj {
			return nil, fmt.Errorf("rounding: coupling (%d, %d) is not between boundary poses", c[0], c[1])
		}
		edges = append(edges, [2]int{i, j})
		bt.cross = append(bt.cross, crossEntry{i, j, vals[k]})
	}
	if n := len(bt.index); n > 0 {
		if bt.sys, err = sparse.NewBoundarySystem(n, 1, bt.parts, edges, n-1); err != nil {
			return nil, err
		}
	}
	return bt, nil
}

// Solve sums the parts' Schur complements and reduced right-hand sides
// (Reduce's, in the parts' order), solves the boundary system, and
// returns each part's boundary values for its Back.
func (bt *BoundaryTranslations) Solve(schurs, zs [][]float64) ([][]float64, error) {
	d := bt.d
	out := make([][]float64, len(bt.parts))
	if bt.sys == nil {
		return out, nil
	}
	n := len(bt.index)
	bt.sys.Reset()
	rhs := make([]float64, n*d)
	for k, ps := range bt.parts {
		nb := len(ps)
		if len(schurs[k]) != nb*nb || len(zs[k]) != nb*d {
			return nil, fmt.Errorf("rounding: part %d's reduction does not fit its %d boundary poses", k, nb)
		}
		bt.sys.AddPart(k, schurs[k])
		for a := 0; a < d; a++ {
			for t, i := range ps {
				rhs[a*n+i] += zs[k][a*nb+t]
			}
		}
	}
	for _, c := range bt.cross {
		if err := bt.sys.AddOff(c.i, c.j, []float64{c.v}); err != nil {
			return nil, err
		}
	}
	if err := bt.sys.Factorize(); err != nil {
		return nil, fmt.Errorf("rounding: translations by parts: the boundary system: %w", err)
	}
	x := make([]float64, n*d)
	for a := 0; a < d; a++ {
		bt.sys.Solve(x[a*n:(a+1)*n], rhs[a*n:(a+1)*n])
	}
	for k, ps := range bt.parts {
		nb := len(ps)
		out[k] = make([]float64, nb*d)
		for a := 0; a < d; a++ {
			for t, i := range ps {
				out[k][a*nb+t] = x[a*n+i]
			}
		}
	}
	return out, nil
}

// RoundByParts is Round followed by the translation recovery
// (RecoverTranslations) made by parts in one process: part[i] is pose
// i's part, and each part's share (Gram, Project, Finish,
// PartTranslations) sees only its own blocks, its edges and the rotations
// at their other ends, the coordinator's (TopLeft, the votes,
// BoundaryTranslations) only the parts' sums. It is what a distributed
// run computes, and its reference. g must have no landmarks and no world
// vertex (the central rounding handles those).
func RoundByParts(g *posegraph.Graph, x *blockmat.Blocks, part []int) ([]posegraph.Pose, error) {
	d, n := g.D, g.N()
	if len(part) != n || x.N != n {
		return nil, errors.New("rounding: a partition or point that does not fit the graph")
	}
	if g.HasLandmarks() || g.World() >= 0 {
		return nil, errors.New("rounding: by parts: landmarks and priors are rounded centrally")
	}
	K := 0
	for _, k := range part {
		K = max(K, k+1)
	}
	own := make([][]int, K)
	for i, k := range part {
		own[k] = append(own[k], i)
	}
	sub := func(k int) *blockmat.Blocks {
		xs := blockmat.NewBlocks(x.R, x.B, len(own[k]))
		for t, i := range own[k] {
			copy(xs.Block(t), x.Block(i))
		}
		return xs
	}
	// Rotations: U_d from the parts' Gram matrices, the votes, the finish.
	r := x.R
	gram := make([]float64, r*r)
	for k := range own {
		gk := make([]float64, r*r)
		Gram(gk, sub(k), d, nil)
		for t, v := range gk {
			gram[t] += v
		}
	}
	ud := TopLeft(gram, r, d)
	proj := make([][]posegraph.Pose, K)
	positive, voters := 0, 0
	for k := range own {
		var p, v int
		proj[k], p, v = Project(sub(k), d, ud, nil)
		positive, voters = positive+p, voters+v
	}
	poses := make([]posegraph.Pose, n)
	for k := range own {
		Finish(proj[k], sub(k), d, ud, nil, 2*positive < voters, false)
		for t, i := range own[k] {
			poses[i] = proj[k][t]
		}
	}
	if x.B == d || n == 1 {
		return poses, nil
	}
	// Translations: each part's reduction, the boundary solve, the
	// parts' back substitutions.
	anchor := g.Anchor()
	edges := make([][]posegraph.Edge, K)
	for _, e := range g.Edges {
		edges[part[e.I]] = append(edges[part[e.I]], e)
		if part[e.J] != part[e.I] {
			edges[part[e.J]] = append(edges[part[e.J]], e)
		}
	}
	pts := make([]*PartTranslations, K)
	var bnd [][]int
	var cross [][2]int
	var vals []float64
	for k := range own {
		pt, err := NewPartTranslations(own[k], edges[k], anchor, d)
		if err != nil {
			return nil, err
		}
		pts[k] = pt
		bnd = append(bnd, pt.Boundary())
		c, v := pt.Cross()
		cross, vals = append(cross, c...), append(vals, v...)
	}
	bt, err := NewBoundaryTranslations(bnd, cross, vals, d)
	if err != nil {
		return nil, err
	}
	rot := func(i int) [9]float64 { return poses[i].R }
	schurs, zs := make([][]float64, K), make([][]float64, K)
	for k, pt := range pts {
		if schurs[k], zs[k], err = pt.Reduce(rot, poses[anchor].T); err != nil {
			return nil, err
		}
	}
	xb, err := bt.Solve(schurs, zs)
	if err != nil {
		return nil, err
	}
	for k, pt := range pts {
		for i, t := range pt.Back(xb[k]) {
			poses[i].T = t
		}
	}
	return poses, nil
}
