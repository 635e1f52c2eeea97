package cli

import (
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/g2o"
	"github.com/bcmsync/bcmsync/posegraph"
)

// generate --landmarks, 2-D and 3-D: the file reads back as the generator
// and AddLandmarks called directly (the same vertices, landmark marks,
// edges and measurements), the g2o truth holds the true poses and the
// landmarks' true positions, the summary counts them, and solve
// certifies the graph. With outliers too, the sidecar still matches
// (the observations come after the outliers).
func TestGenerateLandmarks(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		gen  func(datasets.Config) (*posegraph.Graph, []posegraph.Pose, error)
		lc   datasets.LandmarkConfig
	}{
		{[]string{"manhattan", "-n", "150", "--side", "6", "--landmarks", "25", "--landmark-observers", "4"},
			func(c datasets.Config) (*posegraph.Graph, []posegraph.Pose, error) {
				return datasets.Manhattan(150, 6, c)
			},
			datasets.LandmarkConfig{N: 25, Range: 3, MaxObservers: 4}},
		{[]string{"grid", "--nx", "4", "--ny", "3", "--nz", "3", "--landmarks", "15", "--landmark-range", "1.5"},
			func(c datasets.Config) (*posegraph.Graph, []posegraph.Pose, error) { return datasets.Cube(4, 3, 3, c) },
			datasets.LandmarkConfig{N: 15, Range: 1.5}},
	} {
		out := filepath.Join(dir, c.args[0]+".g2o")
		args := append([]string{"generate"}, c.args...)
		args = append(args, "--seed", "4", "-o", out)
		code, stdout, stderr := runCmd(args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", c.args, code, stderr)
		}
		base, truth, err := c.gen(datasets.Config{Kappa: 500, Tau: 400, LoopProb: 1, Seed: 4})
		if err != nil {
			t.Fatal(err)
		}
		lc := c.lc
		lc.Tau, lc.Seed = 400, 4
		want, wantTruth, err := datasets.AddLandmarks(base, truth, lc)
		if err != nil {
			t.Fatal(err)
		}
		obs := want.M() - base.M()
		if sum := " landmarks=" + strconv.Itoa(lc.N) + " observations=" + strconv.Itoa(obs) + " m=" + strconv.Itoa(want.M()) + " "; !strings.Contains(stdout, sum) ||
			!strings.Contains(stdout, " n="+strconv.Itoa(base.N())+" ") {
			t.Errorf("%s: summary %q, want n=%d and %q", c.args[0], stdout, base.N(), sum)
		}
		g := checkGenerated(t, c.args[0], out, filepath.Join(dir, c.args[0]+".gt.g2o"), want, wantTruth, 1e-9)
		if g.NumLandmarks() != lc.N || g.NumPoses() != base.N() {
			t.Fatalf("%s: read back %d poses and %d landmarks", c.args[0], g.NumPoses(), g.NumLandmarks())
		}
		code, stdout, stderr = runCmd("solve", out)
		if code != 0 || !strings.Contains(stdout, "CERTIFIED globally optimal") ||
			!strings.Contains(stdout, strconv.Itoa(base.N())+" poses + "+strconv.Itoa(lc.N)+" landmarks") {
			t.Errorf("%s: solve: exit %d:\n%s%s", c.args[0], code, stdout, stderr)
		}
	}

	// Outliers and landmarks: the outlier list still names the outlier
	// edges, which join poses only.
	out := filepath.Join(dir, "mo.g2o")
	if code, _, stderr := runCmd("generate", "manhattan", "-n", "120", "--side", "6", "--outlier-count", "5",
		"--landmarks", "10", "--seed", "3", "-o", out); code != 0 {
		t.Fatalf("outliers and landmarks: exit %d: %s", code, stderr)
	}
	g, err := g2o.ReadFile(out, g2o.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mask, err := datasets.ReadOutlierMask(filepath.Join(dir, "mo.outliers.txt"), g)
	if err != nil {
		t.Fatal(err)
	}
	want, _, _ := datasets.Manhattan(120, 6, datasets.Config{Kappa: 500, Tau: 400, LoopProb: 1, Seed: 3})
	_, wantMask, err := datasets.AddOutliers(want, datasets.OutlierConfig{Count: 5, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	if g.NumLandmarks() != 10 || len(mask) != g.M() || !slices.Equal(mask[:len(wantMask)], wantMask) || slices.Contains(mask[len(wantMask):], true) {
		t.Errorf("outliers with landmarks: %d landmarks, mask of %d for %d edges", g.NumLandmarks(), len(mask), g.M())
	}
	for k, e := range g.Edges {
		if mask[k] && g.IsLandmark(e.J) {
			t.Errorf("edge %d observes a landmark but is listed as an outlier", k)
		}
	}
}

// The landmark flags' mistakes are usage errors.
func TestGenerateLandmarksUsage(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "x.g2o")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"generate", "grid", "--landmarks", "-2", "-o", out}, "bcmsync generate: --landmarks must be >= 0, not -2"},
		{[]string{"generate", "grid", "--landmark-range", "2", "-o", out}, "--landmark-range needs --landmarks"},
		{[]string{"generate", "grid", "--landmark-observers", "2", "-o", out}, "--landmark-observers needs --landmarks"},
		{[]string{"generate", "grid", "--landmarks", "3", "--landmark-range", "0", "-o", out}, "--landmark-range must be positive and finite, not 0"},
		{[]string{"generate", "grid", "--landmarks", "3", "--landmark-observers", "-1", "-o", out}, "--landmark-observers must be >= 0"},
		{[]string{"generate", "grid", "--landmarks", "3", "--truth", filepath.Join(dir, "t.tum"), "-o", out}, "TUM holds poses only"},
	} {
		code, _, stderr := runCmd(c.args...)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, stderr, c.want)
		}
	}
}
