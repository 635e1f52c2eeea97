package cli

import (
	"encoding/json"
	"strings"
	"testing"

	bsync "github.com/bcmsync/bcmsync/sync"
)

// TestLimitsNamed: a solve stopped by a limit says which limit and the
// flag that raises it, exits 1, and its report carries the status of its
// own, the limit's value and the stages that ran (none after the time
// limit).
func TestLimitsNamed(t *testing.T) {
	dir := t.TempDir()
	in := demoFile(t, dir, "in.g2o")
	code, stdout, _ := runCmd("solve", "--init", "random", "--max-iterations", "1", in)
	if code != exitLimit || !strings.Contains(stdout, "stopped by the iteration limit (--max-iterations 1 trust-region steps)") ||
		!strings.Contains(stdout, "--max-iterations raises the limit") {
		t.Errorf("--max-iterations 1: exit %d, stdout %q", code, stdout)
	}
	code, stdout, _ = runCmd("solve", "--json", "--init", "random", "--max-iterations", "1", in)
	var rep bsync.Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || code != exitLimit || rep.Status != string(bsync.IterationLimit) || rep.Options.MaxIterations != 1 {
		t.Errorf("--json --max-iterations 1: exit %d, %v, status %q, max_iterations %d", code, err, rep.Status, rep.Options.MaxIterations)
	}
	code, stdout, _ = runCmd("solve", "--time-limit", "1ns", in)
	if code != exitLimit || !strings.Contains(stdout, "stopped by the time limit (--time-limit 1ns)") ||
		!strings.Contains(stdout, "no bound: the certificate did not run") || strings.Contains(stdout, "lambda_min") {
		t.Errorf("--time-limit 1ns: exit %d, stdout %q", code, stdout)
	}
	code, stdout, _ = runCmd("solve", "--json", "--time-limit", "30ms", in)
	rep = bsync.Report{}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || rep.Stages == nil {
		t.Fatalf("--json --time-limit 30ms: exit %d, %v", code, err)
	}
	for _, s := range rep.Stages {
		if s.Start > 0.03 {
			t.Errorf("--time-limit 30ms: stage %s started at %gs", s.Name, s.Start)
		}
	}
	if code, _, stderr := runCmd("solve", "--max-iterations", "-1", in); code != 2 || !strings.Contains(stderr, "--max-iterations") {
		t.Errorf("--max-iterations -1: exit %d, stderr %q", code, stderr)
	}
}

// TestPrecisionHint: a tolerance the certificate's rounding floor cannot
// meet is said to be so, with the floor's cost, and the allowance's term
// is named; a converged, certified solve names gap-tol times |F|.
func TestPrecisionHint(t *testing.T) {
	dir := t.TempDir()
	in := demoFile(t, dir, "in.g2o")
	code, stdout, _ := runCmd("solve", "--json", "--gap-tol", "1e-16", in)
	var rep bsync.Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if code != exitBounded || rep.Status != string(bsync.BelowPrecision) || !(rep.ShiftFloor > rep.GapAllowed) || rep.GapAllowedBy != "gap_tol*|F|" {
		t.Errorf("--gap-tol 1e-16: exit %d, status %q, shift floor %g, allowed %g by %q", code, rep.Status, rep.ShiftFloor, rep.GapAllowed, rep.GapAllowedBy)
	}
	_, stdout, _ = runCmd("solve", "--gap-tol", "1e-16", in)
	if !strings.Contains(stdout, "about what double precision can prove here") || !strings.Contains(stdout, "the bound that was proven is printed below") {
		t.Errorf("--gap-tol 1e-16: stdout %q", stdout)
	}
	code, stdout, _ = runCmd("solve", in)
	if code != 0 || !strings.Contains(stdout, "(--gap-tol 1e-06 times |F|)") {
		t.Errorf("default: exit %d, stdout %q", code, stdout)
	}
}

// stiffSpread is a 5-pose graph with one edge weighted 1e12 among weights
// 1 (legal data): the trust region cannot converge, and the summary says
// why, with the weights' spread, instead of promising convergence. Whether
// it ends on its iteration limit (exit 7) or stalls with a loose bound
// (exit 3) depends on its steps: with the trial points' exact translations
// (sync/varpro.go) it stalls at a lower F.
const stiffSpread = `EDGE_SE2 0 1 1.0598327027295924 -0.2629863776226261 0.5938615260971661 1 0 0 1 0 1
EDGE_SE2 1 2 1.1957558487452924 0.18743917166396665 0.6144026221590972 1 0 0 1 0 1
EDGE_SE2 2 3 0.9773109591335423 0.5430145442948122 0.6000004755290502 1e12 0 0 1e12 0 1e12
EDGE_SE2 3 4 0.7508538643714637 0.8069587608311619 0.6430458241121594 1 0 0 1 0 1
EDGE_SE2 4 0 -0.9614828237550926 1.683840230125504 -2.0801723413218256 1 0 0 1 0 1
EDGE_SE2 0 2 2.3878666034757163 0.812958085419372 0.7738499450103715 1 0 0 1 0 1
EDGE_SE2 1 3 1.3077044240487092 1.6949936364564175 1.065255374380769 1 0 0 1 0 1
`

func TestWeightSpreadNote(t *testing.T) {
	dir := t.TempDir()
	in := writeTemp(t, dir, "stiff.g2o", stiffSpread)
	code, stdout, _ := runCmd("solve", in)
	if (code != exitLimit && code != exitBounded) || !strings.Contains(stdout, "the edge weights span a factor of 1e+12") || strings.Contains(stdout, "CERTIFIED") {
		t.Errorf("1e12 among 1s: exit %d, stdout %q", code, stdout)
	}
	// A certified solve, or weights within the tolerance's reach, get no note.
	if _, stdout, _ := runCmd("solve", demoFile(t, dir, "in.g2o")); strings.Contains(stdout, "precision ") {
		t.Errorf("demo: %q", stdout)
	}
}
