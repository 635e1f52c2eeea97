package blockmat

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestBlockBuilderMatchesMap checks BlockBuilder against a plain map of
// blocks summed in the same order: rows sorted by column, every diagonal
// block present, sums bit for bit in the order of the additions, with short
// rows (sorted by insertion) and a hub row longer than insertionSortMax
// (merge sorted), repeated additions included. Half the builders are grown first,
// which must change nothing.
func TestBlockBuilderMatchesMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 52))
	for _, b := range []int{1, 3, 4} {
		n := 200
		bb := NewBlockBuilder(n, b)
		if b != 3 {
			bb.Grow(1000)
		}
		ref := map[[2]int][]float64{}
		add := func(i, j int, m []float64) {
			if ref[[2]int{i, j}] == nil {
				ref[[2]int{i, j}] = make([]float64, b*b)
			}
			for k, v := range m {
				ref[[2]int{i, j}][k] += v
			}
		}
		for i := 0; i < n; i++ {
			ref[[2]int{i, i}] = make([]float64, b*b)
		}
		m := make([]float64, b*b)
		mt := make([]float64, b*b)
		for it := 0; it < 3000; it++ {
			for k := range m {
				m[k] = rng.NormFloat64()
			}
			i, j := rng.IntN(n), rng.IntN(n)
			if it%3 == 0 {
				i = 7 // a hub: its row far outgrows the insertion sort
			}
			if i == j {
				bb.AddDiag(i, m)
				add(i, i, m)
				continue
			}
			bb.AddOff(i, j, m)
			add(i, j, m)
			for r := 0; r < b; r++ {
				for c := 0; c < b; c++ {
					mt[c*b+r] = m[r*b+c]
				}
			}
			add(j, i, mt)
		}
		q := bb.Build()
		if len(q.ColIdx) != len(ref) {
			t.Fatalf("b=%d: %d blocks, want %d", b, len(q.ColIdx), len(ref))
		}
		if q.RowPtr[8]-q.RowPtr[7] <= insertionSortMax {
			t.Fatalf("b=%d: the hub row has only %d blocks", b, q.RowPtr[8]-q.RowPtr[7])
		}
		for i := 0; i < n; i++ {
			row := q.ColIdx[q.RowPtr[i]:q.RowPtr[i+1]]
			if !slices.IsSorted(row) {
				t.Fatalf("b=%d: row %d not sorted: %v", b, i, row)
			}
			if q.ColIdx[q.Diag[i]] != i {
				t.Fatalf("b=%d: Diag[%d] points at column %d", b, i, q.ColIdx[q.Diag[i]])
			}
			for k := q.RowPtr[i]; k < q.RowPtr[i+1]; k++ {
				want := ref[[2]int{i, q.ColIdx[k]}]
				if want == nil || !slices.EqualFunc(q.Block(k), want, func(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }) {
					t.Fatalf("b=%d: block (%d, %d) = %v, want %v", b, i, q.ColIdx[k], q.Block(k), want)
				}
			}
		}
	}
}

// BenchmarkBlockBuilder builds the pattern of a pose graph of n poses with
// three random neighbours each (about the density of the 3-D lattices).
func BenchmarkBlockBuilder(b *testing.B) {
	for _, n := range []int{8000, 100000} {
		b.Run(fmt.Sprintf("n=%d/b=4", n), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(53, 54))
			for b.Loop() {
				randomSym(rng, n, 4, 3)
			}
		})
	}
}

// randomSym returns a random symmetric block matrix of n blocks of size b
// with about perRow random off-diagonal blocks added per row (pairs may
// repeat, which sums them).
func randomSym(rng *rand.Rand, n, b, perRow int) *BlockSym {
	bb := NewBlockBuilder(n, b)
	m := make([]float64, b*b)
	for i := 0; i < n; i++ {
		for r := 0; r < b; r++ {
			for c := 0; c <= r; c++ {
				v := rng.NormFloat64()
				m[r*b+c], m[c*b+r] = v, v
			}
		}
		bb.AddDiag(i, m)
		for k := 0; k < perRow && n > 1; k++ {
			j := rng.IntN(n - 1)
			if j >= i {
				j++
			}
			for t := range m {
				m[t] = rng.NormFloat64()
			}
			bb.AddOff(i, j, m)
		}
	}
	return bb.Build()
}

// TestBlockBuilderReserve checks the builder's room for AddOff calls: n
// from NewBlockBuilder, or as many as a following Grow asks for, each
// taken in one allocation per array (not n first, then again for Grow).
func TestBlockBuilderReserve(t *testing.T) {
	const n, b = 10, 3
	m := make([]float64, b*b)
	for _, tc := range []struct{ grow, adds int }{{0, n - 1}, {3, n}, {25, 25}} {
		var bb *BlockBuilder
		allocs := testing.AllocsPerRun(5, func() {
			bb = NewBlockBuilder(n, b)
			if tc.grow > 0 {
				bb.Grow(tc.grow)
			}
			for k := 0; k < tc.adds; k++ {
				bb.AddOff(k%n, (k+1)%n, m)
			}
		})
		// The builder, its diagonal and the three arrays of AddOff calls.
		if allocs != 5 {
			t.Errorf("grow %d, %d AddOff calls: %v allocations, want 5", tc.grow, tc.adds, allocs)
		}
		if len(bb.offI) != tc.adds || len(bb.off) != tc.adds*b*b {
			t.Errorf("grow %d: %d and %d recorded, want %d calls", tc.grow, len(bb.offI), len(bb.off), tc.adds)
		}
	}
}
