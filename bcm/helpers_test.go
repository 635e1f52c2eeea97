package bcm

import (
	"bufio"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/bcmsync/bcmsync/internal/smalldense"
	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
)

// randomRotation returns a rotation drawn from the polar factor of a
// Gaussian matrix, sign-corrected.
func randomRotation(rng *rand.Rand, d int) [9]float64 {
	var m, r [9]float64
	for k := 0; k < d*d; k++ {
		m[k] = rng.NormFloat64()
	}
	smalldense.NearestRotation(r[:d*d], m[:d*d], d)
	return r
}

// randomGraph returns a connected pose graph: a chain 0-1-...-(n-1) plus
// extra random edges, with measurements of a random ground truth perturbed
// by noise, and precisions in [0.5, 2].
func randomGraph(rng *rand.Rand, d, n, extra int, noise float64) *posegraph.Graph {
	g := &posegraph.Graph{D: d, IDs: make([]int, n)}
	truth := make([]posegraph.Pose, n)
	for i := range truth {
		g.IDs[i] = i
		truth[i].R = randomRotation(rng, d)
		for a := 0; a < d; a++ {
			truth[i].T[a] = 3 * rng.NormFloat64()
		}
	}
	add := func(i, j int) {
		e := posegraph.Edge{I: i, J: j, Kappa: 0.5 + 1.5*rng.Float64(), Tau: 0.5 + 1.5*rng.Float64()}
		ri, rj := truth[i].R, truth[j].R
		var m [9]float64
		for a := 0; a < d; a++ {
			for c := 0; c < d; c++ {
				for k := 0; k < d; k++ {
					m[a*d+c] += ri[k*d+a] * rj[k*d+c]
				}
				m[a*d+c] += noise * rng.NormFloat64()
			}
			for k := 0; k < d; k++ {
				e.T[a] += ri[k*d+a] * (truth[j].T[k] - truth[i].T[k])
			}
			e.T[a] += noise * rng.NormFloat64()
		}
		smalldense.NearestRotation(e.R[:d*d], m[:d*d], d)
		g.Edges = append(g.Edges, e)
	}
	for i := 0; i+1 < n; i++ {
		add(i, i+1)
	}
	for k := 0; k < extra; k++ {
		i, j := rng.IntN(n), rng.IntN(n)
		if i == j {
			continue
		}
		add(i, j)
	}
	return g
}

// denseX returns X as an r x (n b) gonum matrix.
func denseX(x *sparse.Blocks) *mat.Dense {
	m := mat.NewDense(x.R, x.N*x.B, nil)
	for i := 0; i < x.R; i++ {
		for c := 0; c < x.N*x.B; c++ {
			m.Set(i, c, x.At(i, c))
		}
	}
	return m
}

// denseCost is the oracle F = tr(X Q X^T) with gonum.
func denseCost(q *sparse.BlockSym, x *sparse.Blocks) float64 {
	qd := mat.NewDense(q.Dim(), q.Dim(), q.Dense())
	xd := denseX(x)
	var xq, f mat.Dense
	xq.Mul(xd, qd)
	f.Mul(&xq, xd.T())
	return mat.Trace(&f)
}

// dataDir locates the shared benchmark graphs (BCMSYNC_DATA, else
// ../shared/datasets beside the repository root).
func dataDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("BCMSYNC_DATA")
	if dir == "" {
		wd, _ := os.Getwd()
		for p := wd; ; p = filepath.Dir(p) {
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				dir = filepath.Join(p, "..", "shared", "datasets")
				break
			}
			if filepath.Dir(p) == p {
				break
			}
		}
	}
	if st, err := os.Stat(dir); dir == "" || err != nil || !st.IsDir() {
		if os.Getenv("CI") != "" {
			t.Fatalf("benchmark graphs not found (set BCMSYNC_DATA); looked in %q", dir)
		}
		t.Skipf("benchmark graphs not found in %q", dir)
	}
	return dir
}

