package g2o

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/bcmsync/bcmsync/posegraph"
)

// TestReadLandmarks2D reads a small 2-D file with landmarks declared
// before, between and after the poses and checks the renumbering (poses
// first, each kind by ascending id), the measurements and precisions.
func TestReadLandmarks2D(t *testing.T) {
	src := "VERTEX_XY 1 5 6\n" +
		"VERTEX_SE2 0 0 0 0\nVERTEX_SE2 2 1 0 0.5\n" +
		"EDGE_SE2 0 2 1 0 0.5 4 0 0 4 0 9\n" +
		"EDGE_SE2_XY 0 1 5 6 2 0 2\n" +
		"EDGE_SE2_XY 2 7 -1 0.5 1 0.5 2\n" +
		"EDGE_SE2_XY 2 1 4 6 3 0 3\n" +
		"VERTEX_XY 7 0.5 0.25\n"
	g := mustRead(t, src, ReadOptions{})
	if err := g.Validate(); err != nil {
		t.Fatal(err)
	}
	if want := []int{0, 2, 1, 7}; !equalInts(g.IDs, want) {
		t.Fatalf("IDs = %v, want %v", g.IDs, want)
	}
	if want := []bool{false, false, true, true}; len(g.Landmark) != 4 || g.Landmark[0] != want[0] || g.Landmark[1] != want[1] || !g.Landmark[2] || !g.Landmark[3] {
		t.Fatalf("Landmark = %v, want %v", g.Landmark, want)
	}
	if g.NumPoses() != 2 || g.NumLandmarks() != 2 {
		t.Fatalf("NumPoses %d NumLandmarks %d", g.NumPoses(), g.NumLandmarks())
	}
	if !g.HasInitial[2] || g.Initial[2].T != [3]float64{5, 6} || !g.HasInitial[3] || g.Initial[3].T != [3]float64{0.5, 0.25} {
		t.Fatalf("landmark estimates %v %v / %v %v", g.HasInitial[2], g.Initial[2], g.HasInitial[3], g.Initial[3])
	}
	obs := g.Edges[1]
	if obs.I != 0 || obs.J != 2 || obs.Kappa != 0 || obs.Tau != 2 || obs.T != [3]float64{5, 6} || obs.Line != 5 {
		t.Fatalf("observation %+v", obs)
	}
	// Anisotropic: tau = 2 / tr(inv([[1, .5], [.5, 2]])) = 2 / (3 / 1.75).
	if e := g.Edges[2]; e.I != 1 || e.J != 3 || math.Abs(e.Tau-2*1.75/3) > 1e-15 {
		t.Fatalf("observation %+v, want tau %g", e, 2*1.75/3)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if a[k] != b[k] {
			return false
		}
	}
	return true
}

