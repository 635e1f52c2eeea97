package cli

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// TestEvaluateRealLogs: float time stamps a fraction of a millisecond
// apart match by nearest stamp within --t-max-diff (not at 0); a TUM file
// named .traj is read as TUM; KITTI pose files (named .txt) are matched
// by line, with each other and with a g2o file; the report says how.
func TestEvaluateRealLogs(t *testing.T) {
	dir := t.TempDir()
	var gt, est, kGT, kEst, g3 strings.Builder
	const n = 20
	g3.WriteString("# a g2o file of the same poses\n")
	for k := 0; k < n; k++ {
		x, y := float64(k)*0.5, math.Sin(float64(k)/3)
		stamp := 1403636579.7635 + 0.05*float64(k)
		fmt.Fprintf(&gt, "%.4f %g %g 0 0 0 0 1\n", stamp, x, y)
		dx := 0.0
		if k == 7 {
			dx = 0.3 // one pose off by 0.3 in x
		}
		// The estimate's clock runs 0.1 ms behind.
		fmt.Fprintf(&est, "%.4f %g %g 0 0 0 0 1\n", stamp+0.0001, x+dx, y)
		fmt.Fprintf(&kGT, "1 0 0 %g 0 1 0 %g 0 0 1 0\n", x, y)
		fmt.Fprintf(&kEst, "1.000000e+00 0 0 %g 0 1 0 %g 0 0 1 0\n", x+dx, y)
		fmt.Fprintf(&g3, "VERTEX_SE3:QUAT %d %g %g 0 0 0 0 1\n", k, x, y)
	}
	gtPath := writeText(t, dir, "gt.txt", "# timestamp tx ty tz qx qy qz qw\n"+gt.String())
	estPath := writeText(t, dir, "est.traj", est.String())
	r, _ := evalJSON(t, "--align", "none", estPath, gtPath)
	if r.Matched != n || r.EstFormat != "tum" || r.RefFormat != "tum" || r.Association != "nearest stamp" || r.TMaxDiff != 0.01 ||
		!near(r.ATE.Max, 0.3) || r.ATE.Count != n {
		t.Errorf("TUM within 0.1 ms: %+v", r)
	}
	code, _, errs := runCmd("evaluate", "--t-max-diff", "0", estPath, gtPath)
	if code != 1 || !strings.Contains(errs, "share no id / time stamp within --t-max-diff 0") {
		t.Errorf("--t-max-diff 0: exit %d, %q", code, errs)
	}
	// A stricter tolerance than the offset matches nothing; a looser one
	// than the spacing still matches each pose with its own.
	if code, _, _ := runCmd("evaluate", "--t-max-diff", "0.00005", estPath, gtPath); code != 1 {
		t.Errorf("--t-max-diff 5e-5: exit %d, want 1 (no match)", code)
	}
	r, _ = evalJSON(t, "--align", "none", "--t-max-diff", "0.04", estPath, gtPath)
	if r.Matched != n || !near(r.ATE.Max, 0.3) || !near(r.ATE.RMSE, 0.3/math.Sqrt(n)) {
		t.Errorf("--t-max-diff 0.04: %+v", r.ATE)
	}

	kg := writeText(t, dir, "00.txt", kGT.String())
	ke := writeText(t, dir, "00-est.txt", kEst.String())
	r, _ = evalJSON(t, "--align", "none", ke, kg)
	if r.Matched != n || r.EstFormat != "kitti" || r.RefFormat != "kitti" || r.Association != "by line" || !near(r.ATE.Max, 0.3) {
		t.Errorf("KITTI: %+v", r)
	}
	code, out, _ := runCmd("evaluate", ke, kg)
	if code != 0 || !strings.Contains(out, "matched by line (a KITTI pose file has no time stamps)") {
		t.Errorf("KITTI text output: exit %d\n%s", code, out)
	}
	// KITTI against a g2o file of the same poses (ids 0..n-1): by line.
	gp := writeText(t, dir, "same.g2o", g3.String())
	r, _ = evalJSON(t, "--align", "none", kg, gp)
	if r.Matched != n || r.Association != "by line" || r.ATE.Max > 1e-12 {
		t.Errorf("KITTI against g2o: %+v", r)
	}
	short := writeText(t, dir, "short.txt", strings.Join(strings.SplitAfter(kGT.String(), "\n")[:n-1], ""))
	code, _, errs = runCmd("evaluate", ke, short)
	if code != 1 || !strings.Contains(errs, fmt.Sprintf("%s has %d poses and %s %d: a KITTI pose file has no time stamps", ke, n, short, n-1)) {
		t.Errorf("KITTI of other lengths: exit %d, %q", code, errs)
	}
	odd := writeText(t, dir, "odd.traj", "# what is this\n1 2 3 4 5 6\n")
	code, _, errs = runCmd("evaluate", odd, gtPath)
	if code != 1 || !strings.Contains(errs, odd+":2: 6 numbers: neither a TUM line (8") {
		t.Errorf("unknown format: exit %d, %q", code, errs)
	}
	for _, v := range []string{"-1", "NaN", "Inf"} {
		if code, _, errs := runCmd("evaluate", "--t-max-diff", v, estPath, gtPath); code != 2 || !strings.Contains(errs, "--t-max-diff") {
			t.Errorf("--t-max-diff %s: exit %d, %q", v, code, errs)
		}
	}
}
