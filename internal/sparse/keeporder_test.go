package sparse

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// growBlockSym returns q (nb blocks) grown by extra new blocks, each
// linked to the block before it and to a random earlier one, and by
// closures new edges between random old blocks; touched marks the old
// blocks that a new edge reaches.
func growBlockSym(rng *rand.Rand, q *BlockSym, extra, closures int) (*BlockSym, []bool) {
	nb, b := q.N, q.B
	n := nb + extra
	bb := NewBlockBuilder(n, b)
	blk := make([]float64, b*b)
	deg := make([]float64, n)
	touched := make([]bool, n)
	have := make(map[[2]int]bool)
	add := func(i, j int) {
		i, j = min(i, j), max(i, j)
		if i == j || have[[2]int{i, j}] {
			return
		}
		have[[2]int{i, j}] = true
		for k := range blk {
			blk[k] = rng.NormFloat64()
		}
		bb.AddOff(i, j, blk)
		deg[i]++
		deg[j]++
	}
	for i := 0; i < nb; i++ {
		for k := q.RowPtr[i]; k < q.RowPtr[i+1]; k++ {
			if j := q.ColIdx[k]; j > i {
				add(i, j)
			}
		}
	}
	for c := 0; c < closures && nb > 1; c++ {
		i, j := rng.IntN(nb), rng.IntN(nb)
		if i != j && !have[[2]int{min(i, j), max(i, j)}] {
			touched[i], touched[j] = true, true
			add(i, j)
		}
	}
	for v := nb; v < n; v++ {
		add(v-1, v)
		if v-1 < nb {
			touched[v-1] = true
		}
		if u := rng.IntN(v); u != v-1 {
			add(u, v)
			if u < nb {
				touched[u] = true
			}
		}
	}
	for i := 0; i < n; i++ {
		clear(blk)
		for a := 0; a < b; a++ {
			blk[a*b+a] = 4*float64(b)*(deg[i]+1) + rng.Float64()
		}
		bb.AddDiag(i, blk)
	}
	return bb.Build(), touched
}

// blockColumns returns the block structure of L's column of each block
// (the blocks below it, by block id), from the analysis s.
func blockColumns(s *BlockSymbolic) map[int][]int {
	cols := make(map[int][]int, len(s.order))
	for k, v := range s.order {
		var c []int
		for _, i := range s.sidx[s.sptr[k]:s.sptr[k+1]] {
			c = append(c, s.order[i])
		}
		slices.Sort(c)
		cols[v] = c
	}
	return cols
}

// TestReorderBlocks grows random block graphs step by step (new blocks,
// new edges between old ones, steps that add only closures) and checks
// ReorderBlocks' order at each step: a permutation that keeps blocks
// together; the blocks it keeps come first, in the old order, and have
// the columns of L they had (block structure by block id), which is what
// makes the kept order's analysis and factor reusable; everything else is
// reordered. The factor in the kept order is checked against a dense
// Cholesky.
func TestReorderBlocks(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 29))
	keptAll, blocksAll := 0, 0
	for trial := 0; trial < 20; trial++ {
		b := 1 + trial%4
		q := randomBlockSym(rng, 6+rng.IntN(10), b, 0.3, 1)
		sym, err := AnalyzeBlockPattern(q, BlockOrder(q, 0))
		if err != nil {
			t.Fatal(err)
		}
		for step := 0; step < 6; step++ {
			extra := rng.IntN(6)
			if step == 3 {
				extra = 0 // closures only
			}
			grown, touched := growBlockSym(rng, q, extra, rng.IntN(3))
			prev, parent := sym.Tree()
			prev, parent = slices.Clone(prev), slices.Clone(parent)
			perm, reordered, err := ReorderBlocks(grown, prev, parent, touched)
			if err != nil {
				t.Fatal(err)
			}
			if !blockPermOK(perm, b, grown.N) {
				t.Fatalf("trial %d step %d: not a block permutation: %v", trial, step, perm)
			}
			kept := grown.N - reordered
			keptAll += kept
			blocksAll += grown.N
			order := make([]int, grown.N)
			for k := range order {
				order[k] = perm[k*b] / b
			}
			// The kept blocks: those of prev not affected, in prev's order.
			affected := make([]bool, len(prev))
			for k, v := range prev {
				if touched[v] {
					for a := k; a != -1 && !affected[a]; a = parent[a] {
						affected[a] = true
					}
				}
			}
			var want []int
			for k, v := range prev {
				if !affected[k] {
					want = append(want, v)
				}
			}
			if !slices.Equal(order[:kept], want) {
				t.Fatalf("trial %d step %d: kept blocks %v, want %v", trial, step, order[:kept], want)
			}
			next, err := AnalyzeBlockPattern(grown, perm)
			if err != nil {
				t.Fatal(err)
			}
			before, after := blockColumns(sym), blockColumns(next)
			for _, v := range want {
				if !slices.Equal(before[v], after[v]) {
					t.Fatalf("trial %d step %d: kept block %d's column of L changed: %v to %v", trial, step, v, before[v], after[v])
				}
			}
			c, err := NewCholeskyPerm(LowerCSC(grown, 0, 0), perm)
			if err != nil {
				t.Fatal(err)
			}
			checkFactor(t, c, grown)
			q, sym = grown, next
		}
	}
	// The cases must keep something for the checks to mean anything.
	if keptAll < blocksAll/10 {
		t.Fatalf("only %d of %d blocks kept their place", keptAll, blocksAll)
	}
	t.Logf("%d of %d blocks kept their place", keptAll, blocksAll)
}

