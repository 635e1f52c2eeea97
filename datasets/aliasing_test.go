package datasets

import (
	"math"
	"reflect"
	"testing"

	"github.com/bcmsync/bcmsync/posegraph"
)

// TestAddAliasing checks the groups on noise-free 2-D and 3-D graphs: the
// input is unchanged, the mask marks exactly the appended closures, each
// group's stretches are disjoint, not adjacent and share no pose with
// another group, and each group is exactly consistent: moving its second
// stretch rigidly to the claimed pose satisfies every closure of the group
// and every odometry edge inside both stretches.
func TestAddAliasing(t *testing.T) {
	for _, d := range []int{2, 3} {
		cfg := Config{Kappa: 100, Tau: 50, LoopProb: 0.3, Seed: 4, NoiseFree: true}
		g, truth, err := Geometric(d, 200, 3, cfg)
		if err != nil {
			t.Fatal(err)
		}
		orig := append(g.Edges[:0:0], g.Edges...)
		ac := AliasingConfig{Groups: 6, Size: 4, NoiseFree: true, Seed: 9}
		out, mask, err := AddAliasing(g, truth, ac)
		if err != nil {
			t.Fatal(err)
		}
		m := len(orig)
		if out.M() != m+6*4 || len(mask) != out.M() || !reflect.DeepEqual(g.Edges, orig) {
			t.Fatalf("d=%d: %d edges, mask %d, input changed %v", d, out.M(), len(mask), !reflect.DeepEqual(g.Edges, orig))
		}
		if err := out.Validate(); err != nil {
			t.Fatalf("d=%d: %v", d, err)
		}
		mk, mt := medianWeights(g)
		seen := map[int]bool{}
		for grp := 0; grp < 6; grp++ {
			es := out.Edges[m+4*grp : m+4*grp+4]
			a, b := es[0].I, es[0].J
			if a-b <= 4 && b-a <= 4 {
				t.Errorf("d=%d group %d: stretches at %d and %d overlap or touch", d, grp, a, b)
			}
			// The claimed pose of b seen from a, and the second stretch
			// moved there.
			z0 := es[0].Measurement()
			wrong := posegraph.Compose(&truth[a], &z0, d)
			moved := make([]posegraph.Pose, 4)
			for s := 0; s < 4; s++ {
				e := es[s]
				if e.I != a+s || e.J != b+s || !mask[m+4*grp+s] || e.Kappa != mk || e.Tau != mt {
					t.Fatalf("d=%d group %d closure %d: %+v", d, grp, s, e)
				}
				for _, i := range []int{e.I, e.J} {
					if seen[i] {
						t.Errorf("d=%d: pose %d in two stretches", d, i)
					}
					seen[i] = true
				}
				rel := posegraph.Between(&truth[b], &truth[b+s], d)
				moved[s] = posegraph.Compose(&wrong, &rel, d)
			}
			for s := 0; s < 4; s++ {
				z := posegraph.Between(&truth[a+s], &moved[s], d)
				if dev := poseDiff(z, es[s].Measurement(), d); dev > 1e-9 {
					t.Errorf("d=%d group %d closure %d: off the moved stretch by %g", d, grp, s, dev)
				}
			}
			for _, e := range orig {
				if e.I >= b && e.J == e.I+1 && e.J < b+4 {
					z := posegraph.Between(&moved[e.I-b], &moved[e.J-b], d)
					if dev := poseDiff(z, e.Measurement(), d); dev > 1e-9 {
						t.Errorf("d=%d group %d: odometry %d-%d off the moved stretch by %g", d, grp, e.I, e.J, dev)
					}
				}
			}
		}
		for k := 0; k < m; k++ {
			if mask[k] {
				t.Fatalf("d=%d: input edge %d flagged", d, k)
			}
		}
		again, _, _ := AddAliasing(g, truth, ac)
		if !reflect.DeepEqual(again.Edges, out.Edges) {
			t.Errorf("d=%d: the same seed gave different groups", d)
		}
		noisy, _, _ := AddAliasing(g, truth, AliasingConfig{Groups: 6, Size: 4, Seed: 9})
		if reflect.DeepEqual(noisy.Edges, out.Edges) {
			t.Errorf("d=%d: NoiseFree false made no noise", d)
		}
	}
}

// poseDiff is the largest absolute difference between two poses' entries.
func poseDiff(p, q posegraph.Pose, d int) float64 {
	dev := 0.0
	for a := 0; a < d*d; a++ {
		dev = math.Max(dev, math.Abs(p.R[a]-q.R[a]))
	}
	for a := 0; a < d; a++ {
		dev = math.Max(dev, math.Abs(p.T[a]-q.T[a]))
	}
	return dev
}

func TestAddAliasingErrors(t *testing.T) {
	g, truth, err := Geometric(2, 50, 3, Config{Kappa: 100, Tau: 50, LoopProb: 0.3, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cfg   AliasingConfig
		poses []posegraph.Pose
	}{
		{AliasingConfig{Groups: 0}, truth},
		{AliasingConfig{Groups: 1, Size: -1}, truth},
		{AliasingConfig{Groups: 5, Size: 5}, truth},
		{AliasingConfig{Groups: 1, MaxTranslation: math.Inf(1)}, truth},
		{AliasingConfig{Groups: 1, Kappa: -1}, truth},
		{AliasingConfig{Groups: 1}, truth[1:]},
	} {
		if _, _, err := AddAliasing(g, c.poses, c.cfg); err == nil {
			t.Errorf("%+v with %d poses: no error", c.cfg, len(c.poses))
		}
	}
}
