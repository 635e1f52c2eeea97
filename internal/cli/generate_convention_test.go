package cli

import (
	"bufio"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/bcmsync/bcmsync/g2o"
	"github.com/bcmsync/bcmsync/posegraph"
	"github.com/bcmsync/bcmsync/sync/covariance"
)

// TestGenerateConvention checks what generate's help and docs/formats.md say
// --rot-sigma writes: kappa = 1/(2 sigma^2), which is I33 = 1/(2 sigma^2)
// on an EDGE_SE2 (so g2o, reading I33 as 1/sigma^2, would take
// sqrt(2) sigma) and the rotation block (1/sigma^2) I on an
// EDGE_SE3:QUAT (so g2o, whose rotation error is the quaternion's vector
// part, about theta/2, would take 2 sigma); and that bcmsync reads either
// back as an angle of standard deviation sigma per axis, by the
// covariance of one edge's pose.
func TestGenerateConvention(t *testing.T) {
	const sigma = 0.1
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		tag  string
		d    int
	}{
		{[]string{"manhattan", "-n", "20", "--side", "4"}, "EDGE_SE2", 2},
		{[]string{"grid", "--nx", "3", "--ny", "2", "--nz", "2"}, "EDGE_SE3:QUAT", 3},
	} {
		out := filepath.Join(dir, c.tag+".g2o")
		args := append(append([]string{"generate"}, c.args...), "--rot-sigma", strconv.FormatFloat(sigma, 'g', -1, 64), "--trans-sigma", "0.2", "--quiet", "-o", out)
		if code, _, errs := runCmd(args...); code != 0 {
			t.Fatalf("%v: %s", args, errs)
		}
		info := firstInfo(t, out, c.tag)
		var rot []float64 // the rotation diagonal of the information matrix
		if c.d == 2 {
			rot = []float64{info[5]}
		} else {
			rot = []float64{info[15], info[18], info[20]}
		}
		for _, w := range rot {
			want := 1 / (2 * sigma * sigma) // I33 = kappa
			if c.d == 3 {
				want = 1 / (sigma * sigma) // W_R = 2 kappa I
			}
			if math.Abs(w-want) > 1e-9*want {
				t.Errorf("%s: rotation information %v, want %v", c.tag, w, want)
			}
			// g2o's reading of the same value: variance 1/I33 in 2-D, and
			// 4/w in 3-D (the error is about theta/2).
			g2oSD := math.Sqrt(1 / w)
			if c.d == 3 {
				g2oSD = math.Sqrt(4 / w)
			}
			if wantSD := map[int]float64{2: math.Sqrt2 * sigma, 3: 2 * sigma}[c.d]; math.Abs(g2oSD-wantSD) > 1e-12 {
				t.Errorf("%s: g2o would read a standard deviation of %v, not %v", c.tag, g2oSD, wantSD)
			}
		}
		// bcmsync's reading: one edge of the file, its second pose's
		// rotation covariance with the first held fixed.
		g, err := g2o.ReadFile(out, g2o.ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		e := g.Edges[0]
		one := &posegraph.Graph{D: c.d, IDs: []int{0, 1}, Edges: []posegraph.Edge{{I: 0, J: 1, R: e.R, T: e.T, Kappa: e.Kappa, Tau: e.Tau}}}
		x := []posegraph.Pose{posegraph.Identity(c.d), posegraph.Identity(c.d)}
		x[1].R, x[1].T = e.R, e.T
		cov, err := covariance.Compute(one, x, covariance.Options{})
		if err != nil {
			t.Fatal(err)
		}
		m, k := cov.Marginal(1), cov.Size(1)
		for a := c.d; a < k; a++ {
			if sd := math.Sqrt(m[a*k+a]); math.Abs(sd-sigma) > 1e-12 {
				t.Errorf("%s: bcmsync reads the angle's standard deviation as %v, want %v", c.tag, sd, sigma)
			}
		}
	}
}

// firstInfo returns the information values of the first record tag in
// the file (the last 6 or 21 fields).
func firstInfo(t *testing.T, path, tag string) []float64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || fields[0] != tag {
			continue
		}
		n := 6
		if tag == "EDGE_SE3:QUAT" {
			n = 21
		}
		var v []float64
		for _, s := range fields[len(fields)-n:] {
			x, err := strconv.ParseFloat(s, 64)
			if err != nil {
				t.Fatal(err)
			}
			v = append(v, x)
		}
		return v
	}
	t.Fatalf("%s: no %s record", path, tag)
	return nil
}
