package cli

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/bcmsync/bcmsync/g2o"
	bsync "github.com/bcmsync/bcmsync/sync"
	"github.com/bcmsync/bcmsync/sync/covariance"
)

// covFile is a parsed --covariances file.
type covFile struct {
	header    []string
	poses     map[int][]float64
	landmarks map[int][]float64
	pairs     [][]float64 // the two ids, then the values
	order     []int       // vertex ids in line order
}

func readCovFile(t *testing.T, path string) covFile {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c := covFile{poses: map[int][]float64{}, landmarks: map[int][]float64{}}
	nums := func(fields []string) []float64 {
		v := make([]float64, len(fields))
		for k, f := range fields {
			x, err := strconv.ParseFloat(f, 64)
			if err != nil {
				t.Fatalf("%s: %q is not a number", path, f)
			}
			v[k] = x
		}
		return v
	}
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if strings.HasPrefix(line, "#") {
			c.header = append(c.header, line)
			continue
		}
		f := strings.Fields(line)
		switch f[0] {
		case "landmark":
			id, _ := strconv.Atoi(f[1])
			c.landmarks[id] = nums(f[2:])
			c.order = append(c.order, id)
		case "pair":
			c.pairs = append(c.pairs, nums(f[1:]))
		default:
			id, err := strconv.Atoi(f[0])
			if err != nil {
				t.Fatalf("%s: line %q starts with neither an id, landmark nor pair", path, line)
			}
			c.poses[id] = nums(f[1:])
			c.order = append(c.order, id)
		}
	}
	return c
}

// TestSolveCovariances solves generated 2-D and 3-D graphs and a 2-D graph
// with landmarks with --covariances and --covariance-pairs, and checks the
// file: the header says what the format, the gauge, the method and the
// noise model are; a line per vertex in vertex order, of the documented
// length, with the gauge's zero; pairs; and every number equal to what
// covariance.Compute gives on the same solve.
func TestSolveCovariances(t *testing.T) {
	dir := t.TempDir()
	man := filepath.Join(dir, "man.g2o")
	if code, _, errs := runCmd("generate", "manhattan", "-n", "60", "--side", "5", "--quiet", "-o", man); code != 0 {
		t.Fatalf("generate: %s", errs)
	}
	grid := filepath.Join(dir, "grid.g2o")
	if code, _, errs := runCmd("generate", "grid", "--nx", "3", "--ny", "3", "--nz", "2", "--quiet", "-o", grid); code != 0 {
		t.Fatalf("generate: %s", errs)
	}
	for _, tc := range []struct {
		file  string
		pairs string
		fix   bool
	}{
		{man, "0 59\n# a comment\n\n12 30  # another\n", true},
		{grid, "3 17\n", false},
		{filepath.Join("..", "..", "datasets", "testdata", "manhattan-landmarks.g2o"), "0 250\n5 249\n", false},
	} {
		in := tc.file
		if tc.fix {
			// A FIX line makes another pose the anchor.
			b, _ := os.ReadFile(tc.file)
			in = filepath.Join(dir, "fixed-"+filepath.Base(tc.file))
			os.WriteFile(in, append([]byte("FIX 7\n"), b...), 0o644)
		}
		pairs := filepath.Join(dir, "pairs.txt")
		os.WriteFile(pairs, []byte(tc.pairs), 0o644)
		out := filepath.Join(dir, filepath.Base(in)+".cov")
		code, stdout, errs := runCmd("solve", "--covariances", out, "--covariance-pairs", pairs, in)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", in, code, errs)
		}
		if !strings.Contains(stdout, "covariances: "+out) {
			t.Errorf("%s: the summary does not name the file:\n%s", in, stdout)
		}
		got := readCovFile(t, out)
		g, err := g2o.ReadFile(in, g2o.ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		res, err := bsync.Solve(context.Background(), g, bsync.Options{})
		if err != nil {
			t.Fatal(err)
		}
		var opts covariance.Options
		at := map[int]int{}
		for i, id := range g.IDs {
			at[id] = i
		}
		for _, line := range strings.Split(tc.pairs, "\n") {
			if f := strings.Fields(strings.SplitN(line, "#", 2)[0]); len(f) == 2 {
				a, _ := strconv.Atoi(f[0])
				b, _ := strconv.Atoi(f[1])
				opts.Pairs = append(opts.Pairs, [2]int{at[a], at[b]})
			}
		}
		want, err := covariance.Compute(res.Graph, res.Poses, opts)
		if err != nil {
			t.Fatal(err)
		}
		head := strings.Join(got.header, "\n")
		gaugeID := g.IDs[g.Anchor()]
		for _, s := range []string{
			"certified globally optimal",
			"gauge: pose " + strconv.Itoa(gaugeID) + " held fixed",
			"translation perturbed in the world frame, rotation on the right (body frame)",
			"the isotropic one of the objective", "each edge's kappa and tau", "twice the negative log-likelihood",
			"Gauss-Newton information J^T J of F/2", "selected inversion",
		} {
			if !strings.Contains(head, s) {
				t.Errorf("%s: the header lacks %q:\n%s", in, s, head)
			}
		}
		if tc.fix && gaugeID != 7 {
			t.Errorf("the FIX'ed pose 7 is not the gauge (%d)", gaugeID)
		}
		if len(got.order) != g.N() {
			t.Fatalf("%s: %d vertex lines for %d vertices", in, len(got.order), g.N())
		}
		for i, id := range g.IDs {
			if got.order[i] != id {
				t.Fatalf("%s: line %d is vertex %d, want %d", in, i, got.order[i], id)
			}
			v, ok := got.poses[id]
			if g.IsLandmark(i) {
				v, ok = got.landmarks[id]
			}
			if !ok {
				t.Fatalf("%s: vertex %d is not on a line of its kind", in, id)
			}
			w := want.Marginal(i)
			if len(v) != len(w) {
				t.Fatalf("%s: vertex %d has %d values, want %d", in, id, len(v), len(w))
			}
			for k := range w {
				if v[k] != w[k] {
					t.Fatalf("%s: vertex %d value %d: %v, Compute %v", in, id, k, v[k], w[k])
				}
			}
			if id == gaugeID {
				for _, x := range v {
					if x != 0 {
						t.Fatalf("%s: the gauge's covariance is not zero", in)
					}
				}
			}
		}
		if len(got.pairs) != len(opts.Pairs) {
			t.Fatalf("%s: %d pair lines, want %d", in, len(got.pairs), len(opts.Pairs))
		}
		for q, p := range got.pairs {
			jt := want.Joints[q]
			if int(p[0]) != g.IDs[jt.I] || int(p[1]) != g.IDs[jt.J] || len(p)-2 != len(jt.Cov) {
				t.Fatalf("%s: pair line %d: %v, want ids %d %d and %d values", in, q, p[:2], g.IDs[jt.I], g.IDs[jt.J], len(jt.Cov))
			}
			for k, x := range jt.Cov {
				if p[2+k] != x {
					t.Fatalf("%s: pair %d value %d: %v, Compute %v", in, q, k, p[2+k], x)
				}
			}
		}
		ents, _ := os.ReadDir(filepath.Dir(out))
		for _, e := range ents {
			if strings.Contains(e.Name(), ".tmp") {
				t.Errorf("a temporary file was left behind: %s", e.Name())
			}
		}
	}
}

