package sync

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/g2o"
	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
)

// runsPartition assigns n poses to k parts by contiguous runs of index
// (sync/distributed's Contiguous).
func runsPartition(n, k int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = i * k / n
	}
	return p
}

// TestDomainCertificateMatchesCentral: the certificate factored by parts
// (interiors first, the boundary system last: what a distributed run's
// agents and coordinator do) decides as the central one and proves the
// same bound, at the central optimum of intel and sphere2500 and at a
// rank-2 saddle of intel (random start), where both fail and the weak
// bound, whose factorizations also go by parts, is the same. With the
// central certificate's anchor the shift tried, the bound and the pivot
// rule are the same, so the bound is the same number; with its own anchor
// (the lightest boundary pose) only the shift's cost differs, and the
// bound stays within the allowance of the central one.
func TestDomainCertificateMatchesCentral(t *testing.T) {
	dir := datasets.SuiteOrSkip(t)
	cases := []struct {
		file string
		opts Options
		psd  bool
	}{
		{"intel.g2o", Options{}, true},
		{"sphere2500.g2o", Options{}, true},
		{"intel.g2o", Options{Init: InitRandom, MaxRank: 2}, false},
	}
	for _, tc := range cases {
		g, err := g2o.ReadFile(filepath.Join(dir, tc.file), g2o.ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		res, err := Solve(context.Background(), g, tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		x, d := res.final, g.D
		opts := res.Options
		q := g.Laplacian(posegraph.Poses)
		m := newManifold(q, d, x.R, 1)
		central := newCertifier(q, d, opts.GapTol, opts.GapAbs, opts.EigTol, sparse.BlockOrder(q, 0), opts.Seed)
		want, err := central.check(m, x)
		if err != nil {
			t.Fatal(err)
		}
		if want.psd != tc.psd {
			t.Fatalf("%s %+v: the central certificate's psd is %v, the test expects %v", tc.file, tc.opts, want.psd, tc.psd)
		}
		for _, k := range []int{2, 4} {
			for _, own := range []bool{false, true} {
				dd := newCertifier(q, d, opts.GapTol, opts.GapAbs, opts.EigTol, nil, opts.Seed)
				dd.ddPart = runsPartition(q.N, k)
				if !own {
					dd.ddAnchor = central.anchor
				}
				got, err := dd.check(m, x)
				if err != nil {
					t.Fatal(err)
				}
				name := tc.file
				t.Logf("%s rank %d, %d parts (own anchor %v, %d boundary poses): psd %v shift on %d sigma %.3g bound %.12g (central %v %d %.3g %.12g), min eig %.3g (central %.3g), method %s",
					name, x.R, k, own, dd.dd.BoundaryBlocks(), got.psd, got.shiftPoses, got.sigma, got.lowerBound,
					want.psd, want.shiftPoses, want.sigma, want.lowerBound, got.minEig, want.minEig, got.method)
				if got.psd != want.psd || got.hasLower != want.hasLower {
					t.Fatalf("%s, %d parts: psd %v (bound %v), central %v (%v)", name, k, got.psd, got.hasLower, want.psd, want.hasLower)
				}
				if got.psd && got.method != MethodCholeskyDD {
					t.Errorf("%s: method %q", name, got.method)
				}
				if got.trLambda != want.trLambda {
					t.Errorf("%s: tr Lambda %v, central %v", name, got.trLambda, want.trLambda)
				}
				if !own {
					if got.shiftPoses != want.shiftPoses || got.sigma != want.sigma || got.mu != want.mu ||
						got.dualBound != want.dualBound || got.lowerBound != want.lowerBound || got.floorCost != want.floorCost {
						t.Errorf("%s, %d parts with the central anchor: shift %d %g %g bound %v %v floor %v, central %d %g %g %v %v %v", name, k,
							got.shiftPoses, got.sigma, got.mu, got.dualBound, got.lowerBound, got.floorCost,
							want.shiftPoses, want.sigma, want.mu, want.dualBound, want.lowerBound, want.floorCost)
					}
				} else if got.psd {
					allowed := gapAllowed(res.Objective, dd.fUnit(), opts.GapTol, opts.GapAbs)
					if math.Abs(got.dualBound-want.dualBound) > allowed || res.Objective-got.dualBound > allowed {
						t.Errorf("%s, %d parts with its own anchor: bound %.12g, central %.12g, F %.12g, allowed %.3g",
							name, k, got.dualBound, want.dualBound, res.Objective, allowed)
					}
				}
				if got.psd {
					// Inverse iteration through the parts' factors estimates
					// the same bottom of the spectrum.
					if math.Abs(got.minEig-want.minEig) > 10*math.Max(want.eta, got.eta) {
						t.Errorf("%s: min eig %g, central %g (eta %g)", name, got.minEig, want.minEig, want.eta)
					}
				} else if got.minEig != want.minEig {
					t.Errorf("%s: min eig %g, central %g", name, got.minEig, want.minEig)
				}
			}
		}
	}
}