// TestObservationPrecision checks tau = d / tr(inv(I)) against gonum's
// inverse on random positive-definite matrices, and the rejections.
func TestObservationPrecision(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, d := range []int{2, 3} {
		for trial := 0; trial < 20; trial++ {
			a := mat.NewDense(d, d, nil)
			for k := 0; k < d*d; k++ {
				a.Set(k/d, k%d, rng.NormFloat64())
			}
			var info mat.SymDense
			info.SymOuterK(1, a)
			for k := 0; k < d; k++ {
				info.SetSym(k, k, info.At(k, k)+0.1)
			}
			var upper []float64
			for r := 0; r < d; r++ {
				for c := r; c < d; c++ {
					upper = append(upper, info.At(r, c))
				}
			}
			var inv mat.Dense
			if err := inv.Inverse(&info); err != nil {
				t.Fatal(err)
			}
			want := float64(d) / mat.Trace(&inv)
			got, err := ObservationPrecision(upper)
			if err != nil || math.Abs(got-want) > 1e-12*want {
				t.Fatalf("d=%d: tau = %g (%v), want %g", d, got, err, want)
			}
		}
	}
	for _, bad := range [][]float64{{1, 0}, {1, 2, 1}, {0, 0, 0}, {1, 0, 0, 1, 0, -1}} {
		if _, err := ObservationPrecision(bad); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

// landmarkHandGraph adds nl landmarks observed from random poses to a
// hand-made graph, with positions, measurements made in memory (no raw
// values) and isotropic precisions.
func landmarkHandGraph(rng *rand.Rand, d, n, nl int) *posegraph.Graph {
	g := handGraph(rng, d, n)
	last := g.IDs[n-1]
	g.Landmark = make([]bool, n, n+nl)
	for k := 0; k < nl; k++ {
		g.IDs = append(g.IDs, last+1+2*k)
		g.Landmark = append(g.Landmark, true)
		p := posegraph.Identity(d)
		for a := 0; a < d; a++ {
			p.T[a] = 10 * rng.NormFloat64()
		}
		g.Initial = append(g.Initial, p)
		g.HasInitial = append(g.HasInitial, true)
		for o := 1 + rng.IntN(3); o > 0; o-- {
			e := posegraph.Edge{I: rng.IntN(n), J: n + k, R: posegraph.Identity(d).R, Tau: math.Exp(2 * rng.NormFloat64())}
			for a := 0; a < d; a++ {
				e.T[a] = rng.NormFloat64()
			}
			g.Edges = append(g.Edges, e)
		}
	}
	return g
}

// TestWriteLandmarksRoundTrip writes graphs with landmarks and reads them
// back: same ids, landmark marks, positions, measurements and precisions;
// and writing what was read reproduces the file byte for byte.
func TestWriteLandmarksRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, d := range []int{2, 3} {
		g := landmarkHandGraph(rng, d, 8, 5)
		if err := g.Validate(); err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := Write(&buf, g, nil); err != nil {
			t.Fatal(err)
		}
		text := buf.String()
		for _, tag := range map[int][]string{2: {"VERTEX_XY ", "EDGE_SE2_XY "}, 3: {"PARAMS_SE3OFFSET 0 ", "VERTEX_TRACKXYZ ", "EDGE_SE3_TRACKXYZ "}}[d] {
			if !strings.Contains(text, tag) {
				t.Fatalf("d=%d: output has no %q:\n%s", d, tag, text)
			}
		}
		h, err := Read(strings.NewReader(text), "rt.g2o", ReadOptions{})
		if err != nil {
			t.Fatalf("d=%d: %v\n%s", d, err, text)
		}
		if !equalInts(h.IDs, g.IDs) || h.NumLandmarks() != 5 || len(h.Edges) != len(g.Edges) {
			t.Fatalf("d=%d: read back ids %v landmarks %d edges %d", d, h.IDs, h.NumLandmarks(), len(h.Edges))
		}
		for i := range g.IDs {
			if h.Landmark[i] != g.Landmark[i] || (g.Landmark[i] && h.Initial[i].T != g.Initial[i].T) {
				t.Fatalf("d=%d: vertex %d: %v %v, want %v %v", d, i, h.Landmark[i], h.Initial[i], g.Landmark[i], g.Initial[i])
			}
		}
		for k, e := range g.Edges {
			f := h.Edges[k]
			if g.IsLandmark(e.J) && (f.I != e.I || f.J != e.J || f.T != e.T || f.Tau != e.Tau || f.Kappa != 0) {
				t.Fatalf("d=%d: observation %d: %+v, want %+v", d, k, f, e)
			}
		}
		var again bytes.Buffer
		if err := Write(&again, h, nil); err != nil {
			t.Fatal(err)
		}
		// Landmark lines come back byte for byte (pose vertices may move
		// in the last bit through the quaternion, as without landmarks).
		if a, b := landmarkLines(again.String()), landmarkLines(text); a != b {
			t.Fatalf("d=%d: second write differs:\n%s\n---\n%s", d, a, b)
		}
	}
}

func landmarkLines(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		for _, p := range []string{"VERTEX_XY", "VERTEX_TRACKXYZ", "EDGE_SE2_XY", "EDGE_SE3_TRACKXYZ", "PARAMS_SE3OFFSET"} {
			if strings.HasPrefix(l, p+" ") {
				out = append(out, l)
			}
		}
	}
	return strings.Join(out, "\n")
}
