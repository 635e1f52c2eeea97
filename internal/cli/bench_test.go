package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/g2o"
	"github.com/bcmsync/bcmsync/posegraph"
	bsync "github.com/bcmsync/bcmsync/sync"
)

// TestMain lets the bench tests run real child processes. bench re-runs
// os.Executable(), which under `go test` is this test binary, with
// benchChildEnv set and a command line such as `solve --json --quiet --
// FILE`; such a child runs that command line exactly as the installed
// bcmsync would, instead of the tests.
func TestMain(m *testing.M) {
	if os.Getenv(benchChildEnv) != "" {
		os.Exit(runProcess(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// benchGraphs writes two small synthetic graphs into dir with g2o.Write (a
// 3-D cube and a 2-D Manhattan walk, noisy, with loop closures) and returns
// their names and their optima as sync.Solve finds them on the files read
// back, which is what the bench's children read.
func benchGraphs(t *testing.T, dir string) (names []string, fstar []float64) {
	t.Helper()
	cfg := datasets.Config{Kappa: 50, Tau: 5, LoopProb: 0.5, Seed: 3}
	cube, _, err := datasets.Cube(3, 3, 3, cfg)
	if err != nil {
		t.Fatal(err)
	}
	walk, _, err := datasets.Manhattan(150, 6, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		g    *posegraph.Graph
	}{{"cube.g2o", cube}, {"walk.g2o", walk}} {
		path := filepath.Join(dir, c.name)
		if err := writeOutput(path, io.Discard, func(w io.Writer) error { return g2o.Write(w, c.g, nil) }); err != nil {
			t.Fatal(err)
		}
		g, err := g2o.ReadFile(path, g2o.ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		res, err := bsync.Solve(context.Background(), g, bsync.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Certified {
			t.Fatalf("%s: not certified in-process: %s", c.name, res.Status)
		}
		names = append(names, c.name)
		fstar = append(fstar, res.Objective)
	}
	return names, fstar
}

// readBench reads OUTDIR/bench.json and bench.md.
func readBench(t *testing.T, out string) ([]benchRow, string) {
	t.Helper()
	js, err := os.ReadFile(filepath.Join(out, "bench.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rows []benchRow
	if err := json.Unmarshal(js, &rows); err != nil {
		t.Fatalf("bench.json: %v", err)
	}
	md, err := os.ReadFile(filepath.Join(out, "bench.md"))
	if err != nil {
		t.Fatal(err)
	}
	return rows, string(md)
}

// tableRows returns the cells of the markdown table's rows, header first,
// the alignment row left out.
func tableRows(md string) [][]string {
	var rows [][]string
	for _, line := range strings.Split(md, "\n") {
		if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| ---") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		rows = append(rows, cells)
	}
	return rows
}

// TestBench runs the bench on a directory holding two synthetic graphs, a
// file that is not a graph, a directory named like one, and a REFERENCE.tsv
// with the graphs' optima, and checks every column of both outputs against
// the children's own reports and the reference.
func TestBench(t *testing.T) {
	dir := t.TempDir()
	names, fstar := benchGraphs(t, dir)
	peer := []float64{0.5, 0.25}
	ref := "# test reference\nfile\td\tn\tm\tf_star\tpeer_wall_s\tnotes\n"
	for k, name := range names {
		g, err := g2o.ReadFile(filepath.Join(dir, name), g2o.ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ref += fmt.Sprintf("%s\t%d\t%d\t%d\t%.12g\t%g\t\n", name, g.D, g.N(), g.M(), fstar[k], peer[k])
	}
	for name, text := range map[string]string{"REFERENCE.tsv": ref, "notes.txt": "not a graph\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "old.g2o"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "results")

	code, stdout, stderr := runCmd("bench", dir, "-o", out, "--repeat", "2", "--seed", "7", "--max-rank", "6")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	rows, md := readBench(t, out)
	if stdout != md {
		t.Errorf("stdout differs from bench.md:\n%s\n---\n%s", stdout, md)
	}
	// One progress line per graph.
	if lines := strings.Split(strings.TrimSpace(stderr), "\n"); len(lines) != len(names) ||
		!strings.HasPrefix(lines[0], "[1/2] cube.g2o: ") || !strings.HasPrefix(lines[1], "[2/2] walk.g2o: ") {
		t.Errorf("progress on stderr:\n%s", stderr)
	}

	if len(rows) != len(names) {
		t.Fatalf("bench.json has %d rows, want %d", len(rows), len(names))
	}
	ratioLog := 0.0
	for k, r := range rows {
		g, err := g2o.ReadFile(filepath.Join(dir, names[k]), g2o.ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r.File != names[k] || r.D != g.D || r.N != g.N() || r.M != g.M() {
			t.Errorf("row %d: file, d, n, m = %s %d %d %d, want %s %d %d %d", k, r.File, r.D, r.N, r.M, names[k], g.D, g.N(), g.M())
		}
		if r.Error != "" || !r.Certified || r.Status != string(bsync.Certified) || r.Rank < g.D {
			t.Errorf("%s: error %q, certified %v, status %q, rank %d", r.File, r.Error, r.Certified, r.Status, r.Rank)
		}
		rep := r.Report
		if rep == nil {
			t.Fatalf("%s: no report", r.File)
		}
		// The row repeats the child's report, which used the passed flags.
		if rep.Objective != r.Objective || rep.Rank != r.Rank || rep.Timings.Total != r.Total || rep.Timings.Optimize != r.Optimize ||
			rep.Timings.Parse != r.Parse || rep.Options.Seed != 7 || rep.Options.MaxRank != 6 {
			t.Errorf("%s: row and report disagree: row %+v, report objective %v rank %d timings %+v options %+v",
				r.File, r, rep.Objective, rep.Rank, rep.Timings, rep.Options)
		}
		if !(r.Parse > 0 && r.Total >= r.Parse+r.Init && r.Wall >= r.Total) {
			t.Errorf("%s: times parse %g init %g total %g wall %g", r.File, r.Parse, r.Init, r.Total, r.Wall)
		}
		if r.Runs != 2 {
			t.Errorf("%s: runs = %d, want 2", r.File, r.Runs)
		}
		if runtime.GOOS == "linux" && (r.PeakRSS <= 0 || r.PeakMB != float64(r.PeakRSS)/1e6) {
			t.Errorf("%s: peak RSS %d bytes, %g MB", r.File, r.PeakRSS, r.PeakMB)
		}
		if r.FStar == nil || r.RelErr == nil || r.PeerWall == nil || r.TimeRatio == nil {
			t.Fatalf("%s: reference columns missing: %+v", r.File, r)
		}
		want := fmt.Sprintf("%.12g", fstar[k])
		if got := fmt.Sprintf("%.12g", *r.FStar); got != want || *r.PeerWall != peer[k] {
			t.Errorf("%s: f_star %s, peer %g; reference %s, %g", r.File, got, *r.PeerWall, want, peer[k])
		}
		if rel := (r.Objective - *r.FStar) / *r.FStar; *r.RelErr != rel || math.Abs(rel) > relTolBench {
			t.Errorf("%s: relative error %g, (F - f_star)/f_star = %g", r.File, *r.RelErr, rel)
		}
		if *r.TimeRatio != r.Wall/peer[k] {
			t.Errorf("%s: time ratio %g, wall/peer %g", r.File, *r.TimeRatio, r.Wall/peer[k])
		}
		ratioLog += math.Log(*r.TimeRatio)
	}

	table := tableRows(md)
	if len(table) != 1+len(names) {
		t.Fatalf("markdown table has %d rows, want header + %d:\n%s", len(table), len(names), md)
	}
	header := table[0]
	col := map[string]int{}
	for k, h := range header {
		col[h] = k
	}
	for _, h := range []string{"file", "d", "n", "m", "F", "certified", "rank", "parse", "init", "optimize", "certify", "round",
		"total", "wall", "peak MB", "f_star", "rel. error", "peer_wall_s", "ratio"} {
		if _, ok := col[h]; !ok {
			t.Errorf("markdown header %q lacks column %q", header, h)
		}
	}
	for k, cells := range table[1:] {
		r := rows[k]
		if len(cells) != len(header) {
			t.Errorf("row %q has %d cells, header %d", cells, len(cells), len(header))
			continue
		}
		want := map[string]string{
			"file": r.File, "n": fmt.Sprint(r.N), "m": fmt.Sprint(r.M), "F": fmt.Sprintf("%.12g", r.Objective), "certified": "yes",
			"total": fmt.Sprintf("%.3f", r.Total), "wall": fmt.Sprintf("%.3f", r.Wall),
			"rel. error": fmt.Sprintf("%.2e", *r.RelErr), "ratio": fmt.Sprintf("%.3g", *r.TimeRatio),
		}
		for h, w := range want {
			if got := cells[col[h]]; got != w {
				t.Errorf("%s: column %s = %q, want %q", r.File, h, got, w)
			}
		}
	}
	summary := fmt.Sprintf("Geometric mean of wall/peer_wall_s over 2 graphs: %.3f. Certified and within 1e-07 of f_star: 2 of 2.",
		math.Exp(ratioLog/2))
	if !strings.Contains(md, summary) {
		t.Errorf("bench.md lacks the summary %q:\n%s", summary, md)
	}
}

// TestBenchUncertifiedAndErrors: a solve stopped before its certificate is
// a row with certified=false (the child exits 1 after printing its report),
// a file that does not parse is an error row naming the file and line and
// makes the command fail, and without a reference table there are no
// reference columns.
func TestBenchUncertifiedAndErrors(t *testing.T) {
	dir := t.TempDir()
	benchGraphs(t, dir)
	bad := "VERTEX_SE2 0 0 0 0\nVERTEX_SE2 1 1 0 0\nEDGE_SE2 0 1 1 0 zero 1 0 0 1 0 1\n"
	if err := os.WriteFile(filepath.Join(dir, "bad.g2o"), []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	code, stdout, stderr := runCmd("bench", dir, "-o", out, "--quiet", "--time-limit", "1ns")
	if code != 1 || !strings.Contains(stderr, "1 of 3 graphs could not be solved") {
		t.Errorf("exit %d, stderr %q; want 1 and the count of failures", code, stderr)
	}
	rows, md := readBench(t, out)
	if stdout != md {
		t.Errorf("stdout differs from bench.md")
	}
	if len(rows) != 3 || rows[0].File != "bad.g2o" || rows[1].File != "cube.g2o" || rows[2].File != "walk.g2o" {
		t.Fatalf("rows %+v", rows)
	}
	if r := rows[0]; !strings.Contains(r.Error, "bad.g2o:3") || r.Report != nil || r.Certified {
		t.Errorf("bad.g2o: error %q, report %v, certified %v; want a parse error at bad.g2o:3", r.Error, r.Report, r.Certified)
	}
	for _, r := range rows[1:] {
		if r.Error != "" || r.Certified || r.Status != string(bsync.TimeLimit) || r.Report == nil || r.Report.Certified {
			t.Errorf("%s: error %q certified %v status %q; want an uncertified row stopped by the time limit", r.File, r.Error, r.Certified, r.Status)
		}
		if r.FStar != nil || r.RelErr != nil || r.PeerWall != nil || r.TimeRatio != nil {
			t.Errorf("%s: reference columns without a reference: %+v", r.File, r)
		}
	}
	table := tableRows(md)
	if len(table) != 4 || len(table[0]) != 15 || strings.Contains(md, "f_star") || strings.Contains(md, "Geometric mean") {
		t.Errorf("markdown without reference:\n%s", md)
	}
	if len(table) == 4 && (table[1][5] != "error" || !strings.HasPrefix(table[2][5], "no: ") || !strings.Contains(md, "- bad.g2o: ")) {
		t.Errorf("markdown rows:\n%s", md)
	}
}

// TestBenchBadUse: a directory without graphs, a missing directory or
// reference, and bad flags are errors that say what is wrong.
func TestBenchBadUse(t *testing.T) {
	empty := t.TempDir()
	notGraphs := t.TempDir()
	for _, name := range []string{"REFERENCE.tsv", "README.md"} {
		if err := os.WriteFile(filepath.Join(notGraphs, name), []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "out")
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"bench", empty, "-o", out}, 1, "no pose-graph files (*.g2o, *.graph)"},
		{[]string{"bench", notGraphs, "-o", out}, 1, "no pose-graph files"},
		{[]string{"bench", filepath.Join(empty, "missing"), "-o", out}, 1, "no such file"},
		{[]string{"bench", "-o", out}, 2, "exactly one DIR"},
		{[]string{"bench", empty, notGraphs}, 2, "exactly one DIR"},
		{[]string{"bench", empty, "--repeat", "0"}, 2, "--repeat 0"},
		{[]string{"bench", empty, "--init", "magic"}, 2, "unknown initialization"},
		{[]string{"bench", empty, "--match", "("}, 2, "--match"},
	} {
		code, _, stderr := runCmd(c.args...)
		if code != c.code || !strings.Contains(stderr, c.msg) {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q", c.args, code, stderr, c.code, c.msg)
		}
	}
	// A graph but a reference table that does not parse: the table's error.
	dir := t.TempDir()
	benchGraphs(t, dir)
	if err := os.WriteFile(filepath.Join(dir, "REFERENCE.tsv"), []byte("file\td\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCmd("bench", dir, "-o", out)
	if code != 1 || !strings.Contains(stderr, "REFERENCE.tsv:1: header") {
		t.Errorf("bad reference: exit %d, stderr %q", code, stderr)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("outputs written although every run failed: %v", err)
	}
}

// TestRawReadingHint: the summary explains a 3-D miss that the reading
// explains, and only that.
func TestRawReadingHint(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	row := func(d int, rel float64, certified, raw bool) benchRow {
		r := benchRow{File: "g.g2o", D: d, Certified: certified, FStar: f(1), RelErr: f(rel)}
		if raw {
			r.Report = &bsync.Report{RawQuaternions: true}
		}
		return r
	}
	for _, c := range []struct {
		name string
		rows []benchRow
		want string // substring, "" for no hint
	}{
		{"3-D miss, default reading", []benchRow{row(3, -1.1e-6, true, false), row(3, 1e-9, true, false)}, " 1 certified 3-D graph(s) miss f_star"},
		{"3-D miss, raw reading", []benchRow{row(3, -1.1e-6, true, true)}, ""},
		{"2-D miss", []benchRow{row(2, 1e-5, true, false)}, ""},
		{"3-D within tolerance", []benchRow{row(3, 5e-8, true, false)}, ""},
		{"3-D uncertified", []benchRow{row(3, 1e-3, false, false)}, ""},
	} {
		got := rawReadingHint(c.rows)
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("%s: hint %q, want %q", c.name, got, c.want)
		}
		if got != "" && !strings.Contains(got, "--raw-quaternions") {
			t.Errorf("%s: hint %q does not name the flag", c.name, got)
		}
	}
}
