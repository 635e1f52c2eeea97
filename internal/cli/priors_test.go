package cli

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/bcmsync/bcmsync/g2o"
	"github.com/bcmsync/bcmsync/posegraph"
)

// solve on a graph with GPS-like priors (generate --priors): certified,
// the summary and the report say the estimate is in the priors' world
// frame, and -o and --tum hold it in that frame: -o writes the prior
// records back, and read back (its world vertex at the identity) its F is
// the reported optimum, which no other frame gives; --tum holds the same
// poses; and the estimate lies near the truth, whose frame is the world.
func TestSolvePriorsWorldFrame(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "gps.g2o")
	gt := filepath.Join(dir, "gps.gt.g2o")
	if code, _, stderr := runCmd("generate", "manhattan", "-n", "150", "--side", "8", "--priors", "12", "--prior-sigma", "0.3",
		"--seed", "5", "--quiet", "-o", in); code != 0 {
		t.Fatalf("generate: exit %d: %s", code, stderr)
	}
	out := filepath.Join(dir, "out.g2o")
	tum := filepath.Join(dir, "out.tum")
	rep := filepath.Join(dir, "report.json")
	code, stdout, stderr := runCmd("solve", "-o", out, "--tum", tum, "--report", rep, in)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "n=150 poses, m=") || !strings.Contains(stdout, "12 priors (in m): the estimate is in the priors' world frame") ||
		!strings.Contains(stdout, "CERTIFIED globally optimal") {
		t.Fatalf("summary:\n%s", stdout)
	}
	var m map[string]any
	b, err := os.ReadFile(rep)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m["n"].(float64) != 150 || m["priors"].(float64) != 12 || m["frame"] != "world" {
		t.Fatalf("report: n=%v priors=%v frame=%v", m["n"], m["priors"], m["frame"])
	}
	ob, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(ob), "# bcmsync solve: estimate in the world frame of the 12 priors\n") ||
		strings.Count(string(ob), "EDGE_PRIOR_SE2_XY ") != 12 {
		t.Fatalf("-o: header or prior records missing:\n%.300s", ob)
	}
	g, err := g2o.ReadFile(out, g2o.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Priors()) != 12 || g.NumPoses() != 151 {
		t.Fatalf("-o: %d priors, %d poses with the world vertex", len(g.Priors()), g.NumPoses())
	}
	want := m["objective"].(float64)
	if f := g.Cost(g.Initial, posegraph.Poses); math.Abs(f-want) > 1e-9*want {
		t.Fatalf("F of the written estimate %.12g, reported %.12g", f, want)
	}
	// Any other frame changes the priors' terms: the same poses moved by
	// a small rigid motion cost more.
	moved := make([]posegraph.Pose, g.N())
	shift := posegraph.Pose{R: g2o.RotationFromAngle(0.01), T: [3]float64{0.2, -0.1}}
	for i := range moved {
		moved[i] = g.Initial[i]
		if i != g.World() {
			moved[i] = posegraph.Compose(&shift, &g.Initial[i], 2)
		}
	}
	if f := g.Cost(moved, posegraph.Poses); f < want*(1+1e-6) {
		t.Fatalf("F in another frame %.12g, not above the optimum %.12g", f, want)
	}
	tr, err := g2o.ReadTrajectoryFile(tum)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Poses) != 150 {
		t.Fatalf("--tum: %d poses, want 150", len(tr.Poses))
	}
	for k, s := range tr.Stamps {
		i := int(s)
		if math.Abs(tr.Poses[k].T[0]-g.Initial[i].T[0]) > 1e-9 || math.Abs(tr.Poses[k].T[1]-g.Initial[i].T[1]) > 1e-9 {
			t.Fatalf("--tum pose %d at %v, -o at %v", i, tr.Poses[k].T, g.Initial[i].T)
		}
	}
	truth, err := g2o.ReadFile(gt, g2o.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for i := 0; i < 150; i++ {
		sum += math.Hypot(truth.Initial[i].T[0]-g.Initial[i].T[0], truth.Initial[i].T[1]-g.Initial[i].T[1])
	}
	if mean := sum / 150; mean > 0.5 {
		t.Fatalf("mean distance to the truth %.3g: not in the truth's (the world) frame", mean)
	}

	// The pictures pair the written estimate with the input by id; the
	// world vertex, in neither file, is left out.
	if code, _, stderr := runCmd("plot", "-o", filepath.Join(dir, "plots"), "--report", rep, in, out); code != 0 {
		t.Fatalf("plot: exit %d: %s", code, stderr)
	}
	if code, _, stderr := runCmd("view", "-o", filepath.Join(dir, "view.html"), in, out); code != 0 {
		t.Fatalf("view: exit %d: %s", code, stderr)
	}

	// --rotations keeps no position prior, and says so.
	code, stdout, stderr = runCmd("solve", "--rotations", in)
	if code != 0 || !strings.Contains(stdout, "12 position priors left out") || strings.Contains(stdout, "dropped") {
		t.Fatalf("--rotations: exit %d:\n%s%s", code, stdout, stderr)
	}
}

