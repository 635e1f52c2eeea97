package smalldense

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// gonumPolar is the oracle: U_d V^T and the singular values from gonum's SVD.
func gonumPolar(h []float64, r, d int) ([]float64, []float64) {
	var svd mat.SVD
	if !svd.Factorize(mat.NewDense(r, d, append([]float64(nil), h...)), mat.SVDThin) {
		panic("svd failed")
	}
	var u, v mat.Dense
	svd.UTo(&u)
	svd.VTo(&v)
	var p mat.Dense
	p.Mul(&u, v.T())
	return p.RawMatrix().Data, svd.Values(nil)
}

// randLowRank returns an r x d matrix with the given singular values and
// random singular vectors.
func randLowRank(rng *rand.Rand, r, d int, s []float64) []float64 {
	u := randOrth(rng, r, d)
	v := randOrth(rng, d, d)
	h := make([]float64, r*d)
	for i := 0; i < r; i++ {
		for c := 0; c < d; c++ {
			for k := 0; k < d; k++ {
				h[i*d+c] += u[i*d+k] * s[k] * v[c*d+k]
			}
		}
	}
	return h
}

func randOrth(rng *rand.Rand, r, d int) []float64 {
	g := mat.NewDense(r, d, nil)
	for i := 0; i < r; i++ {
		for c := 0; c < d; c++ {
			g.Set(i, c, rng.NormFloat64())
		}
	}
	var qr mat.QR
	qr.Factorize(g)
	var q mat.Dense
	qr.QTo(&q)
	out := make([]float64, r*d)
	for i := 0; i < r; i++ {
		for c := 0; c < d; c++ {
			out[i*d+c] = q.At(i, c)
		}
	}
	return out
}

// checkStiefel fails unless y^T y = I_d to tol.
func checkStiefel(t *testing.T, y []float64, r, d int, tol float64, what string) {
	t.Helper()
	for a := 0; a < d; a++ {
		for b := 0; b < d; b++ {
			s := 0.0
			for i := 0; i < r; i++ {
				s += y[i*d+a] * y[i*d+b]
			}
			want := 0.0
			if a == b {
				want = 1
			}
			if math.Abs(s-want) > tol {
				t.Fatalf("%s: (Y^T Y)[%d][%d] = %v, want %v", what, a, b, s, want)
			}
		}
	}
}

func inner(a, b []float64) float64 {
	s := 0.0
	for k := range a {
		s += a[k] * b[k]
	}
	return s
}

func TestPolarRandomMatchesGonum(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for d := 1; d <= 3; d++ {
		// r = 20 exercises the allocating path above MaxRows.
		for _, r := range []int{d, d + 1, 4, 5, 6, 7, 8, 9, 10, MaxRows, 20} {
			if r < d {
				continue
			}
			for trial := 0; trial < 50; trial++ {
				h := make([]float64, r*d)
				for k := range h {
					h[k] = rng.NormFloat64()
				}
				dst := make([]float64, r*d)
				nuc := Polar(dst, h, r, d)
				want, sv := gonumPolar(h, r, d)
				wantNuc := 0.0
				for _, s := range sv {
					wantNuc += s
				}
				if math.Abs(nuc-wantNuc) > 1e-13*wantNuc {
					t.Fatalf("r=%d d=%d: nuclear %v, gonum %v", r, d, nuc, wantNuc)
				}
				// The polar factor is unique for full rank; its error scales
				// like eps / sigma_min.
				tol := 1e-13 * sv[0] / sv[d-1]
				for k := range dst {
					if math.Abs(dst[k]-want[k]) > tol {
						t.Fatalf("r=%d d=%d: polar[%d] = %v, gonum %v", r, d, k, dst[k], want[k])
					}
				}
				checkStiefel(t, dst, r, d, 1e-14, "random")
				if got := inner(h, dst); math.Abs(got-wantNuc) > 1e-13*wantNuc {
					t.Fatalf("<h, Polar(h)> = %v, want ||h||_* = %v", got, wantNuc)
				}
			}
		}
	}
}

