package posegraph

import (
	"slices"

	"github.com/bcmsync/bcmsync/posegraph/blockmat"
)

// LaplacianRows makes Q's block rows a few at a time, for a product with Q
// by a process that does not hold Q (a distributed coordinator, whose Q is
// 41 MB at 10^5 poses in 3-D, and whose assembly takes 28 MB more):
// Rows(lo, hi) is Q's rows lo..hi-1 to the bit, as Laplacian makes them.
type LaplacianRows struct {
	g    *Graph
	p    Problem
	d, b int
	// The edges at each pose, in the graph's order: pose i's are
	// edges[ptr[i]:ptr[i+1]].
	ptr, edges []int
	// Work space of Rows, and the rows it returns (valid until its next
	// call): a chunk's storage, made once.
	rows         blockmat.BlockSym
	ent          []rowEntry
	di, dj, off  []float64
	contribution []float64
}

// rowEntry is one term of a block row: column col from edge e (or the
// diagonal, e < 0), transposed when tr.
type rowEntry struct {
	col, e int
	tr     bool
}

// NewLaplacianRows prepares g's rows of Q for problem p: it indexes the
// edges at each pose (n+1 and 2m integers).
func (g *Graph) NewLaplacianRows(p Problem) *LaplacianRows {
	n := g.N()
	ptr := make([]int, n+1)
	for k := range g.Edges {
		ptr[g.Edges[k].I+1]++
		ptr[g.Edges[k].J+1]++
	}
	for i := range n {
		ptr[i+1] += ptr[i]
	}
	edges := make([]int, ptr[n])
	next := slices.Clone(ptr[:n])
	for k := range g.Edges {
		e := &g.Edges[k]
		edges[next[e.I]] = k
		next[e.I]++
		edges[next[e.J]] = k
		next[e.J]++
	}
	b := p.BlockSize(g.D)
	return &LaplacianRows{g: g, p: p, d: g.D, b: b, ptr: ptr, edges: edges,
		di: make([]float64, b*b), dj: make([]float64, b*b), off: make([]float64, b*b), contribution: make([]float64, b*b)}
}

// N returns the number of block rows, the graph's poses.
func (l *LaplacianRows) N() int { return len(l.ptr) - 1 }

// Rows returns Q's block rows lo..hi-1 as a BlockSym of hi-lo rows whose
// column indices are Q's (Diag indexes row k's diagonal block, Q's block
// (lo+k, lo+k)): each block is the sum of its terms in Laplacian's order
// (the diagonal's in edge order from zero, an off-diagonal block's in edge
// order after the diagonal), so that its rows are Laplacian's to the bit,
// and its MulBlocks (into the rows lo..hi-1 of the product) is X Q's rows.
// The rows live in l's storage until the next call of Rows.
func (l *LaplacianRows) Rows(lo, hi int) *blockmat.BlockSym {
	b, bs := l.b, l.b*l.b
	// At most a block per pose and one per edge end: room for all, so
	// that the appends below never copy.
	most := hi - lo + l.ptr[hi] - l.ptr[lo]
	m := &l.rows
	m.N, m.B = hi-lo, b
	m.RowPtr = slices.Grow(m.RowPtr[:0], hi-lo+1)[:hi-lo+1]
	m.Diag = slices.Grow(m.Diag[:0], hi-lo)[:hi-lo]
	m.ColIdx = slices.Grow(m.ColIdx[:0], most)
	m.Val = slices.Grow(m.Val[:0], most*bs)
	m.RowPtr[0] = 0
	for i := lo; i < hi; i++ {
		// Laplacian's builder: the diagonal first, then each edge at i
		// in edge order, sorted stably by column; a block sums its terms
		// in that order, from zero.
		ent := append(l.ent[:0], rowEntry{col: i, e: -1})
		for _, k := range l.edges[l.ptr[i]:l.ptr[i+1]] {
			e := &l.g.Edges[k]
			if e.I == i {
				ent = append(ent, rowEntry{col: e.J, e: k})
			} else {
				ent = append(ent, rowEntry{col: e.I, e: k, tr: true})
			}
		}
		slices.SortStableFunc(ent, func(x, y rowEntry) int { return x.col - y.col })
		l.ent = ent
		var diag []float64 // the diagonal block, summed in edge order
		for t, en := range ent {
			if t == 0 || en.col != ent[t-1].col {
				if en.col == i {
					m.Diag[i-lo] = len(m.ColIdx)
				}
				m.ColIdx = append(m.ColIdx, en.col)
				m.Val = slices.Grow(m.Val, bs)[:len(m.Val)+bs]
				clear(m.Val[len(m.Val)-bs:])
			}
			dst := m.Val[len(m.Val)-bs:]
			if en.e < 0 {
				if diag == nil {
					diag = l.diagonal(i)
				}
				for c, v := range diag {
					dst[c] += v
				}
				continue
			}
			edgeBlocks(&l.g.Edges[en.e], l.p, l.d, l.di, l.dj, l.off)
			if !en.tr {
				for c, v := range l.off {
					dst[c] += v
				}
				continue
			}
			for r := 0; r < b; r++ {
				for c := 0; c < b; c++ {
					dst[c*b+r] += l.off[r*b+c]
				}
			}
		}
		m.RowPtr[i-lo+1] = len(m.ColIdx)
	}
	return m
}

// diagonal returns Q's block (i, i) as Laplacian's builder sums it: from
// zero, each edge at i in edge order (its term at I or at J).
func (l *LaplacianRows) diagonal(i int) []float64 {
	s := l.contribution
	for k := range s {
		s[k] = 0
	}
	for _, k := range l.edges[l.ptr[i]:l.ptr[i+1]] {
		e := &l.g.Edges[k]
		edgeBlocks(e, l.p, l.d, l.di, l.dj, l.off)
		t := l.dj
		if e.I == i {
			t = l.di
		}
		for c, v := range t {
			s[c] += v
		}
	}
	return s
}

// Chunks calls f with Q's rows a chunk at a time, in order: rows holds
// Q's block rows lo.. (Rows), valid until f returns.
func (l *LaplacianRows) Chunks(f func(lo int, rows *blockmat.BlockSym)) {
	n := l.N()
	for lo := 0; lo < n; lo += laplacianChunk {
		f(lo, l.Rows(lo, min(lo+laplacianChunk, n)))
	}
}

// MulBlocks sets dst = X Q, a chunk of rows at a time (dst and x as
// BlockSym.MulBlocks takes them): the same bits as Q's MulBlocks, and
// MulBlocksParallel's, without Q.
func (l *LaplacianRows) MulBlocks(dst, x *blockmat.Blocks) {
	rb := x.R * x.B
	l.Chunks(func(lo int, rows *blockmat.BlockSym) {
		part := &blockmat.Blocks{R: x.R, B: x.B, N: rows.N, Data: dst.Data[lo*rb : (lo+rows.N)*rb]}
		rows.MulBlocks(part, x)
	})
}

// TraceCost is posegraph's TraceCost, F(X) = tr(X Q X^T), with Q's rows
// made a chunk at a time: the same bits.
func (l *LaplacianRows) TraceCost(x, work *blockmat.Blocks) float64 {
	l.MulBlocks(work, x)
	return dotBlocks(x, work)
}

// laplacianChunk is the rows Chunks makes at a time: about 2 MB of Q's
// blocks in 3-D.
const laplacianChunk = 4096
