package sparse_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
)

// shiftedCopy returns q + s I.
func shiftedCopy(q *sparse.BlockSym, s float64) *sparse.BlockSym {
	m := q.Clone()
	b := m.B
	for i := 0; i < m.N; i++ {
		blk := m.Block(m.Diag[i])
		for a := 0; a < b; a++ {
			blk[a*b+a] += s
		}
	}
	return m
}

// partitions returns partitions of nb blocks into k parts: contiguous
// runs (parts with interiors) and a random assignment (mostly boundary).
func partitions(rng *rand.Rand, nb, k int) [][]int {
	runs, random := make([]int, nb), make([]int, nb)
	for i := range runs {
		runs[i] = i * k / nb
		random[i] = rng.IntN(k)
	}
	return [][]int{runs, random}
}

// TestDomainCholesky checks the domain-decomposition factorization against
// gonum's dense Cholesky and eigenvalues and this package's own factor of
// the whole matrix: the same decision on positive definite and indefinite
// matrices, the same solutions, and a smallest pivot no smaller than the
// smallest eigenvalue (as every pivot of a positive definite matrix).
func TestDomainCholesky(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 4))
	for _, c := range cholCases {
		for _, k := range []int{1, 2, 3, 5} {
			for _, margin := range []float64{1e-3, -1e-3} {
				q, shift, anorm := shiftedPD(t, rng, c, margin)
				m := shiftedCopy(q, shift)
				dense := denseOf(m)
				ev, _ := eigenvalues(t, dense, false)
				central, err := sparse.AnalyzeBlocks(m, sparse.BlockAMD(m, 0))
				if err != nil {
					t.Fatal(err)
				}
				centralErr := central.FactorizeBlocks(m, 0)
				for pi, part := range partitions(rng, c.nb, k) {
					last := rng.IntN(c.nb)
					dc, err := sparse.NewDomainCholesky(m, part, nil, last)
					if err != nil {
						t.Fatalf("%+v k=%d partition %d: %v", c, k, pi, err)
					}
					err = dc.Factorize(m)
					if (err == nil) != (centralErr == nil) || (err == nil) != (ev[0] > 0) {
						t.Fatalf("%+v k=%d partition %d margin %g: domain factor %v, whole factor %v, lambda_min %g",
							c, k, pi, margin, err, centralErr, ev[0])
					}
					if err != nil {
						var npd *sparse.NotPositiveDefiniteError
						if !errors.As(err, &npd) || npd.Column < 0 || npd.Column >= m.Dim() {
							t.Fatalf("%+v: error %v does not name a column of the matrix", c, err)
						}
						continue
					}
					if p := dc.MinPivot(); p < ev[0]*(1-1e-8) {
						t.Errorf("%+v k=%d: smallest pivot %g below lambda_min %g", c, k, p, ev[0])
					}
					var ch mat.Cholesky
					if !ch.Factorize(dense) {
						t.Fatal("gonum Cholesky failed on a positive definite matrix")
					}
					y := randVec(rng, m.Dim())
					x := make([]float64, m.Dim())
					dc.Solve(x, y)
					var want mat.VecDense
					if err := ch.SolveVecTo(&want, mat.NewVecDense(len(y), y)); err != nil {
						t.Fatal(err)
					}
					cond := anorm / ev[0]
					for i := range x {
						if math.Abs(x[i]-want.AtVec(i)) > 1e-10*cond*vnorm(x) {
							t.Fatalf("%+v k=%d: x[%d] = %g, gonum %g", c, k, i, x[i], want.AtVec(i))
						}
					}
					// In place.
					dc.Solve(y, y)
					for i := range x {
						if y[i] != x[i] {
							t.Fatalf("%+v: Solve in place differs at %d", c, i)
						}
					}
				}
			}
		}
	}
}

// TestDomainCholeskyThreshold: a part's own threshold is below the whole
// matrix's, so a pivot it accepts may still fail the global test. A
// diagonal matrix with one tiny entry in a part whose other entries are
// small must fail as the whole matrix's factor fails.
func TestDomainCholeskyThreshold(t *testing.T) {
	bb := sparse.NewBlockBuilder(4, 1)
	bb.AddDiag(0, []float64{1e-15})
	bb.AddDiag(1, []float64{1e-3})
	bb.AddDiag(2, []float64{10})
	bb.AddDiag(3, []float64{10})
	bb.AddOff(1, 2, []float64{1e-4})
	m := bb.Build()
	central, err := sparse.AnalyzeBlocks(m, sparse.BlockAMD(m, 0))
	if err != nil {
		t.Fatal(err)
	}
	if central.FactorizeBlocks(m, 0) == nil {
		t.Fatal("the whole factor accepted a pivot below its threshold")
	}
	dc, err := sparse.NewDomainCholesky(m, []int{0, 0, 1, 1}, nil, 3)
	if err != nil {
		t.Fatal(err)
	}
	var npd *sparse.NotPositiveDefiniteError
	if err := dc.Factorize(m); !errors.As(err, &npd) || npd.Column != 0 {
		t.Fatalf("domain factor: %v, want a failed pivot at column 0", err)
	}
}

