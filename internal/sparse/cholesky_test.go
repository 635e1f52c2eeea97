package sparse_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
)

// factorer builds a Cholesky factor; the suite runs once per ordering.
type factorer struct {
	name string
	// q is the block matrix a came from (a = sparse.LowerCSC(q, shift, 0)).
	factor func(a *sparse.CSC, q *sparse.BlockSym) (*sparse.Cholesky, error)
}

func identityPerm(n int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	return p
}

var factorers = []factorer{
	{"AMD", func(a *sparse.CSC, _ *sparse.BlockSym) (*sparse.Cholesky, error) { return sparse.NewCholesky(a) }},
	{"BlockAMD", func(a *sparse.CSC, q *sparse.BlockSym) (*sparse.Cholesky, error) {
		return sparse.NewCholeskyPerm(a, sparse.BlockAMD(q, 0))
	}},
	// Analysed on q's unshifted pattern, factored straight from the blocks
	// with the shift that a carries.
	{"BlockAMD-FactorizeBlocks", func(a *sparse.CSC, q *sparse.BlockSym) (*sparse.Cholesky, error) {
		c, err := sparse.Analyze(sparse.LowerCSC(q, 0, 0), sparse.BlockAMD(q, 0))
		if err != nil {
			return nil, err
		}
		shift := a.Val[a.ColPtr[0]] - q.Block(q.RowPtr[0] + diagSlot(q, 0))[0]
		if err := c.FactorizeBlocks(q, shift); err != nil {
			return nil, err
		}
		return c, nil
	}},
	{"natural", func(a *sparse.CSC, _ *sparse.BlockSym) (*sparse.Cholesky, error) {
		return sparse.NewCholeskyPerm(a, identityPerm(a.N))
	}},
	{"simplicial-AMD", func(a *sparse.CSC, _ *sparse.BlockSym) (*sparse.Cholesky, error) {
		return factorWith(sparse.AnalyzeSimplicial(a, nil))(a)
	}},
	{"simplicial-natural", func(a *sparse.CSC, _ *sparse.BlockSym) (*sparse.Cholesky, error) {
		return factorWith(sparse.AnalyzeSimplicial(a, identityPerm(a.N)))(a)
	}},
}

// diagSlot is the position of block (i, i) within block row i of q.
func diagSlot(q *sparse.BlockSym, i int) int {
	for k := q.RowPtr[i]; k < q.RowPtr[i+1]; k++ {
		if q.ColIdx[k] == i {
			return k - q.RowPtr[i]
		}
	}
	panic("no diagonal block")
}

func factorWith(c *sparse.Cholesky, err error) func(a *sparse.CSC) (*sparse.Cholesky, error) {
	return func(a *sparse.CSC) (*sparse.Cholesky, error) {
		if err != nil {
			return nil, err
		}
		if err := c.Factorize(a); err != nil {
			return nil, err
		}
		return c, nil
	}
}

type cholCase struct {
	nb, b, ncomp int
	dens         float64
}

var cholCases = []cholCase{
	{1, 1, 1, 0}, {1, 4, 1, 0}, {2, 3, 1, 1}, {5, 2, 2, 0.5}, {12, 1, 1, 0.3},
	{20, 3, 1, 0.15}, {30, 4, 3, 0.2}, {50, 2, 1, 0.05}, {80, 3, 2, 0.04}, {100, 1, 4, 0.05},
}

// shiftedPD returns q and the shift that puts the smallest eigenvalue of
// q + shift I at margin*||q||, with ||q|| the dense infinity norm.
func shiftedPD(t *testing.T, rng *rand.Rand, c cholCase, margin float64) (*sparse.BlockSym, float64, float64) {
	q := randBlockSym(rng, c.nb, c.b, c.dens, c.ncomp)
	d := denseOf(q)
	ev, _ := eigenvalues(t, d, false)
	anorm := normInf(d)
	return q, -ev[0] + margin*anorm, anorm
}

