package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/bcmsync/bcmsync/g2o"
)

// solve writes every output and a report with the documented keys.
func TestSolveOutputs(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.g2o")
	// Write the demo graph to a file so solve reads it like any other.
	if code, _, stderr := runCmd("demo", "--quiet", "-o", in, "--plots", ""); code != 0 {
		t.Fatalf("demo: exit %d: %s", code, stderr)
	}
	out := filepath.Join(dir, "out.g2o")
	tum := filepath.Join(dir, "out.tum")
	rep := filepath.Join(dir, "report.json")
	plots := filepath.Join(dir, "plots")
	code, stdout, stderr := runCmd("solve", "-o", out, "--tum", tum, "--report", rep, "--plots", plots, in)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "CERTIFIED globally optimal") {
		t.Errorf("summary lacks the certificate:\n%s", stdout)
	}
	var m map[string]any
	b, err := os.ReadFile(rep)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"file", "d", "n", "m", "objective", "relaxation_objective", "dual_bound",
		"suboptimality_bound", "certified", "status", "rank", "min_eigenvalue", "timings", "history"} {
		if _, ok := m[k]; !ok {
			t.Errorf("report lacks key %q", k)
		}
	}
	if m["certified"] != true || m["n"].(float64) != 250 {
		t.Errorf("report: certified=%v n=%v", m["certified"], m["n"])
	}
	timings := m["timings"].(map[string]any)
	for _, k := range []string{"parse", "init", "optimize", "certify", "round", "total"} {
		if _, ok := timings[k]; !ok {
			t.Errorf("timings lack %q", k)
		}
	}
	if h := m["history"].([]any); len(h) < 2 {
		t.Errorf("history has %d records", len(h))
	}
	// Trust-region records say what each step cost, under stable keys
	// (zero and false fields are left out; a step has at least one inner
	// iteration and a preconditioner).
	steps := 0
	for _, r := range m["history"].([]any) {
		rec := r.(map[string]any)
		if rec["phase"] != "rtr" {
			continue
		}
		steps++
		if in, ok := rec["inner"].(float64); !ok || in < 1 {
			t.Errorf("trust-region record without tCG iterations: %v", rec)
		}
		if rec["precond"] != "hessian" && rec["precond"] != "q" && rec["precond"] != "none" {
			t.Errorf("trust-region record with preconditioner %v", rec["precond"])
		}
	}
	if steps == 0 {
		t.Error("history has no trust-region record")
	}
	// The optimized graph reads back with the same structure and its
	// poses attain the reported objective.
	g, err := g2o.ReadFile(out, g2o.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f := g.Cost(g.Initial, 0)
	if obj := m["objective"].(float64); f > obj*(1+1e-9) || f < obj*(1-1e-9) {
		t.Errorf("F at the written poses %.12g, report says %.12g", f, obj)
	}
	lines, _ := os.ReadFile(tum)
	if n := strings.Count(string(lines), "\n"); n != 250 {
		t.Errorf("TUM file has %d lines, want 250", n)
	}
	for _, p := range []string{"trajectory.png", "convergence.png", "stages.png"} {
		if st, err := os.Stat(filepath.Join(plots, p)); err != nil || st.Size() < 1000 {
			t.Errorf("plot %s: %v", p, err)
		}
	}
}

func TestSolveErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.g2o")
	os.WriteFile(bad, []byte("VERTEX_SE2 0 0 0 0\nEDGE_SE2 0 1 1 0 0 1 0 0 1 0\n"), 0o644)
	code, _, stderr := runCmd("solve", bad)
	if code != 1 || !strings.Contains(stderr, "bad.g2o:2:") {
		t.Errorf("bad file: exit %d, stderr %q; want 1 and a message naming bad.g2o:2", code, stderr)
	}
	disc := filepath.Join(dir, "disc.g2o")
	os.WriteFile(disc, []byte("EDGE_SE2 0 1 1 0 0 1 0 0 1 0 1\nEDGE_SE2 2 3 1 0 0 1 0 0 1 0 1\n"), 0o644)
	code, _, stderr = runCmd("solve", disc)
	if code != 1 || !strings.Contains(stderr, "disconnected") || !strings.Contains(stderr, "[2 2]") {
		t.Errorf("disconnected: exit %d, stderr %q", code, stderr)
	}
	code, stdout, stderr := runCmd("solve", "--largest-component", disc)
	if code != 0 || !strings.Contains(stdout, "n=2 poses") {
		t.Errorf("--largest-component: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if code, _, _ := runCmd("solve"); code != 2 {
		t.Errorf("no file: exit %d, want 2", code)
	}
	if code, _, _ := runCmd("solve", "--init", "nope", disc); code != 2 {
		t.Errorf("bad --init: exit %d, want 2", code)
	}
}

// An estimate without a certificate exits with its status's code (here the
// time limit's) and says so; --json prints the
// report, whose bounds are null or, when the failing level still proved a
// weaker lower bound on F*, consistent with the objective.
func TestSolveNotCertified(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.g2o")
	if code, _, stderr := runCmd("demo", "--quiet", "-o", in, "--plots", ""); code != 0 {
		t.Fatalf("demo: exit %d: %s", code, stderr)
	}
	code, stdout, _ := runCmd("solve", "--time-limit", "1ns", "--bcm-sweeps", "-1", in)
	if code != exitLimit || !strings.Contains(stdout, "NOT certified") {
		t.Errorf("time-limited solve: exit %d, stdout %q", code, stdout)
	}
	code, stdout, _ = runCmd("solve", "--json", "--time-limit", "1ns", "--bcm-sweeps", "-1", in)
	var m map[string]any
	if err := json.Unmarshal([]byte(stdout), &m); err != nil {
		t.Fatalf("--json output is not JSON: %v\n%s", err, stdout)
	}
	if code != exitLimit || m["certified"] != false || (m["dual_bound"] == nil) != (m["suboptimality_bound"] == nil) {
		t.Errorf("exit %d, certified %v, dual_bound %v, suboptimality_bound %v", code, m["certified"], m["dual_bound"], m["suboptimality_bound"])
	}
	if dual, ok := m["dual_bound"].(float64); ok {
		f, gap := m["objective"].(float64), m["suboptimality_bound"].(float64)
		if dual > f || gap != f-dual {
			t.Errorf("objective %g, dual bound %g, suboptimality bound %g", f, dual, gap)
		}
	}
	if code, _, stderr := runCmd("solve", "--gap-abs", "-1", in); code != 2 || !strings.Contains(stderr, "gap-abs") {
		t.Errorf("--gap-abs -1: exit %d, stderr %q", code, stderr)
	}
	if code, _, stderr := runCmd("solve", "--grad-tol", "NaN", in); code != 2 || !strings.Contains(stderr, "grad-tol") {
		t.Errorf("--grad-tol NaN: exit %d, stderr %q", code, stderr)
	}
}

// TestVmHWM: the peak RSS is read from the status file's VmHWM line,
// wherever the line is, and the process's own is positive on Linux.
func TestVmHWM(t *testing.T) {
	for _, c := range []struct {
		status string
		want   int64
	}{
		{"Name:\tbcmsync\nVmPeak:\t  20000 kB\nVmHWM:\t   15872 kB\nVmRSS:\t 1 kB\n", 15872 << 10},
		{"VmHWM: 7 kB\n", 7 << 10},
		{"Name:\tx\nVmRSS:\t 1 kB\n", 0},
		{"", 0},
	} {
		if got := vmHWM([]byte(c.status)); got != c.want {
			t.Errorf("vmHWM(%q) = %d, want %d", c.status, got, c.want)
		}
	}
	if runtime.GOOS == "linux" && peakRSS() <= 0 {
		t.Errorf("peakRSS() = %d on Linux", peakRSS())
	}
}
