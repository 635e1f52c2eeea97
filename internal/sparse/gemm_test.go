package sparse

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// TestGemmNT compares gemmNT with gonum's Dgemm on shapes around the tile,
// block and split sizes, with strides wider than the rows and the alpha and
// beta the factorization uses.
func TestGemmNT(t *testing.T) {
	if !hasFMA() {
		t.Log("no AVX2/FMA: gemmNT is gonum's Dgemm here")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	sizes := []int{1, 5, 6, 7, 8, 9, 13, 95, 96, 97, 200}
	ks := []int{0, 1, 3, 255, 256, 257, 600}
	for _, m := range sizes {
		for _, n := range []int{1, 7, 8, 9, 17, 64} {
			for _, k := range ks {
				for _, ab := range [][2]float64{{1, 0}, {-1, 1}, {0.5, -2}} {
					alpha, beta := ab[0], ab[1]
					lda, ldb, ldc := max(1, k)+3, max(1, k)+1, n+2
					a := randSlice(rng, max(1, m*lda))
					b := randSlice(rng, max(1, n*ldb))
					c := randSlice(rng, m*ldc)
					want := append([]float64(nil), c...)
					gonum.Implementation{}.Dgemm(blas.NoTrans, blas.Trans, m, n, k, alpha, a, max(1, lda), b, max(1, ldb), beta, want, ldc)
					gemmNT(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
					for i := 0; i < m; i++ {
						for j := 0; j < ldc; j++ {
							got, w := c[i*ldc+j], want[i*ldc+j]
							if j >= n {
								// Beyond column n: untouched.
								if got != w {
									t.Fatalf("m=%d n=%d k=%d: wrote C[%d][%d] outside the matrix", m, n, k, i, j)
								}
								continue
							}
							if math.Abs(got-w) > 1e-13*float64(k+1)*(1+math.Abs(w)) {
								t.Fatalf("m=%d n=%d k=%d alpha=%g beta=%g: C[%d][%d] = %g, gonum %g", m, n, k, alpha, beta, i, j, got, w)
							}
						}
					}
				}
			}
		}
	}
}

// TestGemmNTThreadsSameBits: large products split their rows among
// goroutines; every entry is summed in one order whatever the split.
func TestGemmNTThreadsSameBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	m, n, k := 1000, 300, 700
	a, b := randSlice(rng, m*k), randSlice(rng, n*k)
	c0 := randSlice(rng, m*n)
	var out [][]float64
	for _, procs := range []int{1, 2, 3} {
		old := runtime.GOMAXPROCS(procs)
		c := append([]float64(nil), c0...)
		gemmNT(m, n, k, -1, a, k, b, k, 1, c, n)
		runtime.GOMAXPROCS(old)
		out = append(out, c)
	}
	for p := 1; p < len(out); p++ {
		for i := range out[0] {
			if math.Float64bits(out[0][i]) != math.Float64bits(out[p][i]) {
				t.Fatalf("entry %d differs between 1 and %d threads: %g, %g", i, p+1, out[0][i], out[p][i])
			}
		}
	}
}

func randSlice(rng *rand.Rand, n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = rng.Float64()*2 - 1
	}
	return s
}

// BenchmarkGemmNT compares gemmNT with gonum's Dgemm on the square and
// tall-thin shapes of supernodal updates.
func BenchmarkGemmNT(b *testing.B) {
	for _, s := range [][3]int{{64, 64, 64}, {256, 256, 256}, {1024, 1024, 1024}, {2000, 256, 256}, {4000, 64, 500}} {
		m, n, k := s[0], s[1], s[2]
		rng := rand.New(rand.NewPCG(5, 6))
		x, y, c := randSlice(rng, m*k), randSlice(rng, n*k), make([]float64, m*n)
		flops := 2 * float64(m) * float64(n) * float64(k)
		b.Run(fmt.Sprintf("gemmNT/%dx%dx%d", m, n, k), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				gemmNT(m, n, k, -1, x, k, y, k, 1, c, n)
			}
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFlop/s")
		})
		b.Run(fmt.Sprintf("gonum/%dx%dx%d", m, n, k), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				gonum.Implementation{}.Dgemm(blas.NoTrans, blas.Trans, m, n, k, -1, x, k, y, k, 1, c, n)
			}
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFlop/s")
		})
	}
}

