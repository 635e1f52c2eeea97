package posegraph

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/bcmsync/bcmsync/posegraph/blockmat"
)

// TestLaplacianRows: Q's rows made a few at a time are Laplacian's to the
// bit, in 2-D and 3-D, for poses and rotations, with repeated edges (in
// both directions) and a pose of no edge; and their product with X is Q's
// MulBlocks and MulBlocksParallel, to the bit.
func TestLaplacianRows(t *testing.T) {
	bits := func(v []float64) []uint64 {
		u := make([]uint64, len(v))
		for k, x := range v {
			u[k] = math.Float64bits(x)
		}
		return u
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, d := range []int{2, 3} {
		for _, p := range []Problem{Poses, Rotations} {
			for _, n := range []int{1, 7, 60, 5000} {
				g := randomGraph(rng, d, n, 2*n)
				if n > 1 {
					// A repeated edge each way, and a pose with no edge.
					g.Edges = append(g.Edges, g.Edges[0])
					e := g.Edges[1]
					e.I, e.J = e.J, e.I
					g.Edges = append(g.Edges, e)
					g.IDs = append(g.IDs, 1)
				}
				q := g.Laplacian(p)
				l := g.NewLaplacianRows(p)
				for _, r := range [][2]int{{0, q.N}, {0, 1}, {q.N / 3, q.N/3 + q.N/4}, {q.N - 1, q.N}} {
					lo, hi := r[0], r[1]
					rows := l.Rows(lo, hi)
					base := q.RowPtr[lo]
					want := q.RowPtr[lo : hi+1]
					for k := range rows.RowPtr {
						if rows.RowPtr[k]+base != want[k] {
							t.Fatalf("d %d %v n %d rows %d..%d: RowPtr %v, want %v", d, p, n, lo, hi, rows.RowPtr, want)
						}
					}
					bs := q.B * q.B
					if !slices.Equal(rows.ColIdx, q.ColIdx[base:q.RowPtr[hi]]) ||
						!slices.Equal(bits(rows.Val), bits(q.Val[base*bs:q.RowPtr[hi]*bs])) {
						t.Fatalf("d %d %v n %d rows %d..%d: blocks differ from Laplacian's", d, p, n, lo, hi)
					}
					for k := range rows.Diag {
						if rows.Diag[k]+base != q.Diag[lo+k] {
							t.Fatalf("d %d %v n %d: row %d's diagonal at %d, want %d", d, p, n, lo+k, rows.Diag[k]+base, q.Diag[lo+k])
						}
					}
				}
				for _, r := range []int{d, d + 2} {
					x := blockmat.NewBlocks(r, q.B, q.N)
					for k := range x.Data {
						x.Data[k] = rng.NormFloat64()
					}
					want, par, got := blockmat.NewBlocks(r, q.B, q.N), blockmat.NewBlocks(r, q.B, q.N), blockmat.NewBlocks(r, q.B, q.N)
					q.MulBlocks(want, x)
					q.MulBlocksParallel(par, x, 2)
					l.MulBlocks(got, x)
					if !slices.Equal(bits(got.Data), bits(want.Data)) || !slices.Equal(bits(par.Data), bits(want.Data)) {
						t.Fatalf("d %d %v n %d rank %d: X Q by rows differs from MulBlocks", d, p, n, r)
					}
				}
			}
		}
	}
}
