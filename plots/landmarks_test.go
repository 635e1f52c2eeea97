package plots

import (
	"bytes"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bcmsync/bcmsync/posegraph"
)

// helixWithLandmarks adds nl landmarks on a circle outside the helix,
// each observed from one pose.
func helixWithLandmarks(d, n, nl int) (*posegraph.Graph, []posegraph.Pose, []posegraph.Pose) {
	g, truth, guess := helixGraph(d, n)
	g.Landmark = make([]bool, n, n+nl)
	for k := 0; k < nl; k++ {
		l := posegraph.Identity(d)
		l.T = [3]float64{8 * float64(k%2*2-1), 8 * float64(k/2%2*2-1), 1}
		g.IDs = append(g.IDs, 1000+k)
		g.Landmark = append(g.Landmark, true)
		g.Edges = append(g.Edges, posegraph.Edge{I: k, J: n + k, R: posegraph.Identity(d).R, Tau: 1})
		truth = append(truth, l)
		guess = append(guess, l)
	}
	return g, truth, guess
}

// Landmarks are markers, not part of the polylines, and their
// observations are not loop closures.
func TestTrajectoriesLandmarks(t *testing.T) {
	for _, d := range []int{2, 3} {
		g, truth, guess := helixWithLandmarks(d, 120, 4)
		plain, _, _ := helixGraph(d, 120)
		if got, want := len(loopClosures(g)), len(loopClosures(plain)); got != want {
			t.Fatalf("d=%d: %d loop closures, want %d (observations are not closures)", d, got, want)
		}
		path := filepath.Join(t.TempDir(), "traj.png")
		trajs := []Trajectory{{"initial guess", guess}, {"optimized", truth}}
		if err := Trajectories(path, g, trajs, TrajectoryOptions{LoopClosures: true}); err != nil {
			t.Fatal(err)
		}
		h := px(12)
		if d == 3 {
			h = px(16)
		}
		img := decodePNG(t, path, px(16), h)
		checkNotBlank(t, img, palette[0], palette[1])
	}
	// A trajectory must still hold every vertex.
	g, truth, _ := helixWithLandmarks(2, 50, 3)
	if err := Trajectories(filepath.Join(t.TempDir(), "x.png"), g, []Trajectory{{"short", truth[:50]}}, TrajectoryOptions{}); err == nil {
		t.Fatal("a trajectory without the landmarks' positions was accepted")
	}
}

// addObservedLandmarks appends nl landmarks to g, scattered around the
// true trajectory x, each observed by the poses within 2.5 of it (at most
// 6, at least the pose it was placed by): the measured position is
// R_i^T (l - t_i) with a relative error of up to noise. It returns x and
// guess extended with the landmarks, guess's placed from its first
// observer as a front end would.
func addObservedLandmarks(g *posegraph.Graph, x, guess []posegraph.Pose, nl int, noise float64) ([]posegraph.Pose, []posegraph.Pose) {
	d, n := g.D, g.N()
	g.Landmark = make([]bool, n, n+nl)
	for k := 0; k < nl; k++ {
		c := (k*n)/nl + n/(2*nl)
		b := 2.4 * float64(k)
		l := posegraph.Identity(d)
		l.T = x[c].T
		l.T[0] += 1.3 * math.Cos(b)
		l.T[1] += 1.3 * math.Sin(b)
		if d == 3 {
			l.T[2] += 0.6 * math.Sin(3*b)
		}
		j := n + k
		g.IDs = append(g.IDs, 10000+k)
		g.Landmark = append(g.Landmark, true)
		first := -1
		for i := 0; i < n; i++ {
			dist := 0.0
			for a := 0; a < d; a++ {
				dist += (l.T[a] - x[i].T[a]) * (l.T[a] - x[i].T[a])
			}
			if i != c && (math.Sqrt(dist) > 2.5 || abs(i-c) > 3) {
				continue
			}
			e := posegraph.Edge{I: i, J: j, R: posegraph.Identity(d).R, Tau: 2}
			w := 1 + noise*math.Sin(float64(5*k+3*i+1))
			for a := 0; a < d; a++ {
				for q := 0; q < d; q++ {
					e.T[a] += x[i].R[q*d+a] * (l.T[q] - x[i].T[q])
				}
				e.T[a] *= w
			}
			if first < 0 {
				first = i
			}
			g.Edges = append(g.Edges, e)
		}
		gl := posegraph.Identity(d)
		e := g.Edges[len(g.Edges)-1]
		for p := len(g.Edges) - 1; p >= 0 && g.Edges[p].J == j; p-- {
			e = g.Edges[p]
		}
		gl.T = guess[first].T
		for a := 0; a < d; a++ {
			for q := 0; q < d; q++ {
				gl.T[a] += guess[first].R[a*d+q] * e.T[q]
			}
		}
		x = append(x, l)
		guess = append(guess, gl)
	}
	return x, guess
}