// TestPolarRankDeficient covers ranks d-1 down to 0 and nearly deficient
// matrices: the result must be Stiefel and attain <h, Y> = ||h||_*, which is
// what makes it a minimizer of <-h, Y>.
func TestPolarRankDeficient(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for d := 1; d <= 3; d++ {
		for r := d; r <= 10; r++ {
			for rank := 0; rank <= d; rank++ {
				for _, tiny := range []float64{0, 1e-300, 1e-17, 1e-12, 1e-8} {
					s := make([]float64, d)
					for k := range s {
						if k < rank {
							s[k] = 0.5 + rng.Float64()
						} else {
							s[k] = tiny
						}
					}
					h := randLowRank(rng, r, d, s)
					if rank == 0 && tiny == 0 {
						for k := range h {
							h[k] = 0
						}
					}
					dst := make([]float64, r*d)
					nuc := Polar(dst, h, r, d)
					name := fmt.Sprintf("r=%d d=%d rank=%d tiny=%g", r, d, rank, tiny)
					checkStiefel(t, dst, r, d, 1e-14, name)
					_, sv := gonumPolar(h, r, d)
					wantNuc := 0.0
					for _, x := range sv {
						wantNuc += x
					}
					scale := sv[0] + 1e-300
					if math.Abs(nuc-wantNuc) > 1e-14*scale {
						t.Fatalf("%s: nuclear %v, gonum %v", name, nuc, wantNuc)
					}
					if got := inner(h, dst); math.Abs(got-wantNuc) > 1e-14*scale {
						t.Fatalf("%s: <h, Y> = %v, want %v", name, got, wantNuc)
					}
				}
			}
		}
	}
}

func TestPolarZeroIsDeterministic(t *testing.T) {
	for d := 1; d <= 3; d++ {
		for r := d; r <= 6; r++ {
			dst := make([]float64, r*d)
			if nuc := Polar(dst, make([]float64, r*d), r, d); nuc != 0 {
				t.Fatalf("nuclear norm of zero = %v", nuc)
			}
			for i := 0; i < r; i++ {
				for c := 0; c < d; c++ {
					want := 0.0
					if i == c {
						want = 1
					}
					if dst[i*d+c] != want {
						t.Fatalf("r=%d d=%d: Polar(0) = %v, want I_{r x d}", r, d, dst)
					}
				}
			}
		}
	}
}

func TestPolarScaling(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, scale := range []float64{1e-310, 1e-200, 1e-100, 1, 1e100, 1e200, 1e300} {
		for d := 2; d <= 3; d++ {
			r := 5
			h := make([]float64, r*d)
			for k := range h {
				h[k] = rng.NormFloat64()
			}
			ref := make([]float64, r*d)
			refNuc := Polar(ref, h, r, d)
			hs := make([]float64, r*d)
			for k := range h {
				hs[k] = h[k] * scale
			}
			dst := make([]float64, r*d)
			nuc := Polar(dst, hs, r, d)
			tol := 1e-13
			if scale < 1e-300 {
				tol = 1e-5 // subnormal inputs carry few significant bits
			}
			if math.Abs(nuc/scale-refNuc) > tol*refNuc {
				t.Fatalf("scale %g: nuclear %v, want %v", scale, nuc, refNuc*scale)
			}
			for k := range dst {
				if math.Abs(dst[k]-ref[k]) > tol*100 {
					t.Fatalf("scale %g: polar differs: %v vs %v", scale, dst, ref)
				}
			}
		}
	}
}

func TestPolarAliasing(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	h := make([]float64, 12)
	for k := range h {
		h[k] = rng.NormFloat64()
	}
	want := make([]float64, 12)
	Polar(want, h, 4, 3)
	Polar(h, h, 4, 3)
	for k := range h {
		if h[k] != want[k] {
			t.Fatalf("aliased Polar differs at %d", k)
		}
	}
}

func TestNuclear(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for d := 1; d <= 3; d++ {
		for r := d; r <= 10; r++ {
			h := make([]float64, r*d)
			for k := range h {
				h[k] = rng.NormFloat64()
			}
			_, sv := gonumPolar(h, r, d)
			want := 0.0
			for _, s := range sv {
				want += s
			}
			if got := Nuclear(h, r, d); math.Abs(got-want) > 1e-13*want {
				t.Fatalf("Nuclear = %v, gonum %v", got, want)
			}
		}
	}
}

