package bcm

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/g2o"
	"github.com/bcmsync/bcmsync/internal/smalldense"
	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
)

// randomRotation returns a rotation drawn from the polar factor of a
// Gaussian matrix, sign-corrected.
func randomRotation(rng *rand.Rand, d int) [9]float64 {
	var m, r [9]float64
	for k := 0; k < d*d; k++ {
		m[k] = rng.NormFloat64()
	}
	smalldense.NearestRotation(r[:d*d], m[:d*d], d)
	return r
}

// randomGraph returns a connected pose graph: a chain 0-1-...-(n-1) plus
// extra random edges, with measurements of a random ground truth perturbed
// by noise, and precisions in [0.5, 2].
func randomGraph(rng *rand.Rand, d, n, extra int, noise float64) *posegraph.Graph {
	g := &posegraph.Graph{D: d, IDs: make([]int, n)}
	truth := make([]posegraph.Pose, n)
	for i := range truth {
		g.IDs[i] = i
		truth[i].R = randomRotation(rng, d)
		for a := 0; a < d; a++ {
			truth[i].T[a] = 3 * rng.NormFloat64()
		}
	}
	add := func(i, j int) {
		e := posegraph.Edge{I: i, J: j, Kappa: 0.5 + 1.5*rng.Float64(), Tau: 0.5 + 1.5*rng.Float64()}
		ri, rj := truth[i].R, truth[j].R
		var m [9]float64
		for a := 0; a < d; a++ {
			for c := 0; c < d; c++ {
				for k := 0; k < d; k++ {
					m[a*d+c] += ri[k*d+a] * rj[k*d+c]
				}
				m[a*d+c] += noise * rng.NormFloat64()
			}
			for k := 0; k < d; k++ {
				e.T[a] += ri[k*d+a] * (truth[j].T[k] - truth[i].T[k])
			}
			e.T[a] += noise * rng.NormFloat64()
		}
		smalldense.NearestRotation(e.R[:d*d], m[:d*d], d)
		g.Edges = append(g.Edges, e)
	}
	for i := 0; i+1 < n; i++ {
		add(i, i+1)
	}
	for k := 0; k < extra; k++ {
		i, j := rng.IntN(n), rng.IntN(n)
		if i == j {
			continue
		}
		add(i, j)
	}
	return g
}

// denseX returns X as an r x (n b) gonum matrix.
func denseX(x *sparse.Blocks) *mat.Dense {
	m := mat.NewDense(x.R, x.N*x.B, nil)
	for i := 0; i < x.R; i++ {
		for c := 0; c < x.N*x.B; c++ {
			m.Set(i, c, x.At(i, c))
		}
	}
	return m
}

// denseCost is the oracle F = tr(X Q X^T) with gonum.
func denseCost(q *sparse.BlockSym, x *sparse.Blocks) float64 {
	qd := mat.NewDense(q.Dim(), q.Dim(), q.Dense())
	xd := denseX(x)
	var xq, f mat.Dense
	xq.Mul(xd, qd)
	f.Mul(&xq, xd.T())
	return mat.Trace(&f)
}

// loadG2O reads one of the shared benchmark graphs (skipped, or failed
// under CI, when they are missing).
func loadG2O(t testing.TB, name string) *posegraph.Graph {
	t.Helper()
	g, err := g2o.ReadFile(filepath.Join(datasets.SuiteOrSkip(t), name), g2o.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func name(kind posegraph.Problem, d, r int) string {
	return fmt.Sprintf("%v/d=%d/r=%d", kind, d, r)
}
