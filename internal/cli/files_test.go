package cli

import (
	"bytes"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bcmsync/bcmsync/g2o"
)

// snapshot returns every file under dir with its contents (symbolic links
// as "link -> target").
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(path)
			files[rel] = "link -> " + target
			return err
		case d.IsDir():
			files[rel+"/"] = ""
		default:
			b, err := os.ReadFile(path)
			files[rel] = string(b)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// sameSnapshot reports how a differs from b, "" when they are equal.
func sameSnapshot(a, b map[string]string) string {
	var diff []string
	for _, k := range slices.Sorted(maps.Keys(a)) {
		if v, ok := b[k]; !ok {
			diff = append(diff, k+" removed")
		} else if v != a[k] {
			diff = append(diff, k+" changed")
		}
	}
	for _, k := range slices.Sorted(maps.Keys(b)) {
		if _, ok := a[k]; !ok {
			diff = append(diff, k+" created")
		}
	}
	return strings.Join(diff, ", ")
}

// collisionDir holds the inputs of TestOutputCollisions: the demo graph
// in.g2o with a symbolic and a hard link to it, a report of its solve, a
// ground truth, a graph named like a figure inside a folder, and an empty
// folder.
func collisionDir(t *testing.T) string {
	dir := t.TempDir()
	in := demoFile(t, dir, "in.g2o")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink("in.g2o", filepath.Join(dir, "link.g2o")))
	must(os.Link(in, filepath.Join(dir, "hard.g2o")))
	if code, _, stderr := runCmd("solve", "--quiet", "--report", filepath.Join(dir, "report.json"), in); code != 0 {
		t.Fatalf("solve: exit %d: %s", code, stderr)
	}
	b, err := os.ReadFile(in)
	must(err)
	must(os.Mkdir(filepath.Join(dir, "figs"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "figs", "trajectory.png"), b, 0o644))
	must(os.WriteFile(filepath.Join(dir, "figs", "stages.png"), b, 0o644))
	must(os.WriteFile(filepath.Join(dir, "figs", "robust.png"), b, 0o644))
	for _, secret := range []string{"run.key", "run.creds", "client.pem", "client.key", "ca.pem", "pw", "token", "user.nk"} {
		must(os.WriteFile(filepath.Join(dir, secret), []byte("secret\n"), 0o600))
	}
	must(os.WriteFile(filepath.Join(dir, "in.png"), b, 0o644))
	must(os.Mkdir(filepath.Join(dir, "empty"), 0o755))
	must(os.Mkdir(filepath.Join(dir, "bench"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "bench", "g.g2o"), b, 0o644))
	return dir
}

