package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/g2o"
	"github.com/bcmsync/bcmsync/posegraph"
)

// TestSolveRobust runs `solve --robust gnc-tls` on a synthetic graph with 10%
// wrong loop closures written to a file: the outliers are rejected and
// named by line, -o writes the inlier graph, and the report's robust
// section agrees.
func TestSolveRobust(t *testing.T) {
	dir := t.TempDir()
	bad, mask, in := robustFile(t, dir)
	out, rep := filepath.Join(dir, "inliers.g2o"), filepath.Join(dir, "report.json")
	code, stdout, stderr := runCmd("solve", "--robust", "gnc-tls", "-o", out, "--report", rep, in)
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, stdout, stderr)
	}
	outliers := 0
	for _, m := range mask {
		if m {
			outliers++
		}
	}
	for _, want := range []string{"CERTIFIED globally optimal at rank 2 (robust: of the ", "robust gnc-tls", "bad.g2o:", "converged",
		"consistency: ", "rejected by the consistency stage ", " c^2)"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("summary lacks %q:\n%s", want, stdout)
		}
	}
	kept, err := g2o.ReadFile(out, g2o.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if kept.M() != bad.M()-outliers || kept.N() != bad.N() {
		t.Errorf("-o wrote %d edges on %d poses; want the %d inliers on %d", kept.M(), kept.N(), bad.M()-outliers, bad.N())
	}
	b, err := os.ReadFile(rep)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		M      int `json:"m"`
		Robust struct {
			Converged bool `json:"converged"`
			Rejected  []struct {
				Edge int `json:"edge"`
				Line int `json:"line"`
			} `json:"rejected"`
			Edges []json.RawMessage `json:"edges"`
		} `json:"robust"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if !r.Robust.Converged || len(r.Robust.Rejected) != outliers || len(r.Robust.Edges) != bad.M() || r.M != bad.M()-outliers {
		t.Errorf("report: converged %v, %d rejected (want %d), %d edges listed, m %d", r.Robust.Converged, len(r.Robust.Rejected), outliers, len(r.Robust.Edges), r.M)
	}
	for _, e := range r.Robust.Rejected {
		if !mask[e.Edge] || e.Line == 0 {
			t.Errorf("rejected %+v is not an outlier with a line", e)
		}
	}
}

// TestSolveRobustFlags: bad robust flags are usage errors (exit 2).
func TestSolveRobustFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--robust", "huber"},
		{"--robust-quantile", "0.99"},
		{"--trust-odometry=false"},
		{"--robust-consistency=false"},
		{"--robust", "gnc-tls", "--robust-quantile", "1.5"},
		{"--robust", "gnc-tls", "--robust-threshold", "-1"},
		{"--robust", "gnc-tls", "--robust-quantile", "0.99", "--robust-threshold", "10"},
	} {
		code, _, stderr := runCmd(append(append([]string{"solve"}, args...), "x.g2o")...)
		if code != 2 || !strings.HasPrefix(stderr, "bcmsync solve:") {
			t.Errorf("%v: exit %d, stderr %q; want a usage error", args, code, stderr)
		}
	}
}

// TestSolveRobustPlots: --plots with --robust draws the whole run
// (robust.png beside the final solve's figures), and a summary with more
// rejected edges than it names points to --report without claiming a JSON
// report was written.
func TestSolveRobustPlots(t *testing.T) {
	dir := t.TempDir()
	_, _, in := robustFile(t, dir)
	plotDir := filepath.Join(dir, "plots")
	code, stdout, stderr := runCmd("solve", "--robust", "gnc-tls", "--plots", plotDir, in)
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, stdout, stderr)
	}
	if _, err := os.Stat(filepath.Join(plotDir, "robust.png")); err != nil {
		t.Error(err)
	}
	if !strings.Contains(stdout, "robust.png") {
		t.Errorf("the summary does not name robust.png:\n%s", stdout)
	}
	if strings.Contains(stdout, "in the JSON report") || !strings.Contains(stdout, "more (--report writes every edge)") {
		t.Errorf("the summary's list of rejected edges:\n%s", stdout)
	}
}

// robustFile writes dir/bad.g2o, a synthetic 2-D graph with 10% wrong loop
// closures, and returns the graph, the outlier mask and the path.
func robustFile(t *testing.T, dir string) (*posegraph.Graph, []bool, string) {
	t.Helper()
	g, _, err := datasets.Geometric(2, 120, 2.5, datasets.Config{Kappa: 200, Tau: 100, LoopProb: 0.3, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	bad, mask, err := datasets.AddOutliers(g, datasets.OutlierConfig{Fraction: 0.1, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(dir, "bad.g2o")
	f, err := os.Create(in)
	if err != nil {
		t.Fatal(err)
	}
	if err := g2o.Write(f, bad, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return bad, mask, in
}
