package cli

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeText(t *testing.T, dir, name, src string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func evalJSON(t *testing.T, args ...string) (evalReport, string) {
	t.Helper()
	code, out, errs := runCmd(append([]string{"evaluate", "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("%v: exit %d: %s", args, code, errs)
	}
	var r evalReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v in %q", err, out)
	}
	return r, errs
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Max(1, math.Abs(b)) }

// TestEvaluateByHand: the unit square (ids 0..3) with pose 2 moved by
// (0.3, 0.4) in the estimate gives, without alignment, ATE = [0, 0, 0.5, 0]
// and RPE = [0, 0.5, 0.5]. The estimate is a 2-D g2o file of VERTEX lines
// alone with an extra pose (id 9), the truth a planar TUM file, out of
// order, with an extra stamp (7): both extras are reported and left out.
func TestEvaluateByHand(t *testing.T) {
	dir := t.TempDir()
	est := writeText(t, dir, "est.g2o", "VERTEX_SE2 0 0 0 0\nVERTEX_SE2 1 1 0 0\nVERTEX_SE2 2 1.3 1.4 0\nVERTEX_SE2 3 0 1 0\nVERTEX_SE2 9 5 5 0\n")
	gt := writeText(t, dir, "gt.tum", "# t x y z qx qy qz qw\n3 0 1 0 0 0 0 1\n0 0 0 0 0 0 0 1\n1 1 0 0 0 0 0 1\n2 1 1 0 0 0 0 1\n7 3 3 0 0 0 0 1\n")
	r, errs := evalJSON(t, "--align", "none", est, gt)
	if !strings.Contains(errs, "warning: 1 pose(s) of "+est+" have no match in "+gt+" and 1 of "+gt+" none in "+est) {
		t.Errorf("no warning about the unmatched poses: %q", errs)
	}
	if r.D != 2 || r.Matched != 4 || r.EstUnmatched != 1 || r.RefUnmatched != 1 || r.Align != "none" {
		t.Errorf("header %+v", r)
	}
	if a := r.ATE; a.Count != 4 || !near(a.RMSE, 0.25) || !near(a.Mean, 0.125) || !near(a.Median, 0) || !near(a.Max, 0.5) ||
		!near(a.Std, math.Sqrt(0.046875)) || a.Min != 0 {
		t.Errorf("ATE %+v", a)
	}
	if p := r.RPE; p.Count != 3 || !near(p.RMSE, math.Sqrt(0.5/3)) || !near(p.Median, 0.5) || p.Min != 0 {
		t.Errorf("RPE %+v", p)
	}
	if r.ATERot.Max > 1e-12 || r.RPERot.Max > 1e-12 {
		t.Errorf("rotation errors %+v %+v", r.ATERot, r.RPERot)
	}
	// The same with the files swapped: the 2-D truth and a TUM estimate.
	r, _ = evalJSON(t, "--align", "none", gt, est)
	if r.D != 2 || r.Matched != 4 || !near(r.ATE.RMSE, 0.25) {
		t.Errorf("swapped: %+v", r)
	}

	// --delta 2 --all-pairs: pairs (0,2) and (1,3). P0^-1 P2 = (1.3, 1.4)
	// against (1, 1): 0.5; P1^-1 P3 = (-1, 1) against (-1, 1): 0.
	r, _ = evalJSON(t, "--align", "none", "--delta", "2", "--all-pairs", est, gt)
	if r.RPE.Count != 2 || !near(r.RPE.Max, 0.5) || r.RPE.Min != 0 || !r.AllPairs || r.Delta != 2 {
		t.Errorf("delta 2, all pairs: %+v", r.RPE)
	}

	// The text form has a row per error (compared with runs of spaces
	// collapsed).
	code, out, _ := runCmd("evaluate", "--align", "none", est, gt)
	flat := strings.Join(strings.Fields(out), " ")
	for _, want := range []string{"4 matched poses (1 of the estimate and 1 of the reference unmatched)", "alignment: none",
		"count rmse mean median std min max",
		"ATE translation 4 0.25 0.125 0 0.21651 0 0.5", "ATE rotation (deg) 4 0 0 0 0 0 0",
		"RPE translation (delta 1) 3 0.40825 0.33333 0.5 0.2357 0 0.5", "(RPE over 3 consecutive pairs)"} {
		if code != 0 || !strings.Contains(flat, want) {
			t.Errorf("text output lacks %q:\n%s", want, out)
		}
	}
}

// TestEvaluateGenerated: a noise-free graph's dead reckoning is its truth,
// so it evaluates to zero error against the truth generate wrote, whether
// as g2o or TUM, after an SE(3) alignment; a noisy graph's does not; and the
// plot is written.
func TestEvaluateGenerated(t *testing.T) {
	dir := t.TempDir()
	g := filepath.Join(dir, "s.g2o")
	if code, _, errs := runCmd("generate", "sphere", "--rings", "5", "--per-ring", "8", "--noise-free", "-o", g, "--truth", filepath.Join(dir, "s.tum")); code != 0 {
		t.Fatal(errs)
	}
	plot := filepath.Join(dir, "ate.png")
	r, _ := evalJSON(t, "--plot", plot, g, filepath.Join(dir, "s.tum"))
	if r.D != 3 || r.Matched != 40 || r.ATE.Max > 1e-9 || r.ATERot.Max > 1e-6 || r.RPE.Max > 1e-9 || r.RPERot.Max > 1e-6 || r.Plot != plot {
		t.Errorf("noise-free: %+v", r)
	}
	if !near(r.Transform.Scale, 1) || r.Transform.AngleDeg > 1e-6 || len(r.Transform.Rotation) != 9 {
		t.Errorf("alignment %+v", r.Transform)
	}
	if st, err := os.Stat(plot); err != nil || st.Size() < 10000 {
		t.Errorf("plot: %v", err)
	}

	n := filepath.Join(dir, "n.g2o")
	if code, _, errs := runCmd("generate", "grid", "--nx", "4", "--ny", "4", "--nz", "2", "--rot-sigma", "0.05", "-o", n); code != 0 {
		t.Fatal(errs)
	}
	r, _ = evalJSON(t, n, filepath.Join(dir, "n.gt.g2o"))
	if r.Matched != 32 || r.ATE.RMSE < 0.01 || r.RPE.RMSE < 0.01 || r.RPERot.RMSE < 1 {
		t.Errorf("noisy dead reckoning evaluates to %+v / %+v / %+v", r.ATE, r.RPE, r.RPERot)
	}
	// Sim alignment never fits worse than SE, SE never worse than none.
	rs, _ := evalJSON(t, "--align", "sim", n, filepath.Join(dir, "n.gt.g2o"))
	rn, _ := evalJSON(t, "--align", "none", n, filepath.Join(dir, "n.gt.g2o"))
	if !(rs.ATE.RMSE <= r.ATE.RMSE+1e-12 && r.ATE.RMSE <= rn.ATE.RMSE+1e-12) {
		t.Errorf("ATE RMSE sim %v, se %v, none %v", rs.ATE.RMSE, r.ATE.RMSE, rn.ATE.RMSE)
	}
}

// TestEvaluateErrors: bad files exit 1 with FILE:LINE, usage mistakes
// exit 2 with the flag named.
func TestEvaluateErrors(t *testing.T) {
	dir := t.TempDir()
	good := writeText(t, dir, "good.g2o", "VERTEX_SE2 0 0 0 0\nVERTEX_SE2 1 1 0 0\nVERTEX_SE2 2 2 0 0\n")
	far := writeText(t, dir, "far.g2o", "VERTEX_SE2 10 0 0 0\nVERTEX_SE2 11 1 0 0\n")
	tilted := writeText(t, dir, "tilted.tum", "0 0 0 0 0 0 0 1\n1 1 0 0.5 0 0 0 1\n")
	badTUM := writeText(t, dir, "bad.txt", "0 0 0 0 0 0 0 1\n1 1 0 0 0 0 1\n")
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{good}, 2, "bcmsync evaluate: evaluate takes two files, EST and GT, not 1"},
		{[]string{"--align", "rigid", good, good}, 2, `bcmsync evaluate: --align: unknown alignment "rigid"`},
		{[]string{"--delta", "0", good, good}, 2, "bcmsync evaluate: --delta must be >= 1"},
		{[]string{"--plot", "x.gif", good, good}, 2, "bcmsync evaluate: --plot x.gif: the format follows the extension"},
		{[]string{good, badTUM}, 1, badTUM + ":2: 7 fields; a TUM line has 8"},
		{[]string{good, tilted}, 1, tilted + ":2: pose is not planar"},
		{[]string{good, far}, 1, "share no id / time stamp"},
		{[]string{"--delta", "3", good, good}, 1, "delta 3 leaves no pair among 3 matched poses"},
		{[]string{good, filepath.Join(dir, "none.g2o")}, 1, "none.g2o: no such file"},
	} {
		code, _, errs := runCmd(append([]string{"evaluate"}, c.args...)...)
		if code != c.code || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, errs, c.code, c.want)
		}
	}
}