// solve --covariances on a graph with priors: the gauge is the priors'
// world frame, the header says so, and no line is written for the world
// vertex, which is no vertex of the file.
func TestCovariancesPriorsGauge(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "gps.g2o")
	if code, _, stderr := runCmd("generate", "manhattan", "-n", "60", "--side", "5", "--priors", "6", "--seed", "2", "--quiet", "-o", in); code != 0 {
		t.Fatalf("generate: exit %d: %s", code, stderr)
	}
	cov := filepath.Join(dir, "gps.cov")
	code, stdout, stderr := runCmd("solve", "--covariances", cov, in)
	if code != 0 || !strings.Contains(stdout, "gauge the priors' world frame") {
		t.Fatalf("exit %d:\n%s%s", code, stdout, stderr)
	}
	b, err := os.ReadFile(cov)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	if !strings.Contains(text, "# gauge: the world frame of the 6 priors held fixed (their world vertex, id 60, not written)") ||
		!strings.Contains(text, "SE(2), 60 poses, ") {
		t.Fatalf("header:\n%.600s", text)
	}
	lines := 0
	for _, l := range strings.Split(text, "\n") {
		f := strings.Fields(l)
		if len(f) == 0 || f[0] == "#" {
			continue
		}
		lines++
		if f[0] == "60" {
			t.Fatalf("a line for the world vertex: %q", l)
		}
		// Absolute covariances: no pose is held fixed, so none is zero.
		if f[1] == "0" && f[5] == "0" && f[9] == "0" {
			t.Fatalf("pose %s has a zero covariance: %q", f[0], l)
		}
	}
	if lines != 60 {
		t.Fatalf("%d covariance lines, want 60", lines)
	}
}

// info describes a file with priors as the file holds it: its poses and
// edges with the priors counted among the edges, and no world vertex.
func TestInfoPriors(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "gps.g2o")
	if code, _, stderr := runCmd("generate", "manhattan", "-n", "40", "--side", "5", "--priors", "5", "--quiet", "-o", in); code != 0 {
		t.Fatalf("generate: exit %d: %s", code, stderr)
	}
	g, err := g2o.ReadFile(in, g2o.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCmd("info", in)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"poses           40\n", "priors          5 (0 pose, 5 position; in the edges)\n",
		"fixed           none\n", "estimates       40 of 40 poses\n", "components      1\n",
		"edges           " + strconv.Itoa(g.M()) + "\n"} {
		if !strings.Contains(stdout, want) {
			t.Fatalf("info lacks %q:\n%s", want, stdout)
		}
	}
}

// TestSolveHeadingFreeWarning: position priors that all measure one point
// leave the heading free, and the summary and the report say so; a second
// fix elsewhere fixes it and the warning goes.
func TestSolveHeadingFreeWarning(t *testing.T) {
	dir := t.TempDir()
	const chain = "VERTEX_SE2 0 0 0 0\nVERTEX_SE2 1 1 0 0\nVERTEX_SE2 2 2 0 0\n" +
		"EDGE_SE2 0 1 1 0 0 100 0 0 100 0 100\nEDGE_SE2 1 2 1 0 0 100 0 0 100 0 100\nEDGE_SE2 0 2 2 0 0 100 0 0 100 0 100\n"
	for _, c := range []struct {
		priors string
		free   bool
	}{
		{"EDGE_PRIOR_SE2_XY 0 3 3 1 0 1\n", true},
		{"EDGE_PRIOR_SE2_XY 0 3 3 1 0 1\nEDGE_PRIOR_SE2_XY 2 5 3 1 0 1\n", false},
	} {
		in := filepath.Join(dir, "gps.g2o")
		if err := os.WriteFile(in, []byte(chain+c.priors), 0o644); err != nil {
			t.Fatal(err)
		}
		report := filepath.Join(dir, "r.json")
		code, stdout, stderr := runCmd("solve", "--report", report, in)
		if code != 0 {
			t.Fatalf("exit %d: %s\n%s", code, stderr, stdout)
		}
		if got := strings.Contains(stdout, "the estimate's heading is arbitrary"); got != c.free {
			t.Errorf("priors %q: warning shown %v, want %v:\n%s", c.priors, got, c.free, stdout)
		}
		b, err := os.ReadFile(report)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(string(b), `"heading_free": true`); got != c.free {
			t.Errorf("priors %q: report heading_free %v, want %v", c.priors, got, c.free)
		}
		if err := os.Remove(report); err != nil {
			t.Fatal(err)
		}
	}
}
