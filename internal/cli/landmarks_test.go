package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bcmsync/bcmsync/g2o"
	"github.com/bcmsync/bcmsync/posegraph"
)

// solve on a graph with landmarks: certified, -o writes the landmarks with
// their optimized positions (read back, their F is the reported optimum),
// --tum holds the poses only, the summary and the report count them, and
// --plots draws them. --rotations refuses them with a clear error.
func TestSolveLandmarks(t *testing.T) {
	in := filepath.Join("..", "..", "datasets", "testdata", "manhattan-landmarks.g2o")
	dir := t.TempDir()
	out := filepath.Join(dir, "out.g2o")
	tum := filepath.Join(dir, "out.tum")
	rep := filepath.Join(dir, "report.json")
	code, stdout, stderr := runCmd("solve", "-o", out, "--tum", tum, "--report", rep, "--plots", filepath.Join(dir, "plots"), in)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "n=250 poses + 60 landmarks, m=776 edges (480 observations)") ||
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
	if m["n"].(float64) != 250 || m["landmarks"].(float64) != 60 || m["observations"].(float64) != 480 {
		t.Fatalf("report: n=%v landmarks=%v observations=%v", m["n"], m["landmarks"], m["observations"])
	}
	g, err := g2o.ReadFile(out, g2o.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if g.NumLandmarks() != 60 || g.NumPoses() != 250 {
		t.Fatalf("-o: %d poses, %d landmarks", g.NumPoses(), g.NumLandmarks())
	}
	// The written estimate is the optimum: its F is the reported objective.
	if f, want := g.Cost(g.Initial, posegraph.Poses), m["objective"].(float64); f > want*(1+1e-9) || f < want*(1-1e-9) {
		t.Fatalf("F of the written estimate %.12g, reported %.12g", f, want)
	}
	tb, err := os.ReadFile(tum)
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(string(tb), "\n"); lines != 250 {
		t.Fatalf("--tum has %d lines, want 250 (poses only)", lines)
	}
	if _, err := os.Stat(filepath.Join(dir, "plots", "trajectory.png")); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runCmd("solve", "--rotations", in)
	if code != 1 || !strings.Contains(stderr, "rotation synchronization has no use for its 60 landmarks") {
		t.Fatalf("--rotations: exit %d, stderr %q", code, stderr)
	}
	code, stdout, _ = runCmd("info", filepath.Join("..", "..", "datasets", "testdata", "cube-landmarks.g2o"))
	if code != 0 || !strings.Contains(stdout, "125 + 40 landmarks") || !strings.Contains(stdout, "287 landmark observations") {
		t.Fatalf("info: exit %d:\n%s", code, stdout)
	}
}