// TestOutputCollisions: in every command, an output that names an input
// (by the same path, another spelling of it, a symbolic or a hard link) or
// another output is a usage error, exit 2, before anything runs: every
// file is byte-identical afterwards and nothing is created.
func TestOutputCollisions(t *testing.T) {
	dir := collisionDir(t)
	t.Chdir(dir)
	p := func(name string) string { return filepath.Join(dir, name) }
	for _, c := range []struct {
		args []string
		want string
	}{
		// solve: every output against the input, by every spelling.
		{[]string{"solve", "-o", "in.g2o", "in.g2o"}, "-o in.g2o would overwrite the input in.g2o"},
		{[]string{"solve", "--tum", p("in.g2o"), "in.g2o"}, "would overwrite the input in.g2o"},
		{[]string{"solve", "--report", "in.g2o", p("in.g2o")}, "--report in.g2o would overwrite the input"},
		{[]string{"solve", "-o", "./empty/../in.g2o", "in.g2o"}, "would overwrite the input"},
		{[]string{"solve", "-o", "link.g2o", "in.g2o"}, "-o link.g2o would overwrite the input in.g2o"},
		{[]string{"solve", "-o", "in.g2o", "link.g2o"}, "would overwrite the input link.g2o"},
		{[]string{"solve", "-o", "hard.g2o", "in.g2o"}, "-o hard.g2o would overwrite the input in.g2o"},
		{[]string{"solve", "--robust", "gnc-tls", "-o", "in.g2o", "in.g2o"}, "would overwrite the input"},
		{[]string{"solve", "--plots", "figs", "figs/trajectory.png"}, "--plots figs/trajectory.png would overwrite the input"},
		{[]string{"solve", "--rotations", "--plots", "figs", "figs/stages.png"}, "--plots figs/stages.png would overwrite the input"},
		{[]string{"solve", "--robust", "gnc-tls", "--plots", "figs", "figs/robust.png"}, "--plots figs/robust.png would overwrite the input"},
		// solve: outputs against each other.
		{[]string{"solve", "-o", "x", "--tum", "x", "in.g2o"}, "-o x and --tum x are the same file"},
		{[]string{"solve", "-o", "x", "--report", p("x"), "in.g2o"}, "are the same file"},
		{[]string{"solve", "--tum", "out.tum", "--report", "empty/../out.tum", "in.g2o"}, "are the same file"},
		{[]string{"solve", "-o", "-", "--json", "in.g2o"}, "-o and --json both write to standard output"},
		{[]string{"solve", "-o", "-", "--tum", "-", "in.g2o"}, "both write to standard output"},
		{[]string{"solve", "-o", "figs", "in.g2o"}, "-o figs is a folder"},
		{[]string{"solve", "-o", "figs", "--plots", "figs", "in.g2o"}, "-o figs is a folder"},
		{[]string{"solve", "--plots", "in.g2o", "in.g2o"}, "--plots in.g2o: not a folder"},
		{[]string{"solve", "-o", "/nonexistent-bcmsync/dir/o.g2o", "in.g2o"}, "the folder /nonexistent-bcmsync/dir does not exist"},
		{[]string{"solve", "--report", "in.g2o/r.json", "in.g2o"}, "in.g2o is not a folder"},
		// distributed: its outputs against its secret files too.
		{[]string{"distributed", "--agents", "2", "--key", "run.key", "-o", "run.key", "in.g2o"}, "-o run.key would overwrite the input --key run.key"},
		{[]string{"distributed", "--agents", "2", "--nats", "nats://127.0.0.1:1", "--creds", "run.creds", "--report", "run.creds", "in.g2o"}, "would overwrite the input --creds run.creds"},
		{[]string{"distributed", "--agents", "2", "--nats", "nats://127.0.0.1:1", "--nkey", "user.nk", "--tum", "user.nk", "in.g2o"}, "would overwrite the input --nkey user.nk"},
		{[]string{"distributed", "--agents", "2", "--nats", "nats://127.0.0.1:1", "--user", "u", "--password-file", "pw", "-o", "pw", "in.g2o"}, "would overwrite the input --password-file pw"},
		{[]string{"distributed", "--agents", "2", "--nats", "nats://127.0.0.1:1", "--token-file", "token", "-o", "token", "in.g2o"}, "would overwrite the input --token-file token"},
		{[]string{"distributed", "--agents", "2", "--nats", "nats://127.0.0.1:1", "--tls-ca", "ca.pem", "--covariances", "ca.pem", "in.g2o"}, "would overwrite the input --tls-ca ca.pem"},
		{[]string{"distributed", "--agents", "2", "--nats", "nats://127.0.0.1:1", "--tls-cert", "client.pem", "--tls-key", "client.key", "-o", "client.key", "in.g2o"}, "would overwrite the input --tls-key client.key"},
		{[]string{"distributed", "--agents", "2", "--nats", "nats://127.0.0.1:1", "--tls-cert", "client.pem", "--tls-key", "client.key", "--report", "client.pem", "in.g2o"}, "would overwrite the input --tls-cert client.pem"},
		// demo: its outputs.
		{[]string{"demo", "-o", "x", "--tum", "x"}, "-o x and --tum x are the same file"},
		{[]string{"demo", "--report", "r", "-o", "r", "--plots", ""}, "are the same file"},
		{[]string{"demo", "--plots", "figs", "--report", "figs/stages.png"}, "are the same file"},
		{[]string{"demo", "--plots", "in.g2o"}, "--plots in.g2o: not a folder"},
		// view: the page against every input.
		{[]string{"view", "-o", "in.g2o", "in.g2o"}, "would overwrite the input in.g2o"},
		{[]string{"view", "-o", "link.g2o", "in.g2o", "hard.g2o"}, "would overwrite the input in.g2o"},
		{[]string{"view", "--no-solve", "-o", "report.json", "--report", "report.json", "in.g2o"}, "would overwrite the input --report report.json"},
		{[]string{"view", "-o", "/nonexistent-bcmsync/v.html", "in.g2o"}, "does not exist"},
		// plot: the files it writes into its folder against the inputs.
		{[]string{"plot", "-o", "figs", "figs/trajectory.png"}, "would overwrite the input figs/trajectory.png"},
		{[]string{"plot", "-o", "figs", "--report", "figs/stages.png", "in.g2o"}, "would overwrite the input --report figs/stages.png"},
		{[]string{"plot", "-o", "in.g2o", "in.g2o"}, "-o in.g2o: not a folder"},
		// generate: its three outputs.
		{[]string{"generate", "grid", "-o", "g.g2o", "--truth", "g.g2o"}, "are the same file"},
		{[]string{"generate", "grid", "-o", "g.g2o", "--outliers", "0.1", "--outliers-file", "g.gt.g2o"}, "--truth g.gt.g2o and --outliers-file g.gt.g2o are the same file"},
		{[]string{"generate", "grid", "-o", "in.g2o", "--truth", "link.g2o"}, "are the same file"},
		{[]string{"generate", "grid", "-o", "/nonexistent-bcmsync/g.g2o"}, "does not exist"},
		// evaluate: the figure against the inputs.
		{[]string{"evaluate", "--plot", "in.png", "in.png", "in.g2o"}, "--plot in.png would overwrite the input in.png"},
		// bench: its tables against its inputs.
		{[]string{"bench", "-o", "bench", "--reference", "bench/bench.json", "bench"}, "would overwrite the input --reference bench/bench.json"},
		{[]string{"bench", "-o", "in.g2o", "bench"}, "-o in.g2o: not a folder"},
	} {
		before := snapshot(t, dir)
		code, stdout, stderr := runCmd(c.args...)
		if code != exitUsage || !strings.HasPrefix(stderr, "bcmsync "+c.args[0]+": ") || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, stderr, exitUsage, c.want)
		}
		if stdout != "" {
			t.Errorf("%v: printed %q", c.args, stdout)
		}
		if diff := sameSnapshot(before, snapshot(t, dir)); diff != "" {
			t.Errorf("%v: %s", c.args, diff)
		}
	}
	if _, err := os.Stat("/nonexistent-bcmsync"); !errors.Is(err, fs.ErrNotExist) {
		t.Error("a missing output folder was created")
	}
}

