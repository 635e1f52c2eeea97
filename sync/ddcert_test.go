package sync

import (
	"context"
	"math"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/g2o"
	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
	"github.com/bcmsync/bcmsync/rounding"
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

// suitePoint is a graph of the suite and the point a solve left (res.final).
type suitePoint struct {
	file string
	opts Options
	psd  bool // the central certificate passes there
	g    *posegraph.Graph
	res  *Result
}

// suitePoints solves intel and sphere2500 (their optima) and intel from a
// random start stopped at rank 2 (a saddle).
func suitePoints(t *testing.T) []suitePoint {
	dir := datasets.SuiteOrSkip(t)
	cases := []suitePoint{
		{file: "intel.g2o", psd: true},
		{file: "sphere2500.g2o", psd: true},
		{file: "intel.g2o", opts: Options{Init: InitRandom, MaxRank: 2}},
	}
	for k := range cases {
		g, err := g2o.ReadFile(filepath.Join(dir, cases[k].file), g2o.ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		res, err := Solve(context.Background(), g, cases[k].opts)
		if err != nil {
			t.Fatal(err)
		}
		cases[k].g, cases[k].res = g, res
	}
	return cases
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
	for _, tc := range suitePoints(t) {
		g, res := tc.g, tc.res
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
				if dd.dd == nil {
					t.Fatal("no factor by parts")
				}
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
					// Where the test fails, mu is the eigensolver's curvature, whose
					// preconditioner is the check's own factor centrally and a
					// shifted one of its own by parts: equal to the eigensolver's
					// tolerance, not to the bit, and so is the weak bound.
					near := func(a, b float64) bool {
						return a == b || (!got.psd && math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b)))
					}
					if got.shiftPoses != want.shiftPoses || got.sigma != want.sigma || !near(got.mu, want.mu) ||
						got.dualBound != want.dualBound || !near(got.lowerBound, want.lowerBound) || got.floorCost != want.floorCost {
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
				} else if math.Abs(got.minEig-want.minEig) > 1e-9*math.Abs(want.minEig) { // the eigensolver's, as mu above
					t.Errorf("%s: min eig %g, central %g", name, got.minEig, want.minEig)
				}
			}
		}
	}
}

// localParts is a PartsProver in one process: parts made from Q and a
// partition as a distributed run's agents hold them (their rows of Q,
// their own and bordering poses' blocks of the point), the proof made by
// PartCertifier and BoundaryProof. It tests the parts' kernel and the
// staircase's seam without a transport.
type localParts struct {
	q      *sparse.BlockSym
	part   []int
	anchor int
	x      *sparse.Blocks // the point the parts hold (set by the optimizer)
	ids    [][]int        // each part's poses: own first, then bordering
	pcs    []*PartCertifier
	bp     *BoundaryProof
}

func newLocalParts(t testing.TB, q *sparse.BlockSym, part []int, anchor int) *localParts {
	K := 0
	for _, k := range part {
		K = max(K, k+1)
	}
	lp := &localParts{q: q, part: part, anchor: anchor}
	var bnd [][]int
	var cross []CrossBlock
	for k := 0; k < K; k++ {
		var own, nb []int
		seen := map[int]bool{}
		for i := 0; i < q.N; i++ {
			if part[i] != k {
				continue
			}
			own = append(own, i)
			for p := q.RowPtr[i]; p < q.RowPtr[i+1]; p++ {
				if j := q.ColIdx[p]; part[j] != k && !seen[j] {
					seen[j] = true
					nb = append(nb, j)
				}
			}
		}
		ids := append(own, nb...)
		at := map[int]int{}
		for x, i := range ids {
			at[i] = x
		}
		bb := sparse.NewBlockBuilder(len(ids), q.B)
		for x, i := range own {
			bb.AddDiag(x, q.Block(q.Diag[i]))
			for p := q.RowPtr[i]; p < q.RowPtr[i+1]; p++ {
				j := q.ColIdx[p]
				if y := at[j]; j != i && (part[j] != k || y < x) {
					bb.AddOff(x, y, q.Block(p))
				}
			}
		}
		pc, err := NewPartCertifier(bb.Build(), ids, len(own), q.B-1, anchor)
		if err != nil {
			t.Fatal(err)
		}
		lp.ids, lp.pcs = append(lp.ids, ids), append(lp.pcs, pc)
		cross = append(cross, pc.CrossBlocks()...)
		var b []int
		for _, i := range own {
			isB := i == anchor || seenAny(q, i, part)
			if isB {
				b = append(b, i)
			}
		}
		bnd = append(bnd, b)
	}
	var err error
	if lp.bp, err = NewBoundaryProof(q.B, bnd, cross, anchor); err != nil {
		t.Fatal(err)
	}
	return lp
}

// seenAny reports whether pose i is coupled to another part's pose.
func seenAny(q *sparse.BlockSym, i int, part []int) bool {
	for p := q.RowPtr[i]; p < q.RowPtr[i+1]; p++ {
		if part[q.ColIdx[p]] != part[i] {
			return true
		}
	}
	return false
}

