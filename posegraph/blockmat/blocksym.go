package blockmat

import (
	"fmt"
	"slices"
	"sort"
)

// BlockSym is a symmetric matrix of N x N square blocks, each B x B, stored
// as full block rows (both triangles) in block compressed-row form. Row i
// holds the blocks (i, ColIdx[k]) for k in [RowPtr[i], RowPtr[i+1]), sorted by
// column, its diagonal block always present. Block k is Val[k*B*B:(k+1)*B*B],
// row-major.
//
// Storing both triangles doubles memory but makes X*Q a single pass of
// contiguous reads per block row, which is the product every solver here
// lives on.
type BlockSym struct {
	N, B   int
	RowPtr []int
	ColIdx []int
	Val    []float64
	// Diag[i] is the position k of block (i, i).
	Diag []int
}

// BlockBuilder accumulates blocks (i, j) and (j, i) before they are packed
// into a BlockSym. Adding to the same block twice sums the contributions,
// in the order they were added.
//
// It only records the contributions, in flat arrays, and sorts them into
// rows once, in Build: finding each block as it came (a scan of its row, a
// map for hub rows) grew a small slice per row, and building the connection
// Laplacian of a million-pose graph took 2.7 s, most of it in allocation
// and copying; it takes 1.0 s now, most of that the first touch of Q's 410 MB.
type BlockBuilder struct {
	n, b int
	diag []float64 // block (i, i) at diag[i*b*b:]
	offI []int     // the k-th AddOff's block row ...
	offJ []int     // ... and column
	off  []float64 // and its block, at off[k*b*b:]
	// reserve is the room for AddOff calls still to be made on first
	// use: NewBlockBuilder's n, taken together with a Grow that follows
	// it, so that a caller that knows its edge count allocates once.
	reserve int
}

// NewBlockBuilder returns a builder for an n x n block matrix of b x b blocks.
// Every diagonal block is created, zero until added to. It makes room for n
// AddOff calls, as many as a connected graph on n vertices has edges, less one.
func NewBlockBuilder(n, b int) *BlockBuilder {
	return &BlockBuilder{n: n, b: b, diag: make([]float64, n*b*b), reserve: n}
}

// Grow makes room for k more AddOff calls without reallocating, as
// strings.Builder's Grow does: a caller that knows its edge count saves the
// copies of a growing array, hundreds of megabytes at a million poses.
func (bb *BlockBuilder) Grow(k int) {
	k = max(k, bb.reserve)
	bb.reserve = 0
	bb.offI = slices.Grow(bb.offI, k)
	bb.offJ = slices.Grow(bb.offJ, k)
	bb.off = slices.Grow(bb.off, k*bb.b*bb.b)
}

// AddDiag adds the b x b row-major matrix m to block (i, i).
func (bb *BlockBuilder) AddDiag(i int, m []float64) {
	bs := bb.b * bb.b
	s := bb.diag[i*bs : (i+1)*bs]
	for k := range s {
		s[k] += m[k]
	}
}

// AddOff adds m to block (i, j) and m^T to block (j, i); i != j.
func (bb *BlockBuilder) AddOff(i, j int, m []float64) {
	if i == j {
		panic("blockmat: AddOff on a diagonal block")
	}
	if bb.reserve > 0 {
		bb.Grow(0)
	}
	bb.offI = append(bb.offI, i)
	bb.offJ = append(bb.offJ, j)
	bb.off = append(bb.off, m[:bb.b*bb.b]...)
}

// builderEntry is one contribution to a block row: column col, from the
// AddOff call src>>1, transposed when src is odd; src -1 is the diagonal.
type builderEntry struct{ col, src int }

// Build packs the accumulated blocks, each row's blocks by increasing
// column, each block the sum of its contributions in the order they came.
func (bb *BlockBuilder) Build() *BlockSym {
	n, b := bb.n, bb.b
	bs := b * b
	ptr := make([]int, n+1)
	for i := range n {
		ptr[i+1] = 1
	}
	for k, i := range bb.offI {
		ptr[i+1]++
		ptr[bb.offJ[k]+1]++
	}
	for i := range n {
		ptr[i+1] += ptr[i]
	}
	ent := make([]builderEntry, ptr[n])
	next := make([]int, n)
	for i := range n {
		ent[ptr[i]] = builderEntry{i, -1}
		next[i] = ptr[i] + 1
	}
	// In call order, so that a stable sort by column keeps each block's
	// contributions in the order they were added.
	for k, i := range bb.offI {
		j := bb.offJ[k]
		ent[next[i]] = builderEntry{j, 2 * k}
		next[i]++
		ent[next[j]] = builderEntry{i, 2*k + 1}
		next[j]++
	}
	blocks := 0
	for i := range n {
		row := ent[ptr[i]:ptr[i+1]]
		sortEntries(row)
		for t := range row {
			if t == 0 || row[t].col != row[t-1].col {
				blocks++
			}
		}
	}
	m := &BlockSym{
		N: n, B: b,
		RowPtr: make([]int, n+1),
		ColIdx: make([]int, blocks),
		Val:    make([]float64, blocks*bs),
		Diag:   make([]int, n),
	}
	p := -1
	for i := range n {
		row := ent[ptr[i]:ptr[i+1]]
		for t, e := range row {
			if t == 0 || e.col != row[t-1].col {
				p++
				m.ColIdx[p] = e.col
				if e.col == i {
					m.Diag[i] = p
				}
			}
			dst := m.Val[p*bs : (p+1)*bs]
			switch {
			case e.src < 0:
				for c, v := range bb.diag[i*bs : (i+1)*bs] {
					dst[c] += v
				}
			case e.src&1 == 0:
				for c, v := range bb.off[(e.src>>1)*bs : (e.src>>1+1)*bs] {
					dst[c] += v
				}
			default:
				src := bb.off[(e.src>>1)*bs : (e.src>>1+1)*bs]
				for r := 0; r < b; r++ {
					for c := 0; c < b; c++ {
						dst[c*b+r] += src[r*b+c]
					}
				}
			}
		}
		m.RowPtr[i+1] = p + 1
	}
	return m
}

