package plots

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bcmsync/bcmsync/posegraph"
)

// distances returns ||est_k - ref_k|| per pose.
func distances(est, ref []posegraph.Pose) []float64 {
	e := make([]float64, len(est))
	for k := range est {
		s := 0.0
		for a := 0; a < 3; a++ {
			s += (est[k].T[a] - ref[k].T[a]) * (est[k].T[a] - ref[k].T[a])
		}
		e[k] = math.Sqrt(s)
	}
	return e
}

func TestTrajectoryError(t *testing.T) {
	for _, d := range []int{2, 3} {
		_, truth, guess := helixGraph(d, 120)
		path := filepath.Join(t.TempDir(), "ate.png")
		errs := distances(guess, truth)
		if err := TrajectoryError(path, d, guess, truth, errs, ErrorOptions{}); err != nil {
			t.Fatal(err)
		}
		img := decodePNG(t, path, px(16), px(18))
		// The ramp's two ends are drawn: the first pose has error 0, the
		// last the maximum.
		checkNotBlank(t, img, errorRamp[0], palette[0])
		golden(t, path, []string{"", "", "ate2d.png", "ate3d.png"}[d])
	}
}

// TestRamp checks the colour map's stops, its midpoints and its range.
func TestRamp(t *testing.T) {
	r := newRamp(errorRamp)
	r.SetMin(2)
	r.SetMax(6)
	for k, v := range []float64{2, 3, 4, 5, 6} {
		c, err := r.At(v)
		if err != nil {
			t.Fatal(err)
		}
		got := c.(interface {
			RGBA() (uint32, uint32, uint32, uint32)
		})
		r1, g1, b1, _ := got.RGBA()
		w := errorRamp[k]
		if uint8(r1>>8) != w.R || uint8(g1>>8) != w.G || uint8(b1>>8) != w.B {
			t.Errorf("At(%v) = %v, want %v", v, c, w)
		}
	}
	if _, err := r.At(6.5); err == nil {
		t.Error("value above the range: no error")
	}
	if p := r.Palette(5).Colors(); len(p) != 5 {
		t.Errorf("palette of %d colours", len(p))
	}
}

func TestTrajectoryErrorBadInput(t *testing.T) {
	_, truth, guess := helixGraph(2, 10)
	errs := distances(guess, truth)
	path := filepath.Join(t.TempDir(), "x.png")
	for name, c := range map[string]struct {
		d        int
		est, ref []posegraph.Pose
		errs     []float64
		want     string
	}{
		"dim":     {4, guess, truth, errs, "dimension 4"},
		"short":   {2, guess[:1], truth[:1], errs[:1], "fewer than 2 poses"},
		"lengths": {2, guess, truth[:5], errs, "10 estimated poses, 5 reference poses and 10 errors"},
		"nan":     {2, guess, truth, append(errs[:9:9], math.NaN()), "error 9 is NaN"},
	} {
		err := TrajectoryError(path, c.d, c.est, c.ref, c.errs, ErrorOptions{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
	if err := TrajectoryError(filepath.Join(t.TempDir(), "x.gif"), 2, guess, truth, errs, ErrorOptions{}); err == nil {
		t.Error(".gif: no error")
	}
}