func (lp *localParts) ProofPartition() ([]int, int) { return lp.part, lp.anchor }

func (lp *localParts) ProveLambda(x *sparse.Blocks) (float64, error) {
	lp.x = x
	tr := 0.0
	for k, pc := range lp.pcs {
		xk := sparse.NewBlocks(lp.x.R, lp.x.B, len(lp.ids[k]))
		for y, i := range lp.ids[k] {
			copy(xk.Block(y), lp.x.Block(i))
		}
		tr += pc.Lambda(xk)
	}
	return tr, nil
}

func (lp *localParts) ProveFactor(sh ProofShift) (bool, error) {
	proofs := make([]*PartProof, len(lp.pcs))
	for k, pc := range lp.pcs {
		pr, err := pc.Factor(sh)
		if err != nil {
			return false, err
		}
		if pr.Failed {
			return false, nil
		}
		pr.Schur = append([]float64(nil), pr.Schur...)
		proofs[k] = pr
	}
	return lp.bp.Factor(proofs)
}

// TestPartsCertificateMatchesCentral: the certificate made by parts from
// their own rows and blocks (PartCertifier, BoundaryProof) decides as the
// central one and proves the same bound (to rounding: each part sums its
// products X Q in its own order), at the optimum of intel and sphere2500;
// at an intel saddle it fails, and the parts find the eigenvector
// (TestEscapeByPartsMatchesCentral).
func TestPartsCertificateMatchesCentral(t *testing.T) {
	for _, tc := range suitePoints(t) {
		g, res := tc.g, tc.res
		x, d, opts := res.final, g.D, res.Options
		q := g.Laplacian(posegraph.Poses)
		m := newManifold(q, d, x.R, 1)
		part := runsPartition(q.N, 4)
		// The central test in the parts' order with the parts' anchor.
		ref := newCertifier(q, d, opts.GapTol, opts.GapAbs, opts.EigTol, nil, opts.Seed)
		ref.ddPart = part
		want, err := ref.check(m, x)
		if err != nil {
			t.Fatal(err)
		}
		lp := newLocalParts(t, q, part, ref.anchor)
		lp.x = x
		c := newCertifier(q, d, opts.GapTol, opts.GapAbs, opts.EigTol, nil, opts.Seed)
		c.usePartsProver(lp)
		got, err := c.check(m, x)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: by parts psd %v method %s bound %.12g (%d boundary poses), central psd %v bound %.12g",
			tc.file, got.psd, got.method, got.lowerBound, lp.bp.Blocks(), want.psd, want.lowerBound)
		if got.psd != tc.psd || want.psd != tc.psd {
			t.Fatalf("%s: psd %v by parts, %v central, want %v", tc.file, got.psd, want.psd, tc.psd)
		}
		if math.Abs(got.trLambda-want.trLambda) > 1e-11*math.Abs(want.trLambda) {
			t.Errorf("%s: tr Lambda %v by parts, %v central", tc.file, got.trLambda, want.trLambda)
		}
		if tc.psd {
			if got.method != MethodCholeskyParts || got.shiftPoses != want.shiftPoses || math.Abs(got.sigma-want.sigma) > 1e-9*want.sigma ||
				math.Abs(got.dualBound-want.dualBound) > 1e-11*math.Abs(want.dualBound) {
				// sigma is half the allowance over the anchor's weight, and
				// the allowance is relative to tr(Lambda).
				t.Errorf("%s: by parts %s shift %d %g bound %v, central %d %g %v", tc.file, got.method,
					got.shiftPoses, got.sigma, got.dualBound, want.shiftPoses, want.sigma, want.dualBound)
			}
		} else if !got.partsVector || math.Abs(got.minEig-want.minEig) > 1e-6*q.MaxDiag() ||
			math.Abs(got.lowerBound-want.lowerBound) > 1e-6*math.Abs(want.lowerBound) {
			// The eigenvector too is found by parts (parteig.go), to the
			// central eigensolver's tolerance.
			t.Errorf("%s: failed by parts with min eig %g bound %v (vector by parts %v), central %g %v", tc.file, got.minEig, got.lowerBound, got.partsVector, want.minEig, want.lowerBound)
		}
	}
}

