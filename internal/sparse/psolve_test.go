package sparse

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// gridBlocks returns a k^3 grid of b x b blocks (6-neighbour coupling, like
// the connection Laplacian of a 3-D pose grid) with random off-diagonal
// blocks and diagonal blocks large enough for strict diagonal dominance.
func gridBlocks(rng *rand.Rand, k, b int) *BlockSym {
	n := k * k * k
	bb := NewBlockBuilder(n, b)
	blk := make([]float64, b*b)
	diag := make([]float64, b*b)
	for a := 0; a < b; a++ {
		diag[a*b+a] = float64(6*b) + 1
	}
	strides := []int{1, k, k * k}
	for j := 0; j < n; j++ {
		bb.AddDiag(j, diag)
		for d, s := range strides {
			if (j/s)%k+1 < k {
				for t := range blk {
					blk[t] = rng.Float64() - 0.5
				}
				if d == 0 {
					// A chain along x, as odometry makes one.
					for a := 0; a < b; a++ {
						blk[a*b+a] -= 0.5
					}
				}
				bb.AddOff(j, j+s, blk)
			}
		}
	}
	return bb.Build()
}

// randomBlocks returns nb blocks of size b, each pair coupled with
// probability dens within ncomp groups, which only the last hubs blocks
// join, with diagonal blocks that make the matrix strictly diagonally
// dominant. Random coupling fills the factor in, so the root supernode of
// each group is large and dense, with the hubs as rows below it.
func randomBlocks(rng *rand.Rand, nb, b int, dens float64, ncomp, hubs int) *BlockSym {
	bb := NewBlockBuilder(nb, b)
	blk := make([]float64, b*b)
	rowSum := make([]float64, nb*b)
	for i := 0; i < nb; i++ {
		for j := i + 1; j < nb; j++ {
			if (i%ncomp != j%ncomp && j < nb-hubs) || rng.Float64() >= dens {
				continue
			}
			for t := range blk {
				blk[t] = rng.NormFloat64()
				rowSum[i*b+t/b] += math.Abs(blk[t])
				rowSum[j*b+t%b] += math.Abs(blk[t])
			}
			bb.AddOff(i, j, blk)
		}
	}
	for i := 0; i < nb; i++ {
		clear(blk)
		for a := 0; a < b; a++ {
			blk[a*b+a] = rowSum[i*b+a] + 1
		}
		bb.AddDiag(i, blk)
	}
	return bb.Build()
}

type psolveCase struct {
	name string
	a    *CSC
	perm []int
	// What the schedule must hold, so that every path is exercised.
	wantTasks   bool
	wantChunked bool // a top supernode whose rows below are cut into chunks
	wantBlocked bool // a top supernode with a blocked triangle
}

func psolveCases() []psolveCase {
	rng := rand.New(rand.NewPCG(5, 6))
	g8 := gridBlocks(rng, 8, 4)
	g3 := gridBlocks(rng, 3, 2)
	rd := randomBlocks(rng, 450, 4, 0.012, 1, 0)
	r3 := randomBlocks(rng, 750, 3, 0.03, 3, 24)
	g2 := gridCSCInternal(45)
	return []psolveCase{
		{"grid8^3x4", LowerCSC(g8, 0, 0), BlockOrder(g8, 0), true, false, false},
		{"grid45^2", g2, nil, true, false, false},
		{"random450x4", LowerCSC(rd, 0, 0), BlockAMD(rd, 0), true, false, true},
		{"random750x3-3groups-hubs", LowerCSC(r3, 0, 0), BlockAMD(r3, 0), true, false, false},
		{"grid3^3x2", LowerCSC(g3, 0, 0), nil, false, false, false},
	}
}

// testSplitMin is the split threshold of the solves in the tests, far below
// solveSplitMin so that factors small enough for a dense oracle are split.
const testSplitMin = 1 << 12

// factorCase factors c and gives it a solve schedule split from testSplitMin.
func factorCase(c psolveCase) (*Cholesky, error) {
	ch, err := NewCholeskyPerm(c.a, c.perm)
	if err != nil {
		return nil, err
	}
	ch.sn.sched = ch.sn.newSolveSchedule(testSplitMin)
	return ch, nil
}

