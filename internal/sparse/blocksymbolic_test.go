package sparse

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// randomBlockSym builds an nb x nb block matrix of b x b blocks with
// off-diagonal blocks at density dens among ncomp interleaved components,
// diagonally dominant so that it factors.
func randomBlockSym(rng *rand.Rand, nb, b int, dens float64, ncomp int) *BlockSym {
	bb := NewBlockBuilder(nb, b)
	blk := make([]float64, b*b)
	deg := make([]float64, nb)
	for i := 0; i < nb; i++ {
		for j := i + 1; j < nb; j++ {
			if i%ncomp != j%ncomp || rng.Float64() >= dens {
				continue
			}
			for k := range blk {
				blk[k] = rng.NormFloat64()
			}
			bb.AddOff(i, j, blk)
			deg[i]++
			deg[j]++
		}
	}
	for i := 0; i < nb; i++ {
		for k := range blk {
			blk[k] = 0
		}
		for a := 0; a < b; a++ {
			blk[a*b+a] = 4*float64(b)*(deg[i]+1) + rng.Float64()
		}
		bb.AddDiag(i, blk)
	}
	return bb.Build()
}

// randomBlockPerm is a uniformly random order of nb blocks, expanded.
func randomBlockPerm(rng *rand.Rand, nb, b int) []int {
	return expandBlockOrder(rng.Perm(nb), b)
}

// TestAnalyzeBlocks checks that the block analysis is the scalar one:
// every array of the symbolic factor, then the numeric factor's bits.
func TestAnalyzeBlocks(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	cases := []struct {
		nb, b, ncomp int
		dens         float64
	}{
		{1, 1, 1, 0}, {1, 4, 1, 0}, {2, 3, 1, 1}, {7, 2, 2, 0.5}, {30, 1, 1, 0.2},
		{40, 3, 1, 0.1}, {60, 4, 3, 0.15}, {100, 6, 1, 0.04}, {150, 3, 2, 0.03}, {80, 2, 1, 0.5},
	}
	orders := []struct {
		name string
		perm func(q *BlockSym) []int
	}{
		{"BlockAMD", func(q *BlockSym) []int { return BlockAMD(q, 0) }},
		{"BlockOrder", func(q *BlockSym) []int { return BlockOrder(q, 0) }},
		{"NestedDissection", func(q *BlockSym) []int { return NestedDissection(q, 0) }},
		{"random", func(q *BlockSym) []int { return randomBlockPerm(rng, q.N, q.B) }},
		{"natural", func(q *BlockSym) []int {
			p := make([]int, q.N*q.B)
			for i := range p {
				p[i] = i
			}
			return p
		}},
	}
	for ci, tc := range cases {
		q := randomBlockSym(rng, tc.nb, tc.b, tc.dens, tc.ncomp)
		for _, o := range orders {
			perm := o.perm(q)
			t.Run(fmt.Sprintf("%d/%s", ci, o.name), func(t *testing.T) {
				if !blockPermOK(perm, q.B, q.N) || !blockSymOK(q) {
					t.Fatal("the case would not take the block path")
				}
				want, err := Analyze(q.LowerCSC(0, 0), perm)
				if err != nil {
					t.Fatal(err)
				}
				got, err := AnalyzeBlocks(q, perm)
				if err != nil {
					t.Fatal(err)
				}
				sameSymbolic(t, got, want)
				n := q.N * q.B
				rhs := make([]float64, n)
				for i := range rhs {
					rhs[i] = rng.NormFloat64()
				}
				for _, c := range []*Cholesky{want, got} {
					if err := c.FactorizeBlocks(q, 0.5); err != nil {
						t.Fatal(err)
					}
				}
				x1, x2 := make([]float64, n), make([]float64, n)
				want.Solve(x1, rhs)
				got.Solve(x2, rhs)
				if !slices.Equal(x1, x2) {
					t.Fatal("the solves differ")
				}
				// And the scalar matrix's Factorize accepts the block analysis.
				if err := got.Factorize(q.LowerCSC(0.5, 0)); err != nil {
					t.Fatalf("Factorize(LowerCSC) on the block analysis: %v", err)
				}
				got.Solve(x2, rhs)
				if !slices.Equal(x1, x2) {
					t.Fatal("the solves differ after Factorize")
				}
			})
		}
	}
}