// TestRoundByPartsMatchesCentral: the rounding by parts (each part its
// blocks' share of Y Y^T, its projections and votes, its interior
// translation factor; the coordinator the sums and the boundary system)
// gives the estimate of the central rounding to 1e-9, at the optimum of
// intel and sphere2500 (rank 2 and 3) and at a rank-3 point of intel
// (the staircase from a random start with its escapes).
func TestRoundByPartsMatchesCentral(t *testing.T) {
	dir := datasets.SuiteOrSkip(t)
	for _, tc := range []struct {
		file string
		opts Options
	}{{"intel.g2o", Options{}}, {"sphere2500.g2o", Options{}}, {"intel.g2o", Options{Rank0: 3, MaxRank: 3}}} {
		g, err := g2o.ReadFile(filepath.Join(dir, tc.file), g2o.ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		res, err := Solve(context.Background(), g, tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		x := res.final
		plan := rounding.NewPlan(g, nil, nil)
		want, err := roundEstimate(g, x, g.D, posegraph.Poses, plan)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []int{2, 4} {
			got, err := rounding.RoundByParts(g, x, runsPartition(g.N(), k))
			if err != nil {
				t.Fatal(err)
			}
			rounding.ToGauge(g, got)
			worst := 0.0
			for i := range got {
				for c := 0; c < 9; c++ {
					worst = math.Max(worst, math.Abs(got[i].R[c]-want[i].R[c]))
				}
				for a := 0; a < 3; a++ {
					worst = math.Max(worst, math.Abs(got[i].T[a]-want[i].T[a])/(1+math.Abs(want[i].T[a])))
				}
			}
			t.Logf("%s rank %d, %d parts: largest difference %.2e (F %.12g, central %.12g)", tc.file, x.R, k, worst,
				g.Cost(got, posegraph.Poses), g.Cost(want, posegraph.Poses))
			if worst > 1e-9 {
				t.Errorf("%s rank %d, %d parts: the rounding by parts differs from the central one by %.2e", tc.file, x.R, k, worst)
			}
		}
	}
}

// A test by parts that fails after the deadline is not made again on the
// gathered point: no factorization starts after the deadline (review of
// issue 30: the central retry factored, and analysed S by parts, late).
func TestPartsCertificateStopsAtDeadline(t *testing.T) {
	saddles := 0
	for _, tc := range suitePoints(t) {
		if tc.psd {
			continue
		}
		saddles++
		g, res := tc.g, tc.res
		x, d, opts := res.final, g.D, res.Options
		q := g.Laplacian(posegraph.Poses)
		m := newManifold(q, d, x.R, 1)
		part := runsPartition(q.N, 4)
		c := partsCertifier(t, q, x, part, d, opts)
		c.deadline = time.Now().Add(-time.Second)
		got, err := c.check(m, x)
		if err != nil {
			t.Fatal(err)
		}
		if got.psd || !got.timedOut || got.vector != nil || c.dd != nil || c.chol != nil {
			t.Errorf("%s: psd %v, timed out %v, vector %v, factored centrally %v", tc.file, got.psd, got.timedOut, got.vector != nil, c.dd != nil || c.chol != nil)
		}
	}
	if saddles == 0 {
		t.Skip("no saddle among the suite points")
	}
}

// TestPartCertifierRelease: a part's factor let go (PartCertifier.Release,
// what an agent does when its rounds resume) is made again by the next
// Factor to the bit, and the inverse iteration refuses to solve with the
// factor it no longer has.
func TestPartCertifierRelease(t *testing.T) {
	tc := suitePoints(t)[0]
	q := tc.g.Laplacian(posegraph.Poses)
	part := runsPartition(q.N, 4)
	ref := newCertifier(q, tc.g.D, tc.res.Options.GapTol, tc.res.Options.GapAbs, tc.res.Options.EigTol, nil, tc.res.Options.Seed)
	ref.ddPart = part
	m := newManifold(q, tc.g.D, tc.res.final.R, 1)
	if _, err := ref.check(m, tc.res.final); err != nil {
		t.Fatal(err)
	}
	lp := newLocalParts(t, q, part, ref.anchor)
	if _, err := lp.ProveLambda(tc.res.final); err != nil {
		t.Fatal(err)
	}
	for k, pc := range lp.pcs {
		// The rows, their analysis and the complement are made by the
		// first Factor and let go by Release (an agent's rounds come
		// between its set-up and its first test).
		if pc.a != nil || pc.part != nil || pc.schur != nil {
			t.Fatalf("part %d: the certificate's rows made before a Factor", k)
		}
		for _, sh := range []ProofShift{{Sigma: 1e-3, Anchor: lp.anchor}, {Tau: 1, Anchor: lp.anchor}} {
			first, err := pc.Factor(sh)
			if err != nil {
				t.Fatal(err)
			}
			if stored, dense := pc.WSize(); pc.nI > 0 && (stored <= 0 || stored > dense) {
				t.Fatalf("part %d: W of %d values stored, %d dense", k, stored, dense)
			}
			want := *first
			want.Schur = slices.Clone(first.Schur)
			pc.Release()
			if pc.a != nil || pc.part != nil || pc.schur != nil {
				t.Fatalf("part %d: Release kept the certificate's rows", k)
			}
			if _, err := pc.EigReduce(1); err == nil {
				t.Fatalf("part %d: the inverse iteration solved with a released factor", k)
			}
			got, err := pc.Factor(sh)
			if err != nil {
				t.Fatal(err)
			}
			if got.Failed != want.Failed || got.MinPivot != want.MinPivot || got.MaxDiag != want.MaxDiag || !slices.Equal(got.Schur, want.Schur) {
				t.Fatalf("part %d, shift %+v: the factor made again differs", k, sh)
			}
		}
	}
}