// TestFoldersCreated: a folder a command is asked to fill is created, with
// its parents; a file's folder is not (TestOutputCollisions).
func TestFoldersCreated(t *testing.T) {
	dir := t.TempDir()
	in := demoFile(t, dir, "in.g2o")
	figs := filepath.Join(dir, "new", "figs")
	if code, _, stderr := runCmd("solve", "--quiet", "--plots", figs, in); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, name := range []string{"trajectory.png", "convergence.png", "stages.png"} {
		if _, err := os.Stat(filepath.Join(figs, name)); err != nil {
			t.Error(err)
		}
	}
	out := filepath.Join(dir, "plot", "out")
	if code, _, stderr := runCmd("plot", "-o", out, in); code != 0 {
		t.Fatalf("plot: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(out, "trajectory.png")); err != nil {
		t.Error(err)
	}
}

// TestWriteOutputInterrupted: a write that fails half-way leaves no
// partial file and no temporary file, and an older file at the path as it
// was; on standard output it leaves nothing at all.
func TestWriteOutputInterrupted(t *testing.T) {
	dir := t.TempDir()
	g, err := g2o.ReadFile(demoFile(t, dir, "in.g2o"), g2o.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// failing writes the graph into a writer that breaks after n bytes.
	failing := func(n int) func(io.Writer) error {
		return func(w io.Writer) error {
			return g2o.Write(&brokenWriter{w: w, left: n}, g, nil)
		}
	}
	old := filepath.Join(dir, "old.g2o")
	if err := os.WriteFile(old, []byte("the old estimate\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, dir)
	for _, path := range []string{old, filepath.Join(dir, "new.g2o")} {
		if err := writeOutput(path, io.Discard, failing(5000)); err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: error %v, want one naming the file", path, err)
		}
	}
	if diff := sameSnapshot(before, snapshot(t, dir)); diff != "" {
		t.Errorf("after failed writes: %s", diff)
	}
	var stdout bytes.Buffer
	if err := writeOutput(stdio, &stdout, failing(5000)); err == nil || stdout.Len() != 0 {
		t.Errorf("standard output: error %v, %d bytes written", err, stdout.Len())
	}
	// The same write, unbroken, replaces the old file whole.
	if err := writeOutput(old, io.Discard, failing(1<<30)); err != nil {
		t.Fatal(err)
	}
	if back, err := g2o.ReadFile(old, g2o.ReadOptions{}); err != nil || back.N() != g.N() {
		t.Errorf("the replaced file reads back as %v, %v", back, err)
	}
}

// brokenWriter passes left bytes to w and then fails, as a full disk does.
type brokenWriter struct {
	w    io.Writer
	left int
}

func (b *brokenWriter) Write(p []byte) (int, error) {
	if len(p) > b.left {
		n, _ := b.w.Write(p[:b.left])
		b.left = 0
		return n, errors.New("no space left on device (injected)")
	}
	b.left -= len(p)
	return b.w.Write(p)
}

// TestOneWayToWrite: the command and package plots create files only
// through package outfile (writeOutput, plots' createWith), so that no
// output can be left half-written; a new output that calls os.Create or
// os.WriteFile fails this test.
func TestOneWayToWrite(t *testing.T) {
	banned := map[string]bool{"Create": true, "WriteFile": true, "OpenFile": true, "CreateTemp": true}
	for _, dir := range []string{".", "../../plots", "../../datasets", "../../g2o"} {
		fset := token.NewFileSet()
		pkgs, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range pkgs {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "os" && banned[sel.Sel.Name] {
					t.Errorf("%s: os.%s: write outputs through writeOutput (files.go) or internal/outfile", fset.Position(sel.Pos()), sel.Sel.Name)
				}
				return true
			})
		}
	}
}
