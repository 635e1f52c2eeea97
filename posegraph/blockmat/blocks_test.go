package blockmat

import (
	"fmt"
	"github.com/bcmsync/bcmsync/internal/fpfuse"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// TestMulBlocks checks X*Q for every block size and several row counts
// against gonum's dense product, and the unrolled kernels of the pose
// block sizes (3 and 4) and the parallel product bit for bit against
// MulBlockRow, the generic loop, row by row (to the last place where the
// compiler may fuse multiply-adds, differently in the two: fpfuse).
func TestMulBlocks(t *testing.T) {
	same := func(got, want float64) bool {
		if !fpfuse.Fuses {
			return math.Float64bits(got) == math.Float64bits(want)
		}
		return math.Abs(got-want) <= 1e-13*(1+math.Abs(want))
	}
	rng := rand.New(rand.NewPCG(81, 82))
	for b := 1; b <= 5; b++ {
		for _, r := range []int{1, 2, 3, 5} {
			nb := 300
			q := randomSym(rng, nb, b, 6)
			x := NewBlocks(r, b, nb)
			for k := range x.Data {
				x.Data[k] = rng.NormFloat64()
			}
			// Stale values in the destinations: a product must set
			// every entry, not add to it.
			got := NewBlocks(r, b, nb)
			for k := range got.Data {
				got.Data[k] = math.NaN()
			}
			q.MulBlocks(got, x)
			row := make([]float64, r*b)
			for i := 0; i < nb; i++ {
				q.MulBlockRow(row, x, i)
				for k, v := range row {
					if g := got.Block(i)[k]; !same(g, v) {
						t.Fatalf("b=%d r=%d: block %d entry %d is %v, MulBlockRow gives %v", b, r, i, k, g, v)
					}
				}
			}
			par := NewBlocks(r, b, nb)
			for k := range par.Data {
				par.Data[k] = math.NaN()
			}
			old := mulParallelMin
			mulParallelMin = 1 // split even this small matrix
			q.MulBlocksParallel(par, x, 3)
			mulParallelMin = old
			for k, v := range par.Data {
				if math.Float64bits(v) != math.Float64bits(got.Data[k]) {
					t.Fatalf("b=%d r=%d: MulBlocksParallel differs at %d: %v, want %v", b, r, k, v, got.Data[k])
				}
			}
			// Dense oracle: X (r x nb*b, column-major by pose) times Q.
			n := nb * b
			xd := mat.NewDense(r, n, nil)
			for a := 0; a < r; a++ {
				for col := 0; col < n; col++ {
					xd.Set(a, col, x.At(a, col))
				}
			}
			var want mat.Dense
			want.Mul(xd, mat.NewDense(n, n, q.Dense()))
			for a := 0; a < r; a++ {
				for col := 0; col < n; col++ {
					if d := math.Abs(got.At(a, col) - want.At(a, col)); d > 1e-12*(1+math.Abs(want.At(a, col))) {
						t.Fatalf("b=%d r=%d: (XQ)[%d,%d] = %v, dense %v", b, r, a, col, got.At(a, col), want.At(a, col))
					}
				}
			}
		}
	}
}

// BenchmarkMulBlocks times X*Q on one thread for the pose block sizes at
// rank 3, on a random pattern of about 7 blocks per row (a pose graph's).
func BenchmarkMulBlocks(b *testing.B) {
	rng := rand.New(rand.NewPCG(83, 84))
	for _, bs := range []int{3, 4, 5} {
		for _, r := range []int{2, 3} {
			nb := 20000
			q := randomSym(rng, nb, bs, 3)
			x, dst := NewBlocks(r, bs, nb), NewBlocks(r, bs, nb)
			for k := range x.Data {
				x.Data[k] = rng.NormFloat64()
			}
			b.Run(fmt.Sprintf("b=%d/r=%d", bs, r), func(b *testing.B) {
				for b.Loop() {
					q.MulBlocks(dst, x)
				}
			})
		}
	}
}

// TestMulBlocksLeading checks the product by a leading block read in the
// whole matrix's rows bit for bit against MulBlocks on a copy of that
// block (made with a BlockBuilder from the rows' blocks in columns below
// n, as a block-coordinate subproblem's Q_BB is), for every block size,
// the ranks of every kernel, and leading blocks of one row, some rows and
// all of them; and LeadingEnds against a scan of each row.
func TestMulBlocksLeading(t *testing.T) {
	rng := rand.New(rand.NewPCG(85, 86))
	for b := 1; b <= 5; b++ {
		for _, r := range []int{1, 2, 3, 4, 5} {
			nb := 200
			q := randomSym(rng, nb, b, 4)
			for _, n := range []int{1, 37, 150, nb} {
				ends := q.LeadingEnds(n)
				bb := NewBlockBuilder(n, b)
				for i := 0; i < n; i++ {
					end := q.RowPtr[i]
					for k := q.RowPtr[i]; k < q.RowPtr[i+1]; k++ {
						switch j := q.ColIdx[k]; {
						case j < n:
							end = k + 1
							if j == i {
								bb.AddDiag(i, q.Block(k))
							} else if j > i {
								bb.AddOff(i, j, q.Block(k))
							}
						}
					}
					if ends[i] != end {
						t.Fatalf("b=%d n=%d: row %d ends at %d in the leading block, want %d", b, n, i, ends[i], end)
					}
				}
				qbb := bb.Build()
				x := NewBlocks(r, b, n)
				for k := range x.Data {
					x.Data[k] = rng.NormFloat64()
				}
				want, got := NewBlocks(r, b, n), NewBlocks(r, b, n)
				for k := range got.Data {
					got.Data[k] = math.NaN()
				}
				qbb.MulBlocks(want, x)
				q.MulBlocksLeading(got, x, ends)
				for k, v := range got.Data {
					if math.Float64bits(v) != math.Float64bits(want.Data[k]) {
						t.Fatalf("b=%d r=%d n=%d: entry %d is %v, the copy's product %v", b, r, n, k, v, want.Data[k])
					}
				}
			}
		}
	}
}
