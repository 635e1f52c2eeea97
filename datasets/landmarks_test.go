package datasets

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/bcmsync/bcmsync/g2o"
	"github.com/bcmsync/bcmsync/posegraph"
)

func TestAddLandmarks(t *testing.T) {
	base := []struct {
		name string
		make func(cfg Config) (*posegraph.Graph, []posegraph.Pose, error)
	}{
		{"manhattan", func(cfg Config) (*posegraph.Graph, []posegraph.Pose, error) { return Manhattan(300, 12, cfg) }},
		{"cube", func(cfg Config) (*posegraph.Graph, []posegraph.Pose, error) { return Cube(6, 6, 6, cfg) }},
	}
	for _, b := range base {
		for _, noiseFree := range []bool{true, false} {
			cfg := Config{Kappa: 200, Tau: 100, LoopProb: 0.5, Seed: 4, NoiseFree: noiseFree}
			g, truth, err := b.make(cfg)
			if err != nil {
				t.Fatal(err)
			}
			lc := LandmarkConfig{N: 80, Range: 2.5, Tau: 50, NoiseFree: noiseFree, Seed: 9, MaxObservers: 12}
			gl, tl, err := AddLandmarks(g, truth, lc)
			if err != nil {
				t.Fatal(err)
			}
			if err := gl.Validate(); err != nil {
				t.Fatalf("%s: %v", b.name, err)
			}
			n := g.N()
			if gl.NumPoses() != n || gl.NumLandmarks() != 80 || len(tl) != n+80 || len(gl.Initial) != n+80 {
				t.Fatalf("%s: %d poses, %d landmarks, %d truths, %d estimates", b.name, gl.NumPoses(), gl.NumLandmarks(), len(tl), len(gl.Initial))
			}
			if !reflect.DeepEqual(gl.Edges[:g.M()], g.Edges) || !reflect.DeepEqual(tl[:n], truth) {
				t.Fatalf("%s: the pose graph changed", b.name)
			}
			// Every observer is within range, no landmark has more than
			// MaxObservers, and each has one at least (Validate: connected).
			count := map[int]int{}
			sum, m := 0.0, 0
			for _, e := range gl.Edges[g.M():] {
				if !gl.IsLandmark(e.J) || gl.IsLandmark(e.I) || e.Kappa != 0 || e.Tau != 50 {
					t.Fatalf("%s: edge %+v is not an observation", b.name, e)
				}
				count[e.J]++
				dist := 0.0
				for a := 0; a < g.D; a++ {
					v := tl[e.J].T[a] - tl[e.I].T[a]
					dist += v * v
				}
				if math.Sqrt(dist) >= 2.5 {
					t.Fatalf("%s: pose %d observes landmark %d from %g", b.name, e.I, e.J, math.Sqrt(dist))
				}
				// tau ||l - t - R z||^2 at the truth.
				for a := 0; a < g.D; a++ {
					v := tl[e.J].T[a] - tl[e.I].T[a]
					for c := 0; c < g.D; c++ {
						v -= tl[e.I].R[a*g.D+c] * e.T[c]
					}
					sum += e.Tau * v * v
				}
				m++
			}
			for k := n; k < n+80; k++ {
				if count[k] < 1 || count[k] > 12 {
					t.Fatalf("%s: landmark %d has %d observers", b.name, k, count[k])
				}
			}
			if noiseFree && sum > 1e-20 {
				t.Fatalf("%s: noise-free observations cost %g at the truth", b.name, sum)
			}
			if !noiseFree {
				// Chi-squared with d m degrees of freedom: mean d m,
				// standard deviation sqrt(2 d m).
				mean, sd := float64(g.D*m), math.Sqrt(float64(2*g.D*m))
				if math.Abs(sum-mean) > 5*sd {
					t.Fatalf("%s: observation cost at the truth %g, expected %g +- %g", b.name, sum, mean, sd)
				}
			}
			// Seeded: the same call gives the same graph.
			again, _, _ := AddLandmarks(g, truth, lc)
			if !reflect.DeepEqual(again, gl) {
				t.Fatalf("%s: AddLandmarks is not deterministic", b.name)
			}
		}
	}
}

func TestAddLandmarksErrors(t *testing.T) {
	g, truth, _ := Manhattan(20, 4, Config{Kappa: 1, Tau: 1, Seed: 1})
	for _, c := range []struct {
		lc   LandmarkConfig
		want string
	}{
		{LandmarkConfig{N: 0, Tau: 1}, "N = 0"},
		{LandmarkConfig{N: 3, Tau: 0}, "Tau = 0"},
		{LandmarkConfig{N: 3, Tau: 1, Range: -1}, "Range = -1"},
		{LandmarkConfig{N: 3, Tau: 1, MaxObservers: -2}, "MaxObservers"},
	} {
		if _, _, err := AddLandmarks(g, truth, c.lc); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.lc, err, c.want)
		}
	}
	if _, _, err := AddLandmarks(g, truth[:3], LandmarkConfig{N: 1, Tau: 1}); err == nil {
		t.Error("short truth: no error")
	}
	gl, tl, _ := AddLandmarks(g, truth, LandmarkConfig{N: 1, Tau: 1})
	if _, _, err := AddLandmarks(gl, tl, LandmarkConfig{N: 1, Tau: 1}); err == nil {
		t.Error("landmarks twice: no error")
	}
}

// landmarkExamples are the example files of docs/landmarks.md.
var landmarkExamples = map[string]func() (*posegraph.Graph, error){
	"manhattan-landmarks.g2o": func() (*posegraph.Graph, error) {
		g, truth, err := Manhattan(250, 10, Config{Kappa: 500, Tau: 400, LoopProb: 0.2, Seed: 3})
		if err != nil {
			return nil, err
		}
		g, _, err = AddLandmarks(g, truth, LandmarkConfig{N: 60, Range: 2.5, Tau: 100, MaxObservers: 8, Seed: 3})
		return g, err
	},
	"cube-landmarks.g2o": func() (*posegraph.Graph, error) {
		g, truth, err := Cube(5, 5, 5, Config{Kappa: 500, Tau: 400, LoopProb: 0.2, Seed: 3})
		if err != nil {
			return nil, err
		}
		g, _, err = AddLandmarks(g, truth, LandmarkConfig{N: 40, Range: 2, Tau: 100, MaxObservers: 8, Seed: 3})
		return g, err
	},
}

// TestLandmarkExampleFiles checks that the committed example files in
// testdata are exactly what the generator and g2o.Write produce (go test
// -run TestLandmarkExampleFiles -update rewrites them; amd64 only, as for
// demo.g2o), and that they read back with their landmarks.
func TestLandmarkExampleFiles(t *testing.T) {
	for name, gen := range landmarkExamples {
		g, err := gen()
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := g2o.Write(&buf, g, nil); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("testdata", name)
		if *update {
			if err := os.MkdirAll("testdata", 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), want) {
			t.Fatalf("%s differs from the generator (go test ./datasets -run TestLandmarkExampleFiles -update rewrites it)", path)
		}
		h, err := g2o.Read(bytes.NewReader(want), name, g2o.ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Validate(); err != nil || h.NumLandmarks() != g.NumLandmarks() {
			t.Fatalf("%s: %v, %d landmarks", name, err, h.NumLandmarks())
		}
	}
}
