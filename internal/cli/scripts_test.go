package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/bcmsync/bcmsync/g2o"
	bsync "github.com/bcmsync/bcmsync/sync"
)

// The tests of this file are what scripts rely on (issue 24): exit
// statuses, help, the version, the report's schema, standard input and
// output, byte-order marks, and file:line errors for numbers beyond double
// precision.

// withStdin runs args with src as standard input.
func withStdin(src string, args ...string) (code int, stdout, stderr string) {
	old := stdin
	stdin = strings.NewReader(src)
	defer func() { stdin = old }()
	return runCmd(args...)
}

// TestStatusExitCodes: every status of package sync has an exit status of
// its own, distinct from success, errors and usage errors; a status this
// build does not know is an error.
func TestStatusExitCodes(t *testing.T) {
	statuses := []bsync.Status{bsync.Certified, bsync.Bounded, bsync.CertifiedRelaxation, bsync.NotCertified,
		bsync.Inconsistent, bsync.TimeLimit, bsync.Cancelled, bsync.Aborted}
	seen := map[int]bsync.Status{}
	for _, s := range statuses {
		code := statusExitCode(s)
		if s == bsync.Certified {
			if code != exitOK {
				t.Errorf("%q: exit %d", s, code)
			}
			continue
		}
		if code == exitOK || code == exitError || code == exitUsage {
			t.Errorf("%q: exit %d, which means something else", s, code)
		}
		if other, dup := seen[code]; dup {
			t.Errorf("%q and %q share exit %d", s, other, code)
		}
		seen[code] = s
	}
	if code := statusExitCode("a status from the future"); code != exitError {
		t.Errorf("unknown status: exit %d", code)
	}
	// Robust: a certified final solve whose weights did not settle is not
	// the robust estimate; an uncertified one keeps its status's code.
	for _, c := range []struct {
		status    bsync.Status
		converged bool
		stop      string
		want      int
	}{
		{bsync.Certified, true, "converged", exitOK},
		{bsync.Certified, false, "iterations", exitLimit},
		{bsync.Certified, false, "time limit", exitLimit},
		{bsync.Certified, false, "cancelled", exitCancelled},
		{bsync.NotCertified, false, "iterations", exitNotCertified},
		{bsync.TimeLimit, false, "time limit", exitLimit},
		// sync demotes such a run itself now (review D2): the status's
		// own code is the limit's.
		{bsync.RobustUnsettled, false, "iterations", exitLimit},
		{bsync.RobustUnsettled, false, "checks", exitLimit},
	} {
		if got := resultExitCode(c.status, c.converged, c.stop); got != c.want {
			t.Errorf("%q, converged %t, stop %q: exit %d, want %d", c.status, c.converged, c.stop, got, c.want)
		}
	}
}

