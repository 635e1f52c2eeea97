package sparse_test

import (
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
)

// blockPerm reports whether p is a scalar permutation of n blocks of size
// b that keeps every block's variables together and in order.
func blockPerm(p []int, n, b int) bool {
	if !isPerm(p, n*b) {
		return false
	}
	for k := 0; k < n; k++ {
		i := p[k*b] / b
		for c := 0; c < b; c++ {
			if p[k*b+c] != i*b+c {
				return false
			}
		}
	}
	return true
}

func TestNestedDissectionPermutation(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	type order struct {
		name string
		f    func(q *sparse.BlockSym, drop int) []int
	}
	orders := []order{
		{"ND", sparse.NestedDissection},
		{"BlockOrder", sparse.BlockOrder},
	}
	for _, leaf := range []int{1, 2, 16} {
		orders = append(orders, order{"ND-leaf", func(q *sparse.BlockSym, drop int) []int {
			return sparse.NestedDissectionLeaf(q, drop, leaf)
		}})
	}
	cases := []struct {
		nb, b int
		dens  float64
		ncomp int
	}{
		{0, 3, 0, 1},  // empty
		{1, 4, 0, 1},  // one block
		{2, 3, 1, 1},  // one edge
		{40, 1, 0, 1}, // no edges: 40 components
		{60, 3, 0.05, 1},
		{90, 4, 0.04, 3}, // three components
		{300, 2, 0.01, 1},
		{1500, 1, 0.002, 2}, // above the default leaf size
	}
	for _, c := range cases {
		q := randBlockSym(rng, c.nb, c.b, c.dens, c.ncomp)
		for _, o := range orders {
			for _, drop := range []int{0, 1, 5, c.nb} {
				if drop > c.nb {
					continue
				}
				p := o.f(q, drop)
				if !blockPerm(p, c.nb-drop, c.b) {
					t.Errorf("%s of %+v, drop %d: not a block permutation", o.name, c, drop)
				}
				if !slices.Equal(p, o.f(q, drop)) {
					t.Errorf("%s of %+v, drop %d: differs between runs", o.name, c, drop)
				}
			}
		}
	}
}

// denseLower returns the symmetric matrix whose lower triangle a holds.
func denseLower(a *sparse.CSC) *mat.SymDense {
	d := mat.NewSymDense(a.N, nil)
	for j := 0; j < a.N; j++ {
		for p := a.ColPtr[j]; p < a.ColPtr[j+1]; p++ {
			d.SetSym(a.RowIdx[p], j, a.Val[p])
		}
	}
	return d
}

// TestNestedDissectionSolves factors Q + I of random pose graphs (and Q
// without its first block, as the chordal initialization does) under
// nested dissection orderings that dissect down to tiny leaves, and checks
// the solution against gonum's dense Cholesky.
func TestNestedDissectionSolves(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, d := range []int{2, 3} {
		for _, n := range []int{30, 120} {
			g, _ := noiseFreeGraph(rng, n, d, n/3, 1e2, 1)
			q := g.Laplacian(posegraph.Poses)
			for _, drop := range []int{0, 1} {
				for _, leaf := range []int{4, 16} {
					a := sparse.LowerCSC(q, 1, drop)
					perm := sparse.NestedDissectionLeaf(q, drop, leaf)
					ch, err := sparse.NewCholeskyPerm(a, perm)
					if err != nil {
						t.Fatalf("d=%d n=%d drop=%d leaf=%d: %v", d, n, drop, leaf, err)
					}
					rhs := randVec(rng, a.N)
					x := make([]float64, a.N)
					ch.Solve(x, rhs)
					var dc mat.Cholesky
					if !dc.Factorize(denseLower(a)) {
						t.Fatal("dense Cholesky failed")
					}
					want := mat.NewVecDense(a.N, nil)
					if err := dc.SolveVecTo(want, mat.NewVecDense(a.N, rhs)); err != nil {
						t.Fatal(err)
					}
					diff := 0.0
					for i := range x {
						diff = math.Max(diff, math.Abs(x[i]-want.AtVec(i)))
					}
					if scale := mat.Norm(want, math.Inf(1)); diff > 1e-9*scale {
						t.Errorf("d=%d n=%d drop=%d leaf=%d: solution differs from dense by %g (scale %g)", d, n, drop, leaf, diff, scale)
					}
				}
			}
		}
	}
}