// TestGemmNTShortSlices: the assembly kernel must never see a slice
// shorter than the shape needs.
func TestGemmNTShortSlices(t *testing.T) {
	m, n, k := 7, 9, 5
	ok := func(a, b, c []float64, lda, ldb, ldc int) (panicked bool) {
		defer func() { panicked = recover() != nil }()
		gemmNT(m, n, k, 1, a, lda, b, ldb, 0, c, ldc)
		return false
	}
	full := func(l int) []float64 { return make([]float64, l) }
	if ok(full(m*k), full(n*k), full(m*n), k, k, n) {
		t.Fatal("panicked on exact sizes")
	}
	for _, c := range []struct {
		name          string
		a, b, cc      []float64
		lda, ldb, ldc int
	}{
		{"short a", full(m*k - 1), full(n * k), full(m * n), k, k, n},
		{"short b", full(m * k), full(n*k - 1), full(m * n), k, k, n},
		{"short c", full(m * k), full(n * k), full(m*n - 1), k, k, n},
		{"lda < k", full(m * k), full(n * k), full(m * n), k - 1, k, n},
		{"ldb < k", full(m * k), full(n * k), full(m * n), k, k - 1, n},
		{"ldc < n", full(m * k), full(n * k), full(m * n), k, k, n - 1},
	} {
		if !ok(c.a, c.b, c.cc, c.lda, c.ldb, c.ldc) {
			t.Errorf("%s: no panic", c.name)
		}
	}
}

// TestGemmNTNegativeSizes: a negative dimension is a programming error,
// refused as gonum refuses it, on both paths.
func TestGemmNTNegativeSizes(t *testing.T) {
	z := make([]float64, 100)
	for _, s := range [][3]int{{7, 9, -3}, {-1, 9, 5}, {7, -2, 5}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("m, n, k = %v: no panic", s)
				}
			}()
			gemmNT(s[0], s[1], s[2], 1, z, 5, z, 5, 0, z, 9)
		}()
	}
}

// TestTrsmRT checks the triangular solve below a supernode's panel: X L^T
// gives B back (a dense product as the oracle) and X agrees with gonum's
// Dtrsm to rounding, on widths below, at and above the substitution leaf
// (odd ones too), on row counts below a tile, not a multiple of the four
// rows the leaf takes together, and above the split among goroutines,
// with strides wider than the rows as in a supernode; on 1, 2 and 3
// threads the bits are the same; and the leaf's rows give the same bits
// grouped by four as alone.
func TestTrsmRT(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, s := range [][2]int{{5, 3}, {3, 40}, {7, 16}, {101, 17}, {100, 64}, {3000, 64}, {1201, 100}, {50, 37}} {
		m, n := s[0], s[1]
		lda, ldb := n+3, n+5
		a := randSlice(rng, n*lda)
		for i := 0; i < n; i++ {
			a[i*lda+i] = 2 + float64(n) // well conditioned
		}
		b0 := randSlice(rng, m*ldb)
		ref := append([]float64(nil), b0...)
		gonum.Implementation{}.Dtrsm(blas.Right, blas.Lower, blas.Trans, blas.NonUnit, m, n, 1, a, lda, ref, ldb)
		var first []float64
		for _, procs := range []int{1, 2, 3} {
			old := runtime.GOMAXPROCS(procs)
			got := append([]float64(nil), b0...)
			trsmRT(m, n, a, lda, got, ldb)
			runtime.GOMAXPROCS(old)
			if first == nil {
				first = got
				continue
			}
			for i := range got {
				if math.Float64bits(got[i]) != math.Float64bits(first[i]) {
					t.Fatalf("%dx%d: entry %d is %g on %d threads, %g on 1", m, n, i, got[i], procs, first[i])
				}
			}
		}
		for i := 0; i < m; i++ {
			for j := 0; j < n; j++ {
				if d := math.Abs(first[i*ldb+j] - ref[i*ldb+j]); d > 1e-13*(1+math.Abs(ref[i*ldb+j])) {
					t.Fatalf("%dx%d: X[%d][%d] = %g, Dtrsm gives %g", m, n, i, j, first[i*ldb+j], ref[i*ldb+j])
				}
			}
			for j := n; j < ldb; j++ {
				if first[i*ldb+j] != b0[i*ldb+j] {
					t.Fatalf("%dx%d: entry (%d, %d) beyond the %d columns changed", m, n, i, j, n)
				}
			}
		}
		// X L^T = B, L the lower triangle of a.
		for i := 0; i < m; i++ {
			for j := 0; j < n; j++ {
				s := 0.0
				for k := 0; k <= j; k++ {
					s += first[i*ldb+k] * a[j*lda+k]
				}
				if math.Abs(s-b0[i*ldb+j]) > 1e-12*(1+math.Abs(b0[i*ldb+j])) {
					t.Fatalf("%dx%d: (X L^T)[%d][%d] = %g, B has %g", m, n, i, j, s, b0[i*ldb+j])
				}
			}
		}
		// The leaf's rows, four at a time or alone.
		leaf, alone := append([]float64(nil), b0...), append([]float64(nil), b0...)
		trsmRTLeaf(m, n, a, lda, leaf, ldb)
		for i := 0; i < m; i++ {
			trsmRTLeaf(1, n, a, lda, alone[i*ldb:], ldb)
		}
		for i := range leaf {
			if math.Float64bits(leaf[i]) != math.Float64bits(alone[i]) {
				t.Fatalf("%dx%d: the leaf gives %g at %d with rows grouped, %g alone", m, n, leaf[i], i, alone[i])
			}
		}
	}
}