func TestCholeskySolve(t *testing.T) {
	for _, f := range factorers {
		rng := rand.New(rand.NewPCG(1, 2))
		for ci, c := range cholCases {
			t.Run(fmt.Sprintf("%s/%d", f.name, ci), func(t *testing.T) {
				q, shift, _ := shiftedPD(t, rng, c, 1e-3)
				a := sparse.LowerCSC(q, shift, 0)
				ch, err := f.factor(a, q)
				if err != nil {
					t.Fatalf("factor: %v", err)
				}
				n := a.N
				// Oracle: gonum's dense Cholesky.
				ad := denseOf(a)
				var dc mat.Cholesky
				if !dc.Factorize(ad) {
					t.Fatal("dense Cholesky failed on a PD matrix")
				}
				anorm := normInf(ad)
				b := randVec(rng, n)
				x := make([]float64, n)
				ch.Solve(x, b)
				if r := residual(a, anorm, x, b); r > 1e-12 {
					t.Errorf("residual %g", r)
				}
				var xd mat.VecDense
				if err := dc.SolveVecTo(&xd, mat.NewVecDense(n, b)); err != nil {
					t.Fatal(err)
				}
				cond := dc.Cond()
				for i := range x {
					if math.Abs(x[i]-xd.AtVec(i)) > 1e-13*cond*(1+vnorm(x)) {
						t.Fatalf("x[%d] = %g, dense %g (cond %g)", i, x[i], xd.AtVec(i), cond)
					}
				}
				// Aliasing x and b.
				y := append([]float64(nil), b...)
				ch.Solve(y, y)
				for i := range y {
					if y[i] != x[i] {
						t.Fatalf("aliased Solve differs at %d", i)
					}
				}
				// SolveMany against column-by-column Solve.
				// More right-hand sides than SolveMany groups together,
				// and aliased.
				const nrhs = 11
				bm := randVec(rng, n*nrhs)
				xm := make([]float64, n*nrhs)
				ch.SolveMany(xm, bm, nrhs)
				for k := 0; k < nrhs; k++ {
					if r := residual(a, anorm, xm[k*n:(k+1)*n], bm[k*n:(k+1)*n]); r > 1e-12 {
						t.Errorf("SolveMany column %d residual %g", k, r)
					}
					ch.Solve(y, bm[k*n:(k+1)*n])
					for i := range y {
						if math.Abs(y[i]-xm[k*n+i]) > 1e-12*(1+math.Abs(y[i])) {
							t.Fatalf("SolveMany column %d differs from Solve at %d", k, i)
						}
					}
				}
				ch.SolveMany(bm, bm, nrhs)
				for i := range bm {
					if bm[i] != xm[i] {
						t.Fatalf("aliased SolveMany differs at %d", i)
					}
				}
				// The factor's nonzeros: L L^T = P A P^T implies nnz(L) >= nnz(lower A).
				if ch.NNZ() < a.ColPtr[n] {
					t.Errorf("NNZ %d below nnz(A) %d", ch.NNZ(), a.ColPtr[n])
				}
				// Refactorization with new values on the same pattern.
				a2 := sparse.LowerCSC(q, 2*shift+1, 0)
				if err := ch.Factorize(a2); err != nil {
					t.Fatalf("Factorize: %v", err)
				}
				ch.Solve(x, b)
				if r := residual(a2, normInf(denseOf(a2)), x, b); r > 1e-12 {
					t.Errorf("refactorized residual %g", r)
				}
			})
		}
	}
}

func TestCholeskyNotPositiveDefinite(t *testing.T) {
	for _, f := range factorers {
		rng := rand.New(rand.NewPCG(3, 4))
		for ci, c := range cholCases {
			t.Run(fmt.Sprintf("%s/%d", f.name, ci), func(t *testing.T) {
				// Indefinite by a tiny margin: lambda_min = -1e-9 ||A||.
				q, shift, _ := shiftedPD(t, rng, c, -1e-9)
				a := sparse.LowerCSC(q, shift, 0)
				_, err := f.factor(a, q)
				var npd *sparse.NotPositiveDefiniteError
				if !errors.As(err, &npd) {
					t.Fatalf("want NotPositiveDefiniteError, got %v", err)
				}
				if npd.Column < 0 || npd.Column >= a.N || npd.Pivot > 0 {
					t.Errorf("bad error contents %+v", npd)
				}
				// Strongly indefinite too.
				_, err = f.factor(sparse.LowerCSC(q, shift-1, 0), q)
				if !sparse.IsNotPositiveDefinite(err) {
					t.Fatalf("want NotPositiveDefiniteError, got %v", err)
				}
				// A failed refactorization leaves no usable factor, and
				// a good one afterwards restores it.
				good := sparse.LowerCSC(q, shift+1, 0)
				ch, err := f.factor(good, q)
				if err != nil {
					t.Fatal(err)
				}
				if err := ch.Factorize(a); !sparse.IsNotPositiveDefinite(err) {
					t.Fatalf("refactor of indefinite: got %v", err)
				}
				x := make([]float64, a.N)
				b := randVec(rng, a.N)
				ch.Solve(x, b)
				if !math.IsNaN(x[0]) {
					t.Error("Solve after a failed Factorize returned numbers")
				}
				if err := ch.Factorize(good); err != nil {
					t.Fatal(err)
				}
				ch.Solve(x, b)
				if r := residual(good, normInf(denseOf(good)), x, b); r > 1e-12 {
					t.Errorf("residual after recovery %g", r)
				}
			})
		}
	}
}

func TestCholeskyNaN(t *testing.T) {
	a := gridCSC(4, 2)
	ch, err := sparse.NewCholesky(a)
	if err != nil {
		t.Fatal(err)
	}
	bad := *a
	bad.Val = append([]float64(nil), a.Val...)
	bad.Val[3] = math.NaN()
	if _, err := sparse.NewCholesky(&bad); err == nil {
		t.Error("NaN entry accepted")
	}
	// Factorize skips validation of values for speed, but must still fail.
	if err := ch.Factorize(&bad); err == nil {
		t.Error("Factorize accepted a NaN entry")
	}
}

