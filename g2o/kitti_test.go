package g2o

import (
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestSniffTrajectory: the format comes from the first line that is not
// blank or a comment; anything else is an error naming that line.
func TestSniffTrajectory(t *testing.T) {
	for src, want := range map[string]TrajectoryFormat{
		"# header\n\nVERTEX_SE2 0 0 0 0\n":                    FormatG2O,
		"EDGE_SE2 0 1 1 0 0 1 0 0 1 0 1\n":                    FormatG2O,
		"VERTEX2 0 0 0 0\n":                                   FormatG2O,
		"# timestamp tx ty tz qx qy qz qw\n1.5 0 0 0 0 0 0 1": FormatTUM,
		"1 0 0 0 0 1 0 0 0 0 1 0\n":                           FormatKITTI,
		"  1.000000e+00 0 0 2 0 1 0 3 0 0 1 4 # frame 0\n":    FormatKITTI,
	} {
		got, err := SniffTrajectory(strings.NewReader(src), "f")
		if err != nil || got != want {
			t.Errorf("%q: %v, %v; want %v", src, got, err, want)
		}
	}
	for src, want := range map[string]string{
		"\n# c\n1 2 3\n": "f:3: 3 numbers: neither a TUM line (8",
		"":               "f: no poses",
		"# only\n\n":     "f: no poses",
	} {
		if _, err := SniffTrajectory(strings.NewReader(src), "f"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", src, err, want)
		}
	}
}

// TestReadKITTI: [R | t] row by row, pose k stamped k, rotations projected
// onto SO(3) from the printed digits; bad lines are errors with the line.
func TestReadKITTI(t *testing.T) {
	// A rotation by 0.3 rad about y (KITTI's vertical axis), printed to 7
	// digits as KITTI's files are.
	c, s := math.Cos(0.3), math.Sin(0.3)
	src := "1 0 0 0 0 1 0 0 0 0 1 0\n\n" +
		strings.Join([]string{fmt7(c), "0", fmt7(s), "1.5", "0", "1", "0", "-0.25", fmt7(-s), "0", fmt7(c), "10"}, " ") + "\n"
	tr, err := ReadKITTI(strings.NewReader(src), "k.txt")
	if err != nil {
		t.Fatal(err)
	}
	if tr.Format != FormatKITTI || tr.D != 3 || len(tr.Poses) != 2 || tr.Stamps[0] != 0 || tr.Stamps[1] != 1 || tr.Lines[1] != 3 {
		t.Fatalf("got %+v", tr)
	}
	p := tr.Poses[1]
	if p.T != [3]float64{1.5, -0.25, 10} {
		t.Errorf("translation %v", p.T)
	}
	want := [9]float64{c, 0, s, 0, 1, 0, -s, 0, c}
	for k := range want {
		if math.Abs(p.R[k]-want[k]) > 1e-7 {
			t.Errorf("R[%d] = %.10g, want %.10g", k, p.R[k], want[k])
		}
	}
	if e := orthogonalityError(&p.R); e > 1e-14 {
		t.Errorf("the rotation is %g from orthogonal", e)
	}
	for _, c := range []struct{ src, want string }{
		{"1 0 0 0 0 1 0 0 0 0 1 0\n1 0 0 0 0 1 0 0 0 0 1\n", "k:2: 11 fields; a KITTI pose line has 12"},
		{"1 0 0 0 0 1 0 0 0 0 x 0\n", "k:1: field 11 (x) is not a number"},
		{"1 0 0 0 0 1 0 0 0 0 1 NaN\n", "k:1: field 12 (NaN) is not a finite number"},
		{"1 0 0 0 0 2 0 0 0 0 1 0\n", "k:1: the 3x3 part is not a rotation"},
		{"1 0 0 0 0 1 0 0 0 0 -1 0\n", "k:1: the 3x3 part is not a rotation"},
		{"# nothing\n", "k: no poses"},
	} {
		if _, err := ReadKITTI(strings.NewReader(c.src), "k"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.src, err, c.want)
		}
	}
}

// fmt7 prints x to 7 significant digits, as KITTI's files do.
func fmt7(x float64) string { return strconv.FormatFloat(x, 'e', 6, 64) }

// TestReadTrajectoryFileByContent: a TUM file named .traj or .g2o, a
// KITTI file named .txt and a g2o file named .txt are read by what they
// hold; a file of another shape is an error naming its line.
func TestReadTrajectoryFileByContent(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		name, src string
		want      TrajectoryFormat
		n         int
	}{
		{"a.traj", "0.1 0 0 0 0 0 0 1\n0.2 1 0 0 0 0 0 1\n", FormatTUM, 2},
		{"b.g2o", "# t x y z qx qy qz qw\n0.1 0 0 0 0 0 0 1\n", FormatTUM, 1},
		{"c.txt", "1 0 0 0 0 1 0 0 0 0 1 0\n1 0 0 1 0 1 0 0 0 0 1 0\n1 0 0 2 0 1 0 0 0 0 1 0\n", FormatKITTI, 3},
		{"d.txt", "VERTEX_SE2 0 0 0 0\nVERTEX_SE2 1 1 0 0\n", FormatG2O, 2},
		{"e.tum", "VERTEX_SE3:QUAT 0 0 0 0 0 0 0 1\n", FormatG2O, 1},
	} {
		tr, err := ReadTrajectoryFile(write(c.name, c.src))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if tr.Format != c.want || len(tr.Poses) != c.n {
			t.Errorf("%s: format %s with %d poses, want %s with %d", c.name, tr.Format, len(tr.Poses), c.want, c.n)
		}
	}
	bad := write("bad.traj", "# x\n1 2 3 4 5\n")
	if _, err := ReadTrajectoryFile(bad); err == nil || !strings.Contains(err.Error(), bad+":2: 5 numbers") {
		t.Errorf("bad.traj: %v", err)
	}
	mixed := write("mixed.txt", "0 0 0 0 0 0 0 1\n1 0 0 0 0 1 0 0 0 0 1 0\n")
	if _, err := ReadTrajectoryFile(mixed); err == nil || !strings.Contains(err.Error(), mixed+":2: 12 fields; a TUM line has 8") {
		t.Errorf("mixed.txt: %v", err)
	}
}
