package cli

import (
	"math"
	"path/filepath"
	"strings"
	"testing"
)

// view on a graph with landmarks: the page counts them apart from the
// poses, its optimized estimate's costs (observations included) sum to
// the certified objective, a page from the files and the solve's report
// accepts the report (which counts poses and landmarks apart), and a
// rotation-only page is refused in every mode.
func TestViewLandmarks(t *testing.T) {
	in := filepath.Join("..", "..", "datasets", "testdata", "manhattan-landmarks.g2o")
	dir := t.TempDir()
	page := filepath.Join(dir, "lm.html")
	code, stdout, stderr := runCmd("view", "-o", page, in)
	if code != 0 || !strings.Contains(stdout, "CERTIFIED") {
		t.Fatalf("exit %d: %s\n%s", code, stdout, stderr)
	}
	data := viewData(t, page)
	if data["n"].(float64) != 310 || data["landmarks"].(float64) != 60 || data["m"].(float64) != 776 {
		t.Fatalf("n %v landmarks %v m %v", data["n"], data["landmarks"], data["m"])
	}
	edges, loop := data["edges"].([]any), data["loop"].([]any)
	obs := 0
	for k := range loop {
		if edges[2*k+1].(float64) >= 250 {
			obs++
			if loop[k].(float64) != 0 {
				t.Fatalf("observation %d is flagged a loop closure", k)
			}
		}
	}
	if obs != 480 {
		t.Errorf("%d edges end at a landmark, want 480 observations", obs)
	}
	run := data["run"].(map[string]any)
	ests := data["estimates"].([]any)
	total, obj := ests[1].(map[string]any)["total"].(float64), run["objective"].(float64)
	if math.Abs(total-obj) > 1e-9*obj {
		t.Errorf("optimized costs sum to %.12g, the objective is %.12g", total, obj)
	}

	opt, rep := filepath.Join(dir, "opt.g2o"), filepath.Join(dir, "rep.json")
	if code, _, stderr := runCmd("solve", "--quiet", "-o", opt, "--report", rep, in); code != 0 {
		t.Fatalf("solve: exit %d: %s", code, stderr)
	}
	page2 := filepath.Join(dir, "files.html")
	if code, _, stderr := runCmd("view", "--quiet", "-o", page2, "--report", rep, in, opt); code != 0 {
		t.Fatalf("view INPUT OPTIMIZED --report: exit %d: %s", code, stderr)
	}
	if d := viewData(t, page2); d["landmarks"].(float64) != 60 || d["run"] == nil {
		t.Errorf("files page: landmarks %v run %v", d["landmarks"], d["run"])
	}

	for _, args := range [][]string{
		{"view", "--rotations", "-o", filepath.Join(dir, "r1.html"), in},
		{"view", "--no-solve", "--rotations", "-o", filepath.Join(dir, "r2.html"), in},
	} {
		code, _, stderr := runCmd(args...)
		if code != 1 || !strings.Contains(stderr, "rotation synchronization has no use for its 60 landmarks") {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
		}
	}
	// A report of another graph's size names both counts.
	plain := demoFile(t, dir, "plain.g2o")
	code, _, stderr = runCmd("view", "--quiet", "--no-solve", "--report", rep, "-o", filepath.Join(dir, "x.html"), plain)
	if code != 1 || !strings.Contains(stderr, "the report is of 250 poses and 60 landmarks in 2-D, but "+plain+" has 250 poses in 2-D") {
		t.Errorf("mismatched report: exit %d, stderr %q", code, stderr)
	}
}
