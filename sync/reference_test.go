package sync_test

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/g2o"
	bsync "github.com/bcmsync/bcmsync/sync"
)

// knownDeviation lists the graphs whose REFERENCE.tsv optimum differs from
// the objective of DESIGN.md section 1 by more than 1e-7, with the relative
// deviation bcmsync finds. The evidence that the reference, not the solver,
// is off (TestReference3DInconsistent keeps it tested):
//
//   - tinyGrid3D, cubicle: bcmsync's estimate has a LOWER objective than
//     f_star (checked by an independent evaluation of F at the written
//     estimate), so f_star is not the minimum of that objective;
//   - parking-garage, torus3D: f_star lies below bcmsync's proven lower bound
//     on the optimum (with GapTol 1e-8), so it is not a value of it either.
//
// sphere2500 and smallGrid3D are within 1e-7 but their f_star is excluded by
// the proven bound too: every 3-D reference value disagrees with the
// objective as DESIGN.md defines it, every 2-D one agrees to 1e-8.
var knownDeviation = map[string]float64{
	"tinyGrid3D.g2o":     2e-6,
	"cubicle.g2o":        2e-5,
	"parking-garage.g2o": 5e-5,
	"torus3D.g2o":        3e-7,
}

// large graphs are skipped with -short.
var large = map[string]bool{
	"parking-garage.g2o": true, "sphere2500.g2o": true, "torus3D.g2o": true,
	"cubicle.g2o": true, "city10000.g2o": true,
}

func suite(t *testing.T) (string, []datasets.Reference) {
	dir := datasets.SuiteOrSkip(t)
	refs, err := datasets.ReadReference(filepath.Join(dir, "REFERENCE.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	return dir, refs
}

func TestReferenceOptima(t *testing.T) {
	dir, refs := suite(t)
	for _, ref := range refs {
		t.Run(ref.File, func(t *testing.T) {
			if testing.Short() && large[ref.File] {
				t.Skip("large graph in -short mode")
			}
			g, err := g2o.ReadFile(filepath.Join(dir, ref.File), g2o.ReadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if g.D != ref.D || g.N() != ref.N || g.M() != ref.M {
				t.Fatalf("read d=%d n=%d m=%d, reference says %d %d %d", g.D, g.N(), g.M(), ref.D, ref.N, ref.M)
			}
			res, err := bsync.Solve(context.Background(), g, bsync.Options{Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			if !res.Certified {
				t.Fatalf("not certified: %s (min eigenvalue %g, eta %g, gap %g)", res.Status, res.MinEigenvalue, res.Eta, res.SuboptimalityBound)
			}
			rel := (res.Objective - ref.FStar) / ref.FStar
			tol := 1e-7
			if dev, ok := knownDeviation[ref.File]; ok {
				tol = dev
			}
			if math.Abs(rel) > tol {
				t.Errorf("objective %.12g, f_star %.12g: relative difference %.3g > %.1g", res.Objective, ref.FStar, rel, tol)
			}
			if res.SuboptimalityBound < -1e-9*res.Objective || res.SuboptimalityBound > res.GapAllowed {
				t.Errorf("suboptimality bound %g for F = %g (allowed %g)", res.SuboptimalityBound, res.Objective, res.GapAllowed)
			}
			// The objective reported is F evaluated edge by edge at the
			// returned poses.
			if f := g.Cost(res.Poses, res.Problem); f != res.Objective {
				t.Errorf("Objective %g differs from F(Poses) %g", res.Objective, f)
			}
			t.Logf("F=%.12g f*=%.12g rel=%.2g rank=%d lambda_min=%.2g total %.2fs", res.Objective, ref.FStar, rel, res.Rank, res.MinEigenvalue, res.Timings.Total)
		})
	}
}

// Every 3-D f_star is inconsistent with the objective: below a proven lower
// bound on the optimum, or above a feasible value (the estimate).
func TestReference3DInconsistent(t *testing.T) {
	dir, refs := suite(t)
	for _, ref := range refs {
		if ref.D != 3 || testing.Short() && large[ref.File] {
			continue
		}
		g, err := g2o.ReadFile(filepath.Join(dir, ref.File), g2o.ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		res, err := bsync.Solve(context.Background(), g, bsync.Options{GapTol: 1e-8})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Certified {
			t.Errorf("%s: not certified at GapTol 1e-8: %s", ref.File, res.Status)
			continue
		}
		below := res.Objective < ref.FStar // a feasible point under f_star
		above := res.DualBound > ref.FStar // f_star under a proven bound
		if !below && !above {
			t.Errorf("%s: f_star %.12g is consistent with [dual %.12g, F %.12g]", ref.File, ref.FStar, res.DualBound, res.Objective)
		}
		t.Logf("%s: f_star %.12g, proven optimum in [%.12g, %.12g]", ref.File, ref.FStar, res.DualBound, res.Objective)
	}
}