// TestSolveCovariancesErrors checks the usage errors (exit 2) and the bad
// pairs files (exit 1, FILE:LINE), and that no output overwrites an input.
func TestSolveCovariancesErrors(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.g2o")
	if code, _, errs := runCmd("generate", "manhattan", "-n", "30", "--side", "4", "--quiet", "-o", in); code != 0 {
		t.Fatalf("generate: %s", errs)
	}
	orig, _ := os.ReadFile(in)
	out := filepath.Join(dir, "c.txt")
	pairs := filepath.Join(dir, "pairs.txt")
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"solve", "--covariance-pairs", pairs, in}, 2, "--covariance-pairs needs --covariances"},
		{[]string{"solve", "--rotations", "--covariances", out, in}, 2, "rotation-only"},
		{[]string{"solve", "--covariances", in, in}, 2, "would overwrite the input"},
		{[]string{"solve", "--covariances", filepath.Join(dir, ".", "in.g2o"), in}, 2, "would overwrite the input"},
		{[]string{"solve", "--covariances", out, "-o", out, in}, 2, "are the same file"},
		{[]string{"solve", "--covariances", out, "--covariance-pairs", out, in}, 2, "would overwrite the input --covariance-pairs"},
	} {
		code, _, errs := runCmd(c.args...)
		if code != c.code || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, errs, c.code, c.want)
		}
	}
	if b, _ := os.ReadFile(in); string(b) != string(orig) {
		t.Fatal("the input was overwritten")
	}
	for _, c := range []struct {
		pairs, want string
	}{
		{"0 1\n2 3 4\n", "pairs.txt:2: 3 fields"},
		{"0 x\n", "pairs.txt:1: \"x\" is not a vertex id"},
		{"\n\n0 99\n", "pairs.txt:3: no vertex has the id 99"},
		{"4 4\n", "pairs.txt:1: the id 4 twice"},
	} {
		os.WriteFile(pairs, []byte(c.pairs), 0o644)
		code, _, errs := runCmd("solve", "--covariances", out, "--covariance-pairs", pairs, in)
		if code != 1 || !strings.Contains(errs, c.want) {
			t.Errorf("pairs %q: exit %d, stderr %q; want 1 and %q", c.pairs, code, errs, c.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("pairs %q: the covariance file was written", c.pairs)
		}
	}
	// An estimate without a certificate: written, and the header says so.
	code, _, _ := runCmd("solve", "--quiet", "--time-limit", "1ns", "--bcm-sweeps", "-1", "--covariances", out, in)
	if code != 7 {
		t.Errorf("time-limited solve: exit %d, want 7 (a limit hit)", code)
	}
	if c := readCovFile(t, out); !strings.Contains(strings.Join(c.header, "\n"), "# estimate: NOT certified (stopped by time limit") {
		t.Errorf("the header of an uncertified estimate:\n%s", strings.Join(c.header, "\n"))
	}
}
