package sparse

import (
	"math/rand/v2"
	"testing"
)

// ScaleCongruent is D m D with D = diag(scale), checked entry by entry on
// the dense matrix.
func TestScaleCongruent(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const n, b = 5, 3
	bb := NewBlockBuilder(n, b)
	blk := func() []float64 {
		m := make([]float64, b*b)
		for k := range m {
			m[k] = rng.NormFloat64()
		}
		return m
	}
	for i := 0; i < n; i++ {
		d := blk()
		for a := 0; a < b; a++ {
			for e := 0; e < a; e++ {
				d[a*b+e] = d[e*b+a]
			}
		}
		bb.AddDiag(i, d)
		if i > 0 {
			bb.AddOff(i-1, i, blk())
		}
	}
	bb.AddOff(0, n-1, blk())
	m := bb.Build()
	scale := make([]float64, n*b)
	for k := range scale {
		scale[k] = 0.1 + rng.Float64()
	}
	want := m.Dense()
	ScaleCongruent(m, scale)
	got := m.Dense()
	dim := n * b
	for r := 0; r < dim; r++ {
		for c := 0; c < dim; c++ {
			if w := want[r*dim+c] * (scale[r] * scale[c]); got[r*dim+c] != w {
				t.Fatalf("entry (%d, %d): %g, want %g", r, c, got[r*dim+c], w)
			}
		}
	}
}
