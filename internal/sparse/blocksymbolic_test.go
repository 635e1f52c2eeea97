package sparse

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
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
				got, want := analyzeBoth(t, q, perm)
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
				if err := got.Factorize(LowerCSC(q, 0.5, 0)); err != nil {
					t.Fatalf("Factorize(LowerCSC) on the block analysis: %v", err)
				}
				got.Solve(x2, rhs)
				if !slices.Equal(x1, x2) {
					t.Fatal("the solves differ after Factorize")
				}
				// whose vmap, built on demand, is the scalar analysis's.
				if want.sn != nil && !slices.Equal(got.sn.vmap, want.sn.vmap) {
					t.Fatalf("vmap differs: block %v, scalar %v", head(got.sn.vmap), head(want.sn.vmap))
				}
			})
		}
	}
}

// analyzeBoth runs the block and the scalar analysis of q under perm and
// checks that they agree (sameSymbolic).
func analyzeBoth(t *testing.T, q *BlockSym, perm []int) (got, want *Cholesky) {
	t.Helper()
	want, err := Analyze(LowerCSC(q, 0, 0), perm)
	if err != nil {
		t.Fatal(err)
	}
	got, err = AnalyzeBlocks(q, perm)
	if err != nil {
		t.Fatal(err)
	}
	sameSymbolic(t, got, want)
	return got, want
}

// ints widens the int32 row lists of the supernodes for comparison.
func ints(a []int32) []int {
	b := make([]int, len(a))
	for i, v := range a {
		b[i] = int(v)
	}
	return b
}

// scalarParents and scalarCounts are c's elimination tree and column
// counts, stored (a scalar analysis) or derived from the block ones.
func scalarParents(c *Cholesky) []int {
	p := make([]int, c.n)
	for j := range p {
		p[j] = c.parentOf(j)
	}
	return p
}

func scalarCounts(c *Cholesky) []int {
	p := make([]int, c.n)
	for j := range p {
		p[j] = c.count(j)
	}
	return p
}