func TestCholeskyBadInput(t *testing.T) {
	a := gridCSC(3, 2)
	cases := map[string]func(c *sparse.CSC){
		"short colptr": func(c *sparse.CSC) { c.ColPtr = c.ColPtr[:c.N] },
		"no diagonal":  func(c *sparse.CSC) { c.RowIdx[c.ColPtr[2]] = 3 },
		"upper entry":  func(c *sparse.CSC) { c.RowIdx[c.ColPtr[2]+1] = 1 },
		"out of range": func(c *sparse.CSC) { c.RowIdx[c.ColPtr[2]+1] = 99 },
		"unsorted rows": func(c *sparse.CSC) {
			c.RowIdx[c.ColPtr[0]+1], c.RowIdx[c.ColPtr[0]+2] = c.RowIdx[c.ColPtr[0]+2], c.RowIdx[c.ColPtr[0]+1]
		},
	}
	for name, mutate := range cases {
		c := &sparse.CSC{N: a.N, ColPtr: append([]int(nil), a.ColPtr...), RowIdx: append([]int(nil), a.RowIdx...), Val: append([]float64(nil), a.Val...)}
		mutate(c)
		if _, err := sparse.NewCholesky(c); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := sparse.NewCholeskyPerm(a, []int{0, 0, 1, 2, 3, 4, 5, 6, 7}); err == nil {
		t.Error("repeated permutation entry accepted")
	}
	ch, err := sparse.NewCholesky(a)
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Factorize(gridCSC(4, 2)); err == nil {
		t.Error("Factorize accepted another pattern")
	}
	// Same order and entry count, but column pointers that cannot be
	// walked, or too few values: an error, not a panic.
	for name, mutate := range map[string]func(c *sparse.CSC){
		"swapped colptr": func(c *sparse.CSC) { c.ColPtr[2], c.ColPtr[3] = c.ColPtr[3], c.ColPtr[2] },
		"short values":   func(c *sparse.CSC) { c.Val = c.Val[:len(c.Val)-1] },
		"moved column": func(c *sparse.CSC) {
			c.RowIdx[c.ColPtr[1]+1], c.RowIdx[c.ColPtr[1]+2] = c.RowIdx[c.ColPtr[1]+2], c.RowIdx[c.ColPtr[1]+1]
		},
	} {
		c := &sparse.CSC{N: a.N, ColPtr: append([]int(nil), a.ColPtr...), RowIdx: append([]int(nil), a.RowIdx...), Val: append([]float64(nil), a.Val...)}
		mutate(c)
		if err := ch.Factorize(c); err == nil {
			t.Errorf("Factorize accepted a matrix with %s", name)
		}
	}
}

// TestFactorizeBlocks checks that factoring straight from the blocks gives
// the same bits as factoring LowerCSC, for new values on one pattern, on
// both factorizations, and that a different structure or an indefinite
// matrix is refused.
func TestFactorizeBlocks(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, cc := range cholCases {
		q, shift, anorm := shiftedPD(t, rng, cc, 0.1)
		n := q.N * q.B
		b := randVec(rng, n)
		for _, analyze := range []func(*sparse.CSC, []int) (*sparse.Cholesky, error){sparse.Analyze, sparse.AnalyzeSimplicial} {
			perm := sparse.BlockAMD(q, 0)
			viaCSC, err := analyze(sparse.LowerCSC(q, 0, 0), perm)
			if err != nil {
				t.Fatal(err)
			}
			viaBlocks, err := analyze(sparse.LowerCSC(q, 0, 0), perm)
			if err != nil {
				t.Fatal(err)
			}
			// Twice, so the second factorization reuses the first's storage.
			for _, s := range []float64{shift, 2 * shift} {
				if err := viaCSC.Factorize(sparse.LowerCSC(q, s, 0)); err != nil {
					t.Fatal(err)
				}
				if err := viaBlocks.FactorizeBlocks(q, s); err != nil {
					t.Fatal(err)
				}
				x1, x2 := make([]float64, n), make([]float64, n)
				viaCSC.Solve(x1, b)
				viaBlocks.Solve(x2, b)
				for i := range x1 {
					if x1[i] != x2[i] {
						t.Fatalf("%+v shift %g: entry %d: FactorizeBlocks %v, Factorize %v", cc, s, i, x2[i], x1[i])
					}
				}
				// And against the dense oracle.
				d := denseOf(q)
				for i := 0; i < n; i++ {
					d.SetSym(i, i, d.At(i, i)+s)
				}
				var ch mat.Cholesky
				if !ch.Factorize(d) {
					t.Fatal("dense oracle: not positive definite")
				}
				want := mat.NewVecDense(n, nil)
				if err := ch.SolveVecTo(want, mat.NewVecDense(n, b)); err != nil {
					t.Fatal(err)
				}
				for i := range x2 {
					if math.Abs(x2[i]-want.AtVec(i)) > 1e-8*(1+math.Abs(want.AtVec(i))) {
						t.Fatalf("%+v shift %g: entry %d: %v, dense %v", cc, s, i, x2[i], want.AtVec(i))
					}
				}
			}
			// Not positive definite: lambda_min(q + shift I) is 0.1 anorm.
			if err := viaBlocks.FactorizeBlocks(q, shift-0.2*anorm); !sparse.IsNotPositiveDefinite(err) {
				t.Errorf("%+v: indefinite matrix: err %v", cc, err)
			}
			x := make([]float64, n)
			viaBlocks.Solve(x, b)
			if !math.IsNaN(x[0]) {
				t.Errorf("%+v: Solve after a failed FactorizeBlocks gave %v, want NaN", cc, x[0])
			}
		}
	}
	// Another block structure of the same order is refused.
	q1 := randBlockSym(rng, 20, 3, 0.2, 1)
	q2 := randBlockSym(rng, 20, 3, 0.3, 1)
	c, err := sparse.Analyze(sparse.LowerCSC(q1, 0, 0), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.FactorizeBlocks(q2, 100); err == nil {
		t.Error("FactorizeBlocks accepted another block structure")
	}
	if err := c.FactorizeBlocks(randBlockSym(rng, 21, 3, 0.2, 1), 100); err == nil {
		t.Error("FactorizeBlocks accepted another order")
	}
	if err := c.FactorizeBlocks(nil, 1); err == nil {
		t.Error("FactorizeBlocks accepted nil")
	}
	// A malformed matrix of the analysed order is an error, not a panic.
	short := &sparse.BlockSym{N: q1.N, B: q1.B, RowPtr: q1.RowPtr[:5], ColIdx: q1.ColIdx, Val: q1.Val, Diag: q1.Diag}
	if err := c.FactorizeBlocks(short, 100); err == nil {
		t.Error("FactorizeBlocks accepted too few row pointers")
	}
	if _, err := c.FactorizeBlocksModified(short, 100, 1, 1); err == nil {
		t.Error("FactorizeBlocksModified accepted too few row pointers")
	}
}

// TestBlockAMDStar checks the dense-node rule on a star: the hub is
// ordered last, so its factor has no fill. (Without the rule the hub's
// neighbour list was rescanned at every leaf: quadratic.)
func TestBlockAMDStar(t *testing.T) {
	const leaves, b = 5000, 2
	bb := sparse.NewBlockBuilder(leaves+1, b)
	blk := []float64{2, 0, 0, 2}
	off := []float64{-1, 0, 0, -1}
	hub := leaves / 2
	for i := 0; i <= leaves; i++ {
		bb.AddDiag(i, blk)
		if i != hub {
			bb.AddOff(min(i, hub), max(i, hub), off)
		}
	}
	q := bb.Build()
	for name, order := range map[string]func(*sparse.BlockSym, int) []int{"BlockAMD": sparse.BlockAMD, "BlockOrder": sparse.BlockOrder} {
		perm := order(q, 0)
		if !isPerm(perm, q.Dim()) {
			t.Fatalf("%s: not a permutation", name)
		}
		if got := perm[len(perm)-1] / b; got != hub {
			t.Errorf("%s: last block %d, want the hub %d", name, got, hub)
		}
		a := sparse.LowerCSC(q, 0, 0)
		if nnz, _ := sparse.BlockFactorCost(q, 0, perm); nnz != a.NNZ() {
			t.Errorf("%s: factor has %d nonzeros, the lower triangle %d: fill on a star", name, nnz, a.NNZ())
		}
	}
}

func isPerm(p []int, n int) bool {
	if len(p) != n {
		return false
	}
	seen := make([]bool, n)
	for _, i := range p {
		if i < 0 || i >= n || seen[i] {
			return false
		}
		seen[i] = true
	}
	return true
}

func TestAMD(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, c := range cholCases {
		q := randBlockSym(rng, c.nb, c.b, c.dens, c.ncomp)
		a := sparse.LowerCSC(q, 0, 0)
		if p := sparse.AMD(a); !isPerm(p, a.N) {
			t.Errorf("AMD of %+v is not a permutation", c)
		}
		if p := sparse.BlockAMD(q, 0); !isPerm(p, a.N) {
			t.Errorf("BlockAMD of %+v is not a permutation", c)
		}
		if c.nb > 1 {
			if p := sparse.BlockAMD(q, 1); !isPerm(p, a.N-c.b) {
				t.Errorf("BlockAMD with drop of %+v is not a permutation", c)
			}
		}
	}
	// On a pose graph's Q, AMD recognises the pose blocks and orders the
	// block graph, exactly as BlockAMD does.
	g, _ := noiseFreeGraph(rng, 200, 3, 60, 1e2, 1)
	q := g.Laplacian(posegraph.Poses)
	p1, p2 := sparse.AMD(sparse.LowerCSC(q, 1, 0)), sparse.BlockAMD(q, 0)
	for k := range p1 {
		if p1[k] != p2[k] {
			t.Fatalf("AMD and BlockAMD differ on Q at %d", k)
		}
	}
	// Nested dissection on a 3-D lattice block graph.
	for _, b := range []int{1, 3} {
		k := 12
		bb := sparse.NewBlockBuilder(k*k*k, b)
		blk := make([]float64, b*b)
		for i := range k * k * k {
			for a := range b {
				blk[a*b+a] = 7
			}
			bb.AddDiag(i, blk)
			for a := range blk {
				blk[a] = 0
			}
			for _, st := range []int{1, k, k * k} {
				if j := i + st; j < k*k*k && (st != 1 || j%k != 0) && (st != k || (j/k)%k != 0) {
					for a := range b {
						blk[a*b+a] = -1
					}
					bb.AddOff(i, j, blk)
					for a := range blk {
						blk[a] = 0
					}
				}
			}
		}
		q := bb.Build()
		a := sparse.LowerCSC(q, 0, 0)
		nd := sparse.NestedDissection(q, 0)
		if !isPerm(nd, a.N) || !isPerm(sparse.NestedDissection(q, 5), a.N-5*b) {
			t.Fatal("NestedDissection is not a permutation")
		}
		chND, err := sparse.NewCholeskyPerm(a, nd)
		if err != nil {
			t.Fatal(err)
		}
		chAMD, err := sparse.NewCholeskyPerm(a, sparse.BlockAMD(q, 0))
		if err != nil {
			t.Fatal(err)
		}
		nat, err := sparse.Analyze(a, identityPerm(a.N))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("lattice 12^3, blocks %d: nnz(L) ND %d (%.3g flops), AMD %d (%.3g flops), natural %d", b, chND.NNZ(), chND.Flops(), chAMD.NNZ(), chAMD.Flops(), nat.NNZ())
		if 2*chND.NNZ() > nat.NNZ() {
			t.Errorf("ND fill %d not far below natural %d", chND.NNZ(), nat.NNZ())
		}
		x := make([]float64, a.N)
		rhs := randVec(rng, a.N)
		chND.Solve(x, rhs)
		if r := residual(a, cscNormInf(a), x, rhs); r > 1e-13 {
			t.Errorf("ND factor residual %g", r)
		}
	}
	// Fill on grids: minimum degree must beat the natural (banded) order
	// by a wide margin.
	for _, g := range []struct{ k, dim int }{{40, 2}, {12, 3}} {
		a := gridCSC(g.k, g.dim)
		amd, err := sparse.NewCholesky(a)
		if err != nil {
			t.Fatal(err)
		}
		nat, err := sparse.NewCholeskyPerm(a, identityPerm(a.N))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("grid %d^%d: nnz(L) AMD %d, natural %d", g.k, g.dim, amd.NNZ(), nat.NNZ())
		if 2*amd.NNZ() > nat.NNZ() {
			t.Errorf("grid %d^%d: AMD fill %d not far below natural %d", g.k, g.dim, amd.NNZ(), nat.NNZ())
		}
	}
}

// TestCholeskyLargeSupernodes exercises the blocked dense kernels (panels,
// BLAS calls) of the supernodal factorization on a 3-D grid and a dense
// matrix, against the simplicial factorization and the residual.
func TestCholeskyLargeSupernodes(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	dense := func(n int, shift float64) *sparse.CSC {
		c := &sparse.CSC{N: n, ColPtr: make([]int, n+1)}
		g := make([]float64, n*n)
		for i := range g {
			g[i] = rng.NormFloat64()
		}
		for j := 0; j < n; j++ {
			for i := j; i < n; i++ {
				v := 0.5 * (g[i*n+j] + g[j*n+i])
				if i == j {
					v += shift
				}
				c.RowIdx = append(c.RowIdx, i)
				c.Val = append(c.Val, v)
			}
			c.ColPtr[j+1] = len(c.RowIdx)
		}
		return c
	}
	// The grids' smallest eigenvalue is known: 1 + dim (2 - 2 cos(pi/(k+1))).
	gridMin := func(k, dim int) float64 { return 1 + float64(dim)*(2-2*math.Cos(math.Pi/float64(k+1))) }
	cases := map[string]struct {
		a    *sparse.CSC
		lmin func() float64
	}{
		"grid12^3": {gridCSC(12, 3), func() float64 { return gridMin(12, 3) }},
		"grid60^2": {gridCSC(60, 2), func() float64 { return gridMin(60, 2) }},
	}
	for name, n := range map[string]int{"dense300": 300, "dense130": 130} {
		// The spectrum of the symmetric part lies in about [-25, 25].
		a := dense(n, 40)
		cases[name] = struct {
			a    *sparse.CSC
			lmin func() float64
		}{a, func() float64 { ev, _ := eigenvalues(t, denseOf(a), false); return ev[0] }}
	}
	for name, tc := range cases {
		a := tc.a
		t.Run(name, func(t *testing.T) {
			sup, err := sparse.NewCholesky(a)
			if err != nil {
				t.Fatal(err)
			}
			simp, err := sparse.AnalyzeSimplicial(a, sup.Perm())
			if err != nil {
				t.Fatal(err)
			}
			if err := simp.Factorize(a); err != nil {
				t.Fatal(err)
			}
			if sup.NNZ() != simp.NNZ() || sup.StoredNNZ() < sup.NNZ() {
				t.Errorf("nnz: supernodal %d (stored %d), simplicial %d", sup.NNZ(), sup.StoredNNZ(), simp.NNZ())
			}
			t.Logf("order %d, nnz(L) %d, stored %d, %d supernodes", a.N, sup.NNZ(), sup.StoredNNZ(), sup.Supernodes())
			b := randVec(rng, a.N)
			x1 := make([]float64, a.N)
			x2 := make([]float64, a.N)
			sup.Solve(x1, b)
			simp.Solve(x2, b)
			anorm := cscNormInf(a)
			if r := residual(a, anorm, x1, b); r > 1e-13 {
				t.Errorf("supernodal residual %g", r)
			}
			for i := range x1 {
				if math.Abs(x1[i]-x2[i]) > 1e-9*(1+math.Abs(x2[i])) {
					t.Fatalf("x[%d]: supernodal %g, simplicial %g", i, x1[i], x2[i])
				}
			}
			// Shift to indefinite by a tiny margin: both must refuse.
			lmin := tc.lmin()
			bad := &sparse.CSC{N: a.N, ColPtr: a.ColPtr, RowIdx: a.RowIdx, Val: append([]float64(nil), a.Val...)}
			for j := 0; j < a.N; j++ {
				bad.Val[a.ColPtr[j]] -= lmin + 1e-9*anorm
			}
			err1 := sup.Factorize(bad)
			err2 := simp.Factorize(bad)
			if !sparse.IsNotPositiveDefinite(err1) || !sparse.IsNotPositiveDefinite(err2) {
				t.Errorf("indefinite accepted: supernodal %v, simplicial %v", err1, err2)
			}
		})
	}
}

// cscNormInf is the infinity norm of the symmetric matrix whose lower
// triangle c holds.
func cscNormInf(c *sparse.CSC) float64 {
	row := make([]float64, c.N)
	for j := 0; j < c.N; j++ {
		for p := c.ColPtr[j]; p < c.ColPtr[j+1]; p++ {
			i := c.RowIdx[p]
			row[i] += math.Abs(c.Val[p])
			if i != j {
				row[j] += math.Abs(c.Val[p])
			}
		}
	}
	m := 0.0
	for _, v := range row {
		m = max(m, v)
	}
	return m
}

// TestCholeskySingular: an exactly singular PSD matrix (a pose graph's Q,
// whose common translation is a null vector) must be refused, however the
// rounding falls, and a tiny shift must make it factorable.
func TestCholeskySingular(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, d := range []int{2, 3} {
		g, _ := noiseFreeGraph(rng, 300, d, 100, 1e4, 10)
		for _, p := range []posegraph.Problem{posegraph.Poses, posegraph.Rotations} {
			q := g.Laplacian(p)
			for _, f := range factorers {
				_, err := f.factor(sparse.LowerCSC(q, 0, 0), q)
				if !sparse.IsNotPositiveDefinite(err) {
					t.Errorf("d=%d %v %s: singular Q accepted (%v)", d, p, f.name, err)
				}
			}
			m := 0.0
			for i := 0; i < q.N; i++ {
				m = max(m, q.Block(q.Diag[i])[0])
			}
			ch, err := sparse.NewCholesky(sparse.LowerCSC(q, 1e-11*m, 0))
			if err != nil {
				t.Fatalf("d=%d %v: Q + 1e-11 max diag I refused: %v", d, p, err)
			}
			if _, piv := ch.MinPivot(); piv < 1e-11*m*(1-1e-3) {
				t.Errorf("min pivot %g below lambda_min bound %g", piv, 1e-11*m)
			}
		}
	}
}

func TestCholeskyTiny(t *testing.T) {
	empty := &sparse.CSC{N: 0, ColPtr: []int{0}}
	ch, err := sparse.NewCholesky(empty)
	if err != nil || ch.NNZ() != 0 {
		t.Fatalf("empty matrix: %v", err)
	}
	ch.Solve(nil, nil)
	one := &sparse.CSC{N: 1, ColPtr: []int{0, 1}, RowIdx: []int{0}, Val: []float64{4}}
	ch, err = sparse.NewCholesky(one)
	if err != nil {
		t.Fatal(err)
	}
	x := []float64{2}
	ch.Solve(x, x)
	if x[0] != 0.5 {
		t.Errorf("1x1 solve gave %g", x[0])
	}
	one.Val[0] = -1
	if err := ch.Factorize(one); !sparse.IsNotPositiveDefinite(err) {
		t.Errorf("1x1 negative: %v", err)
	}
	if _, err := sparse.SmallestEig(one, sparse.EigOptions{}); err != nil {
		t.Error(err)
	}
	for _, m := range []sparse.EigMethod{sparse.EigLanczos, sparse.EigLOBPCG} {
		res, err := sparse.SmallestEig(one, sparse.EigOptions{Method: m})
		if err != nil || res.Value != -1 || !res.Converged {
			t.Errorf("%v on 1x1: %+v %v", m, res, err)
		}
	}
}

// TestCholeskyThreadsSameBits: the supernodal factorization splits the
// tree into subtrees factored concurrently; the result must not depend on
// the number of threads.
func TestCholeskyThreadsSameBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	g, _ := noiseFreeGraph(rng, 2000, 3, 1500, 1e3, 10)
	cases := map[string]*sparse.CSC{
		"posegraph": sparse.LowerCSC(g.Laplacian(posegraph.Poses), 1, 0),
		"grid60^2":  gridCSC(60, 2),
		"grid14^3":  gridCSC(14, 3),
	}
	for name, a := range cases {
		b := randVec(rng, a.N)
		solve := func(procs int) []float64 {
			old := runtime.GOMAXPROCS(procs)
			defer runtime.GOMAXPROCS(old)
			ch, err := sparse.NewCholesky(a)
			if err != nil {
				t.Fatal(err)
			}
			x := make([]float64, a.N)
			ch.Solve(x, b)
			if r := residual(a, cscNormInf(a), x, b); r > 1e-13 {
				t.Errorf("%s: residual %g with %d threads", name, r, procs)
			}
			return x
		}
		x1, x2 := solve(1), solve(2)
		for i := range x1 {
			if x1[i] != x2[i] {
				t.Fatalf("%s: 1 and 2 threads differ at %d: %g vs %g", name, i, x1[i], x2[i])
			}
		}
	}
}

// BenchmarkBlockAMDStar orders a star of 200,000 leaves (2 x 2 blocks), the
// case the dense-node rule of minDegree is for.
func BenchmarkBlockAMDStar(b *testing.B) {
	const leaves = 200_000
	bb := sparse.NewBlockBuilder(leaves+1, 2)
	for i := 0; i <= leaves; i++ {
		bb.AddDiag(i, []float64{2, 0, 0, 2})
		if i > 0 {
			bb.AddOff(0, i, []float64{-1, 0, 0, -1})
		}
	}
	q := bb.Build()
	for b.Loop() {
		sparse.BlockAMD(q, 0)
	}
}

// TestFactorizeBlocksModified checks the modified factorization against a
// dense oracle: the same right-looking elimination on P (q + shift I) P^T,
// raising each pivot at or below the threshold to max(|pivot|, floor), gives
// the diagonal E; our factor must solve q + shift I + P^T E P (gonum's
// Cholesky of it must exist) and report as many raised pivots. On a
// positive definite matrix nothing is raised and the bits are those of
// FactorizeBlocks.
func TestFactorizeBlocksModified(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	accepted, refused := 0, 0
	// The last case fills supernodes wider than one dense panel.
	for ci, cc := range append(cholCases[:len(cholCases):len(cholCases)], cholCase{60, 3, 1, 0.6}) {
		q, shift, anorm := shiftedPD(t, rng, cc, 0.1)
		n := q.N * q.B
		b := randVec(rng, n)
		for ai, analyze := range []func(*sparse.CSC, []int) (*sparse.Cholesky, error){sparse.Analyze, sparse.AnalyzeSimplicial} {
			perm := sparse.BlockAMD(q, 0)
			plain, err := analyze(sparse.LowerCSC(q, 0, 0), perm)
			if err != nil {
				t.Fatal(err)
			}
			mod, err := analyze(sparse.LowerCSC(q, 0, 0), perm)
			if err != nil {
				t.Fatal(err)
			}
			if err := plain.FactorizeBlocks(q, shift); err != nil {
				t.Fatal(err)
			}
			raised, err := mod.FactorizeBlocksModified(q, shift, anorm, anorm)
			if err != nil || raised != 0 {
				t.Fatalf("case %d/%d: positive definite: raised %d, err %v", ci, ai, raised, err)
			}
			x1, x2 := make([]float64, n), make([]float64, n)
			plain.Solve(x1, b)
			mod.Solve(x2, b)
			for i := range x1 {
				if x1[i] != x2[i] {
					t.Fatalf("case %d/%d: entry %d: modified %v, plain %v", ci, ai, i, x2[i], x1[i])
				}
			}

			// Indefinite: lambda_min(q + s I) is -0.1 anorm.
			s, floor, limit := shift-0.2*anorm, 0.5*anorm, 10*anorm
			raised, err = mod.FactorizeBlocksModified(q, s, floor, limit)
			d := denseOf(q)
			thr := 0.0
			for i := 0; i < n; i++ {
				d.SetSym(i, i, d.At(i, i)+s)
				thr = math.Max(thr, math.Abs(d.At(i, i)))
			}
			thr *= sparse.PivotTol
			e, ok := modifiedCholeskyE(d, mod.Perm(), thr, floor, limit)
			if !ok {
				// A pivot went below -limit: refused, as by the oracle.
				if !sparse.IsNotPositiveDefinite(err) {
					t.Fatalf("case %d/%d: the oracle's pivots pass the limit: err %v", ci, ai, err)
				}
				refused++
				continue
			}
			if err != nil {
				t.Fatalf("case %d/%d: indefinite: %v", ci, ai, err)
			}
			accepted++
			wantRaised := 0
			for k, v := range e {
				if v != 0 {
					wantRaised++
					i := mod.Perm()[k]
					d.SetSym(i, i, d.At(i, i)+v)
				}
			}
			if wantRaised == 0 {
				t.Fatalf("case %d/%d: the oracle raised no pivot of an indefinite matrix", ci, ai)
			}
			if raised != wantRaised {
				t.Errorf("case %d/%d: raised %d pivots, oracle %d", ci, ai, raised, wantRaised)
			}
			var ch mat.Cholesky
			if !ch.Factorize(d) {
				t.Fatalf("case %d/%d: q + shift I + E is not positive definite", ci, ai)
			}
			want := mat.NewVecDense(n, nil)
			if err := ch.SolveVecTo(want, mat.NewVecDense(n, b)); err != nil {
				t.Fatal(err)
			}
			mod.Solve(x2, b)
			for i := range x2 {
				if math.Abs(x2[i]-want.AtVec(i)) > 1e-8*(1+vnorm(x2)) {
					t.Fatalf("case %d/%d: entry %d: %v, dense %v", ci, ai, i, x2[i], want.AtVec(i))
				}
			}
		}
	}
	if accepted == 0 || refused == 0 {
		t.Errorf("%d factors accepted, %d refused: both paths must be tested", accepted, refused)
	}
	// A non-positive floor is refused; NaN still fails.
	q := randBlockSym(rng, 10, 2, 0.3, 1)
	c, err := sparse.Analyze(sparse.LowerCSC(q, 0, 0), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		if _, err := c.FactorizeBlocksModified(q, 0, bad, 1); err == nil {
			t.Errorf("floor %v accepted", bad)
		}
		if _, err := c.FactorizeBlocksModified(q, 0, 1, bad); err == nil {
			t.Errorf("limit %v accepted", bad)
		}
	}
	// A refused argument leaves no usable factor, as any failure does.
	if err := c.FactorizeBlocks(q, 100); err != nil {
		t.Fatal(err)
	}
	if _, err := c.FactorizeBlocksModified(q, 100, 0, 1); err == nil {
		t.Fatal("floor 0 accepted")
	}
	x := make([]float64, q.N*q.B)
	c.Solve(x, randVec(rng, len(x)))
	if !math.IsNaN(x[0]) {
		t.Error("Solve after a refused FactorizeBlocksModified gave a number")
	}
	// An infinite diagonal entry fails, as in FactorizeBlocks, on both
	// factorizations.
	for _, analyze := range []func(*sparse.CSC, []int) (*sparse.Cholesky, error){sparse.Analyze, sparse.AnalyzeSimplicial} {
		qi := randBlockSym(rng, 10, 2, 0.3, 1)
		ci, err := analyze(sparse.LowerCSC(qi, 0, 0), nil)
		if err != nil {
			t.Fatal(err)
		}
		// Shifted by 100 it factors (the control), so a failure below
		// comes from the bad entry, not from a finite negative pivot.
		if _, err := ci.FactorizeBlocksModified(qi, 100, 1, 1); err != nil {
			t.Fatalf("control: %v", err)
		}
		for _, bad := range []float64{math.Inf(1), math.Inf(-1), math.NaN()} {
			q2 := &sparse.BlockSym{N: qi.N, B: qi.B, RowPtr: qi.RowPtr, ColIdx: qi.ColIdx, Diag: qi.Diag,
				Val: append([]float64(nil), qi.Val...)}
			q2.Block(q2.Diag[3])[0] = bad
			if raised, err := ci.FactorizeBlocksModified(q2, 100, 1, 1); !sparse.IsNotPositiveDefinite(err) || raised != 0 {
				t.Errorf("diagonal entry %v: raised %d, err %v", bad, raised, err)
			}
			q2.Block(q2.Diag[3])[0] = qi.Block(qi.Diag[3])[0]
			blk := q2.Block(q2.Diag[3]) // an off-diagonal entry of the diagonal block
			blk[1], blk[q2.B] = bad, bad
			if _, err := ci.FactorizeBlocksModified(q2, 100, 1, 1); !sparse.IsNotPositiveDefinite(err) {
				t.Errorf("entry %v: err %v, want not positive definite", bad, err)
			}
		}
	}
}

// TestFactorizeBlocksModifiedCount checks that only pivots that change are
// counted: a pivot in (floor, threshold] is kept as it is.
func TestFactorizeBlocksModifiedCount(t *testing.T) {
	bb := sparse.NewBlockBuilder(2, 1)
	bb.AddDiag(0, []float64{1})
	bb.AddDiag(1, []float64{1e-14}) // below PivotTol * 1
	q := bb.Build()
	for _, analyze := range []func(*sparse.CSC, []int) (*sparse.Cholesky, error){sparse.Analyze, sparse.AnalyzeSimplicial} {
		c, err := analyze(sparse.LowerCSC(q, 0, 0), []int{0, 1})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.FactorizeBlocks(q, 0); !sparse.IsNotPositiveDefinite(err) {
			t.Fatalf("FactorizeBlocks: err %v, want not positive definite", err)
		}
		for _, tc := range []struct {
			floor float64
			want  int
		}{{1e-15, 0}, {1e-12, 1}} {
			raised, err := c.FactorizeBlocksModified(q, 0, tc.floor, 1)
			if err != nil || raised != tc.want {
				t.Errorf("floor %g: raised %d, err %v; want %d", tc.floor, raised, err, tc.want)
			}
		}
	}
}

// modifiedCholeskyE runs the dense modified Cholesky on P a P^T (perm[k] =
// the row of a eliminated k-th) and returns the amounts E[k] added to each
// pivot (0 where none was), or false if a pivot falls below -limit.
func modifiedCholeskyE(a *mat.SymDense, perm []int, thr, floor, limit float64) ([]float64, bool) {
	n := len(perm)
	l := mat.NewDense(n, n, nil)
	for i := 0; i < n; i++ {
		for j := 0; j <= i; j++ {
			l.Set(i, j, a.At(perm[i], perm[j]))
		}
	}
	e := make([]float64, n)
	for j := 0; j < n; j++ {
		dj := l.At(j, j)
		for t := 0; t < j; t++ {
			dj -= l.At(j, t) * l.At(j, t)
		}
		if !(dj > thr) {
			if dj < -limit {
				return nil, false
			}
			nd := math.Max(math.Abs(dj), floor)
			e[j] = nd - dj
			dj = nd
		}
		ljj := math.Sqrt(dj)
		l.Set(j, j, ljj)
		for i := j + 1; i < n; i++ {
			s := l.At(i, j)
			for t := 0; t < j; t++ {
				s -= l.At(i, t) * l.At(j, t)
			}
			l.Set(i, j, s/ljj)
		}
	}
	return e, true
}
