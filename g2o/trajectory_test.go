package g2o

import (
	"bytes"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bcmsync/bcmsync/posegraph"
)

// poseDiff is the largest entry difference of two poses of dimension d.
func poseDiff(a, b posegraph.Pose, d int) float64 {
	m := 0.0
	for k := 0; k < d*d; k++ {
		m = math.Max(m, math.Abs(a.R[k]-b.R[k]))
	}
	for k := 0; k < d; k++ {
		m = math.Max(m, math.Abs(a.T[k]-b.T[k]))
	}
	return m
}

// TestTrajectoryRoundTrip writes random poses with WriteTUM and Write and
// reads them back with ReadTUM and ReadVertices: the same stamps (vertex
// ids), poses to rounding, and a 2-D TUM file flattens back to 2-D.
func TestTrajectoryRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, d := range []int{2, 3} {
		g := handGraph(rng, d, 12)
		poses := make([]posegraph.Pose, g.N())
		for i := range poses {
			poses[i] = randPose(rng, d)
		}
		var tum, gb bytes.Buffer
		if err := WriteTUM(&tum, g, poses); err != nil {
			t.Fatal(err)
		}
		if err := Write(&gb, g, poses); err != nil {
			t.Fatal(err)
		}
		fromTUM, err := ReadTUM(&tum, "x.tum")
		if err != nil {
			t.Fatal(err)
		}
		fromG2O, err := ReadVertices(&gb, "x.g2o", ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if fromTUM.D != 3 || fromG2O.D != d {
			t.Fatalf("d=%d: dimensions %d and %d", d, fromTUM.D, fromG2O.D)
		}
		if d == 2 {
			if fromTUM, err = fromTUM.Flatten(); err != nil {
				t.Fatal(err)
			}
		}
		for _, tr := range []*Trajectory{fromTUM, fromG2O} {
			if len(tr.Poses) != g.N() {
				t.Fatalf("%s: %d poses, want %d", tr.Source, len(tr.Poses), g.N())
			}
			for i := range poses {
				if tr.Stamps[i] != float64(g.IDs[i]) {
					t.Errorf("%s: stamp %v, want %d", tr.Source, tr.Stamps[i], g.IDs[i])
				}
				if diff := poseDiff(tr.Poses[i], poses[i], d); diff > 1e-14 {
					t.Errorf("%s: pose %d differs by %g", tr.Source, i, diff)
				}
			}
		}
		if fromG2O.Lines[0] != 1 || fromTUM.Lines[3] != 4 {
			t.Errorf("lines %v %v", fromG2O.Lines, fromTUM.Lines)
		}
	}
}

// TestReadVerticesOnly: a file of VERTEX lines alone (no edges), ids out of
// order, comments.
func TestReadVerticesOnly(t *testing.T) {
	src := "# a trajectory\nVERTEX_SE2 7 1 2 0.5\n\nVERTEX_SE2 3 -1 0 0 # first\n"
	tr, err := ReadVertices(strings.NewReader(src), "v.g2o", ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if tr.D != 2 || len(tr.Poses) != 2 || tr.Stamps[0] != 3 || tr.Stamps[1] != 7 || tr.Lines[0] != 4 || tr.Lines[1] != 2 {
		t.Fatalf("got %+v", tr)
	}
	if tr.Poses[1].T != [3]float64{1, 2} || tr.Poses[1].R != RotationFromAngle(0.5) {
		t.Errorf("pose %+v", tr.Poses[1])
	}
}

// TestTUMComments reads CRLF, tabs, comments and unsorted stamps.
func TestTUMComments(t *testing.T) {
	src := "# timestamp tx ty tz qx qy qz qw\r\n1.5\t1 2 3 0 0 0 2\r\n\r\n0.25 0 0 0 1 0 0 0 # x turn\n"
	tr, err := ReadTUM(strings.NewReader(src), "c.tum")
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Poses) != 2 || tr.Stamps[0] != 1.5 || tr.Stamps[1] != 0.25 || tr.Lines[1] != 4 {
		t.Fatalf("got %+v", tr)
	}
	if tr.Poses[0].R != posegraph.Identity(3).R || tr.Poses[0].T != [3]float64{1, 2, 3} {
		t.Errorf("pose 0 %+v", tr.Poses[0])
	}
	if want := [9]float64{1, 0, 0, 0, -1, 0, 0, 0, -1}; tr.Poses[1].R != want {
		t.Errorf("pose 1 %v", tr.Poses[1].R)
	}
	if _, err := tr.Flatten(); err == nil || !strings.Contains(err.Error(), "c.tum:2: pose is not planar") {
		t.Errorf("flatten: %v", err)
	}
}