func sameSymbolic(t *testing.T, got, want *Cholesky) {
	t.Helper()
	ints := []struct {
		name      string
		got, want []int
	}{
		{"perm", got.perm, want.perm}, {"pinv", ints(got.pinv), ints(want.pinv)},
		{"parent", scalarParents(got), scalarParents(want)}, {"colCnt", scalarCounts(got), scalarCounts(want)},
		{"first", got.sn.first, want.sn.first}, {"super", ints(got.sn.super), ints(want.sn.super)},
		{"rowPtr", got.sn.rowPtr, want.sn.rowPtr}, {"rows", ints(got.sn.rows), ints(want.sn.rows)},
		{"valPtr", got.sn.valPtr, want.sn.valPtr},
		{"top", got.sn.top, want.sn.top},
	}
	for _, a := range ints {
		if !slices.Equal(a.got, a.want) {
			t.Fatalf("%s differs: block %v, scalar %v", a.name, head(a.got), head(a.want))
		}
	}
	if got.nnz != want.nnz || got.aNNZ != want.aNNZ || got.hash() != want.hash() || got.sn.stored != want.sn.stored {
		t.Fatalf("nnz %d/%d, aNNZ %d/%d, hash %x/%x, stored %d/%d", got.nnz, want.nnz, got.aNNZ, want.aNNZ,
			got.hash(), want.hash(), got.sn.stored, want.sn.stored)
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
		analyzeBoth(t, q, perm)
	}
	for _, perm := range [][]int{make([]int, n), make([]int, n-1), append(make([]int, n-1), n)} {
		if _, err := AnalyzeBlocks(q, perm); err == nil {
			t.Errorf("perm %v accepted", head(perm))
		}
	}
	if _, err := AnalyzeBlocks(nil, nil); err == nil {
		t.Error("nil matrix accepted")
	}
	// Patterns the block analysis does not assume go to the scalar one:
	// unsymmetric ((0, 1) stored, (1, 0) not) and an unsorted row.
	unsym := &BlockSym{N: 2, B: 1, RowPtr: []int{0, 2, 3}, ColIdx: []int{0, 1, 1}, Val: []float64{4, 1, 4}, Diag: []int{0, 2}}
	unsorted := &BlockSym{N: 2, B: 1, RowPtr: []int{0, 2, 4}, ColIdx: []int{1, 0, 0, 1}, Val: []float64{1, 4, 1, 4}, Diag: []int{1, 3}}
	for _, m := range []*BlockSym{unsym, unsorted} {
		if blockSymOK(m) {
			t.Errorf("pattern %v accepted", m.ColIdx)
		}
		perm := []int{1, 0}
		want, errWant := Analyze(LowerCSC(m, 0, 0), perm)
		got, err := AnalyzeBlocks(m, perm)
		if (err == nil) != (errWant == nil) {
			t.Fatalf("pattern %v: AnalyzeBlocks %v, Analyze %v", m.ColIdx, err, errWant)
		}
		if err == nil {
			sameSymbolic(t, got, want)
		}
	}
	if !blockSymOK(q) {
		t.Error("the builder's matrix is refused")
	}
	// Malformed shapes are errors, not panics.
	for name, m := range map[string]*BlockSym{
		"negative order":   {N: -1, B: 1, RowPtr: []int{0}},
		"short row ptr":    {N: 2, B: 1, RowPtr: []int{0, 1}, ColIdx: []int{0}, Val: []float64{1}},
		"short values":     {N: 1, B: 2, RowPtr: []int{0, 1}, ColIdx: []int{0}, Val: []float64{1}},
		"column too large": {N: 1, B: 1, RowPtr: []int{0, 1}, ColIdx: []int{3}, Val: []float64{1}},
		"decreasing":       {N: 2, B: 1, RowPtr: []int{0, 2, 1}, ColIdx: []int{0, 1}, Val: []float64{1, 1}},
	} {
		if _, err := AnalyzeBlocks(m, nil); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestFactorizeBlocksModifiedThreads checks that the modified
// factorization's count and bits do not depend on the thread count, on a
// matrix split into several concurrent tasks, whether it succeeds or
// fails (a failure reports no count: tasks stop at arbitrary points).
func TestFactorizeBlocksModifiedThreads(t *testing.T) {
	// Four disjoint grids: independent subtrees for the parallel phase.
	g := gridBlockSym(9, 3)
	bb := NewBlockBuilder(4*g.N, g.B)
	for c := 0; c < 4; c++ {
		for i := 0; i < g.N; i++ {
			for k := g.RowPtr[i]; k < g.RowPtr[i+1]; k++ {
				if j := g.ColIdx[k]; j == i {
					bb.AddDiag(c*g.N+i, g.Block(k))
				} else if j > i {
					bb.AddOff(c*g.N+i, c*g.N+j, g.Block(k))
				}
			}
		}
	}
	q := bb.Build()
	// Two negative diagonal entries per grid: pivots of about -7 there,
	// raised under either limit below.
	for c := 0; c < 4; c++ {
		for _, i := range []int{c*g.N + 100, c*g.N + 500} {
			q.Block(q.Diag[i])[0] = -7
		}
	}
	// And in the last grid a pivot of about -50, which the smaller limit
	// refuses after other pivots have been raised.
	strong := q.Block(q.Diag[3*g.N+300])
	c, err := AnalyzeBlocks(q, NestedDissection(q, 0))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.sn.tasks) < 4 {
		t.Fatalf("%d tasks: the test needs a parallel factorization", len(c.sn.tasks))
	}
	n := q.N * q.B
	rhs := make([]float64, n)
	for i := range rhs {
		rhs[i] = float64(i%7) - 3
	}
	// The limits 1e3 and 10 make the modified factorization pass and fail.
	for _, limit := range []float64{1e3, 10} {
		strong[0] = 7
		if limit < 1e3 {
			strong[0] = -50
		}
		var raised0 int
		var err0 error
		var x0 []float64
		for _, procs := range []int{1, 2, 4} {
			old := runtime.GOMAXPROCS(procs)
			raised, err := c.FactorizeBlocksModified(q, 0, 0.5, limit)
			runtime.GOMAXPROCS(old)
			x := make([]float64, n)
			c.Solve(x, rhs)
			if procs == 1 {
				raised0, err0, x0 = raised, err, x
				switch {
				case limit == 1e3 && (err != nil || raised == 0):
					t.Fatalf("limit %g: raised %d, err %v: want a modified factor", limit, raised, err)
				case limit < 1e3 && (!IsNotPositiveDefinite(err) || raised != 0):
					t.Fatalf("limit %g: raised %d, err %v, want not positive definite and 0", limit, raised, err)
				}
				continue
			}
			if raised != raised0 || (err == nil) != (err0 == nil) {
				t.Errorf("limit %g, %d threads: raised %d err %v; 1 thread: %d, %v", limit, procs, raised, err, raised0, err0)
			}
			if err != nil && raised != 0 {
				t.Errorf("limit %g: a failure reported %d raised pivots", limit, raised)
			}
			for i := range x {
				if x[i] != x0[i] && !(math.IsNaN(x[i]) && math.IsNaN(x0[i])) {
					t.Fatalf("limit %g, %d threads: solve differs at %d", limit, procs, i)
				}
			}
		}
	}
}

func BenchmarkAnalyzeBlocks(b *testing.B) {
	for _, side := range []int{20, 40} {
		q := gridBlockSym(side, 6)
		perm := BlockOrder(q, 0)
		b.Run(fmt.Sprintf("grid%d^3/b=6/scalar", side), func(b *testing.B) {
			for b.Loop() {
				if _, err := Analyze(LowerCSC(q, 0, 0), perm); err != nil {
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

// TestFactorizeBlocksPattern checks that FactorizeBlocks refuses a
// matrix of another block pattern and the same order, whether the factor
// was analysed on blocks (the block signature is set then), on the scalar
// matrix (the first call checks the scalar hash), or has already factored
// the right pattern, and that the refusal leaves it able to factor the
// right one again.
func TestFactorizeBlocksPattern(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	q := randomBlockSym(rng, 40, 3, 0.1, 1)
	var other *BlockSym
	for other == nil || slices.Equal(other.ColIdx, q.ColIdx) {
		other = randomBlockSym(rng, 40, 3, 0.1, 1)
	}
	perm := BlockAMD(q, 0)
	block, err := AnalyzeBlocks(q, perm)
	if err != nil {
		t.Fatal(err)
	}
	scalar, err := Analyze(LowerCSC(q, 0, 0), perm)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]*Cholesky{"block analysis": block, "scalar analysis": scalar} {
		if c.sn == nil {
			t.Fatalf("%s: simplicial, the case tests the supernodal path", name)
		}
		for pass := 0; pass < 2; pass++ {
			if err := c.FactorizeBlocks(other, 1); err == nil {
				t.Errorf("%s, pass %d: FactorizeBlocks accepted another pattern", name, pass)
			}
			if err := c.FactorizeBlocks(q, 1); err != nil {
				t.Errorf("%s, pass %d: FactorizeBlocks refused the analysed pattern: %v", name, pass, err)
			}
		}
	}
}

// LastPivot is the coordinate eliminated last: lowering only its diagonal
// entry until the matrix is indefinite changes no other pivot, so the
// factorization fails there and nowhere earlier, under every ordering and
// on the block and the scalar paths.
func TestLastPivot(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	for _, tc := range []struct{ nb, b int }{{1, 3}, {12, 3}, {40, 4}, {25, 1}} {
		q := randomBlockSym(rng, tc.nb, tc.b, 0.2, 1)
		for _, perm := range [][]int{BlockAMD(q, 0), randomBlockPerm(rng, q.N, q.B), nil} {
			c, err := AnalyzeBlocks(q, perm)
			if err != nil {
				t.Fatal(err)
			}
			p := c.LastPivot()
			if p < 0 || p >= q.N*q.B {
				t.Fatalf("nb=%d b=%d: last pivot %d out of range", tc.nb, tc.b, p)
			}
			a := q.Clone()
			blk := a.Block(a.Diag[p/q.B])
			blk[(p%q.B)*q.B+p%q.B] -= 1e6 * (1 + q.MaxDiag())
			err = c.FactorizeBlocks(a, 0.5)
			var npd *NotPositiveDefiniteError
			if !errors.As(err, &npd) || npd.Column != p {
				t.Errorf("nb=%d b=%d: lowering the last pivot %d's diagonal gave %v", tc.nb, tc.b, p, err)
			}
			if err := c.FactorizeBlocks(q, 0.5); err != nil {
				t.Errorf("nb=%d b=%d: the unchanged matrix failed: %v", tc.nb, tc.b, err)
			}
		}
	}
}

// withBlockSize returns a matrix of q's block pattern with b x b blocks:
// each block of q's values, cycled, plus a dominant diagonal.
func withBlockSize(q *BlockSym, b int) *BlockSym {
	m := &BlockSym{N: q.N, B: b, RowPtr: q.RowPtr, ColIdx: q.ColIdx, Diag: q.Diag, Val: make([]float64, len(q.ColIdx)*b*b)}
	for k := range m.Val {
		m.Val[k] = q.Val[k%len(q.Val)] / 4
	}
	// Symmetric values, then a dominant diagonal.
	for i := 0; i < m.N; i++ {
		for pos := m.RowPtr[i]; pos < m.RowPtr[i+1]; pos++ {
			j := m.ColIdx[pos]
			if j > i {
				continue
			}
			blk := m.Block(pos)
			var tr []float64
			for t := m.RowPtr[j]; t < m.RowPtr[j+1]; t++ {
				if m.ColIdx[t] == i {
					tr = m.Block(t)
				}
			}
			for a := 0; a < b; a++ {
				for c := 0; c < b; c++ {
					if j == i {
						blk[a*b+c] = blk[c*b+a]
						if a == c {
							blk[a*b+a] = 10 * float64(b*(m.RowPtr[i+1]-m.RowPtr[i]))
						}
					} else {
						tr[c*b+a] = blk[a*b+c]
					}
				}
			}
		}
	}
	return m
}

// TestBlockSymbolic: one block analysis serves matrices of its pattern with
// any block size, giving AnalyzeBlocks' factor bit for bit, and refuses a
// matrix of another pattern.
func TestBlockSymbolic(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	for _, tc := range []struct{ nb, dens int }{{1, 0}, {30, 20}, {120, 4}} {
		q := randomBlockSym(rng, tc.nb, 2, float64(tc.dens)/100, 1)
		order := rng.Perm(q.N)
		sym, err := AnalyzeBlockPattern(q, expandBlockOrder(order, q.B))
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range []int{1, 3, 4, 6} {
			m := withBlockSize(q, b)
			// A copy of the pattern, so that the check compares it.
			m.RowPtr, m.ColIdx = slices.Clone(m.RowPtr), slices.Clone(m.ColIdx)
			got, err := sym.Analyze(m)
			if err != nil {
				t.Fatal(err)
			}
			want, err := AnalyzeBlocks(m, expandBlockOrder(order, b))
			if err != nil {
				t.Fatal(err)
			}
			sameSymbolic(t, got, want)
			n := m.N * b
			rhs := make([]float64, n)
			for i := range rhs {
				rhs[i] = rng.NormFloat64()
			}
			x1, x2 := make([]float64, n), make([]float64, n)
			for k, c := range []*Cholesky{want, got} {
				if err := c.FactorizeBlocks(m, 0); err != nil {
					t.Fatal(err)
				}
				c.Solve([][]float64{x1, x2}[k], rhs)
			}
			if !slices.Equal(x1, x2) {
				t.Fatalf("nb %d, b %d: the solves differ", tc.nb, b)
			}
		}
		if tc.nb > 1 {
			other := randomBlockSym(rng, tc.nb, 2, 0.5, 1)
			if _, err := sym.Analyze(other); err == nil {
				t.Error("Analyze took a matrix of another pattern")
			}
		}
	}
}

// TestTrailingClique checks TrailingClique against the pattern of L worked
// out by dense symbolic elimination, and that reordering a trailing clique
// leaves the factor's size unchanged (what the certificate relies on when
// it moves a light pose to the end).
func TestTrailingClique(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	moves := 0
	for trial := 0; trial < 40; trial++ {
		nb, b := 3+rng.IntN(12), 1+rng.IntN(3)
		m := randomBlockSym(rng, nb, b, 0.15+0.5*rng.Float64(), 1)
		perm := BlockOrder(m, 0)
		c, err := AnalyzeBlocks(m, perm)
		if err != nil {
			t.Fatal(err)
		}
		n := m.Dim()
		// Dense symbolic elimination in the factor's pivot order, on the
		// block pattern (the factor stores whole blocks).
		nz := make([][]bool, n)
		for i := range nz {
			nz[i] = make([]bool, n)
		}
		for i := 0; i < n; i++ {
			for j := 0; j < n; j++ {
				if m.Find(c.Pivot(i)/b, c.Pivot(j)/b) >= 0 || i == j { // blocks are stored dense
					nz[i][j] = true
				}
			}
		}
		for k := 0; k < n; k++ {
			for i := k + 1; i < n; i++ {
				for j := k + 1; j < n; j++ {
					if nz[i][k] && nz[j][k] {
						nz[i][j] = true
					}
				}
			}
		}
		want := 0
		for j := n - 1; j >= 0; j-- {
			dense := true
			for i := j + 1; i < n; i++ {
				dense = dense && nz[i][j]
			}
			if !dense {
				break
			}
			want++
		}
		if got := c.TrailingClique(); got != want {
			t.Fatalf("trial %d (%d blocks of %d): TrailingClique %d, dense elimination %d", trial, nb, b, got, want)
		}
		// Move the first whole block of the clique to the end.
		for k := n - want; k+b <= n; k++ {
			if c.Pivot(k)%b != 0 || k == n-b {
				continue
			}
			blk := c.Pivot(k) / b
			var moved []int
			for _, p := range c.Perm() {
				if p/b != blk {
					moved = append(moved, p)
				}
			}
			for a := 0; a < b; a++ {
				moved = append(moved, blk*b+a)
			}
			c2, err := AnalyzeBlocks(m, moved)
			if err != nil {
				t.Fatal(err)
			}
			if c2.NNZ() != c.NNZ() || c2.LastPivot()/b != blk {
				t.Errorf("trial %d: moving block %d of the trailing clique last: nnz %d -> %d, last pivot in block %d",
					trial, blk, c.NNZ(), c2.NNZ(), c2.LastPivot()/b)
			}
			moves++
			break
		}
	}
	if moves == 0 {
		t.Error("no trial had a trailing clique of two blocks or more to reorder")
	}
}

// TestBlockSymbolicAnalyzeAgain checks that a second Analyze of one block
// size (a copy sharing the first's structure: sameAnalysis) factors and
// solves bit for bit as a fresh AnalyzeBlocks does, and that factoring the
// analyses in turn, with different values, leaves each its own factor:
// the structure is shared, the values and the work space are not.
func TestBlockSymbolicAnalyzeAgain(t *testing.T) {
	rng := rand.New(rand.NewPCG(33, 34))
	for _, tc := range []struct{ nb, dens int }{{1, 0}, {40, 15}, {150, 4}} {
		q := randomBlockSym(rng, tc.nb, 3, float64(tc.dens)/100, 1)
		order := expandBlockOrder(rng.Perm(q.N), q.B)
		sym, err := AnalyzeBlockPattern(q, order)
		if err != nil {
			t.Fatal(err)
		}
		// Two matrices of q's pattern with other values.
		a, b := *q, *q
		a.Val, b.Val = slices.Clone(q.Val), slices.Clone(q.Val)
		addDiag(&b, 2)
		var got []*Cholesky
		for range 3 {
			c, err := sym.Analyze(&a)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, c)
		}
		// The later analyses are the first's, not made again: they
		// share its structure.
		for k := 1; k < len(got); k++ {
			if &got[k].sn.first[0] != &got[0].sn.first[0] || &got[k].pinv[0] != &got[0].pinv[0] {
				t.Fatalf("nb %d: analysis %d was made again instead of shared", tc.nb, k)
			}
		}
		fresh := func(m *BlockSym) *Cholesky {
			c, err := AnalyzeBlocks(m, order)
			if err != nil {
				t.Fatal(err)
			}
			sameSymbolic(t, got[1], c)
			if err := c.FactorizeBlocks(m, 0); err != nil {
				t.Fatal(err)
			}
			return c
		}
		wantA, wantB := fresh(&a), fresh(&b)
		n := q.N * q.B
		rhs := make([]float64, n)
		for i := range rhs {
			rhs[i] = rng.NormFloat64()
		}
		solve := func(c *Cholesky) []float64 {
			x := make([]float64, n)
			c.Solve(x, rhs)
			return x
		}
		// got[0] and got[2] factor a, got[1] b, interleaved; each solve
		// must be its own matrix's, bit for bit.
		for k, m := range []*BlockSym{&a, &b, &a} {
			if err := got[k].FactorizeBlocks(m, 0); err != nil {
				t.Fatal(err)
			}
		}
		for k, want := range []*Cholesky{wantA, wantB, wantA} {
			if !slices.Equal(solve(got[k]), solve(want)) {
				t.Fatalf("nb %d: analysis %d's solve differs from a fresh analysis's", tc.nb, k)
			}
		}
		// A released factor's storage does not reach its sibling.
		got[1].Release()
		if err := got[2].FactorizeBlocks(&b, 0); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(solve(got[0]), solve(wantA)) || !slices.Equal(solve(got[2]), solve(wantB)) {
			t.Fatalf("nb %d: refactoring one analysis changed another's factor", tc.nb)
		}
	}
}

// addDiag adds v to every diagonal entry of m.
func addDiag(m *BlockSym, v float64) {
	for i := 0; i < m.N; i++ {
		blk := m.Block(m.Diag[i])
		for a := 0; a < m.B; a++ {
			blk[a*m.B+a] += v
		}
	}
}

// TestAnalyzeOrderLimit: a matrix whose order is beyond maxOrder (the
// four-byte row maps of the factorization) is refused by every analysis
// with an error that says so, and one at the limit is analysed.
func TestAnalyzeOrderLimit(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	q := randomBlockSym(rng, 10, 3, 0.3, 1)
	order := rng.Perm(q.N)
	perm := expandBlockOrder(order, q.B)
	sym, err := AnalyzeBlockPattern(q, perm)
	if err != nil {
		t.Fatal(err)
	}
	defer func(m int) { maxOrder = m }(maxOrder)
	maxOrder = q.N * q.B
	if _, err := AnalyzeBlocks(q, perm); err != nil {
		t.Fatalf("at the limit: %v", err)
	}
	maxOrder = q.N*q.B - 1
	for name, analyse := range map[string]func() (*Cholesky, error){
		"AnalyzeBlocks":          func() (*Cholesky, error) { return AnalyzeBlocks(q, perm) },
		"AnalyzeBlocks, no perm": func() (*Cholesky, error) { return AnalyzeBlocks(q, nil) },
		"BlockSymbolic.Analyze":  func() (*Cholesky, error) { return sym.Analyze(q) },
		"Analyze":                func() (*Cholesky, error) { return Analyze(LowerCSC(q, 0, 0), perm) },
		"AnalyzeSimplicial":      func() (*Cholesky, error) { return AnalyzeSimplicial(LowerCSC(q, 0, 0), nil) },
	} {
		c, err := analyse()
		if err == nil || c != nil || !strings.Contains(err.Error(), "beyond the factorization's limit") {
			t.Errorf("%s: got %v, %v; want the order limit's error", name, c, err)
		}
	}
}
