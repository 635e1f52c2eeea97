package sync_test

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/g2o"
	"github.com/bcmsync/bcmsync/posegraph"
	bsync "github.com/bcmsync/bcmsync/sync"
)

// The 3-D optima of REFERENCE.tsv are optima of SE-Sync's reading of the
// files (g2o.ReadOptions.RawQuaternions): edge rotations from the printed,
// unnormalized quaternions and F = tr(X Q X^T). TestReferenceOptima
// reproduces them in that reading, and checks that the default (normalized)
// reading's optimum differs from them by what the quaternions' norms
// predict (rawQuatShift in refcheck_test.go, which derives the formula).
// The 2-D optima do not depend on the reading (rotations from angles).

// aboveOptimum lists the graphs whose f_star lies above the certified
// optimum of SE-Sync's reading by more than 1e-7, with the relative margin
// allowed. parking-garage: certified F = 1.26248413588 (proven lower bound
// 1.262484080 with GapTol 1e-7), f_star = 1.26248553498, 1.1e-6 relative
// above F and 2.7e-6 above the bound. So f_star is a value the peer reached,
// not the minimum: the likely cause is SE-Sync's loose default stop (Riemannian
// gradient norm 1e-2, absolute) on a graph with F = 1.26 and a badly
// conditioned Q. Plausible, not proven: our own iterates first reach that
// gradient norm only 1.2e-7 above the optimum (TestRefCheckSESyncReading),
// so the peer's path would have to be slower there than ours.
var aboveOptimum = map[string]float64{
	"parking-garage.g2o": 2e-6,
}

// gapTol3D is the relative gap the 3-D graphs are certified to: 1e-9, but
// 1e-7 for parking-garage (F = 1.26), whose proven bound is 4e-8 to 7e-9
// relative: its certificate's shift has to clear a Schur complement of
// -4e-9 left by the trust region's tolerance. That still puts f_star, 1.1e-6
// above F, above the proven lower bound.
func gapTol3D(file string) float64 {
	if file == "parking-garage.g2o" {
		return 1e-7
	}
	return 1e-9
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

// solveCertified solves g and fails unless the result is certified with a
// consistent bound and reports F(Poses) as its Objective.
func solveCertified(t *testing.T, g *posegraph.Graph, opts bsync.Options) *bsync.Result {
	t.Helper()
	res, err := bsync.Solve(context.Background(), g, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Certified {
		t.Fatalf("not certified: %s (min eigenvalue %g, eta %g, gap %g)", res.Status, res.MinEigenvalue, res.Eta, res.SuboptimalityBound)
	}
	if res.SuboptimalityBound < -1e-9*res.Objective || res.SuboptimalityBound > res.GapAllowed {
		t.Errorf("suboptimality bound %g for F = %g (allowed %g)", res.SuboptimalityBound, res.Objective, res.GapAllowed)
	}
	// The objective reported is the graph's Cost at the returned poses:
	// the edge formula, plus SE-Sync's constant in the raw reading.
	if f := g.Cost(res.Poses, res.Problem); f != res.Objective {
		t.Errorf("Objective %g differs from F(Poses) %g", res.Objective, f)
	}
	return res
}

func TestReferenceOptima(t *testing.T) {
	dir, refs := suite(t)
	for _, ref := range refs {
		t.Run(ref.File, func(t *testing.T) {
			if testing.Short() && large[ref.File] {
				t.Skip("large graph in -short mode")
			}
			path := filepath.Join(dir, ref.File)
			g, err := g2o.ReadFile(path, g2o.ReadOptions{RawQuaternions: ref.D == 3})
			if err != nil {
				t.Fatal(err)
			}
			if g.D != ref.D || g.N() != ref.N || g.M() != ref.M {
				t.Fatalf("read d=%d n=%d m=%d, reference says %d %d %d", g.D, g.N(), g.M(), ref.D, ref.N, ref.M)
			}
			if ref.D == 2 {
				res := solveCertified(t, g, bsync.Options{Seed: 1})
				rel := (res.Objective - ref.FStar) / ref.FStar
				if math.Abs(rel) > 1e-7 {
					t.Errorf("objective %.12g, f_star %.12g: relative difference %.3g > 1e-7", res.Objective, ref.FStar, rel)
				}
				t.Logf("F=%.12g f*=%.12g rel=%.2g rank=%d total %.2fs", res.Objective, ref.FStar, rel, res.Rank, res.Timings.Total)
				return
			}
			// SE-Sync's reading, certified tightly enough for the proven
			// bound to say where f_star lies.
			res := solveCertified(t, g, bsync.Options{Seed: 1, GapTol: gapTol3D(ref.File)})
			f, dual := res.Objective, res.DualBound
			rel := (f - ref.FStar) / ref.FStar
			if margin, ok := aboveOptimum[ref.File]; ok {
				if rel > 1e-7 || rel < -margin {
					t.Errorf("objective %.12g, f_star %.12g: relative difference %.3g outside [-%.0e, 1e-7]", f, ref.FStar, rel, margin)
				}
				if ref.FStar < dual {
					t.Errorf("f_star %.12g below the proven lower bound %.12g", ref.FStar, dual)
				}
			} else if math.Abs(rel) > 1e-7 {
				t.Errorf("objective %.12g, f_star %.12g: relative difference %.3g > 1e-7", f, ref.FStar, rel)
			}

			// The default reading. rawQuatShift predicts, from the file
			// alone, F_raw* - F_default* to first order. The small graphs
			// are solved and certified in it; the large ones are not
			// solved twice: F_default at the raw optimum is an upper bound
			// on the default optimum and equal to it to first order.
			def, err := g2o.ReadFile(path, g2o.ReadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			shift := rawQuatShift(g)
			fdef, how := def.Cost(res.Poses, posegraph.Poses), "at the raw optimum"
			if !large[ref.File] {
				fdef, how = solveCertified(t, def, bsync.Options{Seed: 1, GapTol: gapTol3D(ref.File)}).Objective, "certified"
			}
			if got := f - fdef; math.Abs(got-shift) > 0.2*math.Abs(shift)+1e-9*f {
				t.Errorf("F_raw - F_default = %.4g (default %s), predicted %.4g", got, how, shift)
			}
			t.Logf("SE-Sync's reading F=%.12g in [%.12g, F], f*=%.12g rel=%+.2g; default reading F=%.12g (%s) rel=%+.2g, predicted %+.2g; rank %d, %.2fs",
				f, dual, ref.FStar, rel, fdef, how, (fdef-ref.FStar)/ref.FStar, (f-shift-ref.FStar)/ref.FStar, res.Rank, res.Timings.Total)
		})
	}
}
