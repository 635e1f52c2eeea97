package sparse_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/bcmsync/bcmsync/internal/sparse"
)

// selinvCases add to cholCases matrices whose supernodes are large enough
// for the dense products to take the BLAS and assembly paths.
var selinvCases = append(append([]cholCase(nil), cholCases...),
	cholCase{60, 4, 1, 0.3}, cholCase{40, 6, 2, 0.5}, cholCase{150, 3, 1, 0.03})

// TestSelectedInverse compares the selected inverse with gonum's dense
// inverse on every entry the factor's pattern holds, for factors made
// from the blocks and from the scalar lower triangle, and checks that the
// pattern holds every entry of the matrix itself and that entries between
// disconnected components are reported as off the pattern.
func TestSelectedInverse(t *testing.T) {
	rng := rand.New(rand.NewPCG(28, 2))
	for ci, cc := range selinvCases {
		t.Run(fmt.Sprint(ci), func(t *testing.T) {
			q, shift, _ := shiftedPD(t, rng, cc, 1e-2)
			n := q.N * q.B
			d := denseOf(q)
			for i := 0; i < n; i++ {
				d.SetSym(i, i, d.At(i, i)+shift)
			}
			var inv mat.Dense
			if err := inv.Inverse(d); err != nil {
				t.Fatal(err)
			}
			scale := 0.0
			for i := 0; i < n; i++ {
				scale = max(scale, math.Abs(inv.At(i, i)))
			}
			blocks, err := sparse.AnalyzeBlocks(q, sparse.BlockOrder(q, 0))
			if err != nil {
				t.Fatal(err)
			}
			if err := blocks.FactorizeBlocks(q, shift); err != nil {
				t.Fatal(err)
			}
			scalar, err := sparse.NewCholesky(sparse.LowerCSC(q, shift, 0))
			if err != nil {
				t.Fatal(err)
			}
			for name, c := range map[string]*sparse.Cholesky{"blocks": blocks, "scalar": scalar} {
				si, err := c.SelectedInverse()
				if err != nil {
					t.Fatal(err)
				}
				if si.N() != n {
					t.Fatalf("%s: order %d, want %d", name, si.N(), n)
				}
				on := 0
				for i := 0; i < n; i++ {
					for j := 0; j < n; j++ {
						v, ok := si.At(i, j)
						if w, _ := si.At(j, i); v != w {
							t.Fatalf("%s: At(%d, %d) = %v but At(%d, %d) = %v", name, i, j, v, j, i, w)
						}
						if !ok {
							if d.At(i, j) != 0 {
								t.Fatalf("%s: entry (%d, %d) of the matrix is off the pattern", name, i, j)
							}
							continue
						}
						on++
						if want := inv.At(i, j); math.Abs(v-want) > 1e-10*scale {
							t.Fatalf("%s: Z(%d, %d) = %v, dense inverse %v", name, i, j, v, want)
						}
					}
				}
				// Pairs across components are never on the pattern.
				if cc.ncomp > 1 {
					if _, ok := si.At(0, q.B); ok {
						t.Errorf("%s: entry between blocks 0 and 1 of different components is on the pattern", name)
					}
				}
				if on < n {
					t.Errorf("%s: only %d entries on the pattern for order %d", name, on, n)
				}
				// A diagonal block through Submatrix.
				idx := make([]int, q.B)
				for k := range idx {
					idx[k] = (q.N-1)*q.B + k
				}
				sub := make([]float64, q.B*q.B)
				if !si.Submatrix(sub, idx) {
					t.Fatalf("%s: the last diagonal block is off the pattern", name)
				}
				for a := range idx {
					for b := range idx {
						if want := inv.At(idx[a], idx[b]); math.Abs(sub[a*q.B+b]-want) > 1e-10*scale {
							t.Fatalf("%s: Submatrix (%d, %d) = %v, dense %v", name, a, b, sub[a*q.B+b], want)
						}
					}
				}
				// The selected inverse survives a refactorization.
				before, _ := si.At(n-1, n-1)
				if err := c.Factorize(sparse.LowerCSC(q, shift+1, 0)); err != nil {
					t.Fatal(err)
				}
				if after, _ := si.At(n-1, n-1); after != before {
					t.Errorf("%s: refactoring the Cholesky changed the selected inverse", name)
				}
			}
		})
	}
}

// TestSelectedInverseRefuses checks that a simplicial, failed or modified
// factor gives an error, not an inverse of something else.
func TestSelectedInverseRefuses(t *testing.T) {
	rng := rand.New(rand.NewPCG(28, 3))
	q, shift, anorm := shiftedPD(t, rng, cholCase{20, 3, 1, 0.2}, 1e-2)
	simp, err := sparse.AnalyzeSimplicial(sparse.LowerCSC(q, 0, 0), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := simp.Factorize(sparse.LowerCSC(q, shift, 0)); err != nil {
		t.Fatal(err)
	}
	if _, err := simp.SelectedInverse(); err == nil {
		t.Error("a simplicial factor gave a selected inverse")
	}
	c, err := sparse.AnalyzeBlocks(q, sparse.BlockOrder(q, 0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.SelectedInverse(); err == nil {
		t.Error("an analysed but unfactored Cholesky gave a selected inverse")
	}
	if err := c.FactorizeBlocks(q, shift-0.5*anorm); err == nil {
		t.Fatal("an indefinite matrix factored")
	}
	if _, err := c.SelectedInverse(); err == nil {
		t.Error("a failed factor gave a selected inverse")
	}
	raised, err := c.FactorizeBlocksModified(q, shift-0.011*anorm, 1e-3*anorm, 1e3*anorm)
	if err != nil {
		t.Fatal(err)
	}
	if raised == 0 {
		t.Fatal("the modified factorization of an indefinite matrix raised no pivot")
	}
	if _, err := c.SelectedInverse(); err == nil {
		t.Error("a modified factor with raised pivots gave a selected inverse")
	}
}

// BenchmarkSelectedInverse times the selected inversion of a 3-D grid
// Laplacian's factor against the factorization itself.
func BenchmarkSelectedInverse(b *testing.B) {
	a := gridCSC(24, 3)
	c, err := sparse.NewCholesky(a)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("factor", func(b *testing.B) {
		for b.Loop() {
			if err := c.Factorize(a); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("selinv", func(b *testing.B) {
		for b.Loop() {
			if _, err := c.SelectedInverse(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