// loadG2O is a minimal reader for the tests (EDGE_SE2, VERTEX_SE2,
// EDGE_SE3:QUAT, VERTEX_SE3:QUAT), with the precisions of DESIGN.md
// section 2, so package bcm's tests do not depend on package g2o. Vertex ids
// are assumed to be 0..n-1.
func loadG2O(t testing.TB, name string) *posegraph.Graph {
	t.Helper()
	path := filepath.Join(dataDir(t), name)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	g := &posegraph.Graph{Source: path}
	sc := bufio.NewScanner(f)
	line := 0
	nums := func(fs []string) []float64 {
		v := make([]float64, len(fs))
		for k, s := range fs {
			x, err := strconv.ParseFloat(s, 64)
			if err != nil {
				t.Fatalf("%s:%d: %v", path, line, err)
			}
			v[k] = x
		}
		return v
	}
	grow := func(i int) {
		for len(g.IDs) <= i {
			g.IDs = append(g.IDs, len(g.IDs))
			g.Initial = append(g.Initial, posegraph.Identity(g.D))
			g.HasInitial = append(g.HasInitial, false)
		}
	}
	for sc.Scan() {
		line++
		fs := strings.Fields(sc.Text())
		if len(fs) == 0 {
			continue
		}
		switch fs[0] {
		case "VERTEX_SE2":
			g.D = 2
			v := nums(fs[1:])
			i := int(v[0])
			grow(i)
			c, s := math.Cos(v[3]), math.Sin(v[3])
			g.Initial[i] = posegraph.Pose{R: [9]float64{c, -s, s, c}, T: [3]float64{v[1], v[2]}}
			g.HasInitial[i] = true
		case "VERTEX_SE3:QUAT":
			g.D = 3
			v := nums(fs[1:])
			i := int(v[0])
			grow(i)
			g.Initial[i] = posegraph.Pose{R: quatRot(v[4], v[5], v[6], v[7]), T: [3]float64{v[1], v[2], v[3]}}
			g.HasInitial[i] = true
		case "EDGE_SE2":
			g.D = 2
			v := nums(fs[1:])
			i, j := int(v[0]), int(v[1])
			grow(max(i, j))
			c, s := math.Cos(v[4]), math.Sin(v[4])
			// info: I11 I12 I13 I22 I23 I33
			in := v[5:11]
			det := in[0]*in[3] - in[1]*in[1]
			trInv := (in[0] + in[3]) / det
			g.Edges = append(g.Edges, posegraph.Edge{I: i, J: j, R: [9]float64{c, -s, s, c},
				T: [3]float64{v[2], v[3]}, Kappa: in[5], Tau: 2 / trInv, Line: line})
		case "EDGE_SE3:QUAT":
			g.D = 3
			v := nums(fs[1:])
			i, j := int(v[0]), int(v[1])
			grow(max(i, j))
			// 21 upper-triangular values, order x y z qx qy qz.
			var w mat.SymDense
			w = *mat.NewSymDense(6, nil)
			k := 9
			for a := 0; a < 6; a++ {
				for b := a; b < 6; b++ {
					w.SetSym(a, b, v[k])
					k++
				}
			}
			tr := func(off int) float64 {
				var ch mat.Cholesky
				if !ch.Factorize(w.SliceSym(off, off+3).(*mat.SymDense)) {
					t.Fatalf("%s:%d: information block not positive definite", path, line)
				}
				var inv mat.SymDense
				ch.InverseTo(&inv)
				return mat.Trace(&inv)
			}
			g.Edges = append(g.Edges, posegraph.Edge{I: i, J: j, R: quatRot(v[5], v[6], v[7], v[8]),
				T: [3]float64{v[2], v[3], v[4]}, Kappa: 3 / (2 * tr(3)), Tau: 3 / tr(0), Line: line})
		case "FIX":
		default:
			t.Fatalf("%s:%d: record %q not understood by the test reader", path, line, fs[0])
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return g
}

// quatRot is the rotation of the quaternion (x, y, z, w), normalized.
func quatRot(x, y, z, w float64) [9]float64 {
	n := math.Sqrt(x*x + y*y + z*z + w*w)
	x, y, z, w = x/n, y/n, z/n, w/n
	return [9]float64{
		1 - 2*(y*y+z*z), 2 * (x*y - z*w), 2 * (x*z + y*w),
		2 * (x*y + z*w), 1 - 2*(x*x+z*z), 2 * (y*z - x*w),
		2 * (x*z - y*w), 2 * (y*z + x*w), 1 - 2*(x*x+y*y),
	}
}

func name(kind posegraph.Problem, d, r int) string {
	return fmt.Sprintf("%v/d=%d/r=%d", kind, d, r)
}