// gridCSCInternal is the 5-point Laplacian plus I on a k x k grid.
func gridCSCInternal(k int) *CSC {
	n := k * k
	a := &CSC{N: n, ColPtr: make([]int, n+1)}
	for j := 0; j < n; j++ {
		a.RowIdx = append(a.RowIdx, j)
		a.Val = append(a.Val, 5)
		if (j+1)%k != 0 {
			a.RowIdx = append(a.RowIdx, j+1)
			a.Val = append(a.Val, -1)
		}
		if j+k < n {
			a.RowIdx = append(a.RowIdx, j+k)
			a.Val = append(a.Val, -1)
		}
		a.ColPtr[j+1] = len(a.RowIdx)
	}
	return a
}

// denseSym is a (lower CSC) as a dense symmetric matrix.
func denseSym(a *CSC) *mat.SymDense {
	d := mat.NewSymDense(a.N, nil)
	for j := 0; j < a.N; j++ {
		for p := a.ColPtr[j]; p < a.ColPtr[j+1]; p++ {
			d.SetSym(a.RowIdx[p], j, a.Val[p])
		}
	}
	return d
}

// checkPlan checks the claims the concurrent solve rests on: every
// supernode is in one task or on top, a task is a whole subtree, every row
// a task updates outside its columns is a column of a top supernode, and
// loc sends it to that column's accumulator.
func checkPlan(t *testing.T, sn *supernodes, c psolveCase) {
	t.Helper()
	p := sn.sched
	ns := len(sn.first) - 1
	owner := make([]int, ns)
	for s := range owner {
		owner[s] = -1
	}
	for ti, r := range p.tasks {
		for s := r[0]; s < r[1]; s++ {
			if owner[s] != -1 {
				t.Fatalf("supernode %d in two tasks", s)
			}
			owner[s] = ti
		}
	}
	blocked, chunked := false, false
	for _, s := range p.top {
		if owner[s] != -1 {
			t.Fatalf("top supernode %d also in task %d", s, owner[s])
		}
		owner[s] = -2
		nc := sn.first[s+1] - sn.first[s]
		nr := sn.rowPtr[s+1] - sn.rowPtr[s]
		blocked = blocked || nc >= triBlocked
		chunked = chunked || (nr-nc)*nc >= rectPar
	}
	for s := 0; s < ns; s++ {
		if owner[s] == -1 {
			t.Fatalf("supernode %d in no task and not on top", s)
		}
		if owner[s] < 0 {
			continue
		}
		ti := owner[s]
		nc := sn.first[s+1] - sn.first[s]
		rows := sn.rows[sn.rowPtr[s]:sn.rowPtr[s+1]]
		for r := nc; r < len(rows); r++ {
			o := owner[sn.super[rows[r]]]
			inside := r < p.split[s]
			switch {
			case inside && o != ti:
				t.Fatalf("supernode %d (task %d): row %d counted inside belongs to %d", s, ti, rows[r], o)
			case !inside && o != -2:
				t.Fatalf("supernode %d (task %d): row %d outside its task is not on top (owner %d)", s, ti, rows[r], o)
			case !inside:
				j := int(p.loc[p.locPtr[s]+r-p.split[s]])
				if j < p.extPtr[ti] || j >= p.extPtr[ti+1] || p.ext[j] != rows[r] {
					t.Fatalf("supernode %d: row %d goes to accumulator %d", s, rows[r], j)
				}
			}
		}
	}
	if c.wantTasks && len(p.tasks) < 2 {
		t.Errorf("%s: %d tasks, want several", c.name, len(p.tasks))
	}
	if c.wantChunked && !chunked {
		t.Errorf("%s: no top supernode with %d entries below its diagonal block", c.name, rectPar)
	}
	if c.wantBlocked && !blocked {
		t.Errorf("%s: no top supernode of %d columns or more", c.name, triBlocked)
	}
	t.Logf("%s: n=%d, %d supernodes, %d stored: %d tasks, %d on top, %d accumulators", c.name, sn.n(), ns, sn.stored, len(p.tasks), len(p.top), len(p.ext))
}