// TestTrsmRTShortSlices: the blocked solve hands parts of its slices to
// the assembly kernel, so a shape they cannot hold is refused first.
func TestTrsmRTShortSlices(t *testing.T) {
	m, n := 40, 32
	full := func(k int) []float64 { return make([]float64, k) }
	for _, c := range []struct {
		name     string
		a, b     []float64
		lda, ldb int
	}{
		{"short a", full((n-1)*n + n - 1), full(m * n), n, n},
		{"short b", full(n * n), full((m-1)*n + n - 1), n, n},
		{"lda < n", full(n * n), full(m * n), n - 1, n},
		{"ldb < n", full(n * n), full(m * n), n, n - 1},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", c.name)
				}
			}()
			trsmRT(m, n, c.a, c.lda, c.b, c.ldb)
		}()
	}
}

// BenchmarkTrsmRT times the triangular solve below a supernode's panel
// (panelWidth = 64 columns) for the row counts of the separators at the
// top of a large 3-D factor, on all cores.
func BenchmarkTrsmRT(b *testing.B) {
	for _, m := range []int{500, 4000, 20000} {
		const n = 64
		rng := rand.New(rand.NewPCG(9, 10))
		a := randSlice(rng, n*n)
		for i := 0; i < n; i++ {
			a[i*n+i] = 2 + float64(n)
		}
		x0 := randSlice(rng, m*n)
		x := make([]float64, m*n)
		flops := float64(m) * n * n
		b.Run(fmt.Sprintf("%dx%d", m, n), func(b *testing.B) {
			for b.Loop() {
				copy(x, x0)
				trsmRT(m, n, a, n, x, n)
			}
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFlop/s")
		})
	}
}

// TestPackStrips compares packStrips with its definition, value for value,
// on whole and partial strips of the kernel's widths (whose whole strips
// have copies of their own) and another width, with row and column
// offsets and strides wider than the rows.
func TestPackStrips(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, w := range []int{gemmMR, gemmNR, 4} {
		for _, rows := range []int{1, w - 1, w, w + 1, 3 * w, 3*w + 2} {
			for _, kc := range []int{1, 3, 6, 17} {
				r0, p0, ldx := 2, 1, kc+4
				x := randSlice(rng, (r0+rows)*ldx)
				strips := (rows + w - 1) / w
				dst := randSlice(rng, strips*w*kc+5)
				tail := append([]float64(nil), dst[strips*w*kc:]...)
				packStrips(dst, x, ldx, r0, rows, p0, kc, w)
				for s := 0; s < strips; s++ {
					for p := 0; p < kc; p++ {
						for i := 0; i < w; i++ {
							want := 0.0
							if s*w+i < rows {
								want = x[(r0+s*w+i)*ldx+p0+p]
							}
							if got := dst[s*w*kc+p*w+i]; got != want {
								t.Fatalf("w=%d rows=%d kc=%d: strip %d column %d row %d = %g, want %g", w, rows, kc, s, p, i, got, want)
							}
						}
					}
				}
				for i, v := range dst[strips*w*kc:] {
					if v != tail[i] {
						t.Fatalf("w=%d rows=%d kc=%d: wrote beyond the strips", w, rows, kc)
					}
				}
			}
		}
	}
}
