package cli

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	bsync "github.com/bcmsync/bcmsync/sync"
)

// helpFlags parses the flag list of a command's help (flag.PrintDefaults'
// layout) into each flag's usage text, defaults left out.
func helpFlags(t *testing.T, help string) map[string]string {
	t.Helper()
	flags := map[string]string{}
	_, list, ok := strings.Cut(help, "\nflags:\n")
	if !ok {
		t.Fatalf("no flag list in:\n%s", help)
	}
	def := regexp.MustCompile(` \(default .*\)$`)
	name := ""
	for _, line := range strings.Split(list, "\n") {
		switch {
		case strings.HasPrefix(line, "  -"):
			f := strings.Fields(line)
			name = strings.TrimPrefix(f[0], "-")
			if _, usage, ok := strings.Cut(line, "\t"); ok { // a one-letter flag's usage is on its line
				flags[name] = usage
			} else {
				flags[name] = ""
			}
		case strings.HasPrefix(line, "    \t") && name != "":
			flags[name] += def.ReplaceAllString(strings.TrimPrefix(line, "    \t"), "")
		}
	}
	return flags
}

// notTakenHelp returns the flags a command's help says it does not take,
// with the reasons.
func notTakenHelp(t *testing.T, cmd, help string) map[string]string {
	t.Helper()
	out := map[string]string{}
	_, rest, ok := strings.Cut(help, "Of solve's flags, "+cmd+" takes all but these:\n")
	if !ok {
		return out
	}
	for _, line := range strings.Split(rest, "\n") {
		if !strings.HasPrefix(line, "    -") {
			break
		}
		names, why, _ := strings.Cut(strings.TrimSpace(line), ": ")
		for _, n := range strings.Split(names, ", ") {
			out[strings.TrimLeft(n, "-")] = why
		}
	}
	return out
}

// TestSolveLikeFlags: solve, demo, view, bench, distributed and replay share solve's
// flags. Each of them takes every solve flag, with solve's own help text
// (distributed declared ten of its own, and its --lenient said landmarks
// were unsupported; view kept an allowlist that lacked --gap-abs and the
// robust flags), or its help names the flag among those it does not take,
// with the reason; and giving such a flag is a usage error saying why.
func TestSolveLikeFlags(t *testing.T) {
	_, solveHelp, _ := runCmd("help", "solve")
	solve := helpFlags(t, solveHelp)
	for _, name := range []string{"gap-abs", "robust", "max-iterations", "covariances", "lenient"} {
		if _, ok := solve[name]; !ok {
			t.Fatalf("solve's help lacks --%s:\n%s", name, solveHelp)
		}
	}
	for _, cmd := range []string{"demo", "view", "bench", "distributed", "replay"} {
		code, help, stderr := runCmd("help", cmd)
		if code != 0 {
			t.Fatalf("%s -h: exit %d: %s", cmd, code, stderr)
		}
		has := helpFlags(t, help)
		not := notTakenHelp(t, cmd, help)
		for name, usage := range solve {
			if why, ok := not[name]; ok {
				if len(why) < 20 {
					t.Errorf("%s: --%s is not taken, for no stated reason (%q)", cmd, name, why)
				}
				continue
			}
			got, ok := has[name]
			switch {
			case !ok:
				t.Errorf("%s does not take solve's --%s, and its help does not say why", cmd, name)
			case got != usage:
				t.Errorf("%s --%s: help %q, solve's %q", cmd, name, got, usage)
			}
		}
		for name, why := range not {
			if _, ok := solve[name]; !ok {
				t.Errorf("%s's help lists --%s among solve's flags it does not take, but solve has no such flag", cmd, name)
			}
			if _, own := has[name]; own {
				continue // the command's own flag of that name (view's -o)
			}
			code, _, stderr := runCmd(cmd, "--"+name+"=1", "x.g2o")
			if code != exitUsage || !strings.Contains(stderr, cmd+" does not take it: "+why) {
				t.Errorf("%s --%s: exit %d, stderr %q; want %d and the reason", cmd, name, code, stderr, exitUsage)
			}
		}
	}
	if _, help, _ := runCmd("help", "distributed"); strings.Contains(help, "landmarks, priors") {
		t.Errorf("distributed's --lenient still says landmarks are unsupported:\n%s", help)
	}
}

