package cli

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/bcmsync/bcmsync/g2o"
	"github.com/bcmsync/bcmsync/rounding"
	bsync "github.com/bcmsync/bcmsync/sync"
)

// The tests of this file are issue 20's rough edges: each would fail on the
// release before it.

// writeTemp writes src into dir/name and returns the path.
func writeTemp(t *testing.T, dir, name, src string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// edge2 is the information part of a unit-weight EDGE_SE2 line.
const edge2 = " 1 0 0 1 0 1\n"

// A 3-D chain with no VERTEX lines and exact measurements (F* = 0).
const chain3 = "EDGE_SE3:QUAT 0 1 1 0 0 0 0 0 1 1 0 0 0 0 0 1 0 0 0 0 1 0 0 0 1 0 0 1 0 1\n" +
	"EDGE_SE3:QUAT 1 2 1 0 0 0 0 0 1 1 0 0 0 0 0 1 0 0 0 0 1 0 0 0 1 0 0 1 0 1\n"

// TestFlagErrors: every bad value of a numeric (or named) flag is a usage
// error, exit 2, prefixed "bcmsync CMD:" and naming the flag, for every
// command that has the flag.
func TestFlagErrors(t *testing.T) {
	dir := t.TempDir()
	in := writeTemp(t, dir, "sq.g2o", "EDGE_SE2 0 1 1 0 0"+edge2+"EDGE_SE2 1 2 1 0 0"+edge2)
	in3 := writeTemp(t, dir, "chain3.g2o", chain3)
	empty := t.TempDir()
	bad := []struct {
		flags []string
		name  string // the flag the message must name
	}{
		{[]string{"--max-rank", "1"}, "--max-rank"},
		{[]string{"--max-rank", "0"}, "--max-rank"},
		{[]string{"--max-rank", "-3"}, "--max-rank"},
		{[]string{"--rank0", "1"}, "--rank0"},
		{[]string{"--rank0", "-1"}, "--rank0"},
		{[]string{"--rank0", "5", "--max-rank", "4"}, "--max-rank"},
		{[]string{"--threads", "-2"}, "--threads"},
		{[]string{"--time-limit", "-1s"}, "--time-limit"},
		{[]string{"--grad-tol", "-1"}, "--grad-tol"},
		{[]string{"--eig-tol", "Inf"}, "--eig-tol"},
		{[]string{"--gap-tol", "NaN"}, "--gap-tol"},
		{[]string{"--bcm-tol", "-1e-3"}, "--bcm-tol"},
		{[]string{"--bcm-decrease", "-1"}, "--bcm-decrease"},
		{[]string{"--init", "nope"}, "--init"},
		{[]string{"--rule", "nope"}, "--rule"},
		{[]string{"--threads", "x"}, "-threads"}, // the flag package's own message
	}
	for _, cmd := range []string{"solve", "demo", "bench"} {
		for _, c := range bad {
			args := append([]string{cmd}, c.flags...)
			switch cmd {
			case "solve":
				args = append(args, in)
			case "bench":
				args = append(args, "--quiet", "-o", filepath.Join(dir, "bench-out"), empty)
			case "demo":
				args = append(args, "--plots", "")
			}
			code, _, stderr := runCmd(args...)
			last := lastLine(stderr)
			if code != 2 || !strings.HasPrefix(last, "bcmsync "+cmd+": ") || !strings.Contains(last, c.name) {
				t.Errorf("%v: exit %d, last stderr line %q; want 2, \"bcmsync %s: ...%s...\"", args, code, last, cmd, c.name)
			}
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		// Ranks against the graph's dimension, known once it is read.
		{[]string{"solve", "--rank0", "2", in3}, "bcmsync solve: --rank0 2 is below the dimension d = 3"},
		{[]string{"solve", "--max-rank", "2", in3}, "bcmsync solve: --max-rank 2 is below the dimension d = 3"},
		{[]string{"bench", "--repeat", "0", empty}, "bcmsync bench: --repeat 0"},
		{[]string{"bench", "--repeat", "-1", empty}, "bcmsync bench: --repeat -1"},
		{[]string{"plot", "--format", "gif", in}, "bcmsync plot: --format"},
	} {
		code, _, stderr := runCmd(c.args...)
		if code != 2 || !strings.HasPrefix(lastLine(stderr), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, stderr, c.want)
		}
	}
	// The boundary values stay valid: 0 where it means a default, d.
	for _, args := range [][]string{
		// (The graphs' measurements are exact, F* = 0: certified needs an
		// absolute tolerance.)
		{"solve", "--quiet", "--gap-abs", "1e-9", "--rank0", "0", "--max-rank", "2", "--threads", "0", "--time-limit", "0", "--grad-tol", "0", in},
		{"solve", "--quiet", "--gap-abs", "1e-9", "--rank0", "3", "--max-rank", "3", "--threads", "1", in3},
	} {
		if code, _, stderr := runCmd(args...); code != 0 {
			t.Errorf("%v: exit %d: %s", args, code, stderr)
		}
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// TestHelpPlaceholders: a backquoted word in a flag's usage is the flag
// package's value placeholder, so it must be one upper-case word (FILE,
// DIR), never a phrase; every command's help is checked. Flags without a
// placeholder show their type (string, int, ...).
func TestHelpPlaceholders(t *testing.T) {
	types := []string{"string", "int", "uint", "float", "duration", "value"}
	word := regexp.MustCompile(`^[A-Z][A-Z0-9_]*(\.[a-z0-9]+)?$`) // FILE, DIR, FILE.g2o
	for name := range commands {
		code, out, _ := runCmd("help", name)
		if code != 0 {
			t.Errorf("help %s: exit %d", name, code)
			continue
		}
		if strings.Contains(out, "`") {
			t.Errorf("help %s prints a backquote:\n%s", name, out)
		}
		flags := 0
		for _, line := range strings.Split(out, "\n") {
			if !strings.HasPrefix(line, "  -") {
				continue
			}
			flags++
			head, _, _ := strings.Cut(strings.TrimPrefix(line, "  -"), "\t")
			f := strings.Fields(head)
			if len(f) > 2 || len(f) == 2 && !word.MatchString(f[1]) && !slices.Contains(types, f[1]) {
				t.Errorf("help %s: flag line %q has placeholder %q", name, line, strings.Join(f[1:], " "))
			}
		}
		if flags == 0 {
			t.Errorf("help %s lists no flags:\n%s", name, out)
		}
	}
}

// TestStatusSentences: each status of package sync has its own sentence in
// the summary, which reads as one (no "not certified at max rank at rank
// 2"), and an unknown status still prints its name, the rank and whether
// it is certified.
func TestStatusSentences(t *testing.T) {
	seen := map[string]bsync.Status{}
	for _, st := range []bsync.Status{bsync.Certified, bsync.CertifiedRelaxation, bsync.Bounded, bsync.BelowPrecision,
		bsync.NotCertified, bsync.Inconsistent, bsync.TimeLimit, bsync.IterationLimit, bsync.Cancelled} {
		r := &bsync.Report{Status: string(st), Certified: st == bsync.Certified, Rank: 4, D: 3, GapAllowed: 1e-3}
		r.Options.MaxRank = 10
		s := statusSentence(r)
		if prev, dup := seen[s]; dup {
			t.Errorf("%q and %q share the sentence %q", prev, st, s)
		}
		seen[s] = st
		if strings.Count(s, "at rank") > 1 || strings.Contains(s, "max rank at rank") || !strings.Contains(s, "rank 4") {
			t.Errorf("%q: %q", st, s)
		}
		if certified := strings.HasPrefix(s, "CERTIFIED"); certified != (st == bsync.Certified) || !certified && !strings.HasPrefix(s, "NOT certified") {
			t.Errorf("%q: %q does not start with CERTIFIED or NOT certified as it should", st, s)
		}
	}
	r := &bsync.Report{Status: string(bsync.NotCertified), Rank: 10}
	r.Options.MaxRank = 10
	if s := statusSentence(r); !strings.Contains(s, "--max-rank") {
		t.Errorf("at the maximum rank: %q", s)
	}
	for _, c := range []struct {
		cert bool
		want string
	}{{false, "NOT certified: a status from the future (rank 3)"}, {true, "CERTIFIED (a status from the future) at rank 3"}} {
		r := &bsync.Report{Status: "a status from the future", Certified: c.cert, Rank: 3}
		if s := statusSentence(r); s != c.want {
			t.Errorf("unknown status, certified %v: %q, want %q", c.cert, s, c.want)
		}
	}
}

// TestSolveRotationsTranslations: solve --rotations writes the input's
// VERTEX translations (-o and --tum), not zeros, says so in a comment line
// of each file and in the summary; a file without VERTEX lines gets the
// chordal initialization's translations. distributed writes through the
// same output path (its own copy wrote the zeros).
func TestSolveRotationsTranslations(t *testing.T) {
	dir := t.TempDir()
	in := demoFile(t, dir, "in.g2o")
	g, err := g2o.ReadFile(in, g2o.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range [][]string{{"solve"}, {"distributed", "--agents", "2"}} {
		out, tum := filepath.Join(dir, "rot.g2o"), filepath.Join(dir, "rot.tum")
		code, stdout, stderr := runCmd(append(cmd, "--rotations", "-o", out, "--tum", tum, in)...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", cmd[0], code, stderr)
		}
		if !strings.Contains(stdout, "translations in "+out+" and "+tum+" are not optimized (--rotations): taken from the input's VERTEX lines") {
			t.Errorf("%s: summary does not say where the translations come from:\n%s", cmd[0], stdout)
		}
		h, err := g2o.ReadFile(out, g2o.ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range g.IDs {
			if h.Initial[i].T != g.Initial[i].T {
				t.Fatalf("%s: pose %d: written t = %v, input t = %v", cmd[0], g.IDs[i], h.Initial[i].T, g.Initial[i].T)
			}
		}
		// The rotations are the solved ones: they attain the reported F.
		if f, want := h.Cost(h.Initial, 1), g.Cost(h.Initial, 1); math.Abs(f-want) > 1e-9*want {
			t.Errorf("%s: rotation cost %g vs %g", cmd[0], f, want)
		}
		for _, p := range []string{out, tum} {
			b, _ := os.ReadFile(p)
			if first, _, _ := strings.Cut(string(b), "\n"); !strings.HasPrefix(first, "# bcmsync solve --rotations") ||
				!strings.Contains(first, "translations not optimized, taken from the input's VERTEX lines") {
				t.Errorf("%s: %s: first line %q", cmd[0], p, first)
			}
		}
		b, _ := os.ReadFile(tum)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) != 251 {
			t.Fatalf("%s: TUM file has %d lines, want the comment and 250 poses", cmd[0], len(lines))
		}
		if f := strings.Fields(lines[2]); len(f) != 8 || f[1] != fmtFloat(g.Initial[1].T[0]) || f[2] != fmtFloat(g.Initial[1].T[1]) {
			t.Errorf("%s: TUM line %q, want the input's translation %v", cmd[0], lines[2], g.Initial[1].T)
		}
	}

	// No VERTEX lines: the chordal translations.
	in3 := writeTemp(t, dir, "chain3.g2o", chain3)
	out3 := filepath.Join(dir, "rot3.g2o")
	code, stdout, stderr := runCmd("solve", "--rotations", "-o", out3, in3)
	if code != 0 {
		t.Fatalf("3-D: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "taken from the chordal initialization, as the input has no VERTEX lines") {
		t.Errorf("3-D summary:\n%s", stdout)
	}
	g3, err := g2o.ReadFile(in3, g2o.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	chordal, err := rounding.Chordal(g3)
	if err != nil {
		t.Fatal(err)
	}
	h3, err := g2o.ReadFile(out3, g2o.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range chordal {
		for a := 0; a < 3; a++ {
			if math.Abs(h3.Initial[i].T[a]-chordal[i].T[a]) > 1e-12 {
				t.Errorf("3-D pose %d: t = %v, chordal %v", i, h3.Initial[i].T, chordal[i].T)
			}
		}
	}
	if h3.Initial[2].T[0] < 1.9 {
		t.Errorf("3-D chain: pose 2 at %v, want about (2, 0, 0)", h3.Initial[2].T)
	}
}

func fmtFloat(x float64) string {
	b, _ := json.Marshal(x)
	return string(b)
}

// TestHints: the unsupported-record error names --lenient (solve, info,
// plot); the disconnected-graph error names --largest-component, and with
// it the summary says what was dropped; solve --plots says where it wrote.
func TestHints(t *testing.T) {
	dir := t.TempDir()
	lm := writeTemp(t, dir, "lm.g2o", "EDGE_SE2 0 1 1 0 0"+edge2+"EDGE_SE2_PRIOR 0 0 0 0 1 0 0 1 0 1\n")
	for _, args := range [][]string{{"solve", lm}, {"info", lm}, {"plot", "-o", filepath.Join(dir, "figs"), lm}} {
		code, _, stderr := runCmd(args...)
		if code != 1 || !strings.Contains(stderr, "lm.g2o:2: EDGE_SE2_PRIOR is not supported") || !strings.Contains(stderr, "--lenient") {
			t.Errorf("%s: exit %d, stderr %q; want 1 and a message naming --lenient", args[0], code, stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "figs")); err == nil {
		t.Error("plot made its folder for a file it could not read")
	}
	// Other reading errors do not suggest it.
	undeclared := writeTemp(t, dir, "undeclared.g2o", "VERTEX_SE2 0 0 0 0\nVERTEX_SE2 1 1 0 0\nEDGE_SE2 0 1 1 0 0"+edge2+"EDGE_SE2 1 2 1 0 0"+edge2)
	for _, args := range [][]string{{"solve", undeclared}, {"solve", "--lenient", undeclared}} {
		code, _, stderr := runCmd(args...)
		if code != 1 || !strings.Contains(stderr, "undeclared.g2o:4: edge 1 -> 2 names vertex 2, which no VERTEX line declares") || strings.Contains(stderr, "--lenient") {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
		}
	}

	disc := writeTemp(t, dir, "disc.g2o", "EDGE_SE2 0 1 1 0 0"+edge2+"EDGE_SE2 1 2 1 0 0"+edge2+
		"EDGE_SE2 5 6 1 0 0"+edge2+"EDGE_SE2 7 8 1 0 0"+edge2)
	code, _, stderr := runCmd("solve", disc)
	if code != 1 || !strings.Contains(stderr, "3 components of sizes [3 2 2]") || !strings.Contains(stderr, "--largest-component solves the largest (3 poses)") {
		t.Errorf("disconnected: exit %d, stderr %q", code, stderr)
	}
	code, stdout, stderr := runCmd("solve", "--gap-abs", "1e-9", "--largest-component", disc)
	if code != 0 || !strings.Contains(stdout, "n=3 poses, m=2 edges") ||
		!strings.Contains(stdout, "largest component: kept 3 of 7 poses and 2 of 4 edges; dropped 4 poses and 2 edges in 2 other component(s)") {
		t.Errorf("--largest-component: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	// With --json the report is stdout's only content and the note goes
	// to stderr.
	code, stdout, stderr = runCmd("solve", "--gap-abs", "1e-9", "--largest-component", "--json", disc)
	var m map[string]any
	if err := json.Unmarshal([]byte(stdout), &m); code != 0 || err != nil || !strings.Contains(stderr, "note: largest component: kept 3 of 7") {
		t.Errorf("--json --largest-component: exit %d, %v, stderr %q", code, err, stderr)
	}

	in := demoFile(t, dir, "in.g2o")
	plots := filepath.Join(dir, "plots")
	code, stdout, stderr = runCmd("solve", "--plots", plots, in)
	want := "  plots: " + strings.Join([]string{filepath.Join(plots, "trajectory.png"), filepath.Join(plots, "convergence.png"),
		filepath.Join(plots, "stages.png")}, ", ") + "\n"
	if code != 0 || !strings.Contains(stdout, want) {
		t.Errorf("--plots: exit %d, stdout %q, want %q; stderr %q", code, stdout, want, stderr)
	}
}

// TestZeroResidualSummary: graphs whose optimum is F* = 0 (exact
// measurements) certify by default; the summary prints an absolute bound,
// not "relative +Inf" (F = 0) or "relative 1.6e+20" (F = 1e-31), and the
// JSON report is valid with a null or finite relative bound.
func TestZeroResidualSummary(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ name, src string }{
		{"chain3.g2o", chain3}, // F = 0 exactly
		// A square loop of quarter turns: F is rounding error, 1e-31 or so.
		{"square.g2o", "EDGE_SE2 0 1 1 0 1.5707963267948966" + edge2 + "EDGE_SE2 1 2 1 0 1.5707963267948966" + edge2 +
			"EDGE_SE2 2 3 1 0 1.5707963267948966" + edge2 + "EDGE_SE2 3 0 1 0 1.5707963267948966" + edge2},
	} {
		in := writeTemp(t, dir, c.name, c.src)
		// F* = 0 data certify by default: the allowance is gap-tol times
		// max(unit, |F|), and the summary says which term set it.
		code, stdout, stderr := runCmd("solve", in)
		if code != 0 || !strings.Contains(stdout, "CERTIFIED") || !strings.Contains(stdout, "(--gap-tol 1e-06 times the unit of F") {
			t.Errorf("%s without --gap-abs: exit %d, stdout %q, stderr %q; want 0, certified by gap-tol times the unit", c.name, code, stdout, stderr)
		}
		code, stdout, stderr = runCmd("solve", "--gap-abs", "1e-3", in)
		if code != 0 || !strings.Contains(stdout, "(--gap-abs 0.001)") {
			t.Errorf("%s with --gap-abs 1e-3: exit %d, stdout %q; want the allowance set by --gap-abs", c.name, code, stdout)
		}
		code, stdout, stderr = runCmd("solve", "--gap-abs", "1e-9", in)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", c.name, code, stderr)
		}
		line := ""
		for _, l := range strings.Split(stdout, "\n") {
			if strings.Contains(l, "suboptimality") {
				line = l
			}
		}
		if !strings.Contains(line, "(absolute") || strings.Contains(line, "relative") && !strings.Contains(line, "no relative bound") ||
			strings.Contains(line, "Inf") || strings.Contains(line, "e+") {
			t.Errorf("%s: suboptimality line %q", c.name, line)
		}
		code, stdout, _ = runCmd("solve", "--gap-abs", "1e-9", "--json", in)
		var m map[string]any
		if err := json.Unmarshal([]byte(stdout), &m); code != 0 || err != nil {
			t.Fatalf("%s: --json: exit %d, %v", c.name, code, err)
		}
		if rel, ok := m["relative_suboptimality_bound"]; !ok {
			t.Errorf("%s: no relative_suboptimality_bound key", c.name)
		} else if v, isNum := rel.(float64); rel != nil && (!isNum || math.IsInf(v, 0)) {
			t.Errorf("%s: relative_suboptimality_bound %v", c.name, rel)
		}
	}
	// A graph with noise keeps the relative bound.
	in := demoFile(t, dir, "in.g2o")
	if _, stdout, _ := runCmd("solve", in); !regexp.MustCompile(`suboptimality +<= \S+ \(relative \S+\)`).MatchString(stdout) {
		t.Errorf("noisy graph: no relative bound in\n%s", stdout)
	}
}
