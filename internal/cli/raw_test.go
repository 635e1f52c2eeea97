package cli

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bcmsync/bcmsync/g2o"
	"github.com/bcmsync/bcmsync/posegraph"
)

// rawFile is a 3-D square with a diagonal whose edge quaternions are off
// unit norm by parts per million, as printed in the published files, and
// by 1e-5 on one edge so the two readings differ well above rounding.
const rawFile = `EDGE_SE3:QUAT 0 1 1 0 0 0.0998334 0 0 0.995004 10 0 0 0 0 0 10 0 0 0 0 10 0 0 0 40 0 0 40 0 40
EDGE_SE3:QUAT 1 2 0 1 0 0 0.0998334 0 0.995004 10 0 0 0 0 0 10 0 0 0 0 10 0 0 0 40 0 0 40 0 40
EDGE_SE3:QUAT 2 3 -1 0 0 0 0 0.0998334 0.995004 10 0 0 0 0 0 10 0 0 0 0 10 0 0 0 40 0 0 40 0 40
EDGE_SE3:QUAT 3 0 0 -1 0 0.3171845 -0.2366641 0.1427899 0.9072 10 0 0 0 0 0 10 0 0 0 0 10 0 0 0 40 0 0 40 0 40
EDGE_SE3:QUAT 0 2 1 1 0 0.0107791 0.00867285 -0.00190021 0.999902 10 0 0 0 0 0 10 0 0 0 0 10 0 0 0 40 0 0 40 0 40
`

// solveFileReport runs solve on in with extra flags, writing the optimized
// graph, and returns the report's objective, the written poses and the
// report's raw_quaternions key.
func solveFileReport(t *testing.T, in string, extra ...string) (float64, []posegraph.Pose, bool) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out.g2o")
	args := append([]string{"solve", "--json", "--gap-tol", "1e-9", "-o", out}, extra...)
	code, stdout, stderr := runCmd(append(args, in)...)
	if code != 0 {
		t.Fatalf("solve %v: exit %d: %s", extra, code, stderr)
	}
	var rep struct {
		Objective      float64 `json:"objective"`
		RawQuaternions bool    `json:"raw_quaternions"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	g, err := g2o.ReadFile(out, g2o.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return rep.Objective, g.Initial, rep.RawQuaternions
}

// --raw-quaternions reaches the reader: the reported F is SE-Sync's
// tr(X Q X^T) of the raw reading at the written poses, and differs from the
// default reading's F.
func TestSolveRawQuaternions(t *testing.T) {
	in := filepath.Join(t.TempDir(), "raw.g2o")
	if err := os.WriteFile(in, []byte(rawFile), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, raw := range []bool{false, true} {
		var extra []string
		if raw {
			extra = []string{"--raw-quaternions"}
		}
		f, poses, repRaw := solveFileReport(t, in, extra...)
		if repRaw != raw {
			t.Errorf("raw=%v: report says raw_quaternions %v", raw, repRaw)
		}
		g, err := g2o.ReadFile(in, g2o.ReadOptions{RawQuaternions: raw})
		if err != nil {
			t.Fatal(err)
		}
		if g.RawRotations != raw {
			t.Fatalf("raw=%v: graph marked %v", raw, g.RawRotations)
		}
		if want := g.Cost(poses, posegraph.Poses); math.Abs(f-want) > 1e-9*want {
			t.Errorf("raw=%v: report F %.15g, F of this reading at the written poses %.15g", raw, f, want)
		}
		// The other reading's F at the same poses is off by its constant,
		// far above the 1e-9 agreement just checked.
		h, _ := g2o.ReadFile(in, g2o.ReadOptions{RawQuaternions: !raw})
		if other := h.Cost(poses, posegraph.Poses); math.Abs(f-other) < 1e-7*f {
			t.Errorf("raw=%v: F %.15g, other reading %.15g: the flag made no difference", raw, f, other)
		}
	}
	code, stdout, stderr := runCmd("info", "--raw-quaternions", in)
	if code != 0 || !strings.Contains(stdout, "SE-Sync's raw quaternions") {
		t.Errorf("info --raw-quaternions: exit %d, %s%s", code, stdout, stderr)
	}
}
