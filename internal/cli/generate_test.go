package cli

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/g2o"
	"github.com/bcmsync/bcmsync/posegraph"
)

// TestGenerateFamilies generates every family, reads the graph and the
// truth back and compares them with the generator called directly: the
// same structure, weights and measurements, the truth as VERTEX lines, and
// the dead-reckoning estimate in the graph's.
func TestGenerateFamilies(t *testing.T) {
	dir := t.TempDir()
	cfg := datasets.Config{Kappa: 300, Tau: 200, LoopProb: 0.7, Seed: 5}
	for _, c := range []struct {
		args []string
		gen  func() (*posegraph.Graph, []posegraph.Pose, error)
		m    int // expected edge count, 0: do not check
	}{
		{[]string{"sphere", "--rings", "4", "--per-ring", "6"}, func() (*posegraph.Graph, []posegraph.Pose, error) { return datasets.Sphere(4, 6, cfg) }, 0},
		{[]string{"torus", "--rings", "3", "--per-ring", "8"}, func() (*posegraph.Graph, []posegraph.Pose, error) { return datasets.Torus(3, 8, cfg) }, 0},
		{[]string{"grid", "--nx", "3", "--ny", "2", "--nz", "2"}, func() (*posegraph.Graph, []posegraph.Pose, error) { return datasets.Cube(3, 2, 2, cfg) }, 0},
		{[]string{"manhattan", "-n", "80", "--side", "5"}, func() (*posegraph.Graph, []posegraph.Pose, error) { return datasets.Manhattan(80, 5, cfg) }, 0},
		{[]string{"geometric", "-n", "40", "--radius", "2", "--dim", "3"}, func() (*posegraph.Graph, []posegraph.Pose, error) { return datasets.Geometric(3, 40, 2, cfg) }, 0},
	} {
		out := filepath.Join(dir, c.args[0]+".g2o")
		args := append([]string{"generate"}, c.args...)
		args = append(args, "--kappa", "300", "--tau", "200", "--loop-prob", "0.7", "--seed", "5", "-o", out)
		code, stdout, stderr := runCmd(args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", c.args, code, stderr)
		}
		want, truth, err := c.gen()
		if err != nil {
			t.Fatal(err)
		}
		if line := "generate: " + c.args[0] + " d="; !strings.HasPrefix(stdout, line) ||
			!strings.Contains(stdout, " m="+strconv.Itoa(want.M())+" outliers=0 ") || strings.Count(stdout, "\n") != 1 {
			t.Errorf("%s: summary %q", c.args[0], stdout)
		}
		checkGenerated(t, c.args[0], out, filepath.Join(dir, c.args[0]+".gt.g2o"), want, truth, 1e-12)
		if _, err := os.Stat(filepath.Join(dir, c.args[0]+".outliers.txt")); !os.IsNotExist(err) {
			t.Errorf("%s: an outlier file without outliers", c.args[0])
		}
	}
}