// TestSolveParallel checks Solve and SolveMany (k = 1, 3, 5, and 9, which
// SolveMany does as 8 + 1) against a dense Cholesky solve, on factors split
// into concurrent subtrees and with large top supernodes, on one and two
// threads.
func TestSolveParallel(t *testing.T) {
	for _, c := range psolveCases() {
		t.Run(c.name, func(t *testing.T) {
			ch, err := factorCase(c)
			if err != nil {
				t.Fatal(err)
			}
			var dc mat.Cholesky
			if !dc.Factorize(denseSym(c.a)) {
				t.Fatal("dense Cholesky failed")
			}
			n := c.a.N
			rng := rand.New(rand.NewPCG(uint64(n), 1))
			const maxRHS = 9
			b := make([]float64, n*maxRHS)
			for i := range b {
				b[i] = rng.NormFloat64()
			}
			want := make([]float64, n*maxRHS)
			for q := 0; q < maxRHS; q++ {
				var xv mat.VecDense
				if err := dc.SolveVecTo(&xv, mat.NewVecDense(n, b[q*n:(q+1)*n])); err != nil {
					t.Fatal(err)
				}
				copy(want[q*n:], xv.RawVector().Data)
			}
			for _, procs := range []int{1, 2} {
				old := runtime.GOMAXPROCS(procs)
				for _, k := range []int{1, 3, 5, 9} {
					x := make([]float64, n*k)
					if k == 1 {
						ch.Solve(x, b)
					} else {
						ch.SolveMany(x, b, k)
					}
					for q := 0; q < k; q++ {
						xq, wq := x[q*n:(q+1)*n], want[q*n:(q+1)*n]
						errMax, wMax := 0.0, 0.0
						for i := range xq {
							errMax = math.Max(errMax, math.Abs(xq[i]-wq[i]))
							wMax = math.Max(wMax, math.Abs(wq[i]))
						}
						if !(errMax <= 1e-11*wMax) {
							t.Errorf("%d threads, k=%d, column %d: max error %g against the dense solve (max %g)", procs, k, q, errMax, wMax)
						}
					}
				}
				runtime.GOMAXPROCS(old)
			}
			checkPlan(t, ch.sn, c)
		})
	}
}

// TestSolveLarge checks a factor too large for a dense oracle, whose top
// supernodes have enough rows below their diagonal blocks to be cut into
// chunks, by the residual and by the agreement of one and two threads.
func TestSolveLarge(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	q := gridBlocks(rng, 14, 4)
	a := LowerCSC(q, 0, 0)
	c := psolveCase{name: "grid14^3x4", a: a, perm: BlockOrder(q, 0), wantTasks: true, wantChunked: true}
	ch, err := NewCholeskyPerm(c.a, c.perm)
	if err != nil {
		t.Fatal(err)
	}
	n := a.N
	anorm := 0.0 // infinity norm of A from its lower triangle
	rowSum := make([]float64, n)
	for j := 0; j < n; j++ {
		for p := a.ColPtr[j]; p < a.ColPtr[j+1]; p++ {
			i, v := a.RowIdx[p], math.Abs(a.Val[p])
			rowSum[i] += v
			if i != j {
				rowSum[j] += v
			}
		}
	}
	for _, v := range rowSum {
		anorm = math.Max(anorm, v)
	}
	const k = 5
	b := make([]float64, n*k)
	for i := range b {
		b[i] = rng.NormFloat64()
	}
	// residual returns ||A x - b||_inf / (||A||_inf ||x||_inf + ||b||_inf).
	residual := func(x, b []float64) float64 {
		r := append([]float64(nil), b...)
		for j := 0; j < n; j++ {
			for p := a.ColPtr[j]; p < a.ColPtr[j+1]; p++ {
				i, v := a.RowIdx[p], a.Val[p]
				r[i] -= v * x[j]
				if i != j {
					r[j] -= v * x[i]
				}
			}
		}
		xn, rn, bn := 0.0, 0.0, 0.0
		for i := range r {
			xn, rn, bn = math.Max(xn, math.Abs(x[i])), math.Max(rn, math.Abs(r[i])), math.Max(bn, math.Abs(b[i]))
		}
		return rn / (anorm*xn + bn)
	}
	var first []float64
	for _, procs := range []int{1, 2} {
		old := runtime.GOMAXPROCS(procs)
		x := make([]float64, n*(k+1))
		ch.SolveMany(x, b, k)
		ch.Solve(x[k*n:], b) // Solve's kernels differ from SolveMany's
		runtime.GOMAXPROCS(old)
		for q := 0; q <= k; q++ {
			if res := residual(x[q*n:(q+1)*n], b[(q%k)*n:(q%k+1)*n]); !(res <= 1e-14) {
				t.Errorf("%d threads, column %d: residual %g", procs, q, res)
			}
		}
		if first == nil {
			first = x
			continue
		}
		for i := range x {
			if math.Float64bits(first[i]) != math.Float64bits(x[i]) {
				t.Fatalf("1 and 2 threads differ at %d: %g vs %g", i, first[i], x[i])
			}
		}
	}
	checkPlan(t, ch.sn, c)
}