func TestNearestRotation(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for d := 2; d <= 3; d++ {
		for trial := 0; trial < 200; trial++ {
			m := make([]float64, d*d)
			for k := range m {
				m[k] = rng.NormFloat64()
			}
			dst := make([]float64, d*d)
			NearestRotation(dst, m, d)
			checkStiefel(t, dst, d, d, 1e-14, "rotation")
			if dt := det(dst, d); math.Abs(dt-1) > 1e-13 {
				t.Fatalf("det = %v", dt)
			}
			// Oracle: gonum SVD with the determinant correction.
			var svd mat.SVD
			svd.Factorize(mat.NewDense(d, d, append([]float64(nil), m...)), mat.SVDFull)
			var u, v mat.Dense
			svd.UTo(&u)
			svd.VTo(&v)
			sgn := mat.Det(&u) * mat.Det(&v)
			if sgn < 0 {
				for i := 0; i < d; i++ {
					u.Set(i, d-1, -u.At(i, d-1))
				}
			}
			var want mat.Dense
			want.Mul(&u, v.T())
			sv := svd.Values(nil)
			tol := 1e-12 * sv[0] / sv[d-1]
			if sgn < 0 {
				// Reflection case: conditioned by the gap of the two smallest.
				tol = 1e-12 * sv[0] / (sv[d-2] - sv[d-1] + 1e-300)
			}
			for i := 0; i < d; i++ {
				for c := 0; c < d; c++ {
					if math.Abs(dst[i*d+c]-want.At(i, c)) > tol {
						t.Fatalf("trial %d: nearest rotation %v, gonum %v", trial, dst, mat.Formatted(&want))
					}
				}
			}
		}
	}
	// A rotation maps to itself; a reflection-perturbed rotation to a rotation.
	r := []float64{0, -1, 0, 1, 0, 0, 0, 0, 1}
	dst := make([]float64, 9)
	NearestRotation(dst, r, 3)
	for k := range r {
		if math.Abs(dst[k]-r[k]) > 1e-15 {
			t.Fatalf("rotation not fixed: %v", dst)
		}
	}
}

func TestPolarNoAllocs(t *testing.T) {
	h := make([]float64, 30)
	for k := range h {
		h[k] = float64(k%7) - 3
	}
	dst := make([]float64, 30)
	if n := testing.AllocsPerRun(100, func() { Polar(dst, h, 10, 3) }); n != 0 {
		t.Fatalf("Polar allocates %v times", n)
	}
	if n := testing.AllocsPerRun(100, func() { NearestRotation(dst[:9], h[:9], 3) }); n != 0 {
		t.Fatalf("NearestRotation allocates %v times", n)
	}
}

func BenchmarkPolar(b *testing.B) {
	for _, d := range []int{2, 3} {
		for r := 3; r <= 10; r++ {
			if r < d {
				continue
			}
			rng := rand.New(rand.NewPCG(uint64(r), uint64(d)))
			h := make([]float64, r*d)
			for k := range h {
				h[k] = rng.NormFloat64()
			}
			dst := make([]float64, r*d)
			b.Run(fmt.Sprintf("d=%d/r=%d", d, r), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					Polar(dst, h, r, d)
				}
			})
			b.Run(fmt.Sprintf("gonum/d=%d/r=%d", d, r), func(b *testing.B) {
				b.ReportAllocs()
				m := mat.NewDense(r, d, h)
				var svd mat.SVD
				var u, v, p mat.Dense
				for b.Loop() {
					svd.Factorize(m, mat.SVDThin)
					svd.UTo(&u)
					svd.VTo(&v)
					p.Mul(&u, v.T())
				}
			})
		}
	}
}

// TestPolarClustered covers the spectra where the closed-form start of the
// d = 3 kernel is weakest: equal, nearly equal and widely spread singular
// values, and an already diagonal Gram matrix.
func TestPolarClustered(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	spectra := [][]float64{
		{1, 1, 1}, {1, 1, 0.5}, {1, 0.5, 0.5}, {1, 1 + 1e-9, 1 - 1e-9}, {1, 1 - 1e-12, 1e-3},
		{1e6, 1, 1e-6}, {1, 1e-4, 1e-8}, {2, 1 + 1e-15, 1},
	}
	for _, r := range []int{3, 5, 10} {
		for _, s := range spectra {
			for trial := 0; trial < 20; trial++ {
				h := randLowRank(rng, r, 3, s)
				if trial == 0 {
					// Orthogonal columns: a diagonal Gram matrix.
					for k := range h {
						h[k] = 0
					}
					for c := 0; c < 3; c++ {
						h[c*3+c] = s[c]
					}
				}
				dst := make([]float64, r*3)
				nuc := Polar(dst, h, r, 3)
				checkStiefel(t, dst, r, 3, 1e-14, fmt.Sprint(s))
				want, sv := gonumPolar(h, r, 3)
				wantNuc := sv[0] + sv[1] + sv[2]
				if math.Abs(nuc-wantNuc) > 1e-14*wantNuc {
					t.Fatalf("r=%d s=%v: nuclear %v, gonum %v", r, s, nuc, wantNuc)
				}
				tol := 1e-13 * sv[0] / sv[2]
				for k := range dst {
					if math.Abs(dst[k]-want[k]) > tol {
						t.Fatalf("r=%d s=%v: polar[%d] = %v, gonum %v", r, s, k, dst[k], want[k])
					}
				}
			}
		}
	}
}