// TestExitCodesOfSolves: solves that end each way exit with their status's
// code, after writing every output, and say which status in the report.
func TestExitCodesOfSolves(t *testing.T) {
	dir := t.TempDir()
	gen := func(name string, args ...string) string {
		path := filepath.Join(dir, name)
		if code, _, stderr := runCmd(append([]string{"generate", "--quiet", "-o", path}, args...)...); code != 0 {
			t.Fatalf("generate %v: exit %d: %s", args, code, stderr)
		}
		return path
	}
	outliers := gen("outliers.g2o", "grid", "--nx", "4", "--ny", "4", "--nz", "3", "--outliers", "0.1")
	noisy := gen("noisy.g2o", "sphere", "--rings", "6", "--per-ring", "8", "--kappa", "1", "--tau", "1")
	plain := demoFile(t, dir, "plain.g2o")
	for _, c := range []struct {
		args   []string
		status bsync.Status
		code   int
	}{
		{[]string{"solve", plain}, bsync.Certified, exitOK},
		{[]string{"solve", outliers}, bsync.Inconsistent, exitInconsistent},
		{[]string{"solve", "--max-rank", "3", noisy}, bsync.NotCertified, exitNotCertified},
		{[]string{"solve", "--time-limit", "1ns", "--bcm-sweeps", "-1", plain}, bsync.TimeLimit, exitLimit},
		{[]string{"solve", "--robust", "gnc-tls", outliers}, bsync.Certified, exitOK},
	} {
		report := filepath.Join(dir, "report.json")
		out := filepath.Join(dir, "out.g2o")
		os.Remove(report)
		os.Remove(out)
		args := append([]string{c.args[0], "--quiet", "--report", report, "-o", out}, c.args[1:]...)
		code, _, stderr := runCmd(args...)
		if code != c.code {
			t.Errorf("%v: exit %d, want %d: %s", c.args, code, c.code, stderr)
		}
		rep, err := readReport(report)
		if err != nil {
			t.Errorf("%v: %v", c.args, err)
			continue
		}
		if rep.Status != string(c.status) {
			t.Errorf("%v: status %q, want %q", c.args, rep.Status, c.status)
		}
		if _, err := g2o.ReadFile(out, g2o.ReadOptions{}); err != nil {
			t.Errorf("%v: -o: %v", c.args, err)
		}
	}
	// Cancelled (an interrupt cancels the context): the estimate so far is
	// written whole, and the status is exitCancelled.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out := filepath.Join(dir, "cancelled.g2o")
	var stdout, stderr bytes.Buffer
	if code := run(ctx, []string{"solve", "-o", out, plain}, &stdout, &stderr); code != exitCancelled {
		t.Errorf("cancelled: exit %d: %s", code, stderr.String())
	}
	if g, err := g2o.ReadFile(out, g2o.ReadOptions{}); err != nil || g.N() != 250 {
		t.Errorf("cancelled: -o: %v", err)
	}
	// A command that stops on the context: the same status.
	if code := run(ctx, []string{"info", plain}, &stdout, &stderr); code != exitCancelled {
		t.Errorf("cancelled info: exit %d", code)
	}
}

// TestHelpEverywhere: help for every command, in this build, and for help
// itself, exits 0 with the command's usage on stdout; so does COMMAND -h.
// bcmsync help lists the exit statuses.
func TestHelpEverywhere(t *testing.T) {
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range commands {
			if !yield(n) {
				return
			}
		}
	})
	for _, name := range names {
		for _, args := range [][]string{{"help", name}, {name, "-h"}, {name, "--help"}} {
			code, stdout, stderr := runCmd(args...)
			if code != exitOK {
				t.Errorf("%v: exit %d: %s", args, code, stderr)
			}
			out := stdout + stderr // -h prints on stderr, as flag does
			if !strings.Contains(out, "usage: bcmsync "+name) {
				t.Errorf("%v: no usage in %q", args, out)
			}
		}
	}
	for _, args := range [][]string{{"help"}, {"help", "help"}, {"-h"}, {"--help"}} {
		code, stdout, _ := runCmd(args...)
		if code != exitOK || !strings.Contains(stdout, "commands:") || !strings.Contains(stdout, "exit status") {
			t.Errorf("%v: exit %d, stdout %q", args, code, stdout)
		}
		for _, want := range []string{"  3  not certified", "  8  cancelled", "- names"} {
			if !strings.Contains(stdout, want) {
				t.Errorf("%v: help lacks %q", args, want)
			}
		}
	}
	if code, _, _ := runCmd("help", "nosuch"); code != exitUsage {
		t.Errorf("help nosuch: exit %d", code)
	}
}

// TestVersion: --version names the module version and the commit, "(devel)"
// and "unknown" for a build without them (a test binary is one).
func TestVersion(t *testing.T) {
	for _, flag := range []string{"--version", "-version"} {
		code, stdout, _ := runCmd(flag)
		re := regexp.MustCompile(`^bcmsync (\(devel\)|v\S+) commit (unknown|[0-9a-f]{40}(\+dirty)?)`)
		if code != exitOK || !re.MatchString(stdout) || !strings.Contains(stdout, "go1.") {
			t.Errorf("%s: exit %d, %q", flag, code, stdout)
		}
	}
}

