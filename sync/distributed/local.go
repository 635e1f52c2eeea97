package distributed

import (
	"context"
	"fmt"
	"math"
	"sort"

	"github.com/bcmsync/bcmsync/internal/graphs"
	"github.com/bcmsync/bcmsync/internal/smalldense"
	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
	bsync "github.com/bcmsync/bcmsync/sync"
)

// local is one agent's share of the problem: its own poses, the rows of Q
// that belong to them (internal edges and the shared edges to other
// agents' public poses), and its copy of the public poses it needs. It
// never sees any other row of Q.
//
// Local indices 0..nOwn-1 are the agent's poses (sorted by global index);
// nOwn.. are the public poses of its neighbours (sorted by global index).
type local struct {
	d, b  int
	kind  posegraph.Problem
	part  int
	own   []int // global index of each own pose
	pub   []int // global index of each neighbour public pose
	owner []int // part owning pub[j]
	// globalToLocal maps a global pose index to its local index, -1 if
	// the agent does not know the pose.
	globalToLocal map[int]int
	// shared lists the own poses (local indices) with an edge to another
	// part: the agent's public poses, which it publishes after each update.
	shared []int
	q      *sparse.BlockSym // rows 0..nOwn-1 are complete rows of Q
	x      *sparse.Blocks   // r x b blocks of own poses, then public poses

	// Translation step (Poses): the tau-Laplacian of the own poses, with
	// the public poses fixed (their edges stay on its diagonal); an own
	// component without a shared edge has its first pose anchored.
	chol    *sparse.Cholesky
	tIndex  []int // own local index -> row of the reduced system, -1 if anchored
	nFree   int
	rhs     []float64
	nrow, h []float64
	y       []float64
	// block is the own poses' subproblem with the public poses fixed: the
	// trust-region steps, the statistics and the momentum (package sync's
	// manifold and trust region).
	block    *bsync.BlockProblem
	maxInner int // CG iterations per trust-region step (0: the trust region's default)
	// ov, if set, is the overlapping subproblem that the updates solve
	// instead of the own block alone (overlap.go).
	ov *overlap
}

// newLocal assembles agent k's rows of Q from the edges incident to its
// poses, at rank r, with the exact translation step when translations is
// set. It uses only those edges.
func newLocal(g *posegraph.Graph, p *Partition, k int, kind posegraph.Problem, r int, translations bool) (*local, error) {
	return newLocalOf(g, p, k, p.Owned(k), func(i int) bool { return p.Part[i] == k }, kind, r, translations)
}

// newLocalOf is newLocal for any set of poses own (sorted; in tells its
// members) in place of part k's: the rows of Q at them, the poses beyond
// them that those rows touch, fixed, and their exact local steps (the
// exact translation step only with translations: an agent's updates
// under an overlap are its overlap's). The agents' overlapping
// subproblems (overlap.go) are made with it.
func newLocalOf(g *posegraph.Graph, p *Partition, k int, own []int, in func(int) bool, kind posegraph.Problem, r int, translations bool) (*local, error) {
	d := g.D
	b := kind.BlockSize(d)
	l := &local{d: d, b: b, kind: kind, part: k, own: own, globalToLocal: map[int]int{}}
	for li, gi := range l.own {
		l.globalToLocal[gi] = li
	}
	pubSet := map[int]bool{}
	sharedSet := map[int]bool{}
	for _, e := range g.Edges {
		pi, pj := in(e.I), in(e.J)
		switch {
		case pi && !pj:
			pubSet[e.J] = true
			sharedSet[e.I] = true
		case pj && !pi:
			pubSet[e.I] = true
			sharedSet[e.J] = true
		}
	}
	for gi := range pubSet {
		l.pub = append(l.pub, gi)
	}
	sort.Ints(l.pub)
	nOwn := len(l.own)
	for j, gi := range l.pub {
		l.globalToLocal[gi] = nOwn + j
		l.owner = append(l.owner, p.Part[gi])
	}
	for li, gi := range l.own {
		if sharedSet[gi] {
			l.shared = append(l.shared, li)
		}
	}
	// The rows of Q at the own poses are those of the Laplacian of the
	// edges incident to them alone, on the local numbering: the graph of
	// those edges, assembled as the whole graph's Q is (the same blocks,
	// summed in the same edge order, so the rows are Q's to the bit).
	local := &posegraph.Graph{D: d, IDs: make([]int, nOwn+len(l.pub))}
	for _, e := range g.Edges {
		if !in(e.I) && !in(e.J) {
			continue
		}
		e.I, e.J = l.globalToLocal[e.I], l.globalToLocal[e.J]
		local.Edges = append(local.Edges, e)
	}
	l.q = local.Laplacian(kind)
	l.x = sparse.NewBlocks(r, b, nOwn+len(l.pub))
	var err error
	if l.block, err = bsync.NewBlockProblem(l.q, nOwn, d); err != nil {
		return nil, fmt.Errorf("agent %d: %w", k, err)
	}
	if kind == posegraph.Poses && translations {
		if err := l.factorTranslations(); err != nil {
			return nil, fmt.Errorf("agent %d: %w", k, err)
		}
	}
	l.setRank(r)
	return l, nil
}

