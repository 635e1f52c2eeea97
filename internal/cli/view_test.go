package cli

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var viewDataRE = regexp.MustCompile(`(?s)<script type="application/json" id="viewer-data">(.*?)</script>`)

// viewData reads a page written by view and returns its data.
func viewData(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := viewDataRE.FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s: no data element", path)
	}
	var data map[string]any
	if err := json.Unmarshal(m[1], &data); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return data
}

// demoFile writes the demo graph to dir/name.
func demoFile(t *testing.T, dir, name string) string {
	t.Helper()
	in := filepath.Join(dir, name)
	if code, _, stderr := runCmd("demo", "--quiet", "-o", in, "--plots", ""); code != 0 {
		t.Fatalf("demo: exit %d: %s", code, stderr)
	}
	return in
}

// view FILE solves FILE and writes FILE.html in the current directory with
// the initial and optimized estimates, the certificate and the history;
// the optimized estimate's edge costs sum to the reported objective.
func TestViewSolves(t *testing.T) {
	dir := t.TempDir()
	in := demoFile(t, dir, "demo graph.g2o")
	t.Chdir(dir)
	code, stdout, stderr := runCmd("view", in)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "CERTIFIED") || !strings.Contains(stdout, "wrote demo graph.html") {
		t.Errorf("stdout %q", stdout)
	}
	data := viewData(t, filepath.Join(dir, "demo graph.html"))
	if data["title"] != "demo graph.g2o" || data["problem"] != "SE(2)" || data["n"].(float64) != 250 {
		t.Errorf("title %v problem %v n %v", data["title"], data["problem"], data["n"])
	}
	run := data["run"].(map[string]any)
	if run["certified"] != true || run["dual_bound"] == nil {
		t.Errorf("run: certified %v dual bound %v", run["certified"], run["dual_bound"])
	}
	if f := run["history"].(map[string]any)["f"].([]any); len(f) < 2 {
		t.Errorf("history of %d records", len(f))
	}
	ests := data["estimates"].([]any)
	if len(ests) != 2 || !strings.HasPrefix(ests[0].(map[string]any)["label"].(string), "initial (chordal)") {
		t.Fatalf("estimates %v", len(ests))
	}
	total, obj := ests[1].(map[string]any)["total"].(float64), run["objective"].(float64)
	if math.Abs(total-obj) > 1e-9*obj {
		t.Errorf("optimized estimate's costs sum to %.12g, the report's objective is %.12g", total, obj)
	}

	// Rotation synchronization: an SO(2) page.
	out := filepath.Join(dir, "rot.html")
	if code, _, stderr := runCmd("view", "--quiet", "--rotations", "-o", out, in); code != 0 {
		t.Fatalf("--rotations: exit %d: %s", code, stderr)
	}
	if data := viewData(t, out); data["problem"] != "SO(2)" || data["layout"] == nil {
		t.Errorf("--rotations: problem %v layout %v", data["problem"], data["layout"])
	}

	// An uncertified solve still writes its page, and the page says so.
	out = filepath.Join(dir, "uncertified.html")
	code, _, stderr = runCmd("view", "--quiet", "--time-limit", "1ns", "--bcm-sweeps", "-1", "-o", out, in)
	if code != 0 {
		t.Fatalf("time-limited: exit %d: %s", code, stderr)
	}
	if run := viewData(t, out)["run"].(map[string]any); run["certified"] != false {
		t.Errorf("time-limited: certified %v", run["certified"])
	}
}