// insertionSortMax is the row length up to which sortEntries sorts by
// insertion.
const insertionSortMax = 32

// sortEntries sorts a row's entries by column, stably: by insertion for the
// short rows of a pose graph, by merging for a hub's.
func sortEntries(row []builderEntry) {
	if len(row) > insertionSortMax {
		slices.SortStableFunc(row, func(x, y builderEntry) int { return x.col - y.col })
		return
	}
	for t := 1; t < len(row); t++ {
		e := row[t]
		u := t
		for u > 0 && row[u-1].col > e.col {
			row[u] = row[u-1]
			u--
		}
		row[u] = e
	}
}

// Block returns block k (row-major B x B), aliasing the matrix's storage.
func (m *BlockSym) Block(k int) []float64 {
	bs := m.B * m.B
	return m.Val[k*bs : (k+1)*bs]
}

// Dim is the scalar dimension N*B.
func (m *BlockSym) Dim() int { return m.N * m.B }

// NNZBlocks is the number of stored blocks (both triangles).
func (m *BlockSym) NNZBlocks() int { return len(m.ColIdx) }

// At returns the scalar entry (r, c). It is meant for tests and debugging.
func (m *BlockSym) At(r, c int) float64 {
	i, a := r/m.B, r%m.B
	j, b := c/m.B, c%m.B
	for k := m.RowPtr[i]; k < m.RowPtr[i+1]; k++ {
		if m.ColIdx[k] == j {
			return m.Val[k*m.B*m.B+a*m.B+b]
		}
	}
	return 0
}

// Dense returns the matrix as a dense row-major slice of Dim()*Dim() values,
// for tests on small problems.
func (m *BlockSym) Dense() []float64 {
	n := m.Dim()
	d := make([]float64, n*n)
	b := m.B
	for i := 0; i < m.N; i++ {
		for k := m.RowPtr[i]; k < m.RowPtr[i+1]; k++ {
			j := m.ColIdx[k]
			blk := m.Block(k)
			for a := 0; a < b; a++ {
				for c := 0; c < b; c++ {
					d[(i*b+a)*n+j*b+c] = blk[a*b+c]
				}
			}
		}
	}
	return d
}

// Clone returns a matrix with the same pattern and a copy of the values.
func (m *BlockSym) Clone() *BlockSym {
	c := *m
	c.Val = append([]float64(nil), m.Val...)
	return &c
}

// CheckSymmetric reports the first block whose transpose partner is missing
// or differs by more than tol.
func (m *BlockSym) CheckSymmetric(tol float64) error {
	b := m.B
	for i := 0; i < m.N; i++ {
		for k := m.RowPtr[i]; k < m.RowPtr[i+1]; k++ {
			j := m.ColIdx[k]
			kt := m.Find(j, i)
			if kt < 0 {
				return fmt.Errorf("blockmat: block (%d,%d) has no partner (%d,%d)", i, j, j, i)
			}
			x, y := m.Block(k), m.Block(kt)
			for r := 0; r < b; r++ {
				for c := 0; c < b; c++ {
					if d := x[r*b+c] - y[c*b+r]; d > tol || d < -tol {
						return fmt.Errorf("blockmat: block (%d,%d) entry (%d,%d) differs from its transpose by %g", i, j, r, c, d)
					}
				}
			}
		}
	}
	return nil
}

// Find returns the position k of block (i, j) (Block(k)), or -1 when it is
// not stored.
func (m *BlockSym) Find(i, j int) int {
	lo, hi := m.RowPtr[i], m.RowPtr[i+1]
	k := lo + sort.SearchInts(m.ColIdx[lo:hi], j)
	if k < hi && m.ColIdx[k] == j {
		return k
	}
	return -1
}

// MaxDiag returns the largest diagonal entry: the scale that relative
// tolerances (shifts, certificate floors) are measured against.
func (m *BlockSym) MaxDiag() float64 {
	s, b := 0.0, m.B
	for i := 0; i < m.N; i++ {
		blk := m.Block(m.Diag[i])
		for a := 0; a < b; a++ {
			if blk[a*b+a] > s {
				s = blk[a*b+a]
			}
		}
	}
	return s
}