// TestViewSolveFlags: view takes solve's flags, --gap-abs, the robust ones
// and the outputs (--tum) among them, and writes what they ask for as
// solve does; with INPUT and OPTIMIZED, or --no-solve, it solves nothing,
// and a flag of the solve is a usage error rather than ignored.
func TestViewSolveFlags(t *testing.T) {
	dir := t.TempDir()
	in := demoFile(t, dir, "in.g2o")
	page, tum := filepath.Join(dir, "p.html"), filepath.Join(dir, "p.tum")
	code, stdout, stderr := runCmd("view", "--gap-abs", "1e-3", "--max-iterations", "100", "--tum", tum, "-o", page, in)
	if code != 0 || !strings.Contains(stdout, "CERTIFIED") || !strings.Contains(stdout, "wrote "+page) {
		t.Fatalf("exit %d, stdout %q, stderr %s", code, stdout, stderr)
	}
	if b, err := os.ReadFile(tum); err != nil || strings.Count(string(b), "\n") != 250 {
		t.Errorf("--tum: %v, %d lines", err, strings.Count(string(b), "\n"))
	}
	if _, err := os.Stat(page); err != nil {
		t.Error(err)
	}

	_, _, bad := robustFile(t, dir)
	rpage := filepath.Join(dir, "r.html")
	code, stdout, stderr = runCmd("view", "--robust", "gnc-tls", "-o", rpage, bad)
	if code != 0 || !strings.Contains(stdout, "robust gnc-tls") {
		t.Fatalf("--robust: exit %d, stdout %q, stderr %s", code, stdout, stderr)
	}

	// --json prints the report on standard output; "wrote" goes to stderr.
	code, stdout, stderr = runCmd("view", "--json", "-o", page, in)
	var rep bsync.Report
	if code != 0 || json.Unmarshal([]byte(stdout), &rep) != nil || !rep.Certified || !strings.Contains(stderr, "wrote "+page) {
		t.Errorf("--json: exit %d, stdout %.200q, stderr %q", code, stdout, stderr)
	}

	for _, args := range [][]string{
		{"view", "--seed", "3", in, page},
		{"view", "--no-solve", "--tum", tum, in},
		{"view", "--no-solve", "--robust", "gnc-tls", in},
	} {
		code, _, stderr := runCmd(args...)
		if code != exitUsage || !strings.Contains(stderr, "view solves nothing") {
			t.Errorf("%q: exit %d, stderr %q; want %d and that nothing is solved", args, code, stderr, exitUsage)
		}
	}
}

// TestViewOutputIsHTML: the page is HTML, so -o with another extension is
// a usage error (view -o out.png wrote HTML into a .png), and nothing is
// written.
func TestViewOutputIsHTML(t *testing.T) {
	dir := t.TempDir()
	in := demoFile(t, dir, "in.g2o")
	for _, out := range []string{"out.png", "out", "out.html.png"} {
		path := filepath.Join(dir, out)
		code, _, stderr := runCmd("view", "-o", path, in)
		if code != exitUsage || !strings.Contains(stderr, "the page is HTML: give a file name ending in .html") {
			t.Errorf("-o %s: exit %d, stderr %q", out, code, stderr)
		}
		if _, err := os.Stat(path); err == nil {
			t.Errorf("-o %s: the file was written", out)
		}
	}
	if code, _, stderr := runCmd("view", "--quiet", "-o", filepath.Join(dir, "OUT.HTML"), in); code != 0 {
		t.Errorf("-o OUT.HTML: exit %d: %s", code, stderr)
	}
}

// TestViewRobustReport: a robust solve's F is over the edges it kept, so
// the page of its input and its -o output, with its report, sums the
// input's edge costs without the rejected edges: the sidebar showed F =
// 1.77e7 over every edge beside the header's 52.348. The page of the
// output file alone (the kept edges) needs nothing left out.
func TestViewRobustReport(t *testing.T) {
	dir := t.TempDir()
	_, _, bad := robustFile(t, dir)
	opt, repPath := filepath.Join(dir, "opt.g2o"), filepath.Join(dir, "rep.json")
	if code, _, stderr := runCmd("solve", "--quiet", "--robust", "gnc-tls", "-o", opt, "--report", repPath, bad); code != 0 {
		t.Fatalf("solve --robust: exit %d: %s", code, stderr)
	}
	rep, err := readReport(repPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Robust.Rejected) == 0 {
		t.Fatal("the robust solve rejected nothing: the test needs outliers")
	}
	for _, c := range []struct {
		input    string
		rejected int
	}{{bad, len(rep.Robust.Rejected)}, {opt, 0}} {
		page := filepath.Join(dir, "p.html")
		if code, _, stderr := runCmd("view", "--quiet", "-o", page, "--report", repPath, c.input, opt); code != 0 {
			t.Fatalf("view %s: exit %d: %s", c.input, code, stderr)
		}
		data := viewData(t, page)
		if got := int(data["rejected"].(float64)); got != c.rejected {
			t.Errorf("view %s: %d edges left out, want %d", c.input, got, c.rejected)
		}
		ests := data["estimates"].([]any)
		total := ests[1].(map[string]any)["total"].(float64)
		obj := data["run"].(map[string]any)["objective"].(float64)
		if math.Abs(total-obj) > 1e-9*obj {
			t.Errorf("view %s: the optimized estimate's F is %.12g, the report's %.12g", c.input, total, obj)
		}
	}
	// A report of another graph's robust solve is refused, not applied.
	other := demoFile(t, dir, "other.g2o")
	code, _, stderr := runCmd("view", "--quiet", "--no-solve", "-o", filepath.Join(dir, "o.html"), "--report", repPath, other)
	if code != exitError || !strings.Contains(stderr, "rep.json") {
		t.Errorf("a report of another graph: exit %d, stderr %q", code, stderr)
	}
}
