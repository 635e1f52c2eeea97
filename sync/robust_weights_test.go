package sync

import (
	"math"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"
)

// TestTLSWeightHand checks the GNC-TLS weight update against values worked
// out by hand. With c^2 = 4 and mu = 1 the band is [mu/(mu+1) c^2,
// (mu+1)/mu c^2] = [2, 8] and inside it w = sqrt(c^2 mu (mu+1) / r^2) - mu =
// sqrt(8 / r^2) - 1; with c^2 = 3 and mu = 0.5 the band is [1, 9] and
// w = sqrt(2.25 / r^2) - 0.5.
func TestTLSWeightHand(t *testing.T) {
	for _, c := range []struct{ r2, c2, mu, want float64 }{
		{0, 4, 1, 1},
		{1, 4, 1, 1},
		{2, 4, 1, 1},                    // the band's lower end
		{3, 4, 1, math.Sqrt(8.0/3) - 1}, // 0.63299...
		{4, 4, 1, math.Sqrt2 - 1},       // at the threshold
		{8, 4, 1, 0},                    // the band's upper end
		{9, 4, 1, 0},
		{1e12, 4, 1, 0},
		{3, 3, 0.5, math.Sqrt(0.75) - 0.5}, // 0.36603...
		{1, 3, 0.5, 1},
		{9, 3, 0.5, 0},
		// Large mu: the band [c^2 (1 - 1/(mu+1)), c^2 (1 + 1/mu)] closes
		// on c^2 and the weight is TLS's inlier test.
		{3.99, 4, 1e6, 1},
		{4.01, 4, 1e6, 0},
	} {
		got := tlsWeight(c.r2, c.c2, c.mu)
		if math.Abs(got-c.want) > 1e-15 {
			t.Errorf("tlsWeight(%g, %g, %g) = %.17g, want %.17g", c.r2, c.c2, c.mu, got, c.want)
		}
	}
}

// TestTLSWeightShape checks, on a fine grid, that the weight is in [0, 1],
// does not increase with the residual, and that the band's formula meets 1
// and 0 at its ends, so the weight is continuous.
func TestTLSWeightShape(t *testing.T) {
	for _, mu := range []float64{1e-4, 0.1, 1, 7, 1e3} {
		const c2 = 5.0
		lo, hi := mu/(mu+1)*c2, (mu+1)/mu*c2
		for _, end := range []struct{ r2, want float64 }{{lo, 1}, {hi, 0}} {
			inside := math.Sqrt(c2*mu*(mu+1)/end.r2) - mu
			if math.Abs(inside-end.want) > 1e-9 {
				t.Errorf("mu=%g: the band formula is %g at r^2=%g, want %g", mu, inside, end.r2, end.want)
			}
		}
		prev := 1.0
		for k := 0; k <= 20000; k++ {
			r2 := hi * 1.2 * float64(k) / 20000
			w := tlsWeight(r2, c2, mu)
			if w < 0 || w > 1 || w > prev+1e-15 {
				t.Fatalf("mu=%g: w(%g) = %g after %g", mu, r2, w, prev)
			}
			prev = w
		}
	}
}

// TestGNCInitialMu checks mu_0 = c^2 / (2 r_max^2 - c^2) by hand and that
// it puts the largest term inside the band with weight (sqrt 2 - 1) mu_0.
func TestGNCInitialMu(t *testing.T) {
	if got := gncInitialMu(4, 10); got != 0.25 {
		t.Errorf("gncInitialMu(4, 10) = %g, want 4/16 = 0.25", got)
	}
	if got := gncInitialMu(16.27, 1e6); math.Abs(got-16.27/(2e6-16.27)) > 1e-20 {
		t.Errorf("gncInitialMu(16.27, 1e6) = %g", got)
	}
	for _, r2 := range []float64{4.5, 10, 1e3, 1e7} {
		mu := gncInitialMu(4, r2)
		w := tlsWeight(r2, 4, mu)
		if want := (math.Sqrt2 - 1) * mu; math.Abs(w-want) > 1e-12*want {
			t.Errorf("r2max=%g: weight %g at mu_0=%g, want %g", r2, w, mu, want)
		}
	}
}

// TestRobustThresholdDefault pins the default thresholds: the 0.999
// chi-squared quantiles with 3 (SE(2)), 6 (SE(3)), 1 (SO(2)) and 3 (SO(3))
// degrees of freedom, from tables: 16.266, 22.458, 10.828, 16.266.
func TestRobustThresholdDefault(t *testing.T) {
	for _, c := range []struct {
		dof  int
		want float64
	}{{3, 16.266}, {6, 22.458}, {1, 10.828}} {
		got := distuv.ChiSquared{K: float64(c.dof)}.Quantile(DefaultRobustQuantile)
		if math.Abs(got-c.want) > 1e-3 {
			t.Errorf("dof %d: c^2 = %g, want %g", c.dof, got, c.want)
		}
	}
}

func TestParseRobust(t *testing.T) {
	for _, s := range []string{"", "none", "gnc-tls"} {
		if _, err := ParseRobust(s); err != nil {
			t.Errorf("ParseRobust(%q): %v", s, err)
		}
	}
	if _, err := ParseRobust("huber"); err == nil {
		t.Error("ParseRobust(huber) passed")
	}
	for _, o := range []RobustOptions{
		{Loss: "tls"}, {Loss: RobustGNCTLS, Quantile: 1}, {Loss: RobustGNCTLS, Quantile: -0.1},
		{Loss: RobustGNCTLS, Threshold: math.NaN()}, {Loss: RobustGNCTLS, Threshold: -1},
		{Loss: RobustGNCTLS, MuStep: 1}, {Loss: RobustGNCTLS, MaxIterations: -1},
	} {
		if err := o.check(); err == nil {
			t.Errorf("%+v passed the check", o)
		}
	}
}
