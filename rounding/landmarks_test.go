package rounding

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
)

// addLandmarks appends nl landmarks at random positions to g (and truth),
// each observed from obs random poses (all poses if obs <= 0), with
// measurements R_i^T (l - t_i) plus Gaussian noise of standard deviation
// noise.
func addLandmarks(rng *rand.Rand, g *posegraph.Graph, truth []posegraph.Pose, nl, obs int, noise float64) []posegraph.Pose {
	d, n := g.D, len(truth)
	g.Landmark = make([]bool, n, n+nl)
	for k := 0; k < nl; k++ {
		l := posegraph.Identity(d)
		for a := 0; a < d; a++ {
			l.T[a] = 5 * rng.NormFloat64()
		}
		truth = append(truth, l)
		g.IDs = append(g.IDs, 1000+k)
		g.Landmark = append(g.Landmark, true)
		var from []int
		if obs <= 0 {
			for i := 0; i < n; i++ {
				from = append(from, i)
			}
		} else {
			for o := 0; o < obs; o++ {
				from = append(from, rng.IntN(n))
			}
		}
		for _, i := range from {
			e := posegraph.Edge{I: i, J: n + k, R: posegraph.Identity(d).R, Tau: 0.5 + 2*rng.Float64()}
			for a := 0; a < d; a++ {
				s := 0.0
				for c := 0; c < d; c++ {
					s += truth[i].R[c*d+a] * (l.T[c] - truth[i].T[c])
				}
				e.T[a] = s + noise*rng.NormFloat64()
			}
			g.Edges = append(g.Edges, e)
		}
	}
	return truth
}

// sameWithLandmarks is sameUpToGauge for graphs with landmarks: poses are
// compared whole, landmarks by position only (their R is I in both).
func sameWithLandmarks(t *testing.T, g *posegraph.Graph, a, b []posegraph.Pose, tol float64) {
	t.Helper()
	d := g.D
	np := g.NumPoses()
	sameUpToGauge(t, a[:np], b[:np], d, false, tol)
	rm := mulRot(a[0].R, transpose(b[0].R, d), d)
	for i := np; i < len(a); i++ {
		if a[i].R != posegraph.Identity(d).R {
			t.Fatalf("landmark %d has R = %v, want I", i, a[i].R)
		}
		for p := 0; p < d; p++ {
			s := a[0].T[p]
			for k := 0; k < d; k++ {
				s += rm[p*d+k] * (b[i].T[k] - b[0].T[k])
			}
			if math.Abs(s-a[i].T[p]) > tol*(1+math.Abs(s)) {
				t.Fatalf("landmark %d: position %d differs by %g", i, p, s-a[i].T[p])
			}
		}
	}
}

func TestChordalLandmarksNoiseFree(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, d := range []int{2, 3} {
		for trial := 0; trial < 4; trial++ {
			g, truth := randomGraph(rng, d, 12, 4, 0, 0)
			truth = addLandmarks(rng, g, truth, 7, 3, 0)
			if err := g.Validate(); err != nil {
				t.Fatal(err)
			}
			for name, init := range map[string]func(*posegraph.Graph) ([]posegraph.Pose, error){"chordal": Chordal, "odometry": Odometry} {
				got, err := init(g)
				if err != nil {
					t.Fatalf("d=%d %s: %v", d, name, err)
				}
				sameWithLandmarks(t, g, got, truth, 1e-8)
				if f := g.Cost(got, posegraph.Poses); f > 1e-14 {
					t.Fatalf("d=%d %s: F = %g on noise-free data", d, name, f)
				}
			}
		}
	}
}

// Poses with no pose edge at all, each seeing the same landmarks: the
// relaxed chordal problem still determines them, odometry cannot.
func TestChordalLandmarksOnly(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	for _, d := range []int{2, 3} {
		_, truth := randomGraph(rng, d, 5, 0, 0, 0)
		g := &posegraph.Graph{D: d, Source: "only.g2o"}
		for i := range truth {
			g.IDs = append(g.IDs, i)
		}
		truth = addLandmarks(rng, g, truth, 2*d+1, 0, 0)
		if err := g.Validate(); err != nil {
			t.Fatal(err)
		}
		got, err := Chordal(g)
		if err != nil {
			t.Fatal(err)
		}
		sameWithLandmarks(t, g, got, truth, 1e-8)
		_, err = Odometry(g)
		if err == nil || !strings.Contains(err.Error(), "only through landmarks") {
			t.Fatalf("d=%d: odometry: %v, want an error about landmarks", d, err)
		}
	}
}

// With noise, chordal's translations and landmark positions are the exact
// minimizers for its rotations (the gradient in t vanishes), and they
// match the dense least-squares oracle.
func TestChordalLandmarksNoisy(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 26))
	for _, d := range []int{2, 3} {
		g, truth := randomGraph(rng, d, 15, 5, 0.05, 0.1)
		addLandmarks(rng, g, truth, 9, 3, 0.1)
		got, err := Chordal(g)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range translationGradient(g, got) {
			if math.Abs(v) > 1e-9 {
				t.Fatalf("d=%d: dF/dt[%d] = %g", d, k, v)
			}
		}
		want := translationOracle(t, g, got)
		for i := range got {
			for a := 0; a < d; a++ {
				if math.Abs(got[i].T[a]-want[i][a]) > 1e-8*(1+math.Abs(want[i][a])) {
					t.Fatalf("d=%d: vertex %d: t = %v, oracle %v", d, i, got[i].T, want[i])
				}
			}
		}
	}
}

// RoundMasked ignores landmark blocks: filling them with anything, even
// reflections, changes nothing for the poses, and landmarks get R = I.
func TestRoundMaskedIgnoresLandmarks(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 28))
	for _, d := range []int{2, 3} {
		r, np, nl := d+2, 6, 9
		rots := randomRotations(rng, d, np)
		o := randomStiefel(rng, r, d)
		poseOnly := liftWith(rng, o, rots, r, d, d+1, 1e-3)
		x := sparse.NewBlocks(r, d+1, np+nl)
		copy(x.Data, poseOnly.Data)
		skip := make([]bool, np+nl)
		for i := np; i < np+nl; i++ {
			skip[i] = true
			blk := x.Block(i)
			for k := range blk {
				blk[k] = 100 * rng.NormFloat64()
			}
		}
		want := Round(poseOnly, d)
		got := RoundMasked(x, d, skip)
		for i := 0; i < np; i++ {
			for k := 0; k < d*d; k++ {
				if math.Abs(got[i].R[k]-want[i].R[k]) > 1e-12 {
					t.Fatalf("d=%d pose %d: %v, want %v", d, i, got[i].R, want[i].R)
				}
			}
		}
		for i := np; i < np+nl; i++ {
			if got[i].R != posegraph.Identity(d).R {
				t.Fatalf("landmark %d: R = %v", i, got[i].R)
			}
		}
	}
}