// TestBlockFactorCost checks the symbolic block count against the scalar
// symbolic analysis, for several orderings, block sizes and drops.
func TestBlockFactorCost(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	for _, c := range []struct {
		nb, b int
		dens  float64
		ncomp int
	}{{1, 3, 0, 1}, {50, 1, 0.1, 1}, {80, 3, 0.05, 2}, {200, 4, 0.015, 1}} {
		q := randBlockSym(rng, c.nb, c.b, c.dens, c.ncomp)
		for _, drop := range []int{0, 1} {
			nb := c.nb - drop
			rev := make([]int, 0, nb)
			for i := nb - 1; i >= 0; i-- {
				rev = append(rev, i)
			}
			revPerm := make([]int, 0, nb*c.b)
			for _, i := range rev {
				for k := 0; k < c.b; k++ {
					revPerm = append(revPerm, i*c.b+k)
				}
			}
			for _, perm := range [][]int{sparse.BlockAMD(q, drop), sparse.NestedDissectionLeaf(q, drop, 8), revPerm} {
				a := sparse.LowerCSC(q, 1, drop)
				ch, err := sparse.Analyze(a, perm)
				if err != nil {
					t.Fatal(err)
				}
				nnz, flops := sparse.BlockFactorCost(q, drop, perm)
				if nnz != ch.NNZ() || math.Abs(flops-ch.Flops()) > 1e-12*ch.Flops() {
					t.Errorf("%+v drop %d: BlockFactorCost %d, %g; Analyze %d, %g", c, drop, nnz, flops, ch.NNZ(), ch.Flops())
				}
			}
		}
	}
}

// lattice returns the 7-point Laplacian (plus 7 I) of a k x k x k lattice
// as a BlockSym of b x b blocks.
func lattice(k, b int) *sparse.BlockSym {
	bb := sparse.NewBlockBuilder(k*k*k, b)
	blk := make([]float64, b*b)
	set := func(v float64) {
		for a := range blk {
			blk[a] = 0
		}
		for a := range b {
			blk[a*b+a] = v
		}
	}
	for i := range k * k * k {
		set(7)
		bb.AddDiag(i, blk)
		set(-1)
		x, y := i%k, (i/k)%k
		if x+1 < k {
			bb.AddOff(i, i+1, blk)
		}
		if y+1 < k {
			bb.AddOff(i, i+k, blk)
		}
		if i+k*k < k*k*k {
			bb.AddOff(i, i+k*k, blk)
		}
	}
	return bb.Build()
}

// TestBlockOrder checks that BlockOrder returns the ordering of BlockAMD and
// NestedDissection whose factor costs less (flops plus 100 per nonzero),
// on lattices and on a chain, with its gate at zero (BlockOrderFrom), and
// that BlockOrder itself keeps BlockAMD below the gate. On the 20^3 lattice
// dissection must win, as it does on 3-D grids of that size (the classic
// n^2 against minimum degree's worse growth).
func TestBlockOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	chain, _ := noiseFreeGraph(rng, 3000, 2, 0, 10, 1)
	for _, c := range []struct {
		name   string
		q      *sparse.BlockSym
		wantND bool
	}{
		{"lattice 20^3", lattice(20, 1), true},
		{"lattice 11^3, blocks 3", lattice(11, 3), false},
		{"chain", chain.Laplacian(posegraph.Rotations), false},
	} {
		amd, nd := sparse.BlockAMD(c.q, 0), sparse.NestedDissection(c.q, 0)
		na, fa := sparse.BlockFactorCost(c.q, 0, amd)
		nn, fn := sparse.BlockFactorCost(c.q, 0, nd)
		got := sparse.BlockOrderFrom(c.q, 0, 0)
		t.Logf("%s: BlockAMD %d nonzeros, %.3g flops; ND %d, %.3g", c.name, na, fa, nn, fn)
		want := amd
		if fn+100*float64(nn) < fa+100*float64(na) {
			want = nd
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: BlockOrder did not return the cheaper ordering", c.name)
		}
		if c.wantND && !slices.Equal(got, nd) {
			t.Errorf("%s: minimum degree chosen over dissection", c.name)
		}
		if gated := sparse.BlockOrder(c.q, 0); fa+100*float64(na) < sparse.NDWorthCost && !slices.Equal(gated, amd) {
			t.Errorf("%s: factor cost %.3g is below the gate, but BlockOrder did not keep BlockAMD", c.name, fa+100*float64(na))
		}
	}
}

// TestNestedDissectionParallel checks that dissecting halves on other
// goroutines gives the same order as one goroutine, on a lattice large
// enough for both halves of its first separator to be dissected in
// parallel.
func TestNestedDissectionParallel(t *testing.T) {
	if testing.Short() {
		t.Skip("a 46656-node lattice")
	}
	q := lattice(36, 1)
	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	p1 := sparse.NestedDissection(q, 0)
	runtime.GOMAXPROCS(4)
	p4 := sparse.NestedDissection(q, 0)
	if !blockPerm(p4, q.N, 1) || !slices.Equal(p1, p4) {
		t.Error("the order depends on the number of goroutines")
	}
}
