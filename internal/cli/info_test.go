package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/bcmsync/bcmsync/datasets"
)

// runCmd runs the command line and returns the exit status and outputs.
func runCmd(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestInfoDatasets runs "info --json" on every benchmark graph and compares
// d, n and m with REFERENCE.tsv.
func TestInfoDatasets(t *testing.T) {
	dir := datasets.SuiteOrSkip(t)
	refs, err := datasets.ReadReference(filepath.Join(dir, "REFERENCE.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range refs {
		path := filepath.Join(dir, ref.File)
		code, out, errs := runCmd("info", "--json", path)
		if code != 0 {
			t.Errorf("%s: exit %d: %s", ref.File, code, errs)
			continue
		}
		var got graphInfo
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%s: %v in %q", ref.File, err, out)
		}
		if got.File != path || got.D != ref.D || got.N != ref.N || got.M != ref.M {
			t.Errorf("%s: file, d, n, m = %s, %d, %d, %d; REFERENCE.tsv: %d, %d, %d", ref.File, got.File, got.D, got.N, got.M, ref.D, ref.N, ref.M)
		}
		if got.Components != 1 || !slices.Equal(got.ComponentSizes, []int{ref.N}) {
			t.Errorf("%s: components %d %v, want one of %d", ref.File, got.Components, got.ComponentSizes, ref.N)
		}
		if mean := float64(2*ref.M) / float64(ref.N); got.DegreeMean != mean || got.DegreeMin < 1 || got.DegreeMax < got.DegreeMin {
			t.Errorf("%s: degrees %d %g %d", ref.File, got.DegreeMin, got.DegreeMean, got.DegreeMax)
		}
		if want := countLoopClosures(t, path); got.LoopClosures != want {
			t.Errorf("%s: %d loop closures, the file has %d", ref.File, got.LoopClosures, want)
		}
		noVertex := strings.Contains(ref.File, "CSAIL") || strings.Contains(ref.File, "manhattan") || strings.Contains(ref.File, "kitti")
		if want := ref.N; noVertex && got.Estimates != 0 || !noVertex && got.Estimates != want {
			t.Errorf("%s: %d poses with estimates", ref.File, got.Estimates)
		}
	}
}

// TestInfoByHand checks every statistic on a small disconnected graph:
// poses 1, 2, 3, 7 in one piece (edges 1-2, 2-3, 3-1, 1-7, 7-1), 10 and 11
// in another, 20 alone.
func TestInfoByHand(t *testing.T) {
	const e = " 1 0 0 1 0 0 1 0 1\n"
	src := "VERTEX_SE2 20 0 0 0\nVERTEX_SE2 1 0 0 0\nFIX 1 10\n" +
		"VERTEX_SE2 2 0 0 0\nVERTEX_SE2 3 0 0 0\nVERTEX_SE2 7 0 0 0\nVERTEX_SE2 10 0 0 0\nVERTEX_SE2 11 0 0 0\n" +
		"EDGE_SE2 1 2" + e + "EDGE_SE2 2 3" + e + "EDGE_SE2 3 1" + e + "EDGE_SE2 1 7" + e + "EDGE_SE2 7 1" + e +
		"EDGE_SE2 10 11" + e
	path := filepath.Join(t.TempDir(), "hand.g2o")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCmd("info", path, "--json") // flags after the file work too
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var got graphInfo
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	want := graphInfo{File: path, D: 2, N: 7, M: 6, Components: 3, ComponentSizes: []int{4, 2, 1},
		DegreeMin: 0, DegreeMean: 12.0 / 7, DegreeMax: 4, LoopClosures: 3, Fixed: []int{1, 10}, Estimates: 7}
	if !equalInfo(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}

	code, out, _ = runCmd("info", path)
	if code != 0 {
		t.Fatalf("text: exit %d", code)
	}
	for _, line := range []string{
		"dimension       2\n", "poses           7\n", "edges           6\n",
		"components      3 (sizes 4, 2, 1)\n", "degree          min 0, mean 1.714, max 4\n",
		"loop closures   3\n", "fixed           1 10\n", "estimates       7 of 7 poses\n",
	} {
		if !strings.Contains(out, line) {
			t.Errorf("text output lacks %q:\n%s", line, out)
		}
	}
}

// countLoopClosures counts the EDGE lines of a file whose two ids differ by
// other than 1, independently of the reader.
func countLoopClosures(t *testing.T, path string) int {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || !strings.HasPrefix(f[0], "EDGE") {
			continue
		}
		i, err1 := strconv.Atoi(f[1])
		j, err2 := strconv.Atoi(f[2])
		if err1 != nil || err2 != nil {
			t.Fatalf("%s: %q", path, line)
		}
		if i-j != 1 && j-i != 1 {
			n++
		}
	}
	return n
}