// TestReportSchema: the report names its schema, in the file and on
// stdout, and reads back with it.
func TestReportSchema(t *testing.T) {
	dir := t.TempDir()
	in := demoFile(t, dir, "in.g2o")
	code, stdout, stderr := runCmd("solve", "--json", in)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(stdout), &m); err != nil {
		t.Fatal(err)
	}
	if m["schema"] != "bcmsync.report/3" || bsync.ReportSchema != "bcmsync.report/3" {
		t.Errorf("schema %v", m["schema"])
	}
	if !strings.HasPrefix(stdout, "{\n  \"schema\": ") {
		t.Errorf("the schema is not the first key: %.60q", stdout)
	}
}

// TestStdio: - reads standard input where one file is read, and writes
// standard output where one is written (the summary then goes to stderr);
// errors name <stdin> and the line.
func TestStdio(t *testing.T) {
	dir := t.TempDir()
	in := demoFile(t, dir, "in.g2o")
	src, err := os.ReadFile(in)
	if err != nil {
		t.Fatal(err)
	}
	// solve - -o -: the graph in, the optimized graph out, the summary on
	// stderr.
	code, stdout, stderr := withStdin(string(src), "solve", "-o", "-", "-")
	if code != 0 || !strings.Contains(stderr, "<stdin>: SE(2), n=250") || !strings.Contains(stderr, "CERTIFIED") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	g, err := g2o.Read(strings.NewReader(stdout), "stdout", g2o.ReadOptions{})
	if err != nil || g.N() != 250 {
		t.Fatalf("-o - printed what does not read as the graph: %v", err)
	}
	// --report - and --tum -, from a file.
	code, stdout, _ = runCmd("solve", "--report", "-", in)
	if rep, err := bsync.ReadReport(strings.NewReader(stdout)); code != 0 || err != nil || rep.N != 250 {
		t.Errorf("--report -: exit %d, %v", code, err)
	}
	code, stdout, _ = runCmd("solve", "--tum", "-", "--quiet", in)
	if tr, err := g2o.ReadTUM(strings.NewReader(stdout), "stdout"); code != 0 || err != nil || len(tr.Poses) != 250 {
		t.Errorf("--tum -: exit %d, %v", code, err)
	}
	// --json with a graph from standard input names it <stdin>.
	code, stdout, _ = withStdin(string(src), "solve", "--json", "-")
	if rep, err := bsync.ReadReport(strings.NewReader(stdout)); code != 0 || err != nil || rep.File != "<stdin>" {
		t.Errorf("solve --json -: exit %d, %v, %+v", code, err, rep)
	}
	// A bad record on standard input: <stdin>:LINE.
	code, _, stderr = withStdin("EDGE_SE2 0 1 1 0 0"+edge2+"EDGE_SE2 1 2 x 0 0"+edge2, "solve", "-")
	if code != exitError || !strings.HasPrefix(stderr, "<stdin>:2: ") {
		t.Errorf("bad input: exit %d, stderr %q", code, stderr)
	}
	// info, view, plot and evaluate read it too.
	if code, stdout, _ := withStdin(string(src), "info", "--json", "-"); code != 0 || !strings.Contains(stdout, `"file":"<stdin>"`) {
		t.Errorf("info -: exit %d, %q", code, stdout)
	}
	if code, stdout, stderr := withStdin(string(src), "view", "--quiet", "-o", "-", "-"); code != 0 || !strings.HasPrefix(stdout, "<!DOCTYPE html>") {
		t.Errorf("view -o - -: exit %d, %.40q, %s", code, stdout, stderr)
	}
	if code, _, stderr := withStdin(string(src), "view", "-"); code != exitUsage || !strings.Contains(stderr, "give -o") {
		t.Errorf("view - without -o: exit %d, %s", code, stderr)
	}
	plotDir := filepath.Join(dir, "figs")
	if code, _, stderr := withStdin(string(src), "plot", "-o", plotDir, "-"); code != 0 {
		t.Errorf("plot -: exit %d, %s", code, stderr)
	}
	tum := filepath.Join(dir, "est.tum")
	if code, _, stderr := runCmd("solve", "--quiet", "--tum", tum, in); code != 0 {
		t.Fatalf("%d %s", code, stderr)
	}
	tumSrc, _ := os.ReadFile(tum)
	for _, c := range []struct{ src, what string }{{string(tumSrc), "TUM"}, {string(src), "g2o"}} {
		code, stdout, stderr := withStdin(c.src, "evaluate", "--json", "-", tum)
		if code != 0 || !strings.Contains(stdout, `"estimate": "<stdin>"`) || !strings.Contains(stdout, `"matched": 250`) {
			t.Errorf("evaluate - (%s): exit %d, %s %s", c.what, code, stdout, stderr)
		}
	}
	// Standard input can be read once.
	if code, _, stderr := withStdin(string(src), "evaluate", "-", "-"); code != exitUsage || !strings.Contains(stderr, "standard input") {
		t.Errorf("evaluate - -: exit %d, %s", code, stderr)
	}
	if code, _, stderr := withStdin(string(src), "view", "-o", "x.html", "-", "-"); code != exitUsage || !strings.Contains(stderr, "standard input") {
		t.Errorf("view - -: exit %d, %s", code, stderr)
	}
	// Where - cannot work, a usage error says why.
	for _, args := range [][]string{
		{"evaluate", "--plot", "-", in, in},
		{"generate", "grid", "-o", "-"},
		{"solve", "--plots", "-", in},
		{"bench", "--reference", "-", dir},
	} {
		if code, _, stderr := runCmd(args...); code != exitUsage || !strings.Contains(stderr, " -: ") {
			t.Errorf("%v: exit %d, %s", args, code, stderr)
		}
	}
}

