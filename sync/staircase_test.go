package sync

import (
	"context"
	"testing"

	"github.com/bcmsync/bcmsync/posegraph"
)

// With heavy rotation noise and a random start at rank d, the first level
// ends at a critical point that is not a global minimum: the certificate
// fails, the staircase escapes along the negative eigenvector to rank d+1
// and beyond, and certifies there. The instances were found by searching
// seeds; they are fixed so the test is deterministic.
func TestStaircaseEscapesSaddle(t *testing.T) {
	for _, c := range []struct {
		d    int
		seed uint64
	}{{2, 4}, {3, 1}} {
		g, _ := noisyGraph(c.d, 12, 14, 1.0, 0.3, c.seed)
		res, err := Solve(context.Background(), g, Options{Problem: posegraph.Rotations, Init: InitRandom, Seed: c.seed, MaxRank: 6})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Levels) < 2 {
			t.Fatalf("d=%d: the staircase did not climb (levels %+v)", c.d, res.Levels)
		}
		first := res.Levels[0]
		if first.Certified || first.MinEigenvalue >= -res.Eta || first.EscapeDecrease <= 0 {
			t.Errorf("d=%d: first level should fail the certificate and escape: %+v", c.d, first)
		}
		for k := 1; k < len(res.Levels); k++ {
			prev, cur := res.Levels[k-1], res.Levels[k]
			if cur.Rank != prev.Rank+1 {
				t.Errorf("d=%d: rank went %d -> %d", c.d, prev.Rank, cur.Rank)
			}
			// The escape decreases F and the next level does not undo it.
			if cur.F > prev.F-prev.EscapeDecrease*(1-1e-9) {
				t.Errorf("d=%d: level %d ends at F=%g, above level %d's %g minus its escape %g", c.d, k, cur.F, k-1, prev.F, prev.EscapeDecrease)
			}
		}
		last := res.Levels[len(res.Levels)-1]
		if !last.Certified || !res.Certified || res.Rank <= c.d {
			t.Fatalf("d=%d: want a certificate above rank d, got status %q at rank %d", c.d, res.Status, res.Rank)
		}
		if res.MinEigenvalue < -res.Eta || res.SuboptimalityBound < 0 || res.SuboptimalityBound > res.GapAllowed {
			t.Errorf("d=%d: final min eigenvalue %g (eta %g), suboptimality bound %g (allowed %g)", c.d, res.MinEigenvalue, res.Eta, res.SuboptimalityBound, res.GapAllowed)
		}
		// The certified optimum is no worse than any other start finds.
		other, err := Solve(context.Background(), g, Options{Problem: posegraph.Rotations, Seed: 99, MaxRank: 6})
		if err != nil {
			t.Fatal(err)
		}
		if other.Objective < res.Objective*(1-1e-9) {
			t.Errorf("d=%d: a chordal start found F=%g below the certified %g", c.d, other.Objective, res.Objective)
		}
	}
}

// When the relaxation's solution has rank > d, rounding is not tight: the
// status says so, and the bound F(rounded) - tr(Lambda) is positive and
// reported.
func TestRoundingNotTightIsReported(t *testing.T) {
	g, _ := noisyGraph(3, 12, 14, 1.0, 0.3, 2)
	res, err := Solve(context.Background(), g, Options{Problem: posegraph.Rotations, Init: InitRandom, Seed: 2, MaxRank: 6})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != CertifiedRelaxation || res.Certified {
		t.Fatalf("status %q, want %q", res.Status, CertifiedRelaxation)
	}
	if !(res.SuboptimalityBound > 0) || res.Objective < res.DualBound || res.RelaxationObjective > res.Objective {
		t.Errorf("bounds inconsistent: F(rounded)=%g relaxation=%g dual=%g gap=%g", res.Objective, res.RelaxationObjective, res.DualBound, res.SuboptimalityBound)
	}
}

// The trust-region records account for every step: per level their tCG
// iterations add up to the level's, accepted steps are those that moved F,
// and each step that made a preconditioner says which and at what cost.
// The saddle instance covers rank d and the split form above it.
func TestStepRecordsAddUp(t *testing.T) {
	for _, c := range []struct {
		d    int
		seed uint64
	}{{2, 4}, {3, 1}} {
		g, _ := noisyGraph(c.d, 12, 14, 1.0, 0.3, c.seed)
		res, err := Solve(context.Background(), g, Options{Problem: posegraph.Rotations, Init: InitRandom, Seed: c.seed, MaxRank: 6})
		if err != nil {
			t.Fatal(err)
		}
		for _, lv := range res.Levels {
			inner, steps, factored := 0, 0, 0
			var prev *Record
			for k := range res.History {
				h := &res.History[k]
				if h.Rank != lv.Rank {
					continue
				}
				if h.Phase == "rtr" {
					steps++
					inner += h.Inner
					if h.Inner < 1 {
						t.Errorf("d=%d rank %d iter %d: a step with %d inner iterations", c.d, lv.Rank, h.Iter, h.Inner)
					}
					switch h.Precond {
					case "hessian":
						if h.Factorizations > 0 && (h.Shift < 0 || h.Shift > shiftLadder[len(shiftLadder)-1] || h.Raised < 0) {
							t.Errorf("d=%d rank %d iter %d: shift %g, raised %d", c.d, lv.Rank, h.Iter, h.Shift, h.Raised)
						}
					case "q", "none":
					default:
						t.Errorf("d=%d rank %d iter %d: preconditioner %q", c.d, lv.Rank, h.Iter, h.Precond)
					}
					if h.Factorizations > 0 {
						factored++
					}
					if h.FactorSeconds < 0 || (h.Factorizations == 0) != (h.FactorSeconds == 0) {
						t.Errorf("d=%d rank %d iter %d: %d factorizations in %g s", c.d, lv.Rank, h.Iter, h.Factorizations, h.FactorSeconds)
					}
					if prev != nil && h.Accepted == (h.F == prev.F) {
						t.Errorf("d=%d rank %d iter %d: accepted %v but F %g -> %g", c.d, lv.Rank, h.Iter, h.Accepted, prev.F, h.F)
					}
				}
				prev = h
			}
			if inner != lv.RTRInner || steps != lv.RTRIterations {
				t.Errorf("d=%d rank %d: records count %d steps and %d inner iterations, the level %d and %d", c.d, lv.Rank, steps, inner, lv.RTRIterations, lv.RTRInner)
			}
			if lv.RTRIterations > 0 && factored == 0 {
				t.Errorf("d=%d rank %d: %d steps and no factorization", c.d, lv.Rank, lv.RTRIterations)
			}
		}
	}
}