// checkFactor compares c's solution of a random system with the dense
// oracle's (gonum's Cholesky).
func checkFactor(t *testing.T, c *Cholesky, q *BlockSym) {
	t.Helper()
	a := LowerCSC(q, 0, 0)
	rng := rand.New(rand.NewPCG(1, 2))
	rhs := make([]float64, a.N)
	for i := range rhs {
		rhs[i] = rng.NormFloat64()
	}
	x := make([]float64, a.N)
	c.Solve(x, rhs)
	want := denseSolve(t, a, rhs)
	for i := range x {
		if d := x[i] - want[i]; d > 1e-9 || d < -1e-9 {
			t.Fatalf("x[%d] = %g, dense %g", i, x[i], want[i])
		}
	}
}

// TestReorderBlocksErrors checks that inconsistent inputs are refused.
func TestReorderBlocksErrors(t *testing.T) {
	q := randomBlockSym(rand.New(rand.NewPCG(3, 4)), 5, 2, 0.5, 1)
	for _, tc := range []struct {
		name         string
		prev, parent []int
		touched      []bool
	}{
		{"repeated block", []int{0, 0}, []int{1, -1}, nil},
		{"block out of range", []int{0, 7}, []int{1, -1}, nil},
		{"parent below", []int{0, 1}, []int{-1, 0}, nil},
		{"parent lengths", []int{0, 1}, []int{1}, nil},
		{"touched length", []int{0, 1}, []int{1, -1}, []bool{true}},
		{"too many blocks", []int{0, 1, 2, 3, 4, 5}, []int{-1, -1, -1, -1, -1, -1}, nil},
	} {
		if _, _, err := ReorderBlocks(q, tc.prev, tc.parent, tc.touched); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
	if _, _, err := ReorderBlocks(nil, nil, nil, nil); err == nil {
		t.Error("nil matrix: no error")
	}
}

// denseSolve solves a x = rhs (a's lower triangle) by gonum's dense
// Cholesky.
func denseSolve(t *testing.T, a *CSC, rhs []float64) []float64 {
	t.Helper()
	n := a.N
	ad := mat.NewSymDense(n, nil)
	for j := 0; j < n; j++ {
		for p := a.ColPtr[j]; p < a.ColPtr[j+1]; p++ {
			ad.SetSym(a.RowIdx[p], j, a.Val[p])
		}
	}
	var ch mat.Cholesky
	if !ch.Factorize(ad) {
		t.Fatal("dense Cholesky failed")
	}
	var x mat.VecDense
	if err := ch.SolveVecTo(&x, mat.NewVecDense(n, rhs)); err != nil {
		t.Fatal(err)
	}
	return x.RawVector().Data
}

// latticeRows is the w x rows grid graph with unit blocks, rows added in
// order as a trajectory sweeping a floor would add them, and the blocks a
// new row touches in the grid before it.
func latticeRows(w, rows int) (*BlockSym, []bool) {
	n := w * rows
	bb := NewBlockBuilder(n, 1)
	deg := make([]float64, n)
	touched := make([]bool, n)
	for r := 0; r < rows; r++ {
		for c := 0; c < w; c++ {
			v := r*w + c
			if c > 0 {
				bb.AddOff(v-1, v, []float64{-1})
				deg[v-1]++
				deg[v]++
			}
			if r > 0 {
				bb.AddOff(v-w, v, []float64{-1})
				deg[v-w]++
				deg[v]++
				if r == rows-1 {
					touched[v-w] = true
				}
			}
		}
	}
	for i := range deg {
		bb.AddDiag(i, []float64{deg[i] + 1})
	}
	return bb.Build(), touched
}

// TestReorderBlocksFill: on a grid that grows by rows, the kept order,
// re-ordered only where each row joins it, costs about what a fresh
// minimum-degree order does (BlockOrder's model). The kept subtrees enter
// minimum degree as elements; without them the reordered top fills in as
// if the subtrees were absent, and the cost was many times a fresh
// order's on the benchmark graphs' replays.
func TestReorderBlocksFill(t *testing.T) {
	const w = 12
	q, _ := latticeRows(w, 2)
	sym, err := AnalyzeBlockPattern(q, BlockOrder(q, 0))
	if err != nil {
		t.Fatal(err)
	}
	worst := 0.0
	for rows := 3; rows <= 30; rows++ {
		grown, touched := latticeRows(w, rows)
		prev, parent := sym.Tree()
		perm, _, err := ReorderBlocks(grown, slices.Clone(prev), slices.Clone(parent), touched)
		if err != nil {
			t.Fatal(err)
		}
		nk, fk := BlockFactorCost(grown, 0, perm)
		nf, ff := BlockFactorCost(grown, 0, BlockOrder(grown, 0))
		ratio := (fk + 100*float64(nk)) / (ff + 100*float64(nf))
		worst = math.Max(worst, ratio)
		if sym, err = AnalyzeBlockPattern(grown, perm); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("kept order's cost over a fresh order's: at worst %.3g", worst)
	if worst > 1.5 {
		t.Fatalf("the kept order costs up to %.3g times a fresh order's", worst)
	}
}