// setRank changes the rank of the local variable, keeping the top rows.
func (l *local) setRank(r int) {
	if l.x.R != r {
		nx := sparse.NewBlocks(r, l.b, l.x.N)
		rows := min(r, l.x.R)
		for i := 0; i < l.x.N; i++ {
			copy(nx.Block(i)[:rows*l.b], l.x.Block(i)[:rows*l.b])
		}
		l.x = nx
	}
	l.nrow = make([]float64, r*l.b)
	l.h = make([]float64, r*l.d)
	l.y = make([]float64, r*l.d)
	l.rhs = make([]float64, r*l.nFree)
	l.block.Reset()
	if l.ov != nil {
		l.ov.setRank(r)
	}
}

// factorTranslations builds and factors the own poses' tau-Laplacian.
func (l *local) factorTranslations() error {
	nOwn, b, d := len(l.own), l.b, l.d
	// Components of the own poses; those without a shared edge are anchored.
	u := graphs.NewUnionFind(nOwn)
	grounded := make([]bool, nOwn)
	for i := 0; i < nOwn; i++ {
		for p := l.q.RowPtr[i]; p < l.q.RowPtr[i+1]; p++ {
			j := l.q.ColIdx[p]
			if j >= nOwn {
				grounded[i] = true
				continue
			}
			u.Union(i, j)
		}
	}
	rootGrounded := make([]bool, nOwn)
	for i := 0; i < nOwn; i++ {
		if grounded[i] {
			rootGrounded[u.Find(i)] = true
		}
	}
	l.tIndex = make([]int, nOwn)
	l.nFree = 0
	for i := 0; i < nOwn; i++ {
		if u.Find(i) == i && !rootGrounded[i] {
			l.tIndex[i] = -1
			continue
		}
		l.tIndex[i] = l.nFree
		l.nFree++
	}
	if l.nFree == 0 {
		return nil
	}
	bb := sparse.NewBlockBuilder(l.nFree, 1)
	one := []float64{0}
	for i := 0; i < nOwn; i++ {
		ti := l.tIndex[i]
		if ti < 0 {
			continue
		}
		for p := l.q.RowPtr[i]; p < l.q.RowPtr[i+1]; p++ {
			j := l.q.ColIdx[p]
			v := l.q.Block(p)[d*b+d]
			switch {
			case j == i:
				one[0] = v
				bb.AddDiag(ti, one)
			case j < nOwn && j > i && l.tIndex[j] >= 0:
				one[0] = v
				bb.AddOff(ti, l.tIndex[j], one)
			}
		}
	}
	lt := bb.Build()
	chol, err := sparse.AnalyzeBlocks(lt, nil)
	if err == nil {
		err = chol.FactorizeBlocks(lt, 0)
	}
	if err != nil {
		return fmt.Errorf("factoring the translation Laplacian of its poses: %w", err)
	}
	l.chol = chol
	return nil
}

// releaseStepsFactor lets go of the trust-region steps' factor, the own
// block's and the overlap's, until the next update makes it again, bit for
// bit (bsync.BlockProblem.ReleaseFactor): the certificate and the
// rounding use other factors.
func (l *local) releaseStepsFactor() {
	l.block.ReleaseFactor()
	if l.ov != nil {
		l.ov.ext.block.ReleaseFactor()
	}
}

