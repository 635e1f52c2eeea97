package datasets

import (
	"math"
	"testing"

	"github.com/bcmsync/bcmsync/internal/smalldense"
)

// TestCorridor: the way out and the way back are chains of unit steps
// (the U-turn half a unit), the way back runs beside the way out facing
// the other way, and the closures join pose out+k to out-1-k every gap
// poses, each an exact relative pose when noise-free.
func TestCorridor(t *testing.T) {
	const n, segment, gap = 300, 40, 10
	for _, p := range []float64{0, 0.5, 1} {
		g, truth, err := Corridor(n, segment, gap, Config{Kappa: 100, Tau: 1000, LoopProb: p, NoiseFree: true, Seed: 2})
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Validate(); err != nil {
			t.Fatal(err)
		}
		if g.D != 2 || g.N() != n {
			t.Fatalf("d=%d n=%d", g.D, g.N())
		}
		checkChain(t, g, truth, 1.6) // the way back cuts corners diagonally
		out := (n + 1) / 2
		closures := 0
		for _, e := range g.Edges {
			if e.J == e.I+1 {
				continue
			}
			closures++
			k := e.J - out
			if k <= 0 || k%gap != 0 || e.I != out-1-k {
				t.Fatalf("closure (%d, %d) is not a candidate", e.I, e.J)
			}
			if s := math.Sqrt(dist2(truth[e.I].T, truth[e.J].T)); math.Abs(s-0.5) > 1e-12 {
				t.Errorf("closure (%d, %d) spans %g, not the corridor's half width", e.I, e.J, s)
			}
			// Facing the other way.
			rel := smalldense.MulTN(&truth[e.I].R, &truth[e.J].R, 2)
			if math.Abs(rel[0]+1) > 1e-12 {
				t.Errorf("closure (%d, %d): relative rotation %v is not a half turn", e.I, e.J, rel[:4])
			}
		}
		want := (n - out - 1) / gap
		switch {
		case p == 1 && closures != want, p == 0 && closures != 0:
			t.Errorf("p=%g: %d closures, want %d", p, closures, want)
		}
		if g.M() != n-1+closures {
			t.Errorf("m = %d for %d closures", g.M(), closures)
		}
		// Noise-free: every edge is the exact relative pose, so the truth
		// has F = 0.
		if f := g.Cost(truth, 0); f > 1e-16*float64(g.M()) {
			t.Errorf("p=%g: F at the truth = %g", p, f)
		}
	}
	if _, _, err := Corridor(3, 10, 10, Config{Kappa: 1, Tau: 1, LoopProb: 1}); err == nil {
		t.Error("n = 3 accepted")
	}
}
