package posegraph

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// rawRotation is what SE-Sync's reader makes of a printed quaternion
// q = s u: I + s^2 (R(u) - I), off orthogonal by O(|s^2 - 1|). In 2-D it is
// the same formula on the rotation's matrix (no reader produces it; it
// exercises the d = 2 branches).
func rawRotation(r [9]float64, d int, s2 float64) [9]float64 {
	var out [9]float64
	for a := 0; a < d; a++ {
		for c := 0; c < d; c++ {
			v := s2 * r[a*d+c]
			if a == c {
				v += 1 - s2
			}
			out[a*d+c] = v
		}
	}
	return out
}

// rawGraph is randomGraph with every edge rotation replaced by its raw
// reading, |s^2 - 1| up to eps, and RawRotations set.
func rawGraph(rng *rand.Rand, d, n, extra int, eps float64) *Graph {
	g := randomGraph(rng, d, n, extra)
	g.RawRotations = true
	for k := range g.Edges {
		e := &g.Edges[k]
		e.R = rawRotation(e.R, d, 1+eps*(2*rng.Float64()-1))
	}
	return g
}

// denseQSESync is SE-Sync's data matrix by dense gonum arithmetic: the
// edge-residual assembly denseQ, whose (i, i) rotation block receives
// kappa R_e R_e^T, with that term replaced by kappa I as SE-Sync writes it.
func denseQSESync(g *Graph, p Problem) *mat.Dense {
	q := denseQ(g, p)
	d, b := g.D, p.BlockSize(g.D)
	for _, e := range g.Edges {
		r := mat.NewDense(d, d, append([]float64(nil), e.R[:d*d]...))
		var rrT mat.Dense
		rrT.Mul(r, r.T())
		for a := 0; a < d; a++ {
			for c := 0; c < d; c++ {
				v := -e.Kappa * rrT.At(a, c)
				if a == c {
					v += e.Kappa
				}
				q.Set(e.I*b+a, e.I*b+c, q.At(e.I*b+a, e.I*b+c)+v)
			}
		}
	}
	return q
}

// denseTrace is tr(X Q X^T) by dense gonum products, X the lifted poses.
func denseTrace(g *Graph, x []Pose, p Problem, q *mat.Dense) float64 {
	d, b := g.D, p.BlockSize(g.D)
	xm := mat.NewDense(d, b*len(x), nil)
	for i := range x {
		for a := 0; a < d; a++ {
			for c := 0; c < d; c++ {
				xm.Set(a, i*b+c, x[i].R[a*d+c])
			}
			if p == Poses {
				xm.Set(a, i*b+d, x[i].T[a])
			}
		}
	}
	var xq, xqxT mat.Dense
	xq.Mul(xm, q)
	xqxT.Mul(&xq, xm.T())
	return mat.Trace(&xqxT)
}