// TestTrajectoryErrors: every problem is a ParseError naming file and line.
func TestTrajectoryErrors(t *testing.T) {
	for _, c := range []struct {
		name, src, want string
		tum             bool
	}{
		{"fields", "0 0 0 0 0 0 0 1\n1 0 0 0 0 0 1\n", "t:2: 7 fields; a TUM line has 8", true},
		{"number", "0 0 0 x 0 0 0 1\n", "t:1: field 4 (x) is not a number", true},
		{"nan", "0 0 0 NaN 0 0 0 1\n", "t:1: field 4 (NaN) is not a finite number", true},
		{"range", "0 0 0 1e999 0 0 0 1\n", "t:1: field 4 (1e999) is not a finite number", true},
		{"quaternion", "\n0 0 0 0 0 0 0 0\n", "t:2: zero quaternion", true},
		{"repeat", "5 0 0 0 0 0 0 1\n# c\n5.0 1 0 0 0 0 0 1\n", "t:3: time stamp 5.0 repeats line 1", true},
		{"empty tum", "# nothing\n", "t: no poses", true},
		{"empty g2o", "EDGE_SE2 0 1 1 0 0 1 0 0 1 0 1\n", "t: no VERTEX records", false},
		{"twice", "VERTEX_SE2 1 0 0 0\nVERTEX_SE2 2 0 0 0\nVERTEX_SE2 1 0 0 0\n", "t:3: vertex 1 declared twice (first at line 1)", false},
		{"bad vertex", "VERTEX_SE2 1 0 0\n", "t:1: too few fields", false},
		{"huge id", "VERTEX_SE2 18014398509481984 0 0 0\n", "t:1: vertex id 18014398509481984 is beyond 2^53", false},
		{"long", strings.Repeat(" ", MaxLineLength+1), "t:1: line longer than", true},
	} {
		var err error
		if c.tum {
			_, err = ReadTUM(strings.NewReader(c.src), "t")
		} else {
			_, err = ReadVertices(strings.NewReader(c.src), "t", ReadOptions{})
		}
		if _, ok := err.(*ParseError); !ok || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want a ParseError with %q", c.name, err, c.want)
		}
	}
}

func TestIsTUMPath(t *testing.T) {
	for path, want := range map[string]bool{"a.tum": true, "b/c.TXT": true, "x.g2o": false, "tum": false, "y.gt.g2o": false} {
		if IsTUMPath(path) != want {
			t.Errorf("%s: %v", path, !want)
		}
	}
}

// TestReadTrajectoryLandmarks: landmark vertices are marked by ReadVertices
// and left out of the trajectory that ReadTrajectoryFile returns, so
// evaluate compares poses with poses only.
func TestReadTrajectoryLandmarks(t *testing.T) {
	src := "VERTEX_SE2 0 0 0 0\nVERTEX_XY 7 5 6\nVERTEX_SE2 2 1 0 0.5\nVERTEX_XY 1 2 3\n" +
		"EDGE_SE2 0 2 1 0 0.5 4 0 0 4 0 9\nEDGE_SE2_XY 0 1 2 3 1 0 1\nEDGE_SE2_XY 2 7 4 6 1 0 1\n"
	tr, err := ReadVertices(strings.NewReader(src), "lm.g2o", ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []bool{false, true, false, true}; !slices.Equal(tr.Landmark, want) || !slices.Equal(tr.Stamps, []float64{0, 1, 2, 7}) {
		t.Fatalf("stamps %v, landmark %v; want 0 1 2 7 and %v", tr.Stamps, tr.Landmark, want)
	}
	path := filepath.Join(t.TempDir(), "lm.g2o")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	poses, err := ReadTrajectoryFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(poses.Stamps, []float64{0, 2}) || poses.Landmark != nil || !slices.Equal(poses.Lines, []int{1, 3}) {
		t.Fatalf("poses only: stamps %v lines %v landmark %v", poses.Stamps, poses.Lines, poses.Landmark)
	}
	if poses.Poses[1].T != [3]float64{1, 0} {
		t.Fatalf("pose 2 at %v", poses.Poses[1].T)
	}
}