// solveTranslations minimizes F exactly over the own translations with
// everything else fixed: delta L = -N_p, p += delta.
func (l *local) solveTranslations() {
	if l.chol == nil {
		return
	}
	r, b, d, nf := l.x.R, l.b, l.d, l.nFree
	for i, t := range l.tIndex {
		if t < 0 {
			continue
		}
		l.q.MulBlockRow(l.nrow, l.x, i)
		for a := 0; a < r; a++ {
			l.rhs[a*nf+t] = -l.nrow[a*b+d]
		}
	}
	l.chol.SolveMany(l.rhs, l.rhs, r)
	for i, t := range l.tIndex {
		if t < 0 {
			continue
		}
		blk := l.x.Block(i)
		for a := 0; a < r; a++ {
			blk[a*b+d] += l.rhs[a*nf+t]
		}
	}
}

// updatePose replaces own pose i by its exact minimizer with every other
// block fixed (docs/design.md section 4).
func (l *local) updatePose(i int) {
	r, b, d := l.x.R, l.b, l.d
	n := l.nrow
	l.q.MulBlockRow(n, l.x, i)
	xi := l.x.Block(i)
	qii := l.q.Block(l.q.Diag[i])
	// G = N - X_i Q_ii, only the columns needed.
	h := l.h
	for a := 0; a < r; a++ {
		for c := 0; c < b; c++ {
			s := n[a*b+c]
			for e := 0; e < b; e++ {
				s -= xi[a*b+e] * qii[e*b+c]
			}
			n[a*b+c] = s // n now holds G_i
		}
	}
	if b == d {
		for a := 0; a < r*d; a++ {
			h[a] = -n[a]
		}
		smalldense.Polar(l.y, h, r, d)
		copy(xi, l.y)
		return
	}
	c := qii[d*b+d]
	for a := 0; a < r; a++ {
		gp := n[a*b+d]
		for e := 0; e < d; e++ {
			h[a*d+e] = -(n[a*b+e] - gp*qii[e*b+d]/c)
		}
	}
	smalldense.Polar(l.y, h, r, d)
	for a := 0; a < r; a++ {
		s := n[a*b+d]
		for e := 0; e < d; e++ {
			xi[a*b+e] = l.y[a*d+e]
			s += l.y[a*d+e] * qii[e*b+d]
		}
		xi[a*b+d] = -s / c
	}
}

// improve lowers F over the own poses, the public poses fixed: sweeps
// cyclic passes, each an exact translation step (Poses) and one exact
// update of every own pose, then a last translation step, then up to
// newtonSteps steps of the trust region (package sync's, on the own block:
// bsync.BlockProblem). Every step is an exact block minimization or an
// accepted trust-region step, so F never increases. With an overlap the
// steps are those of the own poses and the halo together, of which only
// the own poses are kept (overlap.go).
func (l *local) improve(sweeps, newtonSteps int) error {
	if l.ov != nil {
		return l.ov.improve(l, sweeps, newtonSteps)
	}
	for s := 0; s < sweeps; s++ {
		l.solveTranslations()
		for i := range l.own {
			l.updatePose(i)
		}
	}
	l.solveTranslations()
	if _, err := l.block.TrustRegion(context.Background(), l.x, newtonSteps, l.maxInner); err != nil {
		return fmt.Errorf("agent %d: %w", l.part, err)
	}
	return nil
}

// stats returns the own poses' share of F, sum_i <X_i, (XQ)_i> (the
// shares of all agents add up to F), of ||grad F||^2 and of ||2 X Q||^2.
func (l *local) stats() (f, grad2, n2 float64) { return l.block.Stats(l.x) }

// setPose writes pose p into local block li (top d rows; the rest zero).
func (l *local) setPose(li int, p posegraph.Pose) {
	blk := l.x.Block(li)
	clear(blk)
	b, d := l.b, l.d
	for a := 0; a < d; a++ {
		for c := 0; c < d; c++ {
			blk[a*b+c] = p.R[a*d+c]
		}
		if b > d {
			blk[a*b+d] = p.T[a]
		}
	}
}

// finite reports whether every value is finite.
func finite(v []float64) bool {
	for _, x := range v {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return false
		}
	}
	return true
}

// extrapolate is the momentum step of accelerated block-coordinate
// descent on the own poses (bsync.BlockProblem.Momentum): X <- R(X +
// beta (X - X_last)), X_last the own blocks at the previous
// extrapolation; beta = 0 only records X (a restart).
func (l *local) extrapolate(beta float64) { l.block.Momentum(l.x, beta) }