func equalInfo(a, b graphInfo) bool {
	return a.File == b.File && a.D == b.D && a.N == b.N && a.M == b.M && a.Components == b.Components &&
		slices.Equal(a.ComponentSizes, b.ComponentSizes) && a.DegreeMin == b.DegreeMin &&
		a.DegreeMean == b.DegreeMean && a.DegreeMax == b.DegreeMax && a.LoopClosures == b.LoopClosures &&
		slices.Equal(a.Fixed, b.Fixed) && a.Estimates == b.Estimates
}

// TestInfoErrors checks bad files (status 1, FILE:LINE: problem on stderr),
// usage errors (status 2) and lenient reading.
func TestInfoErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.g2o", "EDGE_SE2 0 1 1 0 0 1 0 0 1 0 1\n")
	landmarks := write("landmarks.g2o", "EDGE_SE2 0 1 1 0 0 1 0 0 1 0 1\nVERTEX_POINTXY 5 1 2\nVERTEX_POINTXY 6 1 2\n")
	for _, c := range []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"bad number", []string{"info", write("num.g2o", "VERTEX_SE2 0 0 0 0\nEDGE_SE2 0 1 1 0 zero 1 0 0 1 0 1\n")}, 1, "num.g2o:2: field 5 of EDGE_SE2 (zero) is not a number"},
		{"not PD", []string{"info", "--json", write("pd.g2o", "\n\nEDGE_SE2 0 1 1 0 0 -1 0 0 1 0 1\n")}, 1, "pd.g2o:3: EDGE_SE2: information matrix is not positive definite"},
		{"empty", []string{"info", write("empty.g2o", "# nothing\n")}, 1, "empty.g2o: no edges"},
		{"missing", []string{"info", filepath.Join(dir, "nope.g2o")}, 1, "nope.g2o: no such file"},
		{"landmarks", []string{"info", landmarks}, 1, "landmarks.g2o:2: VERTEX_POINTXY is not supported (this kind of landmark record"},
		{"lenient", []string{"info", "--lenient", landmarks}, 0, "warning: " + landmarks + ": skipped 2 VERTEX_POINTXY record(s)"},
		{"no file", []string{"info"}, 2, "bcmsync info: no FILE given"},
		{"bad flag", []string{"info", "--frobnicate", good}, 2, "flag provided but not defined: -frobnicate"},
		{"help flag", []string{"info", "-h"}, 0, "usage: bcmsync info"},
		{"unknown command", []string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{"help unknown", []string{"help", "frobnicate"}, 2, `unknown command "frobnicate"`},
	} {
		code, _, errs := runCmd(c.args...)
		if code != c.code || !strings.Contains(errs, c.stderr) {
			t.Errorf("%s: exit %d, stderr %q; want %d and %q", c.name, code, errs, c.code, c.stderr)
		}
	}
}

// TestNoArgsRunsDemo: a bare bcmsync solves the embedded demo and writes
// its plots into ./bcmsync-demo (here a temporary working directory).
func TestNoArgsRunsDemo(t *testing.T) {
	t.Chdir(t.TempDir())
	code, out, errs := runCmd()
	if code != 0 || !strings.Contains(out, "CERTIFIED globally optimal") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
	for _, f := range []string{"trajectory.png", "convergence.png", "stages.png"} {
		if _, err := os.Stat(filepath.Join("bcmsync-demo", f)); err != nil {
			t.Error(err)
		}
	}
}

// TestHelp checks the command list and per-command help on stdout.
func TestHelp(t *testing.T) {
	code, out, _ := runCmd("help")
	// The columns are as wide as the longest command name.
	listed := func(name, short string) bool {
		return regexp.MustCompile(`(?m)^  ` + name + ` +` + regexp.QuoteMeta(short)).MatchString(out)
	}
	if code != 0 || !listed("info", "describe pose-graph files") || !listed("solve", "find and certify") || !listed("distributed", "solve and certify FILE with K agents") ||
		!listed("evaluate", "absolute and relative") || !listed("generate", "write a synthetic") {
		t.Errorf("help: exit %d:\n%s", code, out)
	}
	code, out, _ = runCmd("help", "info")
	if code != 0 || !strings.Contains(out, "usage: bcmsync info") || !strings.Contains(out, "-lenient") {
		t.Errorf("help info: exit %d:\n%s", code, out)
	}
}

// TestParseArgs checks flags after positional arguments and "--".
func TestParseArgs(t *testing.T) {
	var buf bytes.Buffer
	fs := newFlagSet("x", "x [flags] ARGS", "", &buf)
	v := fs.Bool("v", false, "")
	pos, err := parseArgs(fs, []string{"a", "-v", "b", "--", "-c", "d"})
	if err != nil || !*v || !slices.Equal(pos, []string{"a", "b", "-c", "d"}) {
		t.Errorf("got %v %v %v", pos, *v, err)
	}
}