// view INPUT OPTIMIZED --report shows the files' estimates with the
// report's certificate, and plot --html writes the same page.
func TestViewFiles(t *testing.T) {
	dir := t.TempDir()
	in := demoFile(t, dir, "in.g2o")
	opt, rep := filepath.Join(dir, "opt.g2o"), filepath.Join(dir, "rep.json")
	if code, _, stderr := runCmd("solve", "--quiet", "-o", opt, "--report", rep, in); code != 0 {
		t.Fatalf("solve: exit %d: %s", code, stderr)
	}
	page := filepath.Join(dir, "page.html")
	code, stdout, stderr := runCmd("view", in, opt, "--report", rep, "-o", page)
	if code != 0 || !strings.Contains(stdout, "wrote "+page) {
		t.Fatalf("exit %d, stdout %q, stderr %s", code, stdout, stderr)
	}
	data := viewData(t, page)
	ests := data["estimates"].([]any)
	if len(ests) != 2 || ests[0].(map[string]any)["label"] != "input" || ests[1].(map[string]any)["label"] != "optimized (opt.g2o)" {
		t.Fatalf("estimates %v", ests)
	}
	if run, ok := data["run"].(map[string]any); !ok || run["certified"] != true {
		t.Errorf("run %v", data["run"])
	}

	// One file, not solved, no report: no run.
	page1 := filepath.Join(dir, "page1.html")
	if code, _, stderr := runCmd("view", "--no-solve", "-o", page1, opt); code != 0 {
		t.Fatalf("--no-solve: exit %d: %s", code, stderr)
	}
	if data := viewData(t, page1); data["run"] != nil || len(data["estimates"].([]any)) != 1 {
		t.Errorf("--no-solve: run %v, %d estimates", data["run"], len(data["estimates"].([]any)))
	}

	plotDir := filepath.Join(dir, "plots")
	if code, _, stderr := runCmd("plot", "--html", "-o", plotDir, "--report", rep, in, opt); code != 0 {
		t.Fatalf("plot --html: exit %d: %s", code, stderr)
	}
	if data := viewData(t, filepath.Join(plotDir, "view.html")); len(data["estimates"].([]any)) != 2 || data["run"] == nil {
		t.Errorf("plot --html: %d estimates, run %v", len(data["estimates"].([]any)), data["run"])
	}
}

func TestViewErrors(t *testing.T) {
	dir := t.TempDir()
	in := demoFile(t, dir, "in.g2o")
	noVertex := filepath.Join(dir, "novertex.g2o")
	os.WriteFile(noVertex, []byte("EDGE_SE2 0 1 1 0 0 1 0 0 1 0 1\n"), 0o644)
	bad := filepath.Join(dir, "bad.g2o")
	os.WriteFile(bad, []byte("VERTEX_SE2 0 0 0 0\nEDGE_SE2 0 1 1 0 0 1 0 0 1 0\n"), 0o644)
	badRep := filepath.Join(dir, "rep.json")
	os.WriteFile(badRep, []byte("{not json"), 0o644)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"view"}, 2, "bcmsync view: view takes FILE.g2o"},
		{[]string{"view", "a.g2o", "b.g2o", "c.g2o"}, 2, "bcmsync view: view takes"},
		{[]string{"view", "--report", badRep, in}, 2, "bcmsync view: --report shows an earlier solve"},
		{[]string{"view", "--no-solve", in, in}, 2, "bcmsync view: --no-solve is implied"},
		{[]string{"view", "--grad-tol", "-1", in}, 2, "bcmsync view: --grad-tol"},
		{[]string{"view", "--init", "nope", in}, 2, "bcmsync view:"},
		{[]string{"view", "-o", in, in}, 2, "would overwrite the input"},
		{[]string{"view", "--nope", in}, 2, "bcmsync view: flag provided but not defined"},
		{[]string{"view", "-o", filepath.Join(dir, "x.html"), bad}, 1, "bad.g2o:2:"},
		{[]string{"view", "--no-solve", "-o", filepath.Join(dir, "x.html"), noVertex}, 1, "novertex.g2o: pose 0 has no VERTEX line"},
		{[]string{"view", "--no-solve", "--report", badRep, "-o", filepath.Join(dir, "x.html"), in}, 1, "rep.json:"},
		{[]string{"view", "-o", filepath.Join(dir, "x.html"), filepath.Join(dir, "missing.g2o")}, 1, "missing.g2o"},
	} {
		code, _, stderr := runCmd(c.args...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q", c.args, code, stderr, c.code, c.want)
		}
	}
	if _, err := os.Stat(in); err != nil {
		t.Errorf("the input is gone: %v", err)
	}
}

