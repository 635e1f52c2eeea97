package datasets

import (
	"math"
	"testing"

	"github.com/bcmsync/bcmsync/posegraph"
)

// AddPriors puts noise-free priors exactly at the true positions (so F at
// the truth, the world vertex at the identity, is 0 on a noise-free
// graph), on distinct poses, and keeps the landmarks after the world
// vertex.
func TestAddPriors(t *testing.T) {
	g, truth, err := Manhattan(60, 6, Config{Kappa: 100, Tau: 100, LoopProb: 0.3, NoiseFree: true, Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	g, truth, err = AddLandmarks(g, truth, LandmarkConfig{N: 5, Tau: 100, NoiseFree: true, Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	h, tr, err := AddPriors(g, truth, PriorConfig{N: 7, Tau: 4, NoiseFree: true, Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Validate(); err != nil {
		t.Fatal(err)
	}
	w := h.World()
	if w != 60 || len(tr) != h.N() || len(h.Priors()) != 7 || !h.IsLandmark(61) || tr[w] != posegraph.Identity(2) {
		t.Fatalf("world %d, %d truth poses for %d vertices, %d priors", w, len(tr), h.N(), len(h.Priors()))
	}
	seen := map[int]bool{}
	for _, p := range h.Priors() {
		if seen[p.Pose] {
			t.Fatalf("two priors on pose %d", p.Pose)
		}
		seen[p.Pose] = true
	}
	if f := h.Cost(tr, posegraph.Poses); f > 1e-18 {
		t.Fatalf("F at the truth = %g, want 0 for noise-free data", f)
	}
	// With noise, F at the truth is about its expected chi-squared value.
	h, tr, err = AddPriors(g, truth, PriorConfig{N: 60, Tau: 4, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	if f := h.Cost(tr, posegraph.Poses); math.Abs(f-120) > 6*math.Sqrt(240) {
		t.Fatalf("F of 60 noisy 2-D priors at the truth = %g, want about 120", f)
	}
	for _, bad := range []PriorConfig{{N: 0, Tau: 1}, {N: 61, Tau: 1}, {N: 3, Tau: 0}} {
		if _, _, err := AddPriors(g, truth, bad); err == nil {
			t.Fatalf("%+v accepted", bad)
		}
	}
}
