package cli

import (
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/g2o"
	"github.com/bcmsync/bcmsync/posegraph"
)

// readReplayReport reads a replay report.
func readReplayReport(t *testing.T, path string) replayReport {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rep replayReport
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return rep
}

// replayed runs replay --report report with args, fails t unless it exits
// 0, and returns the report and stdout.
func replayed(t *testing.T, report string, args ...string) (replayReport, string) {
	t.Helper()
	code, stdout, stderr := runCmd(append([]string{"replay", "--report", report}, args...)...)
	if code != 0 {
		t.Fatalf("replay %v: exit %d: %s\n%s", args, code, stderr, stdout)
	}
	return readReplayReport(t, report), stdout
}

// replay FILE --steps K prints a line per step and a total, writes the
// report and the figure, and its last step is solve's optimum.
func TestReplay(t *testing.T) {
	dir := t.TempDir()
	in := demoFile(t, dir, "in.g2o")
	report, pl := filepath.Join(dir, "r.json"), filepath.Join(dir, "plots")
	code, stdout, stderr := runCmd("replay", "--steps", "5", "--report", report, "--plots", pl, in)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if n := strings.Count(stdout, "certified\n"); n != 5 {
		t.Errorf("%d certified step lines, want 5:\n%s", n, stdout)
	}
	if !strings.Contains(stdout, "5 steps in") || !strings.Contains(stdout, "plots: "+filepath.Join(pl, replayPNG)) {
		t.Errorf("no total or plots line:\n%s", stdout)
	}
	rep := readReplayReport(t, report)
	if rep.Schema != replaySchema || len(rep.Steps) != 5 || !rep.AllCertified || rep.File != "in.g2o" {
		t.Fatalf("report: %+v", rep)
	}
	poses, edges := 0, 0
	for k, s := range rep.Steps {
		poses += s.NewPoses
		edges += s.NewEdges
		if s.Poses != poses || s.Edges != edges || s.Waiting != 0 || !s.Certified || s.Seconds <= 0 {
			t.Errorf("step %d: %+v (poses and edges so far %d, %d)", k+1, s, poses, edges)
		}
	}
	code, out, stderr := runCmd("solve", "--json", in)
	if code != 0 {
		t.Fatalf("solve: exit %d: %s", code, stderr)
	}
	var sol struct {
		Objective float64 `json:"objective"`
		N         int     `json:"n"`
	}
	if err := json.Unmarshal([]byte(out), &sol); err != nil {
		t.Fatal(err)
	}
	last := rep.Steps[4]
	if rel := math.Abs(last.Objective-sol.Objective) / sol.Objective; rel > 1e-6 {
		t.Errorf("last step F = %.12g, solve's %.12g", last.Objective, sol.Objective)
	}
	if b, err := os.ReadFile(filepath.Join(pl, replayPNG)); err != nil || !strings.HasPrefix(string(b), "\x89PNG") {
		t.Errorf("%s: not a PNG (%v)", replayPNG, err)
	}
	// --json prints the report on stdout, the lines on stderr.
	code, out, stderr = runCmd("replay", "--steps", "3", "--json", in)
	var again replayReport
	if code != 0 || json.Unmarshal([]byte(out), &again) != nil || len(again.Steps) != 3 || strings.Count(stderr, "certified\n") != 3 {
		t.Errorf("--json: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
}

// replay's usage errors and file checks: --steps is required, a solve
// flag it cannot honour says why, and no output may overwrite the input.
func TestReplayUsage(t *testing.T) {
	dir := t.TempDir()
	in := demoFile(t, dir, "in.g2o")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"replay", in}, "--steps"},
		{[]string{"replay", "--steps", "-2", in}, "--steps"},
		{[]string{"replay", "--steps", "3", "-o", filepath.Join(dir, "x.g2o"), in}, "replay does not take it"},
		{[]string{"replay", "--steps", "3", "--report", in, in}, "--report"},
		{[]string{"replay", "--steps", "3"}, "exactly one FILE"},
		{[]string{"replay", "--steps", "3", "--robust", "huber", in}, "huber"},
	} {
		code, _, stderr := runCmd(tc.args...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, stderr, exitUsage, tc.want)
		}
	}
	if b, err := os.ReadFile(in); err != nil || !strings.Contains(string(b), "EDGE") {
		t.Errorf("the input was touched: %v", err)
	}
}