// TestSolveThreadsSameBits checks that Solve and SolveMany give the same
// bits on one, two and three threads (three splits the chunks unevenly).
func TestSolveThreadsSameBits(t *testing.T) {
	for _, c := range psolveCases() {
		ch, err := factorCase(c)
		if err != nil {
			t.Fatal(err)
		}
		n := c.a.N
		rng := rand.New(rand.NewPCG(uint64(n), 2))
		b := make([]float64, n*5)
		for i := range b {
			b[i] = rng.NormFloat64()
		}
		solve := func(procs, k int) []float64 {
			old := runtime.GOMAXPROCS(procs)
			defer runtime.GOMAXPROCS(old)
			x := make([]float64, n*k)
			ch.SolveMany(x, b, k)
			return x
		}
		for _, k := range []int{1, 5} {
			x1 := solve(1, k)
			for _, procs := range []int{2, 3} {
				xp := solve(procs, k)
				for i := range x1 {
					if math.Float64bits(x1[i]) != math.Float64bits(xp[i]) {
						t.Fatalf("%s, k=%d: 1 and %d threads differ at %d: %g vs %g", c.name, k, procs, i, x1[i], xp[i])
					}
				}
			}
		}
	}
}

// TestSolveNoAlloc checks that repeated solves allocate nothing once the
// schedule exists. testing.AllocsPerRun measures at GOMAXPROCS 1, so this is
// the sequential path; on two threads the runtime may now and then
// allocate a goroutine for a helper (the review counted 0 to 2 small
// allocations over 400 solves).
func TestSolveNoAlloc(t *testing.T) {
	old := runtime.GOMAXPROCS(2)
	defer runtime.GOMAXPROCS(old)
	for _, c := range psolveCases() {
		ch, err := factorCase(c)
		if err != nil {
			t.Fatal(err)
		}
		n := c.a.N
		b := make([]float64, 5*n)
		for i := range b {
			b[i] = float64(i%7) - 3
		}
		x := make([]float64, 5*n)
		if a := testing.AllocsPerRun(10, func() { ch.Solve(x, b) }); a != 0 {
			t.Errorf("%s: Solve allocates %v times", c.name, a)
		}
		if a := testing.AllocsPerRun(10, func() { ch.SolveMany(x, b, 5) }); a != 0 {
			t.Errorf("%s: SolveMany allocates %v times", c.name, a)
		}
	}
}

// BenchmarkSolveGrid times Solve and SolveMany with the factor of a 3-D
// block grid ordered as the solver orders it (BlockOrder).
//
//	go test ./internal/sparse -run '^$' -bench SolveGrid -benchtime 20x -cpu 1,2
func BenchmarkSolveGrid(b *testing.B) {
	for _, k := range []int{14, 22} {
		rng := rand.New(rand.NewPCG(uint64(k), 7))
		q := gridBlocks(rng, k, 4)
		a := LowerCSC(q, 0, 0)
		ch, err := NewCholeskyPerm(a, BlockOrder(q, 0))
		if err != nil {
			b.Fatal(err)
		}
		n := a.N
		for _, nrhs := range []int{1, 5} {
			b.Run(fmt.Sprintf("k=%d/nrhs=%d", k, nrhs), func(b *testing.B) {
				rhs := make([]float64, n*nrhs)
				for i := range rhs {
					rhs[i] = rng.NormFloat64()
				}
				x := make([]float64, n*nrhs)
				b.SetBytes(int64(8 * ch.StoredNNZ()))
				for b.Loop() {
					if nrhs == 1 {
						ch.Solve(x, rhs)
					} else {
						ch.SolveMany(x, rhs, nrhs)
					}
				}
				b.ReportMetric(float64(ch.StoredNNZ()), "stored")
			})
		}
	}
}
