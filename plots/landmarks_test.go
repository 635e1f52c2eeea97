package plots

import (
	"path/filepath"
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