// factorOf factors m, supernodal or simplicial.
func factorOf(t *testing.T, m *sparse.BlockSym, simplicial bool) *sparse.Cholesky {
	t.Helper()
	var chol *sparse.Cholesky
	var err error
	if simplicial {
		chol, err = sparse.AnalyzeSimplicial(sparse.LowerCSC(m, 0, 0), nil)
	} else {
		chol, err = sparse.AnalyzeBlocks(m, sparse.BlockAMD(m, 0))
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := chol.FactorizeBlocks(m, 0); err != nil {
		t.Fatal(err)
	}
	return chol
}

// TestForwardMany: W = L^-1 P B has W^T W = B^T A^-1 B (gonum's dense
// solve), for several right-hand sides at once and in groups.
func TestForwardMany(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 9))
	for _, c := range cholCases {
		q, shift, _ := shiftedPD(t, rng, c, 1e-2)
		m := shiftedCopy(q, shift)
		n := m.Dim()
		for _, simplicial := range []bool{false, true} {
			chol := factorOf(t, m, simplicial)
			nrhs := 45
			b := randVec(rng, n*nrhs)
			w := make([]float64, n*nrhs)
			chol.ForwardMany(w, b, nrhs)
			// A multiple of the solve's group at a time (as
			// SchurPart.Factorize calls it, to hold a chunk of A_IB's
			// columns instead of all of them) gives the bits of one call.
			for _, chunk := range []int{8, 16, 32} {
				got := make([]float64, n*nrhs)
				for q0 := 0; q0 < nrhs; q0 += chunk {
					k := min(chunk, nrhs-q0)
					chol.ForwardMany(got[q0*n:(q0+k)*n], b[q0*n:(q0+k)*n], k)
				}
				for i := range w {
					if math.Float64bits(got[i]) != math.Float64bits(w[i]) {
						t.Fatalf("%+v, simplicial %v, chunks of %d: entry %d is %v, one call gives %v", c, simplicial, chunk, i, got[i], w[i])
					}
				}
			}
			var ch mat.Cholesky
			if !ch.Factorize(denseOf(m)) {
				t.Fatal("gonum Cholesky failed")
			}
			bm := mat.NewDense(nrhs, n, b) // rows are the right-hand sides
			var x mat.Dense
			if err := ch.SolveTo(&x, bm.T()); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < nrhs; i++ {
				for j := 0; j < nrhs; j++ {
					got, want := 0.0, 0.0
					for k := 0; k < n; k++ {
						got += w[i*n+k] * w[j*n+k]
						want += b[i*n+k] * x.At(k, j)
					}
					if math.Abs(got-want) > 1e-8*(1+math.Abs(want)) {
						t.Fatalf("%+v simplicial %v: (W^T W)[%d,%d] = %g, B^T A^-1 B %g", c, simplicial, i, j, got, want)
					}
				}
			}
		}
	}
}

// BenchmarkDomainCholesky factors the connection Laplacian of a 3-D
// lattice (plus a shift) whole and by 4 contiguous parts: the parts'
// interiors, their Schur complements and the boundary system.
func BenchmarkDomainCholesky(b *testing.B) {
	g, _, err := datasets.Cube(12, 12, 12, datasets.Config{Kappa: 30, Tau: 4, LoopProb: 0.2, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	m := shiftedCopy(g.Laplacian(posegraph.Poses), 1e-3)
	b.Run("whole", func(b *testing.B) {
		c, err := sparse.AnalyzeBlocks(m, sparse.BlockAMD(m, 0))
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if err := c.FactorizeBlocks(m, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parts=4", func(b *testing.B) {
		part := make([]int, m.N)
		for i := range part {
			part[i] = i * 4 / m.N
		}
		dc, err := sparse.NewDomainCholesky(m, part, nil, m.N-1)
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if err := dc.Factorize(m); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(dc.BoundaryBlocks()), "boundary-blocks")
	})
}

// TestBoundarySystemRelease: a boundary system released after a
// factorization and made again from the same contributions gives the same
// pivots and solves to the bit.
func TestBoundarySystemRelease(t *testing.T) {
	const b = 2
	parts := [][]int{{0, 1}, {2}}
	s, err := sparse.NewBoundarySystem(3, b, parts, [][2]int{{1, 2}}, 2)
	if err != nil {
		t.Fatal(err)
	}
	t0 := []float64{ // 4 x 4, symmetric positive definite
		4, 1, 0.5, 0,
		1, 5, 0, 0.25,
		0.5, 0, 6, 1,
		0, 0.25, 1, 7,
	}
	t1 := []float64{3, 0.5, 0.5, 2}
	off := []float64{0.3, -0.2, 0.1, 0.4}
	y := []float64{1, -2, 3, 0.5, -1, 2}
	solve := func() ([]float64, float64) {
		s.Reset()
		s.AddPart(0, t0)
		s.AddPart(1, t1)
		if err := s.AddOff(1, 2, off); err != nil {
			t.Fatal(err)
		}
		if err := s.Factorize(); err != nil {
			t.Fatal(err)
		}
		x := make([]float64, len(y))
		s.Solve(x, y)
		_, piv := s.MinPivot()
		return x, piv
	}
	x1, p1 := solve()
	s.Release()
	x2, p2 := solve()
	if math.Float64bits(p1) != math.Float64bits(p2) {
		t.Errorf("smallest pivot %v after Release, %v before", p2, p1)
	}
	for i := range x1 {
		if math.Float64bits(x1[i]) != math.Float64bits(x2[i]) {
			t.Errorf("solution entry %d is %v after Release, %v before", i, x2[i], x1[i])
		}
	}
}