// TestViewFilesMatchIDs: OPTIMIZED is paired with INPUT by vertex id, so
// a file of other ids is an error naming both (it was paired by rank and
// drawn as if it were the input's estimate), and an OPTIMIZED of VERTEX
// lines alone, as many optimizers write, is enough.
func TestViewFilesMatchIDs(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.g2o")
	os.WriteFile(in, []byte("VERTEX_SE2 0 0 0 0\nVERTEX_SE2 1 1 0 0\nVERTEX_SE2 2 2 0 0\n"+
		"EDGE_SE2 0 1 1 0 0 1 0 0 1 0 1\nEDGE_SE2 1 2 1 0 0 1 0 0 1 0 1\n"), 0o644)
	other := filepath.Join(dir, "other.g2o")
	os.WriteFile(other, []byte("VERTEX_SE2 0 0 0 0\nVERTEX_SE2 1 1 0 0\nVERTEX_SE2 7 2 0 0\n"+
		"EDGE_SE2 0 1 1 0 0 1 0 0 1 0 1\nEDGE_SE2 1 7 1 0 0 1 0 0 1 0 1\n"), 0o644)
	page := filepath.Join(dir, "p.html")
	for _, args := range [][]string{
		{"view", "-o", page, in, other},
		{"plot", "--html", "-o", filepath.Join(dir, "plots"), in, other},
	} {
		code, _, stderr := runCmd(args...)
		if code != 1 || !strings.Contains(stderr, "other.g2o:3: vertex 7") || !strings.Contains(stderr, "in.g2o") {
			t.Errorf("%q: exit %d, stderr %q; want 1 and the first id that differs", args, code, stderr)
		}
	}

	vonly := filepath.Join(dir, "vonly.g2o")
	os.WriteFile(vonly, []byte("VERTEX_SE2 2 2.5 0 0\nVERTEX_SE2 0 0.5 0 0\nVERTEX_SE2 1 1.5 0 0\n"), 0o644)
	if code, _, stderr := runCmd("view", "-o", page, in, vonly); code != 0 {
		t.Fatalf("VERTEX-only OPTIMIZED: exit %d: %s", code, stderr)
	}
	ests := viewData(t, page)["estimates"].([]any)
	pos := ests[1].(map[string]any)["pos"].([]any)
	if len(pos) != 6 || pos[0] != 0.5 || pos[2] != 1.5 || pos[4] != 2.5 {
		t.Errorf("VERTEX-only OPTIMIZED: positions %v, want x = 0.5, 1.5, 2.5 by id", pos)
	}
}

// TestPlotHTMLLenient: plot --html reads the files as plot does, so
// --lenient skips an unsupported record (a prior) for the page too.
func TestPlotHTMLLenient(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "lm.g2o")
	os.WriteFile(in, []byte("EDGE_SE2_PRIOR 0 0 0 0 1 0 0 1 0 1\nVERTEX_SE2 0 0 0 0\nVERTEX_SE2 1 1 0 0\nEDGE_SE2 0 1 1 0 0 1 0 0 1 0 1\n"), 0o644)
	plotDir := filepath.Join(dir, "plots")
	if code, _, stderr := runCmd("plot", "--lenient", "--html", "-o", plotDir, in); code != 0 {
		t.Fatalf("plot --lenient --html: exit %d: %s", code, stderr)
	}
	if data := viewData(t, filepath.Join(plotDir, "view.html")); data["n"] != 2.0 {
		t.Errorf("n = %v, want 2", data["n"])
	}
	code, _, stderr := runCmd("view", "--no-solve", "-o", filepath.Join(dir, "p.html"), in)
	if code != 1 || !strings.Contains(stderr, "--lenient skips") {
		t.Errorf("view without --lenient: exit %d, stderr %q; want the --lenient hint", code, stderr)
	}
}

// TestViewDisconnectedHint: view solves as solve does, so a disconnected
// graph's error names --largest-component, which view takes, as solve's
// does.
func TestViewDisconnectedHint(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "disc.g2o")
	os.WriteFile(in, []byte("EDGE_SE2 0 1 1 0 0 1 0 0 1 0 1\nEDGE_SE2 2 3 1 0 0 1 0 0 1 0 1\nEDGE_SE2 3 4 1 0 0 1 0 0 1 0 1\n"), 0o644)
	code, _, stderr := runCmd("view", "--quiet", "-o", filepath.Join(dir, "d.html"), in)
	if code != 1 || !strings.Contains(stderr, "--largest-component solves the largest (3 poses)") {
		t.Errorf("exit %d, stderr %q; want 1 and the --largest-component hint", code, stderr)
	}
}

// TestViewKeepsReport: -o naming the --report file is a usage error, as
// -o naming an input is; it used to replace the report with the page.
func TestViewKeepsReport(t *testing.T) {
	dir := t.TempDir()
	in := demoFile(t, dir, "in.g2o")
	rep := filepath.Join(dir, "rep.json")
	if code, _, stderr := runCmd("solve", "--quiet", "--report", rep, in); code != 0 {
		t.Fatalf("solve: exit %d: %s", code, stderr)
	}
	before, _ := os.ReadFile(rep)
	code, _, stderr := runCmd("view", "--no-solve", "--report", rep, "-o", rep, in)
	if code != 2 || !strings.Contains(stderr, "would overwrite the input --report "+rep) {
		t.Errorf("exit %d, stderr %q; want 2 and the report named", code, stderr)
	}
	if after, _ := os.ReadFile(rep); string(after) != string(before) {
		t.Error("the report was overwritten")
	}
}
