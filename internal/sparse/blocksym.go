package sparse

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
// into a BlockSym. Adding to the same block twice sums the contributions.
//
// Blocks are found through their row: a short row is scanned, a row longer
// than rowScanMax (a hub pose) is looked up in a map. A map for every block
// made building the connection Laplacian of a million-pose graph take 4 s,
// most of it hashing.
type BlockBuilder struct {
	n, b int
	rows [][]builderSlot // the blocks of each row, in the order they came
	big  map[[2]int]int  // slots of the rows longer than rowScanMax
	keys [][2]int        // slot -> (i, j)
	vals []float64       // slot k's block at vals[k*b*b:]
}

type builderSlot struct{ col, slot int }

// rowScanMax is the row length up to which slot scans the row.
const rowScanMax = 32

// NewBlockBuilder returns a builder for an n x n block matrix of b x b blocks.
// Every diagonal block is created, zero until added to.
func NewBlockBuilder(n, b int) *BlockBuilder {
	bb := &BlockBuilder{n: n, b: b, rows: make([][]builderSlot, n),
		keys: make([][2]int, 0, 3*n), vals: make([]float64, 0, 3*n*b*b)}
	for i := 0; i < n; i++ {
		bb.slot(i, i)
	}
	return bb
}

func (bb *BlockBuilder) slot(i, j int) []float64 {
	bs := bb.b * bb.b
	row := bb.rows[i]
	if len(row) <= rowScanMax {
		for _, e := range row {
			if e.col == j {
				return bb.vals[e.slot*bs : (e.slot+1)*bs]
			}
		}
	} else if k, ok := bb.big[[2]int{i, j}]; ok {
		return bb.vals[k*bs : (k+1)*bs]
	}
	k := len(bb.keys)
	bb.keys = append(bb.keys, [2]int{i, j})
	bb.vals = append(bb.vals, make([]float64, bs)...)
	bb.rows[i] = append(row, builderSlot{j, k})
	if len(bb.rows[i]) == rowScanMax+1 {
		// The row outgrew scanning: index all of it.
		if bb.big == nil {
			bb.big = make(map[[2]int]int)
		}
		for _, e := range bb.rows[i] {
			bb.big[[2]int{i, e.col}] = e.slot
		}
	} else if len(bb.rows[i]) > rowScanMax+1 {
		bb.big[[2]int{i, j}] = k
	}
	return bb.vals[k*bs : (k+1)*bs]
}

// AddDiag adds the b x b row-major matrix m to block (i, i).
func (bb *BlockBuilder) AddDiag(i int, m []float64) {
	s := bb.slot(i, i)
	for k := range s {
		s[k] += m[k]
	}
}

// AddOff adds m to block (i, j) and m^T to block (j, i); i != j.
func (bb *BlockBuilder) AddOff(i, j int, m []float64) {
	if i == j {
		panic("sparse: AddOff on a diagonal block")
	}
	b := bb.b
	s := bb.slot(i, j)
	for k := range s {
		s[k] += m[k]
	}
	t := bb.slot(j, i)
	for r := 0; r < b; r++ {
		for c := 0; c < b; c++ {
			t[c*b+r] += m[r*b+c]
		}
	}
}

// Build packs the accumulated blocks, each row's blocks by increasing
// column.
func (bb *BlockBuilder) Build() *BlockSym {
	bs := bb.b * bb.b
	m := &BlockSym{
		N: bb.n, B: bb.b,
		RowPtr: make([]int, bb.n+1),
		ColIdx: make([]int, len(bb.keys)),
		Val:    make([]float64, len(bb.keys)*bs),
		Diag:   make([]int, bb.n),
	}
	p := 0
	for i, row := range bb.rows {
		slices.SortFunc(row, func(x, y builderSlot) int { return x.col - y.col })
		for _, e := range row {
			m.ColIdx[p] = e.col
			copy(m.Val[p*bs:(p+1)*bs], bb.vals[e.slot*bs:(e.slot+1)*bs])
			if e.col == i {
				m.Diag[i] = p
			}
			p++
		}
		m.RowPtr[i+1] = p
	}
	return m
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

// CloneWithValues returns a matrix with the same pattern and a copy of the values.
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
			kt := m.find(j, i)
			if kt < 0 {
				return fmt.Errorf("sparse: block (%d,%d) has no partner (%d,%d)", i, j, j, i)
			}
			x, y := m.Block(k), m.Block(kt)
			for r := 0; r < b; r++ {
				for c := 0; c < b; c++ {
					if d := x[r*b+c] - y[c*b+r]; d > tol || d < -tol {
						return fmt.Errorf("sparse: block (%d,%d) entry (%d,%d) differs from its transpose by %g", i, j, r, c, d)
					}
				}
			}
		}
	}
	return nil
}

func (m *BlockSym) find(i, j int) int {
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
