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
// within max(GapTol max(FUnit, |F|), GapAbs). kitti_00 (F = 125.69) certifies
// at 1e-5 and at 1e-7; at 1e-10 the shift's rounding floor alone costs
// more than the allowance, and the status says the bound is all that was
// proven, and why. (Before issue 18, a hundredfold floor allowance of 0.13
// certified it at any tolerance.)
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
		if res.GapAllowed != allowed || res.GapAllowedBy != "gap_tol*|F|" {
			t.Errorf("gap tol %g: GapAllowed %g by %q, want GapTol |F| = %g", c.gapTol, res.GapAllowed, res.GapAllowedBy, allowed)
		}
		t.Logf("gap tol %g: %s, bound %.3g (relative %.2g), shift floor %.3g", c.gapTol, res.Status, res.SuboptimalityBound, res.SuboptimalityBound/res.Objective, res.ShiftFloor)
		if !res.HasBound || res.SuboptimalityBound != res.Objective-res.DualBound {
			t.Fatalf("gap tol %g: no bound, or bound %g is not F - dual", c.gapTol, res.SuboptimalityBound)
		}
		if res.Certified != (res.SuboptimalityBound <= allowed) || res.Certified != c.certified {
			t.Errorf("gap tol %g: certified %v (%s) with bound %g (relative %.2g), allowed %g; want certified %v",
				c.gapTol, res.Certified, res.Status, res.SuboptimalityBound, res.SuboptimalityBound/res.Objective, allowed, c.certified)
		}
		// Not certified: the status says whether the rounding floor or the
		// convergence stood in the way, and says it truly.
		if !c.certified && res.Status != Bounded && res.Status != BelowPrecision ||
			res.Status == BelowPrecision && !(res.ShiftFloor > allowed) || res.Status == Bounded && res.ShiftFloor > allowed {
			t.Errorf("gap tol %g: status %q with shift floor %g, allowed %g", c.gapTol, res.Status, res.ShiftFloor, allowed)
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
// trust-region step. The bound (F itself, since F* >= 0) is within the
// allowance with or without GapAbs: the default allowance is GapTol times
// max(FUnit, |F|), not a relative 1e-6 of F ~ 1e-22.
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

// Exact and near-exact graphs certify at default settings (issue 24): a
// tree with noisy measurements (F* = 0: every measurement can be met), a
// noise-free graph with closures, a 2-pose chain with a generic
// measurement, and graphs whose optimum is small (F* < 1), where the
// allowance may be GapTol times the unit of F, GapTol max(FUnit, |F|).
func TestExactGraphsCertifyByDefault(t *testing.T) {
	tree, _, err := datasets.Mixed(datasets.MixedConfig{D: 3, N: 40, MinWeight: 10, MaxWeight: 1e6, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	exact, _, err := datasets.Mixed(datasets.MixedConfig{D: 2, N: 50, Closures: 60, MinWeight: 10, MaxWeight: 1e6, NoiseFree: true, Seed: 6})
	if err != nil {
		t.Fatal(err)
	}
	pair := &posegraph.Graph{D: 2, IDs: []int{0, 1}, Edges: []posegraph.Edge{{I: 0, J: 1, Kappa: 3, Tau: 7,
		R: [9]float64{math.Cos(0.7), -math.Sin(0.7), math.Sin(0.7), math.Cos(0.7)}, T: [3]float64{1.3, -0.4}}}}
	cases := []struct {
		name string
		g    *posegraph.Graph
	}{{"tree", tree}, {"noise-free", exact}, {"two poses", pair},
		// One pose and no edge: F = 0 is the optimum, though the pose's
		// zero rows of Q look like a landmark's (rotationFreeBlocks).
		{"one pose 2-D", &posegraph.Graph{D: 2, IDs: []int{0}}}, {"one pose 3-D", &posegraph.Graph{D: 3, IDs: []int{7}}}}
	for _, seed := range []uint64{35, 124} { // F* = 0.13 and 0.96 (weights 10..1e6)
		g, _, err := datasets.Mixed(datasets.RandomConsistent(seed))
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases, struct {
			name string
			g    *posegraph.Graph
		}{"small F", g})
	}
	for _, c := range cases {
		for _, prob := range []posegraph.Problem{posegraph.Poses, posegraph.Rotations} {
			res, err := Solve(context.Background(), c.g, Options{Problem: prob})
			if err != nil {
				t.Fatal(err)
			}
			by := "gap_tol*unit"
			if res.Objective >= res.FUnit {
				by = "gap_tol*|F|"
			}
			if !res.Certified || res.GapAllowedBy != by || !(res.FUnit > 0) || res.GapAllowed != 1e-6*math.Max(res.FUnit, res.Objective) {
				t.Errorf("%s %v: %s, F %g, bound %g, allowed %g by %q", c.name, prob, res.Status, res.Objective, res.SuboptimalityBound, res.GapAllowed, res.GapAllowedBy)
			}
			if c.name != "small F" && res.Objective > 1e-9 {
				t.Errorf("%s %v: F %g, want 0 up to rounding", c.name, prob, res.Objective)
			}
		}
	}
}

// A shift floor above the allowance does not end the level before its
// proof refinements (review D3): the bound is F - tr(Lambda) plus the
// shift's cost, and F - tr(Lambda) can be negative, so only the refined
// point's proof decides BelowPrecision. At GapTol 1e-16 the floor is far
// above the allowance; the level still refines.
func TestBelowPrecisionAfterRefinement(t *testing.T) {
	g, _ := noisyGraph(2, 30, 10, 0.05, 0.05, 3)
	res, err := Solve(context.Background(), g, Options{GapTol: 1e-16})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != BelowPrecision || !(res.ShiftFloor > res.GapAllowed) {
		t.Fatalf("%s, shift floor %g, allowed %g: want %q", res.Status, res.ShiftFloor, res.GapAllowed, BelowPrecision)
	}
	lv := res.Levels[len(res.Levels)-1]
	if lv.ProofRefinements == 0 && lv.RTRStop != "stalled" {
		t.Errorf("level %+v: no proof refinement before BelowPrecision", lv)
	}
}
