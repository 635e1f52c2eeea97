package sparsebench_test

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/bcmsync/bcmsync/g2o"
	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
)

// BenchmarkEig times the eigensolvers on real Q matrices: the largest
// eigenvalue by Lanczos, and the smallest (0, the common translation) by
// LOBPCG preconditioned with a factor of Q + tau I from FactorShifted.
// It also times PCG on Q + 1e-6 max diag I with block Jacobi.
func BenchmarkEig(b *testing.B) {
	dir := suiteDir(b)
	for _, name := range []string{"sphere2500", "city10000", "torus3D"} {
		g, err := g2o.ReadFile(filepath.Join(dir, name+".g2o"), g2o.ReadOptions{Lenient: true})
		if err != nil {
			b.Fatal(err)
		}
		q := g.Laplacian(posegraph.Poses)
		m := 0.0
		for i := 0; i < q.N; i++ {
			for a := 0; a < q.B; a++ {
				m = math.Max(m, q.Block(q.Diag[i])[a*q.B+a])
			}
		}
		b.Run(name+"/LargestEig", func(b *testing.B) {
			var res sparse.EigResult
			for b.Loop() {
				res, err = sparse.LargestEig(q, sparse.EigOptions{Tol: 1e-8})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(res.Iterations), "iters")
		})
		b.Run(name+"/SmallestEig-LOBPCG-shifted", func(b *testing.B) {
			var res sparse.EigResult
			for b.Loop() {
				pre, _, err := sparse.FactorShifted(q, 1e-8*m, 10)
				if err != nil {
					b.Fatal(err)
				}
				res, err = sparse.SmallestEig(q, sparse.EigOptions{Tol: 1e-8, Precond: pre})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(res.Iterations), "iters")
			b.ReportMetric(res.Value/m, "lambda/maxdiag")
		})
		b.Run(name+"/PCG-BlockJacobi", func(b *testing.B) {
			a := sparse.LowerCSC(q, 1e-6*m, 0)
			jac, err := sparse.NewBlockJacobi(q, 1e-6*m)
			if err != nil {
				b.Fatal(err)
			}
			rhs := make([]float64, a.N)
			for i := range rhs {
				rhs[i] = math.Sin(float64(i))
			}
			x := make([]float64, a.N)
			w := sparse.NewPCGWork(a.N)
			var res sparse.PCGResult
			for b.Loop() {
				for i := range x {
					x[i] = 0
				}
				res, err = sparse.PCG(a, x, rhs, jac, sparse.PCGOptions{Tol: 1e-8, MaxIter: 20000}, w)
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(res.Iterations), "iters")
		})
	}
}