// TestByteOrderMarkFile: a file saved with a UTF-8 byte-order mark solves
// as the same file without it.
func TestByteOrderMarkFile(t *testing.T) {
	dir := t.TempDir()
	in := demoFile(t, dir, "in.g2o")
	src, _ := os.ReadFile(in)
	bom := filepath.Join(dir, "bom.g2o")
	if err := os.WriteFile(bom, append([]byte("\xef\xbb\xbf"), src...), 0o644); err != nil {
		t.Fatal(err)
	}
	_, want, _ := runCmd("solve", "--json", in)
	code, got, stderr := runCmd("solve", "--json", bom)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	objective := func(s string) float64 {
		rep, err := bsync.ReadReport(strings.NewReader(s))
		if err != nil {
			t.Fatal(err)
		}
		return rep.Objective
	}
	if objective(got) != objective(want) {
		t.Errorf("F %v with the mark, %v without", objective(got), objective(want))
	}
}

// TestExtremeNumbers: numbers beyond what double precision can solve get a
// FILE:LINE error that says what is wrong and what to do, from a file and
// from standard input, instead of an internal error from deep in the
// solver.
func TestExtremeNumbers(t *testing.T) {
	dir := t.TempDir()
	cycle := func(line3 string) string {
		return "VERTEX_SE2 0 0 0 0\nVERTEX_SE2 1 1 0 0\nVERTEX_SE2 2 1 1 0\nVERTEX_SE2 3 0 1 0\n" +
			"EDGE_SE2 0 1 1 0 1.5707963267948966" + edge2 +
			"EDGE_SE2 1 2 1 0 1.5707963267948966" + edge2 +
			line3 +
			"EDGE_SE2 3 0 1 0 1.5707963267948966" + edge2
	}
	for _, c := range []struct {
		name, src string
		want      []string
	}{
		{"translation", cycle("EDGE_SE2 2 3 1e200 0 1.5707963267948966" + edge2),
			[]string{":7: the measured translation has the coordinate 1e+200", "larger unit"}},
		{"information", cycle("EDGE_SE2 2 3 1 0 1.5707963267948966 1e20 0 0 1e20 0 1e20\n"),
			[]string{":7: rotation precision kappa = 1e+20 here is 5e+19 times", "(ids 2, 3)", "(lines 6, 8)", "16 digits"}},
		{"translation information", cycle("EDGE_SE2 2 3 1 0 1.5707963267948966 1e20 0 0 1e20 0 1\n"),
			[]string{":7: translation precision tau = 1e+20 here is 5e+19 times"}},
		{"tiny weight", cycle("EDGE_SE2 2 3 1 0 1.5707963267948966 1e-60 0 0 1e-60 0 1\n"),
			[]string{":7: translation precision tau = 1e-60 is outside [1e-50, 1e+50]"}},
		{"vertex", strings.Replace(cycle("EDGE_SE2 2 3 1 0 1.5707963267948966"+edge2), "VERTEX_SE2 2 1 1 0", "VERTEX_SE2 2 1 -1e300 0", 1),
			[]string{":3: vertex 2's position has the coordinate -1e+300"}},
	} {
		path := writeTemp(t, dir, c.name+".g2o", c.src)
		code, _, stderr := runCmd("solve", path)
		for _, w := range append([]string{path + ":"}, c.want...) {
			if code != exitError || !strings.Contains(stderr, w) {
				t.Errorf("%s: exit %d, stderr %q; want %q", c.name, code, stderr, w)
			}
		}
		if strings.Contains(stderr, "sparse:") || strings.Contains(stderr, "eigensolver") {
			t.Errorf("%s: an internal error reached the user: %s", c.name, stderr)
		}
		code, _, stderr = withStdin(c.src, "solve", "-")
		if code != exitError || !strings.HasPrefix(stderr, "<stdin>"+c.want[0]) {
			t.Errorf("%s from stdin: exit %d, stderr %q", c.name, code, stderr)
		}
		// view solves too; distributed validates the same way.
		if code, _, stderr := runCmd("view", "-o", filepath.Join(dir, "v.html"), path); code != exitError || !strings.Contains(stderr, path+c.want[0]) {
			t.Errorf("%s: view: exit %d, %s", c.name, code, stderr)
		}
	}
}