func abs(i int) int {
	if i < 0 {
		return -i
	}
	return i
}

// landmarkBrowserGraph is browserGraph with nl observed landmarks.
func landmarkBrowserGraph(d, n, nl int) Viewer {
	v := browserGraph(d, n, posegraph.Poses)
	v.Title = fmt.Sprintf("helix-landmarks-%dd.g2o", d)
	truth, guess := addObservedLandmarks(v.Graph, v.Estimates[1].Poses, v.Estimates[0].Poses, nl, 0.05)
	v.Estimates[0].Poses, v.Estimates[1].Poses = guess, truth
	return v
}

// The page's data marks the landmarks: their count, their positions after
// the poses', observations neither odometry nor loop closures, and the
// observations' costs (the translation term alone, as kappa = 0).
func TestPageDataLandmarks(t *testing.T) {
	for _, d := range []int{2, 3} {
		const n, nl = 60, 7
		v := landmarkBrowserGraph(d, n, nl)
		g := v.Graph
		_, data := pageJSON(t, v)
		if data["landmarks"].(float64) != nl || data["n"].(float64) != n+nl || data["m"].(float64) != float64(g.M()) {
			t.Fatalf("d=%d: landmarks %v n %v m %v", d, data["landmarks"], data["n"], data["m"])
		}
		loop, edges := data["loop"].([]any), data["edges"].([]any)
		obs := 0
		for k, e := range g.Edges {
			if edges[2*k+1].(float64) != float64(e.J) {
				t.Fatalf("d=%d edge %d: endpoint %v, want %d", d, k, edges[2*k+1], e.J)
			}
			if e.J >= n {
				obs++
				if loop[k].(float64) != 0 {
					t.Errorf("d=%d: observation %d (%d, %d) is flagged a loop closure", d, k, e.I, e.J)
				}
			}
		}
		if obs < nl {
			t.Fatalf("d=%d: %d observations for %d landmarks", d, obs, nl)
		}
		ids := data["ids"].([]any)
		est := data["estimates"].([]any)[1].(map[string]any)
		pos, cost := est["pos"].([]any), est["cost"].([]any)
		truth := v.Estimates[1].Poses
		for i := n; i < n+nl; i++ {
			if ids[i].(float64) != float64(g.IDs[i]) {
				t.Errorf("d=%d: landmark %d has id %v, want %d", d, i, ids[i], g.IDs[i])
			}
			for a := 0; a < d; a++ {
				if got := pos[d*i+a].(float64); math.Abs(got-truth[i].T[a]) > 1e-6*math.Max(1, math.Abs(got)) {
					t.Fatalf("d=%d: landmark %d coordinate %d is %v, want %v", d, i, a, got, truth[i].T[a])
				}
			}
		}
		// An observation's cost by hand: tau ||l - t_i - R_i z||^2.
		for k, e := range g.Edges {
			if e.J < n {
				continue
			}
			want := 0.0
			for a := 0; a < d; a++ {
				r := truth[e.J].T[a] - truth[e.I].T[a]
				for q := 0; q < d; q++ {
					r -= truth[e.I].R[a*d+q] * e.T[q]
				}
				want += e.Tau * r * r
			}
			if got := cost[k].(float64); math.Abs(got-want) > 5e-4*want+1e-300 {
				t.Fatalf("d=%d: observation %d cost %v, want %v", d, k, got, want)
			}
		}
	}
}

// A rotation-only page refuses landmarks, as sync.Solve does, and a page
// refuses a landmark structure it cannot draw.
func TestPageLandmarkErrors(t *testing.T) {
	v := landmarkBrowserGraph(2, 40, 3)
	v.Problem = posegraph.Rotations
	var buf bytes.Buffer
	if err := WriteHTML(&buf, v); err == nil || !strings.Contains(err.Error(), "has no use for the graph's 3 landmarks") {
		t.Errorf("SO(2) page with landmarks: %v", err)
	}
	for name, c := range map[string]struct {
		edit func(g *posegraph.Graph)
		want string
	}{
		"short mask":      {func(g *posegraph.Graph) { g.Landmark = g.Landmark[:10] }, "landmark mask has 10 entries"},
		"pose after":      {func(g *posegraph.Graph) { g.Landmark[g.N()-1] = false }, "comes after a landmark"},
		"from a landmark": {func(g *posegraph.Graph) { e := &g.Edges[g.M()-1]; e.I, e.J = e.J, e.I }, "starts at landmark"},
	} {
		v := landmarkBrowserGraph(2, 40, 3)
		c.edit(v.Graph)
		if err := WriteHTML(&buf, v); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", name, err, c.want)
		}
	}
}
