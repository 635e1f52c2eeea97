package plots

import (
	"math"
	"path/filepath"
	"strings"
	"testing"
)

// robustRun is a made-up robust run of 40 edges, the first 10 trusted: a
// GNC graduation over five solves in which edges 30..39 fall to 0 and the
// others rise to 1, then a certified solve.
func robustRun() ([]RobustStep, []bool) {
	const m = 40
	skip := make([]bool, m)
	for e := range 10 {
		skip[e] = true
	}
	var steps []RobustStep
	for s := range 6 {
		w := make([]float64, m)
		for e := range w {
			switch {
			case e < 10:
				w[e] = 1
			case e >= 30:
				w[e] = max(0, 1-float64(s)/3-float64(e-30)/20)
			default:
				w[e] = min(1, 0.5+float64(s)/8+float64(e-10)/80)
			}
		}
		steps = append(steps, RobustStep{Certified: s == 5, TLS: 1000 / float64(s+1), Objective: 5000 / float64(s*s+1), Weights: w})
	}
	return steps, skip
}

func TestRobust(t *testing.T) {
	steps, skip := robustRun()
	path := filepath.Join(t.TempDir(), "robust.png")
	if err := Robust(path, steps, RobustOptions{Skip: skip}); err != nil {
		t.Fatal(err)
	}
	img := decodePNG(t, path, px(16), px(9))
	checkNotBlank(t, img, palette[0], palette[5], costColors[0], costColors[1])
	golden(t, path, "robust.png")
}

func TestRobustBadInput(t *testing.T) {
	steps, skip := robustRun()
	bad := func(f func(s []RobustStep) ([]RobustStep, []bool)) ([]RobustStep, []bool) {
		cp := make([]RobustStep, len(steps))
		for k, s := range steps {
			cp[k] = s
			cp[k].Weights = append([]float64(nil), s.Weights...)
		}
		return f(cp)
	}
	for name, c := range map[string]func(s []RobustStep) ([]RobustStep, []bool){
		"no steps":     func(s []RobustStep) ([]RobustStep, []bool) { return nil, nil },
		"weight above": func(s []RobustStep) ([]RobustStep, []bool) { s[2].Weights[12] = 1.5; return s, skip },
		"weight NaN":   func(s []RobustStep) ([]RobustStep, []bool) { s[2].Weights[12] = math.NaN(); return s, skip },
		"short step":   func(s []RobustStep) ([]RobustStep, []bool) { s[3].Weights = s[3].Weights[:5]; return s, skip },
		"cost":         func(s []RobustStep) ([]RobustStep, []bool) { s[1].TLS = -1; return s, skip },
		"skip length":  func(s []RobustStep) ([]RobustStep, []bool) { return s, skip[:3] },
	} {
		st, sk := bad(c)
		err := Robust(filepath.Join(t.TempDir(), "r.png"), st, RobustOptions{Skip: sk})
		if err == nil || !strings.HasPrefix(err.Error(), "plots: ") {
			t.Errorf("%s: error %v", name, err)
		}
	}
}
