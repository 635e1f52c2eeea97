package sync

import (
	"math"
	"testing"

	"github.com/bcmsync/bcmsync/posegraph"
)

// What a PartsRounder returns is checked before F is evaluated at it: a
// pose no part returned (R = 0), a reflection, a rotation off the group or
// a translation that is not finite sends the staircase back to the
// gathered point's rounding.
func TestCheckRounded(t *testing.T) {
	c, s := math.Cos(0.3), math.Sin(0.3)
	good := func() []posegraph.Pose {
		return []posegraph.Pose{posegraph.Identity(2), {R: [9]float64{c, -s, s, c}, T: [3]float64{1, 2}}}
	}
	if err := checkRounded(good(), 2, 2); err != nil {
		t.Fatalf("rotations refused: %v", err)
	}
	three := []posegraph.Pose{posegraph.Identity(3), {R: [9]float64{c, -s, 0, s, c, 0, 0, 0, 1}}}
	if err := checkRounded(three, 2, 3); err != nil {
		t.Fatalf("3-D rotations refused: %v", err)
	}
	bad := map[string]func([]posegraph.Pose) []posegraph.Pose{
		"missing pose": func(p []posegraph.Pose) []posegraph.Pose { p[1] = posegraph.Pose{}; return p },
		"reflection":   func(p []posegraph.Pose) []posegraph.Pose { p[1].R = [9]float64{1, 0, 0, -1}; return p },
		"scaled":       func(p []posegraph.Pose) []posegraph.Pose { p[1].R[0] *= 1 + 1e-6; return p },
		"NaN":          func(p []posegraph.Pose) []posegraph.Pose { p[0].T[1] = math.NaN(); return p },
		"short":        func(p []posegraph.Pose) []posegraph.Pose { return p[:1] },
	}
	for name, f := range bad {
		if err := checkRounded(f(good()), 2, 2); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