// replay --robust gnc-tls rejects the wrong closures of a generated graph
// step by step, and a graph with landmarks replays with them arriving at
// their first observation.
func TestReplayRobustAndLandmarks(t *testing.T) {
	dir := t.TempDir()
	clean, truth, err := datasets.Manhattan(150, 8, datasets.Config{Kappa: 100, Tau: 25, LoopProb: 0.5, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	noisy, _, err := datasets.AddOutliers(clean, datasets.OutlierConfig{Count: 3, Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "outliers.g2o")
	if err := writeG2O(out, noisy); err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(dir, "r.json")
	rep, stdout := replayed(t, report, "--steps", "4", "--robust", "gnc-tls", out)
	if rep.Robust != "gnc-tls" || !rep.AllCertified || rep.Steps[3].Rejected < 3 || !strings.Contains(stdout, "rejected") {
		t.Errorf("robust replay: %+v\n%s", rep, stdout)
	}

	lm, _, err := datasets.AddLandmarks(clean, truth, datasets.LandmarkConfig{N: 15, Range: 2, MaxObservers: 4, Tau: 50, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	lmFile := filepath.Join(dir, "landmarks.g2o")
	if err := writeG2O(lmFile, lm); err != nil {
		t.Fatal(err)
	}
	rep, stdout = replayed(t, report, "--steps", "3", lmFile)
	if last := rep.Steps[2]; last.Landmarks != 15 || last.Poses != 150 || !strings.Contains(stdout, "landmarks") {
		t.Errorf("landmark replay: %+v\n%s", last, stdout)
	}
}

// writeG2O writes g with its initial estimates to path.
func writeG2O(path string, g *posegraph.Graph) error {
	return writeOutput(path, io.Discard, func(w io.Writer) error { return g2o.Write(w, g, nil) })
}

// A pose whose edges all go to later ids waits, at the step it arrives,
// for the step that links it; a file that stays disconnected is solve's
// error.
func TestReplayWaiting(t *testing.T) {
	dir := t.TempDir()
	const info = " 100 0 0 100 0 400\n"
	text := "EDGE_SE2 0 1 1 0 0" + info + "EDGE_SE2 1 3 2 0 0" + info + "EDGE_SE2 2 3 1 0 0" + info + "EDGE_SE2 0 2 1.9 0 0" + info
	in := writeTemp(t, dir, "late.g2o", text)
	report := filepath.Join(dir, "r.json")
	rep, stdout := replayed(t, report, "--steps", "4", in)
	// Step 1, pose 0 alone, has nothing to solve, and says so.
	if s := rep.Steps[0]; s.Status != noEdgesYet || s.Certified || !strings.Contains(stdout, noEdgesYet) {
		t.Errorf("step 1: %+v\n%s", s, stdout)
	}
	// Pose 2 arrives at step 3 with its edge from 0, so nothing waits;
	// drop that edge and it waits for pose 3.
	if rep.Steps[2].Waiting != 0 || rep.Steps[2].Poses != 3 {
		t.Errorf("step 3: %+v", rep.Steps[2])
	}
	text = strings.Replace(text, "EDGE_SE2 0 2 1.9 0 0"+info, "", 1)
	writeTemp(t, dir, "late.g2o", text)
	rep, stdout = replayed(t, report, "--steps", "4", in)
	if s := rep.Steps[2]; s.Waiting != 1 || s.Poses != 2 || !strings.Contains(stdout, "waiting 1") {
		t.Errorf("step 3: %+v\n%s", s, stdout)
	}
	if s := rep.Steps[3]; s.Waiting != 0 || s.Poses != 4 || !s.Certified {
		t.Errorf("step 4: %+v", s)
	}
	// Two pieces: solve's error, or the largest replayed.
	text += "EDGE_SE2 7 8 1 0 0" + info
	writeTemp(t, dir, "late.g2o", text)
	if code, _, stderr := runCmd("replay", "--steps", "2", in); code != 1 || !strings.Contains(stderr, "--largest-component") {
		t.Errorf("disconnected: exit %d, %s", code, stderr)
	}
	if rep, _ = replayed(t, report, "--steps", "2", "--largest-component", in); rep.Steps[1].Poses != 4 {
		t.Errorf("--largest-component: %+v", rep.Steps[1])
	}
}

// TestReplayPriors: a file with GPS-like priors replays to the end, also
// under --rotations, which leaves out the position priors and the world
// vertex with them (each step's warm start must then leave it out too);
// the steps count the file's poses, never the world vertex.
func TestReplayPriors(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "gps.g2o")
	if code, _, stderr := runCmd("generate", "sphere", "--rings", "6", "--per-ring", "10", "--priors", "3", "--seed", "2", "-o", in); code != 0 {
		t.Fatalf("generate: exit %d: %s", code, stderr)
	}
	for _, rot := range []bool{false, true} {
		args := []string{"--steps", "4", in}
		if rot {
			args = append([]string{"--rotations"}, args...)
		}
		rep, _ := replayed(t, filepath.Join(dir, "r.json"), args...)
		last := rep.Steps[len(rep.Steps)-1]
		for _, st := range rep.Steps {
			// The file is connected in id order: nothing ever waits,
			// the world vertex included, whether it has arrived or not.
			if !st.Certified || st.Waiting != 0 {
				t.Errorf("rotations=%v: step %d: %s, %d waiting", rot, st.Step, st.Status, st.Waiting)
			}
		}
		if last.Poses != 60 || last.Waiting != 0 {
			t.Errorf("rotations=%v: last step has %d poses and %d waiting, want 60 and 0", rot, last.Poses, last.Waiting)
		}
		if err := os.Remove(filepath.Join(dir, "r.json")); err != nil {
			t.Fatal(err)
		}
	}
}

// A pose with id -1 is a pose like any other: no step takes it for the
// priors' world vertex and reports -1 waiting (review: -1 stood for "no
// world vertex").
func TestReplayNegativeID(t *testing.T) {
	dir := t.TempDir()
	const info = " 100 0 0 100 0 400\n"
	text := "EDGE_SE2 -1 0 1 0 0" + info + "EDGE_SE2 0 1 1 0 0" + info + "EDGE_SE2 1 2 1 0 0" + info + "EDGE_SE2 -1 2 3 0 0" + info
	in := writeTemp(t, dir, "neg.g2o", text)
	rep, stdout := replayed(t, filepath.Join(dir, "r.json"), "--steps", "4", in)
	// Step 1, pose -1 alone, has nothing to solve (as in TestReplayWaiting).
	if s := rep.Steps[0]; s.Status != noEdgesYet {
		t.Errorf("step 1: %+v\n%s", s, stdout)
	}
	for k, s := range rep.Steps[1:] {
		if s.Waiting != 0 || s.Poses != k+2 || !s.Certified {
			t.Errorf("step %d: %+v\n%s", k+2, s, stdout)
		}
	}
}