// With RawRotations, Laplacian is SE-Sync's Q (kappa I on the diagonal
// blocks), and Cost, TraceCost and a dense tr(X Q X^T) agree; without it
// Cost is the edge formula, and the two differ by sum kappa (d - ||R_e||^2).
func TestRawRotationsCostIsTraceCost(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, p := range []Problem{Poses, Rotations} {
		for _, d := range []int{2, 3} {
			// 3.4e-6 is the largest |s^2 - 1| of the published files;
			// 1e-3 makes the constant large against rounding.
			for _, eps := range []float64{3.4e-6, 1e-3} {
				n := 3 + rng.IntN(10)
				g := rawGraph(rng, d, n, rng.IntN(2*n), eps)
				x := randomPoses(rng, d, n)
				t.Run(fmt.Sprintf("%v/d=%d/eps=%g", p, d, eps), func(t *testing.T) {
					q := g.Laplacian(p)
					want := denseQSESync(g, p)
					got := mat.NewDense(q.Dim(), q.Dim(), q.Dense())
					if !mat.EqualApprox(got, want, 1e-13*(1+mat.Norm(want, math.Inf(1)))) {
						t.Fatalf("Laplacian differs from SE-Sync's dense Q:\ngot  %v\nwant %v", mat.Formatted(got), mat.Formatted(want))
					}
					dense := denseTrace(g, x, p, want)
					cost := g.Cost(x, p)
					if math.Abs(cost-dense) > 1e-12*math.Abs(dense) {
						t.Errorf("Cost %.17g, dense tr(X Q X^T) %.17g: relative %.2g", cost, dense, (cost-dense)/dense)
					}
					X := g.Lift(x, p, d+1)
					tr := TraceCost(q, X, g.Lift(x, p, d+1))
					if math.Abs(tr-dense) > 1e-12*math.Abs(dense) {
						t.Errorf("TraceCost %.17g, dense %.17g", tr, dense)
					}
					// The edge formula: the flag off, and the dense
					// evaluation with the edge-residual Q.
					shift := 0.0
					for _, e := range g.Edges {
						s := float64(d)
						for _, v := range e.R[:d*d] {
							s -= v * v
						}
						shift += e.Kappa * s
					}
					if math.Abs(shift) < 1e-9*math.Abs(dense) {
						t.Fatalf("constant %g too small to tell the readings apart", shift)
					}
					h := *g
					h.RawRotations = false
					edge := h.Cost(x, p)
					if de := denseTrace(g, x, p, denseQ(g, p)); math.Abs(edge-de) > 1e-12*math.Abs(de) {
						t.Errorf("flag off: Cost %.17g, dense edge-formula tr %.17g", edge, de)
					}
					if diff := cost - edge; math.Abs(diff-shift) > 1e-12*math.Abs(dense) {
						t.Errorf("Cost(raw) - Cost(edge) = %.6g, want sum kappa (d - ||R||^2) = %.6g", diff, shift)
					}
					// EdgeCost is the edge formula whatever the flag: on
					// the raw graph its terms sum to the flag-off Cost.
					sum := 0.0
					for k := range g.Edges {
						sum += g.EdgeCost(&g.Edges[k], x, p)
					}
					if math.Abs(sum-edge) > 1e-12*math.Abs(dense) {
						t.Errorf("sum of EdgeCost %.17g, Cost(edge) %.17g", sum, edge)
					}
				})
			}
		}
	}
}

// Validate accepts raw rotations within RawRotationTol only with the flag,
// and rejects them beyond it with the file and line either way.
func TestValidateRawRotations(t *testing.T) {
	// A quarter turn about z: ||R^T R - I||_F + |det R - 1| of the raw
	// reading is about (2 sqrt 2 + 2) |s^2 - 1|.
	quarter := [9]float64{0, -1, 0, 1, 0, 0, 0, 0, 1}
	mk := func(s2 float64, raw bool) *Graph {
		rng := rand.New(rand.NewPCG(13, 14))
		g := randomGraph(rng, 3, 5, 2)
		g.Source, g.RawRotations = "raw.g2o", raw
		g.Edges[1].R = rawRotation(quarter, 3, s2)
		g.Edges[1].Line = 42
		return g
	}
	r := rawRotation(quarter, 3, 1+1e-5)
	dev := rotationDeviation(r[:], 3)
	if !(dev > 1e-6 && dev < RawRotationTol) {
		t.Fatalf("test rotation's deviation %g is not between the two tolerances", dev)
	}
	if err := mk(1+1e-5, true).Validate(); err != nil {
		t.Errorf("raw reading, |s^2 - 1| = 1e-5: %v", err)
	}
	if err := mk(1-1e-5, true).Validate(); err != nil {
		t.Errorf("raw reading, |s^2 - 1| = -1e-5: %v", err)
	}
	if err := mk(1+1e-5, false).Validate(); err == nil || !strings.Contains(err.Error(), "raw.g2o:42: measurement is not a rotation") {
		t.Errorf("default reading, |s^2 - 1| = 1e-5: Validate = %v, want raw.g2o:42 not a rotation", err)
	}
	for _, raw := range []bool{false, true} {
		err := mk(1+1e-3, raw).Validate()
		if err == nil || !strings.Contains(err.Error(), "raw.g2o:42: measurement is not a rotation") {
			t.Errorf("raw=%v, |s^2 - 1| = 1e-3: Validate = %v, want raw.g2o:42 not a rotation", raw, err)
		}
		if raw && err != nil && !strings.Contains(err.Error(), "SE-Sync's raw reading") {
			t.Errorf("raw reading's message %q should say which reading failed", err)
		}
	}
}

func TestSubgraphKeepsRawRotations(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	g := rawGraph(rng, 3, 6, 3, 1e-5)
	s := g.Subgraph([]int{0, 1, 2})
	if !s.RawRotations {
		t.Fatal("Subgraph dropped RawRotations")
	}
	if err := s.Validate(); err != nil {
		t.Errorf("raw subgraph rejected: %v", err)
	}
}
