package smalldense

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// TestMul compares Mul and MulTN with gonum's dense products for d = 1..3,
// and checks that the entries beyond d*d stay zero.
func TestMul(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for d := 1; d <= 3; d++ {
		var a, b [9]float64
		for k := 0; k < d*d; k++ {
			a[k], b[k] = rng.NormFloat64(), rng.NormFloat64()
		}
		ma := mat.NewDense(d, d, append([]float64(nil), a[:d*d]...))
		mb := mat.NewDense(d, d, append([]float64(nil), b[:d*d]...))
		var want, wantTN mat.Dense
		want.Mul(ma, mb)
		wantTN.Mul(ma.T(), mb)
		got, gotTN := Mul(&a, &b, d), MulTN(&a, &b, d)
		for i := 0; i < d; i++ {
			for j := 0; j < d; j++ {
				if math.Abs(got[i*d+j]-want.At(i, j)) > 1e-14 {
					t.Errorf("d=%d: Mul[%d,%d] = %v, want %v", d, i, j, got[i*d+j], want.At(i, j))
				}
				if math.Abs(gotTN[i*d+j]-wantTN.At(i, j)) > 1e-14 {
					t.Errorf("d=%d: MulTN[%d,%d] = %v, want %v", d, i, j, gotTN[i*d+j], wantTN.At(i, j))
				}
			}
		}
		for k := d * d; k < 9; k++ {
			if got[k] != 0 || gotTN[k] != 0 {
				t.Errorf("d=%d: entry %d beyond d*d is %v, %v", d, k, got[k], gotTN[k])
			}
		}
	}
}

// TestMulTVec compares MulTVec with gonum's a^T v for d = 1..3, and checks
// that the entries beyond d stay zero.
func TestMulTVec(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for d := 1; d <= 3; d++ {
		var a [9]float64
		var v [3]float64
		for k := 0; k < d*d; k++ {
			a[k] = rng.NormFloat64()
		}
		for k := 0; k < d; k++ {
			v[k] = rng.NormFloat64()
		}
		ma := mat.NewDense(d, d, append([]float64(nil), a[:d*d]...))
		var want mat.VecDense
		want.MulVec(ma.T(), mat.NewVecDense(d, append([]float64(nil), v[:d]...)))
		got := MulTVec(&a, &v, d)
		for i := 0; i < d; i++ {
			if math.Abs(got[i]-want.AtVec(i)) > 1e-14 {
				t.Errorf("d=%d: MulTVec[%d] = %v, want %v", d, i, got[i], want.AtVec(i))
			}
		}
		for k := d; k < 3; k++ {
			if got[k] != 0 {
				t.Errorf("d=%d: entry %d beyond d is %v", d, k, got[k])
			}
		}
	}
}
