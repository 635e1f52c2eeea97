package sparse_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/bcmsync/bcmsync/internal/sparse"
)

func TestPCG(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	precs := []struct {
		name string
		make func(q *sparse.BlockSym, a *sparse.CSC, shift float64) (sparse.Preconditioner, error)
	}{
		{"none", func(*sparse.BlockSym, *sparse.CSC, float64) (sparse.Preconditioner, error) { return nil, nil }},
		{"BlockJacobi", func(q *sparse.BlockSym, _ *sparse.CSC, shift float64) (sparse.Preconditioner, error) {
			return sparse.NewBlockJacobi(q, shift)
		}},
		{"Cholesky", func(_ *sparse.BlockSym, a *sparse.CSC, _ float64) (sparse.Preconditioner, error) {
			return sparse.NewCholesky(a)
		}},
	}
	for ci, c := range cholCases {
		q, shift, _ := shiftedPD(t, rng, c, 0.05)
		a := sparse.LowerCSC(q, shift, 0)
		n := a.N
		ad := denseOf(a)
		var dc mat.Cholesky
		if !dc.Factorize(ad) {
			t.Fatal("dense Cholesky failed")
		}
		b := randVec(rng, n)
		var xd mat.VecDense
		if err := dc.SolveVecTo(&xd, mat.NewVecDense(n, b)); err != nil {
			t.Fatal(err)
		}
		w := sparse.NewPCGWork(n)
		for _, p := range precs {
			t.Run(fmt.Sprintf("%d/%s", ci, p.name), func(t *testing.T) {
				m, err := p.make(q, a, shift)
				if err != nil {
					t.Fatal(err)
				}
				x := randVec(rng, n) // arbitrary initial guess
				res, err := sparse.PCG(a, x, b, m, sparse.PCGOptions{Tol: 1e-11, MaxIter: 20 * n}, w)
				if err != nil {
					t.Fatal(err)
				}
				if !res.Converged || res.Residual > 1e-11 {
					t.Fatalf("not converged: %+v", res)
				}
				if p.name == "Cholesky" && res.Iterations > 2 {
					t.Errorf("exact preconditioner took %d iterations", res.Iterations)
				}
				errNorm := 0.0
				for i := range x {
					d := x[i] - xd.AtVec(i)
					errNorm += d * d
				}
				if errNorm > 1e-16*dc.Cond()*dc.Cond()*vnorm(b)*vnorm(b) {
					t.Errorf("error %g vs dense solution", errNorm)
				}
			})
		}
	}
}

func TestPCGIndefinite(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	q, shift, _ := shiftedPD(t, rng, cholCase{30, 3, 1, 0.1}, -0.2)
	a := sparse.LowerCSC(q, shift, 0)
	x := make([]float64, a.N)
	_, err := sparse.PCG(a, x, randVec(rng, a.N), nil, sparse.PCGOptions{MaxIter: 10 * a.N}, nil)
	if !errors.Is(err, sparse.ErrNotPositiveDefinite) {
		t.Errorf("want ErrNotPositiveDefinite, got %v", err)
	}
	if _, err := sparse.PCG(a, x[:3], x, nil, sparse.PCGOptions{}, nil); err == nil {
		t.Error("length mismatch accepted")
	}
	if _, err := sparse.NewBlockJacobi(q, -1e6); !sparse.IsNotPositiveDefinite(err) {
		t.Errorf("BlockJacobi of a negative definite diagonal: %v", err)
	}
}

func TestNoAllocation(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 20))
	q, shift, _ := shiftedPD(t, rng, cholCase{40, 3, 1, 0.1}, 0.1)
	a := sparse.LowerCSC(q, shift, 0)
	ch, err := sparse.NewCholesky(a)
	if err != nil {
		t.Fatal(err)
	}
	simp, err := sparse.AnalyzeSimplicial(a, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := simp.Factorize(a); err != nil {
		t.Fatal(err)
	}
	jac, err := sparse.NewBlockJacobi(q, shift)
	if err != nil {
		t.Fatal(err)
	}
	n := a.N
	b := randVec(rng, 2*n)
	x := make([]float64, 2*n)
	w := sparse.NewPCGWork(n)
	checks := map[string]func(){
		"Solve":            func() { ch.Solve(x[:n], b[:n]) },
		"SolveSimplicial":  func() { simp.Solve(x[:n], b[:n]) },
		"SolveMany":        func() { ch.SolveMany(x, b, 2) },
		"BlockJacobi":      func() { jac.Precondition(x[:n], b[:n]) },
		"PCG":              func() { sparse.PCG(a, x[:n], b[:n], ch, sparse.PCGOptions{}, w) },
		"FactorSimplicial": func() { simp.Factorize(a) },
	}
	for name, f := range checks {
		if allocs := testing.AllocsPerRun(5, f); allocs > 0 {
			t.Errorf("%s allocates %v times", name, allocs)
		}
	}
	// The supernodal refactorization starts goroutines: a few small
	// allocations, none of the size of the problem.
	if allocs := testing.AllocsPerRun(5, func() { ch.Factorize(a) }); allocs > 10 {
		t.Errorf("Factorize allocates %v times", allocs)
	}
}