// TestSolveErrorNamesFile: an error from inside the solver names the file.
func TestSolveErrorNamesFile(t *testing.T) {
	g, err := g2o.Read(strings.NewReader("EDGE_SE2 0 1 1 0 0"+edge2), "x.g2o", g2o.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ err, want string }{
		{"x.g2o:3: already located", "x.g2o:3: already located"},
		{"factoring the preconditioner Q + sigma I: sparse: matrix is not positive definite: pivot 0 at column 3",
			"x.g2o: factoring the preconditioner Q + sigma I: sparse: matrix is not positive definite: pivot 0 at column 3 (a numerical failure"},
		{"robust: the time limit passed before the first solve", "x.g2o: robust: the time limit passed"},
	} {
		if got := solveError(errorString(c.err), g).Error(); !strings.HasPrefix(got, c.want) {
			t.Errorf("%q became %q", c.err, got)
		}
	}
}

type errorString string

func (e errorString) Error() string { return string(e) }

// TestInterrupt: an interrupt (Ctrl-C) during a solve cancels it: the
// estimate so far is written whole, with no temporary file left, and the
// process exits with exitCancelled. It runs the command as a child process
// (this test binary, as bench does) to send it a real signal.
func TestInterrupt(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no SIGINT to send")
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "geo.g2o")
	if code, _, stderr := runCmd("generate", "--quiet", "geometric", "--n", "3000", "--dim", "3", "-o", in); code != 0 {
		t.Fatalf("generate: %d %s", code, stderr)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.g2o")
	cmd := exec.Command(exe, "solve", "--verbose", "--quiet", "-o", out, in)
	cmd.Env = append(os.Environ(), benchChildEnv+"=1")
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Interrupt once the solve has started: after the initialization.
	sc := bufio.NewScanner(errPipe)
	var log strings.Builder
	for sc.Scan() {
		log.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "initialized") {
			if err := cmd.Process.Signal(os.Interrupt); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	go io.Copy(&log, errPipe)
	err = cmd.Wait()
	code := cmd.ProcessState.ExitCode()
	if code == exitOK {
		t.Skip("the solve finished before the interrupt arrived")
	}
	if code != exitCancelled {
		t.Fatalf("exit %d (%v), want %d:\n%s", code, err, exitCancelled, log.String())
	}
	g, err := g2o.ReadFile(out, g2o.ReadOptions{})
	if err != nil || g.N() != 3000 {
		t.Errorf("-o after the interrupt: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 3 { // geo.g2o, its truth, out.g2o
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("the folder holds %v", names)
	}
}