// checkGenerated reads back the graph generate wrote to out and its truth
// at gtPath and compares them with the generator called directly: both
// have want's vertices, edges and measurements (sameGenerated), the
// graph's initial estimate is want's within initTol (1+i) at vertex i (the
// dead reckoning's rounding grows along it), and the truth's vertices are
// truth's within 1e-12. It returns the graph read.
func checkGenerated(t *testing.T, name, out, gtPath string, want *posegraph.Graph, truth []posegraph.Pose, initTol float64) *posegraph.Graph {
	t.Helper()
	g, err := g2o.ReadFile(out, g2o.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A graph of another size would send the loops below out of range.
	if err := sameGenerated(want, g); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	for i := range g.Initial {
		if !g.HasInitial[i] || poseDist(g.Initial[i], want.Initial[i], g.D) > initTol*(1+float64(i)) {
			t.Errorf("%s: initial vertex %d (landmark %t) differs", name, g.IDs[i], g.IsLandmark(i))
			break
		}
	}
	gt, err := g2o.ReadFile(gtPath, g2o.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := sameGenerated(want, gt); err != nil {
		t.Fatalf("%s truth: %v", name, err)
	}
	for i := range truth {
		if poseDist(gt.Initial[i], truth[i], g.D) > 1e-12 {
			t.Errorf("%s: true vertex %d (landmark %t) differs", name, g.IDs[i], g.IsLandmark(i))
			break
		}
	}
	return g
}

// poseDist is the largest entry difference of two poses.
func poseDist(a, b posegraph.Pose, d int) float64 {
	m := 0.0
	for k := 0; k < d*d; k++ {
		m = math.Max(m, math.Abs(a.R[k]-b.R[k]))
	}
	for k := 0; k < d; k++ {
		m = math.Max(m, math.Abs(a.T[k]-b.T[k]))
	}
	return m
}

// TestGenerateSigmas: --rot-sigma and --trans-sigma give kappa = 1/(2 s^2)
// and tau = 1/s^2 in the file, and the measurements' noise, measured
// against the written truth, has those standard deviations per axis.
func TestGenerateSigmas(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "g.g2o")
	const rs, ts = 0.05, 0.2
	code, _, stderr := runCmd("generate", "geometric", "--dim", "3", "-n", "1500", "--radius", "1.5",
		"--rot-sigma", "0.05", "--trans-sigma", "0.2", "--seed", "2", "-o", out, "--truth", filepath.Join(dir, "gt.tum"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	g, err := g2o.ReadFile(out, g2o.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gt, err := g2o.ReadTrajectoryFile(filepath.Join(dir, "gt.tum"))
	if err != nil {
		t.Fatal(err)
	}
	var rot, trans float64
	for _, e := range g.Edges {
		if math.Abs(e.Kappa-1/(2*rs*rs)) > 1e-9 || math.Abs(e.Tau-1/(ts*ts)) > 1e-9 {
			t.Fatalf("kappa %v tau %v, want %v %v", e.Kappa, e.Tau, 1/(2*rs*rs), 1/(ts*ts))
		}
		pi, pj := gt.Poses[e.I], gt.Poses[e.J]
		// Noise rotation E = (R_i^T R_j)^T Rt and translation R_i^T (t_j - t_i) - tt.
		var rel, en [9]float64
		for a := 0; a < 3; a++ {
			for b := 0; b < 3; b++ {
				for k := 0; k < 3; k++ {
					rel[a*3+b] += pi.R[k*3+a] * pj.R[k*3+b]
				}
			}
		}
		for a := 0; a < 3; a++ {
			for b := 0; b < 3; b++ {
				for k := 0; k < 3; k++ {
					en[a*3+b] += rel[k*3+a] * e.R[k*3+b]
				}
			}
		}
		// The rotation vector's squared norm is theta^2.
		th := math.Atan2(0.5*math.Sqrt(sq(en[7]-en[5])+sq(en[2]-en[6])+sq(en[3]-en[1])), 0.5*(en[0]+en[4]+en[8]-1))
		rot += th * th
		for a := 0; a < 3; a++ {
			s := 0.0
			for k := 0; k < 3; k++ {
				s += pi.R[k*3+a] * (pj.T[k] - pi.T[k])
			}
			trans += sq(s - e.T[a])
		}
	}
	m := float64(g.M())
	rotSD, transSD := math.Sqrt(rot/(3*m)), math.Sqrt(trans/(3*m))
	t.Logf("m = %d: rotation sd %.5f (want %v), translation sd %.5f (want %v)", g.M(), rotSD, rs, transSD, ts)
	if math.Abs(rotSD/rs-1) > 0.03 || math.Abs(transSD/ts-1) > 0.03 {
		t.Errorf("noise sd per axis: rotation %v (want %v), translation %v (want %v)", rotSD, rs, transSD, ts)
	}
}

func sq(x float64) float64 { return x * x }

// TestGenerateOutliersAndNoiseFree: the outlier sidecar reads back as
// AddOutliers' mask (outlier seed defaulting to --seed), the outliers'
// measurements disagree with the truth while with --noise-free every other
// edge agrees exactly, and the same flags give the same bytes.
func TestGenerateOutliersAndNoiseFree(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "m.g2o")
	args := []string{"generate", "manhattan", "-n", "200", "--side", "8", "--noise-free", "--outliers", "0.1", "--seed", "9", "-o", out}
	if code, _, stderr := runCmd(args...); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	g, err := g2o.ReadFile(out, g2o.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mask, err := datasets.ReadOutlierMask(filepath.Join(dir, "m.outliers.txt"), g)
	if err != nil {
		t.Fatal(err)
	}
	want, truth, _ := datasets.Manhattan(200, 8, datasets.Config{Kappa: 500, Tau: 400, NoiseFree: true, LoopProb: 1, Seed: 9})
	want, wantMask, err := datasets.AddOutliers(want, datasets.OutlierConfig{Fraction: 0.1, Seed: 9})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(mask, wantMask) {
		t.Fatalf("sidecar mask differs from AddOutliers'")
	}
	if err := sameGenerated(want, g); err != nil {
		t.Fatal(err)
	}
	bad := 0
	for k, e := range g.Edges {
		pi, pj := truth[e.I], truth[e.J]
		dx, dy := pj.T[0]-pi.T[0], pj.T[1]-pi.T[1]
		tx, ty := pi.R[0]*dx+pi.R[2]*dy, pi.R[1]*dx+pi.R[3]*dy
		off := math.Hypot(tx-e.T[0], ty-e.T[1])
		if mask[k] {
			if off > 1e-9 {
				bad++
			}
		} else if off > 1e-12 {
			t.Errorf("noise-free edge %d is off the truth by %g", k, off)
		}
	}
	if nOut := strings.Count(mustReadString(t, filepath.Join(dir, "m.outliers.txt")), "\n") - 2; bad < nOut*9/10 {
		t.Errorf("only %d of %d outliers disagree with the truth", bad, nOut)
	}
	first := mustReadString(t, out)
	if code, _, _ := runCmd(args...); code != 0 || mustReadString(t, out) != first {
		t.Error("the same flags wrote different bytes")
	}
}

func mustReadString(t *testing.T, path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestGenerateUsage: mistakes in the command line exit 2 with the prefix
// and the flag named.
func TestGenerateUsage(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "x.g2o")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"generate", "-o", out}, "bcmsync generate: generate takes exactly one FAMILY"},
		{[]string{"generate", "cube", "-o", out}, `bcmsync generate: unknown FAMILY "cube"`},
		{[]string{"generate", "grid"}, "bcmsync generate: -o FILE.g2o is required"},
		{[]string{"generate", "grid", "-o", filepath.Join(dir, "x.tum")}, "the graph is written as g2o"},
		{[]string{"generate", "sphere", "--nx", "3", "-o", out}, "bcmsync generate: --nx does not apply to sphere (its size flags: --rings, --per-ring)"},
		{[]string{"generate", "grid", "--kappa", "3", "--rot-sigma", "0.1", "-o", out}, "--kappa or --rot-sigma, not both"},
		{[]string{"generate", "grid", "--trans-sigma", "0", "-o", out}, "--trans-sigma must be positive"},
		{[]string{"generate", "grid", "--tau", "-1", "-o", out}, "--tau must be positive"},
		{[]string{"generate", "grid", "--kappa", "1e60", "-o", out}, "--kappa 1e+60 is outside [1e-50, 1e+50]"},
		{[]string{"generate", "grid", "--trans-sigma", "1e30", "-o", out}, "--tau 1e-60 is outside"},
		{[]string{"generate", "grid", "--loop-prob", "1.5", "-o", out}, "--loop-prob must be in [0, 1]"},
		{[]string{"generate", "grid", "--outlier-seed", "4", "-o", out}, "--outlier-seed needs --outliers"},
		{[]string{"generate", "grid", "--outliers", "0.1", "--outlier-count", "3", "-o", out}, "--outliers or --outlier-count, not both"},
		{[]string{"generate", "grid", "--truth", out, "-o", out}, "-o " + out + " and --truth " + out + " are the same file"},
		// The default outlier list's path given as the truth: the list
		// overwrote the truth without a word.
		{[]string{"generate", "grid", "--outliers", "0.1", "--truth", filepath.Join(dir, "x.outliers.txt"), "-o", out}, "--truth " + filepath.Join(dir, "x.outliers.txt") + " and --outliers-file " + filepath.Join(dir, "x.outliers.txt") + " are the same file"},
		{[]string{"generate", "sphere", "--rings", "0", "-o", out}, "bcmsync generate: datasets: Sphere: need rings >= 1"},
		{[]string{"generate", "geometric", "--dim", "4", "-o", out}, "dimension 4 is not 2 or 3"},
		{[]string{"generate", "grid", "--bogus", "-o", out}, "flag provided but not defined: -bogus"},
		// Sizes whose product overflows int, or that no machine holds, are
		// usage errors before anything is allocated.
		{[]string{"generate", "sphere", "--rings", "3037000500", "--per-ring", "3037000500", "-o", out}, "bcmsync generate: sphere: 3037000500 x 3037000500 poses"},
		{[]string{"generate", "torus", "--rings", "4294967296", "--per-ring", "4294967296", "-o", out}, "bcmsync generate: torus: 4294967296 x 4294967296 poses"},
		{[]string{"generate", "grid", "--nx", "4294967296", "--ny", "4294967296", "--nz", "2", "-o", out}, "bcmsync generate: grid: 4294967296 x 4294967296 x 2 poses"},
		{[]string{"generate", "manhattan", "-n", "100000000", "-o", out}, "bcmsync generate: manhattan: 100000000 poses"},
		{[]string{"generate", "geometric", "-n", "100000000", "-o", out}, "bcmsync generate: geometric: 100000000 poses"},
	} {
		code, _, stderr := runCmd(c.args...)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, stderr, c.want)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Error("a usage error wrote the output")
	}
	// -h is help, not an error.
	code, _, stderr := runCmd("generate", "-h")
	if code != 0 || !strings.Contains(stderr, "usage: bcmsync generate FAMILY") || !strings.Contains(stderr, "--rot-sigma") {
		t.Errorf("-h: exit %d: %s", code, stderr)
	}
}