func sameSymbolic(t *testing.T, got, want *Cholesky) {
	t.Helper()
	ints := []struct {
		name      string
		got, want []int
	}{
		{"perm", got.perm, want.perm}, {"pinv", got.pinv, want.pinv},
		{"parent", got.parent, want.parent}, {"colCnt", got.colCnt, want.colCnt},
		{"first", got.sn.first, want.sn.first}, {"super", got.sn.super, want.sn.super},
		{"rowPtr", got.sn.rowPtr, want.sn.rowPtr}, {"rows", got.sn.rows, want.sn.rows},
		{"valPtr", got.sn.valPtr, want.sn.valPtr}, {"vmap", got.sn.vmap, want.sn.vmap},
		{"top", got.sn.top, want.sn.top},
	}
	for _, a := range ints {
		if !slices.Equal(a.got, a.want) {
			t.Fatalf("%s differs: block %v, scalar %v", a.name, head(a.got), head(a.want))
		}
	}
	if got.nnz != want.nnz || got.aNNZ != want.aNNZ || got.aHash != want.aHash || got.sn.stored != want.sn.stored {
		t.Fatalf("nnz %d/%d, aNNZ %d/%d, hash %x/%x, stored %d/%d", got.nnz, want.nnz, got.aNNZ, want.aNNZ,
			got.aHash, want.aHash, got.sn.stored, want.sn.stored)
	}
	if !slices.Equal(got.sn.tasks, want.sn.tasks) {
		t.Fatal("task split differs")
	}
}

func head(v []int) []int {
	return v[:min(len(v), 24)]
}

// TestAnalyzeBlocksFallback checks that orders that split or reorder a
// block, nil, bad permutations and unsymmetric patterns go to the scalar
// analysis (and its errors).
func TestAnalyzeBlocksFallback(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	q := randomBlockSym(rng, 20, 3, 0.2, 1)
	n := q.N * q.B
	scalarPerm := rng.Perm(n)
	swapped := expandBlockOrder(rng.Perm(q.N), q.B)
	swapped[0], swapped[1] = swapped[1], swapped[0]
	for _, perm := range [][]int{nil, scalarPerm, swapped} {
		want, err := Analyze(q.LowerCSC(0, 0), perm)
		if err != nil {
			t.Fatal(err)
		}
		got, err := AnalyzeBlocks(q, perm)
		if err != nil {
			t.Fatal(err)
		}
		sameSymbolic(t, got, want)
	}
	for _, perm := range [][]int{make([]int, n), make([]int, n-1), append(make([]int, n-1), n)} {
		if _, err := AnalyzeBlocks(q, perm); err == nil {
			t.Errorf("perm %v accepted", head(perm))
		}
	}
	if _, err := AnalyzeBlocks(nil, nil); err == nil {
		t.Error("nil matrix accepted")
	}
	// An unsymmetric pattern: block (0, j) dropped from row 0 only.
	u := &BlockSym{N: q.N, B: q.B, RowPtr: append([]int(nil), q.RowPtr...), ColIdx: append([]int(nil), q.ColIdx...),
		Val: append([]float64(nil), q.Val...), Diag: append([]int(nil), q.Diag...)}
	if blockSymOK(u) != true {
		t.Fatal("the builder's matrix is not accepted")
	}
	for k := u.RowPtr[0]; k < u.RowPtr[1]; k++ {
		if u.ColIdx[k] != 0 {
			u.ColIdx[k] = 0 // now block (0, 0) twice
			break
		}
	}
	if blockSymOK(u) {
		t.Error("a row with a block twice passes")
	}
}

func BenchmarkAnalyzeBlocks(b *testing.B) {
	for _, side := range []int{20, 40} {
		q := gridBlockSym(side, 6)
		perm := BlockOrder(q, 0)
		b.Run(fmt.Sprintf("grid%d^3/b=6/scalar", side), func(b *testing.B) {
			for b.Loop() {
				if _, err := Analyze(q.LowerCSC(0, 0), perm); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("grid%d^3/b=6/blocks", side), func(b *testing.B) {
			for b.Loop() {
				if _, err := AnalyzeBlocks(q, perm); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// gridBlockSym is the 7-point Laplacian pattern of a side^3 grid with b x b
// blocks (diagonally dominant values).
func gridBlockSym(side, b int) *BlockSym {
	nb := side * side * side
	bb := NewBlockBuilder(nb, b)
	off := make([]float64, b*b)
	dia := make([]float64, b*b)
	for a := 0; a < b; a++ {
		off[a*b+a] = -1
		dia[a*b+a] = 7
	}
	id := func(x, y, z int) int { return (z*side+y)*side + x }
	for z := 0; z < side; z++ {
		for y := 0; y < side; y++ {
			for x := 0; x < side; x++ {
				i := id(x, y, z)
				bb.AddDiag(i, dia)
				if x+1 < side {
					bb.AddOff(i, id(x+1, y, z), off)
				}
				if y+1 < side {
					bb.AddOff(i, id(x, y+1, z), off)
				}
				if z+1 < side {
					bb.AddOff(i, id(x, y, z+1), off)
				}
			}
		}
	}
	return bb.Build()
}
