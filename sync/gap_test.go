package sync

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/g2o"
	"github.com/bcmsync/bcmsync/posegraph"
)

// Certified means exactly what Options.GapTol says: the proven bound is
// within max(GapTol |F|, GapAbs). kitti_00 (F = 125.69) proves 3e-8
// relative through the anchor shift, so it certifies at 1e-5 and at 1e-7;
// at 1e-10 the shift's rounding floor alone costs more than the allowance,
// and the status says the bound is all that was proven. (Before, a
// hundredfold floor allowance of 0.13 certified it at any tolerance.)
func TestKittiGapTol(t *testing.T) {
	dir := datasets.SuiteOrSkip(t)
	g, err := g2o.ReadFile(filepath.Join(dir, "kitti_00.g2o"), g2o.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		gapTol    float64
		certified bool
	}{{1e-5, true}, {1e-7, true}, {1e-10, false}} {
		res, err := Solve(context.Background(), g, Options{GapTol: c.gapTol})
		if err != nil {
			t.Fatal(err)
		}
		allowed := c.gapTol * math.Abs(res.Objective)
		if res.GapAllowed != allowed {
			t.Errorf("gap tol %g: GapAllowed %g, want GapTol |F| = %g", c.gapTol, res.GapAllowed, allowed)
		}
		if !res.HasBound || res.SuboptimalityBound != res.Objective-res.DualBound {
			t.Fatalf("gap tol %g: no bound, or bound %g is not F - dual", c.gapTol, res.SuboptimalityBound)
		}
		if res.Certified != (res.SuboptimalityBound <= allowed) || res.Certified != c.certified {
			t.Errorf("gap tol %g: certified %v (%s) with bound %g (relative %.2g), allowed %g; want certified %v",
				c.gapTol, res.Certified, res.Status, res.SuboptimalityBound, res.SuboptimalityBound/res.Objective, allowed, c.certified)
		}
		if !c.certified && res.Status != Bounded {
			t.Errorf("gap tol %g: status %q, want %q", c.gapTol, res.Status, Bounded)
		}
		// SE-Sync's optimum lies above every bound we prove.
		if res.DualBound > 125.693514543 {
			t.Errorf("gap tol %g: dual bound %.12g above the reference optimum", c.gapTol, res.DualBound)
		}
	}
}

// A graph whose measurements agree exactly (F* = 0: an odometry chain with
// a few exactly consistent closures, or a tree) is solved by its chordal
// estimate: Solve certifies that point as it is, with no BCM sweep and no
// trust-region step. With GapAbs the bound (F itself, since F* >= 0) is
// within the allowance; without it, a relative tolerance of ~1e-22 cannot
// be met and the status says so, still without climbing (unless F is
// exactly 0, as the rotations of this axis-aligned walk are).
func TestZeroResidualChainCertifiedWithoutClimbing(t *testing.T) {
	for _, loop := range []float64{0, 0.004} {
		g, _, err := datasets.Manhattan(3000, 30, datasets.Config{Kappa: 100, Tau: 10, LoopProb: loop, NoiseFree: true, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		if loop > 0 && g.M() <= g.N() {
			t.Fatalf("loop probability %g: %d edges on %d poses, want closures", loop, g.M(), g.N())
		}
		for _, prob := range []posegraph.Problem{posegraph.Poses, posegraph.Rotations} {
			for _, gapAbs := range []float64{1e-6, 0} {
				res, err := Solve(context.Background(), g, Options{Problem: prob, GapAbs: gapAbs})
				if err != nil {
					t.Fatal(err)
				}
				want := Certified
				if gapAbs == 0 && res.Objective > 0 {
					want = Bounded // F exactly 0 (axis-aligned rotations) is proven optimal
				}
				if res.Status != want || res.Objective > 1e-15 || !res.HasBound || res.SuboptimalityBound > 1e-15 {
					t.Errorf("closures %g %v GapAbs %g: %q, F %g, bound %g (has %v); want %q",
						loop, prob, gapAbs, res.Status, res.Objective, res.SuboptimalityBound, res.HasBound, want)
				}
				if len(res.Levels) != 1 || res.Levels[0].BCMSweeps != 0 || res.Levels[0].RTRIterations != 0 || !res.Levels[0].Certified || len(res.History) != 0 {
					t.Errorf("closures %g %v GapAbs %g: climbed: levels %+v, %d history records", loop, prob, gapAbs, res.Levels, len(res.History))
				}
			}
		}
	}
}

// A tolerance that is negative, NaN or infinite is an error, not a
// certificate that can never (or always) pass.
func TestGapTolerancesChecked(t *testing.T) {
	g, _ := noisyGraph(2, 10, 3, 0.05, 0.05, 1)
	for _, o := range []Options{{GapTol: -1}, {GapTol: math.NaN()}, {GapAbs: -1e-9}, {GapAbs: math.Inf(1)}} {
		if _, err := Solve(context.Background(), g, o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}
