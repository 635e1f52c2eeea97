package g2o

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// randSPD returns a random k x k symmetric positive definite matrix A A^T +
// eps I with entries of varied scale.
func randSPD(rng *rand.Rand, k int) *mat.SymDense {
	a := mat.NewDense(k, k, nil)
	for i := 0; i < k; i++ {
		s := math.Pow(10, 3*rng.Float64())
		for j := 0; j < k; j++ {
			a.Set(i, j, s*rng.NormFloat64())
		}
	}
	var s mat.SymDense
	s.SymOuterK(1, a)
	for i := 0; i < k; i++ {
		s.SetSym(i, i, s.At(i, i)+1e-3)
	}
	return &s
}

func upper(s mat.Symmetric) []float64 {
	var u []float64
	k := s.SymmetricDim()
	for i := 0; i < k; i++ {
		for j := i; j < k; j++ {
			u = append(u, s.At(i, j))
		}
	}
	return u
}

// traceInv is the oracle: tr(inv(block)) by gonum's dense inverse.
func traceInv(t *testing.T, s mat.Matrix, r0, k int) float64 {
	t.Helper()
	b := mat.DenseCopyOf(s).Slice(r0, r0+k, r0, r0+k)
	var inv mat.Dense
	if err := inv.Inverse(b); err != nil {
		t.Fatal(err)
	}
	return mat.Trace(&inv)
}

func relClose(a, b, tol float64) bool { return math.Abs(a-b) <= tol*math.Max(math.Abs(a), math.Abs(b)) }

// TestPrecisionsOracle compares kappa and tau with docs/design.md section 2
// evaluated by gonum's dense inverse on random positive definite matrices.
func TestPrecisionsOracle(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 200; trial++ {
		w2 := randSPD(rng, 3)
		kappa, tau, err := SE2Precisions(upper(w2))
		if err != nil {
			t.Fatal(err)
		}
		if want := w2.At(2, 2); kappa != want {
			t.Errorf("SE2 kappa = %g, want I33 = %g", kappa, want)
		}
		if want := 2 / traceInv(t, w2, 0, 2); !relClose(tau, want, 1e-10) {
			t.Errorf("SE2 tau = %.17g, want %.17g", tau, want)
		}

		w3 := randSPD(rng, 6)
		kappa, tau, err = SE3Precisions(upper(w3))
		if err != nil {
			t.Fatal(err)
		}
		if want := 3 / (2 * traceInv(t, w3, 3, 3)); !relClose(kappa, want, 1e-10) {
			t.Errorf("SE3 kappa = %.17g, want %.17g", kappa, want)
		}
		if want := 3 / traceInv(t, w3, 0, 3); !relClose(tau, want, 1e-10) {
			t.Errorf("SE3 tau = %.17g, want %.17g", tau, want)
		}
	}
}

// TestPrecisionsByHand checks values worked out by hand.
func TestPrecisionsByHand(t *testing.T) {
	// W_t = [[2 1] [1 2]]: inv = [[2 -1] [-1 2]] / 3, trace 4/3, tau = 3/2.
	kappa, tau, err := SE2Precisions([]float64{2, 1, 0.5, 2, 0.25, 7})
	if err != nil || kappa != 7 || math.Abs(tau-1.5) > 1e-15 {
		t.Errorf("SE2: %g, %g, %v; want 7, 1.5", kappa, tau, err)
	}
	// W_t = diag(1, 2, 4): trace of inverse 1.75, tau = 12/7.
	// W_R = [[2 1 0] [1 2 0] [0 0 1]]: trace of inverse 4/3 + 1 = 7/3, kappa = 3/(14/3) = 9/14.
	info := []float64{
		1, 0, 0, 0.1, 0, 0,
		2, 0, 0, 0, 0,
		4, 0, 0, 0,
		2, 1, 0,
		2, 0,
		1,
	}
	kappa, tau, err = SE3Precisions(info)
	if err != nil || math.Abs(kappa-9.0/14) > 1e-15 || math.Abs(tau-12.0/7) > 1e-15 {
		t.Errorf("SE3: %g, %g, %v; want 9/14, 12/7", kappa, tau, err)
	}
	// Isotropic: diag(tau I, 2 kappa I) gives back kappa and tau.
	kappa, tau, err = SE3Precisions([]float64{5, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 5, 0, 0, 0, 6, 0, 0, 6, 0, 6})
	if err != nil || math.Abs(kappa-3) > 1e-15 || math.Abs(tau-5) > 1e-14 {
		t.Errorf("SE3 isotropic: %g, %g, %v; want 3, 5", kappa, tau, err)
	}
	for _, bad := range [][]float64{nil, {1, 2, 3}, make([]float64, 21)} {
		if _, _, err := SE2Precisions(bad); err == nil {
			t.Errorf("SE2Precisions(%v) accepted", bad)
		}
	}
	if _, _, err := SE3Precisions(make([]float64, 6)); err == nil {
		t.Error("SE3Precisions of 6 values accepted")
	}
	// Entries so large that the trace of the inverse underflows to zero.
	if _, _, err := SE2Precisions([]float64{1e308, 0, 0, 1e308, 0, 1}); err != nil {
		t.Logf("huge entries: %v", err)
	}
	if _, _, err := SE2Precisions([]float64{1e-320, 0, 0, 1e-320, 0, 1}); err == nil {
		t.Error("denormal translation block gave finite tau")
	}
}

// TestInfoPositiveDefinite compares the full-matrix check with gonum's
// Cholesky on random symmetric matrices, about half of them indefinite.
func TestInfoPositiveDefinite(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 400; trial++ {
		k := 3 + 3*(trial%2)
		s := randSPD(rng, k)
		// Shift by a multiple of I that makes it indefinite about half the time.
		var ev mat.EigenSym
		if !ev.Factorize(s, false) {
			t.Fatal("eigen failed")
		}
		lmin := ev.Values(nil)[0]
		shift := lmin * (0.5 + rng.Float64())
		for i := 0; i < k; i++ {
			s.SetSym(i, i, s.At(i, i)-shift)
		}
		var ch mat.Cholesky
		want := ch.Factorize(s)
		err := InfoPositiveDefinite(upper(s))
		if (err == nil) != want {
			t.Errorf("k=%d shift/lmin=%.3f: InfoPositiveDefinite = %v, gonum Cholesky ok = %v", k, shift/lmin, err, want)
		}
	}
	if err := InfoPositiveDefinite(make([]float64, 5)); err == nil {
		t.Error("5 values accepted")
	}
}
