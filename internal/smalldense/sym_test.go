package smalldense

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

func TestSymAtB(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, d := range []int{2, 3} {
		for _, bw := range []int{d, d + 1} {
			for r := d; r <= 7; r++ {
				a, b := make([]float64, r*bw), make([]float64, r*bw)
				for k := range a {
					a[k], b[k] = rng.NormFloat64(), rng.NormFloat64()
				}
				// Oracle: the first d columns as gonum matrices.
				am, bm := mat.NewDense(r, bw, a).Slice(0, r, 0, d), mat.NewDense(r, bw, b).Slice(0, r, 0, d)
				var ab, ba mat.Dense
				ab.Mul(am.T(), bm)
				ba.Mul(bm.T(), am)
				got := make([]float64, d*d)
				SymAtB(got, a, b, r, bw, d)
				for i := 0; i < d; i++ {
					for j := 0; j < d; j++ {
						want := (ab.At(i, j) + ba.At(i, j)) / 2
						if math.Abs(got[i*d+j]-want) > 1e-13*(1+math.Abs(want)) {
							t.Fatalf("d=%d b=%d r=%d: (%d,%d) = %v, want %v", d, bw, r, i, j, got[i*d+j], want)
						}
					}
				}
			}
		}
	}
}
