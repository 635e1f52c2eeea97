package sync

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/g2o"
	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
	"github.com/bcmsync/bcmsync/posegraph/blockmat"
)

// localParts as a PartsEigen: each part's piece of the vector in its
// PartCertifier, the boundary solve in the BoundaryProof, as
// sync/distributed's agents and coordinator hold them.

// partPoint returns part k's blocks of lp.x (own, then bordering).
func (lp *localParts) partPoint(k int) *sparse.Blocks {
	xk := sparse.NewBlocks(lp.x.R, lp.x.B, len(lp.ids[k]))
	for y, i := range lp.ids[k] {
		copy(xk.Block(y), lp.x.Block(i))
	}
	return xk
}

func (lp *localParts) EigStep(s float64, start, solve bool) (EigSums, error) {
	var sum EigSums
	add := func(t EigSums) { sum.Norm2, sum.VSV, sum.SV2 = sum.Norm2+t.Norm2, sum.VSV+t.VSV, sum.SV2+t.SV2 }
	if !solve {
		for _, pc := range lp.pcs {
			add(pc.EigScale(s))
		}
		return sum, nil
	}
	reduced := make([][]float64, len(lp.pcs))
	for k, pc := range lp.pcs {
		if start {
			pc.EigStart()
		}
		var err error
		if reduced[k], err = pc.EigReduce(s); err != nil {
			return sum, err
		}
	}
	w, err := lp.bp.EigSolve(reduced)
	if err != nil {
		return sum, err
	}
	for k, pc := range lp.pcs {
		nOwn := len(lp.ids[k]) - len(lp.bordering(k))
		ids := append(pc.Boundary(), lp.ids[k][nOwn:]...)
		vals, err := lp.bp.EigValues(w, ids)
		if err != nil {
			return sum, err
		}
		t, err := pc.EigBack(ids, vals)
		if err != nil {
			return sum, err
		}
		add(t)
	}
	return sum, nil
}

// bordering lists part k's bordering poses (other parts' poses it shares
// an edge with).
func (lp *localParts) bordering(k int) []int {
	var out []int
	for _, i := range lp.ids[k] {
		if lp.part[i] != k {
			out = append(out, i)
		}
	}
	return out
}

func (lp *localParts) EigLift(alpha float64, commit bool) (float64, *blockmat.Blocks, error) {
	f := 0.0
	var xn *sparse.Blocks
	if commit {
		xn = sparse.NewBlocks(lp.x.R+1, lp.x.B, lp.x.N)
	}
	for k, pc := range lp.pcs {
		xk := lp.partPoint(k)
		xl := sparse.NewBlocks(xk.R+1, xk.B, xk.N)
		f += pc.EigLift(xl, xk, alpha)
		if commit {
			for y, i := range lp.ids[k] {
				if lp.part[i] == k {
					copy(xn.Block(i), xl.Block(y))
				}
			}
		}
	}
	if commit {
		lp.x = xn
	}
	return f, xn, nil
}

// intelSaddle is a rank-2 saddle of intel: the point the staircase
// leaves from a random start (seed) stopped at rank 2, with Q, the solve's
// options and the manifold at the point.
type intelSaddle struct {
	g    *posegraph.Graph
	x    *sparse.Blocks
	q    *sparse.BlockSym
	m    *manifold
	opts Options
}

func newIntelSaddle(t *testing.T, seed uint64) intelSaddle {
	dir := datasets.SuiteOrSkip(t)
	g, err := g2o.ReadFile(filepath.Join(dir, "intel.g2o"), g2o.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Solve(context.Background(), g, Options{Init: InitRandom, MaxRank: 2, Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	q := g.Laplacian(posegraph.Poses)
	return intelSaddle{g: g, x: res.final, q: q, m: newManifold(q, g.D, res.final.R, 1), opts: res.Options}
}

// centralCheck is the central test of the point in the parts' order
// (part), with its certifier, whose anchor the parts then take.
func (s intelSaddle) centralCheck(t *testing.T, part []int) (*certifier, certificate) {
	o := s.opts
	ref := newCertifier(s.q, s.g.D, o.GapTol, o.GapAbs, o.EigTol, nil, o.Seed)
	ref.ddPart = part
	want, err := ref.check(s.m, s.x)
	if err != nil {
		t.Fatal(err)
	}
	return ref, want
}

// TestEscapeByPartsMatchesCentral: at rank-2 saddles of intel (random
// starts) the eigenpair found by parts (inverse iteration through the
// parts' factors, each part holding its piece of the vector) is the
// central eigensolver's (the eigenvalue to its tolerance, the direction
// up to sign), the weak bound is the central one's, and the escape by
// parts (each part lifting its blocks, F summed from the parts' shares)
// decreases F as the central escape does and lands on the same point up
// to the sign of the new row.
func TestEscapeByPartsMatchesCentral(t *testing.T) {
	saddles := 0
	for _, seed := range []uint64{1, 2} {
		sp := newIntelSaddle(t, seed)
		x, d, opts, q, m := sp.x, sp.g.D, sp.opts, sp.q, sp.m
		for _, k := range []int{2, 4} {
			part := runsPartition(q.N, k)
			ref, want := sp.centralCheck(t, part)
			if want.psd || want.vector == nil {
				t.Logf("seed %d: rank %d point certified (%v) or without a vector", seed, x.R, want.psd)
				continue
			}
			saddles++
			lp := newLocalParts(t, q, part, ref.anchor)
			lp.x = x
			c := newCertifier(q, d, opts.GapTol, opts.GapAbs, opts.EigTol, nil, opts.Seed)
			c.usePartsProver(lp)
			got, err := c.check(m, x)
			if err != nil {
				t.Fatal(err)
			}
			if got.psd || !got.partsVector || got.vector != nil || got.method != MethodEigParts || c.chol != nil || c.dd != nil {
				t.Fatalf("seed %d, %d parts: psd %v, parts vector %v, vector %v, method %s, factored centrally %v",
					seed, k, got.psd, got.partsVector, got.vector != nil, got.method, c.chol != nil || c.dd != nil)
			}
			v := make([]float64, q.Dim())
			for p, pc := range lp.pcs {
				own := make([]float64, (len(lp.ids[p])-len(lp.bordering(p)))*q.B)
				pc.EigVector(own)
				for y, i := range lp.ids[p][:len(own)/q.B] {
					copy(v[i*q.B:(i+1)*q.B], own[y*q.B:(y+1)*q.B])
				}
			}
			dot, nv := 0.0, 0.0
			for i := range v {
				dot += v[i] * want.vector[i]
				nv += v[i] * v[i]
			}
			// v^T S v at the parts' vector, computed here.
			sv := make([]float64, len(v))
			ref.s.MulVec(sv, v)
			vsv := 0.0
			for i := range v {
				vsv += v[i] * sv[i]
			}
			normS := q.MaxDiag()
			t.Logf("seed %d, %d parts: min eig %.12g by parts (v^T S v %.12g, |v| %.15f), central %.12g; |<v, v_central>| = %.12f; weak bound %.12g, central %.12g",
				seed, k, got.minEig, vsv, math.Sqrt(nv), want.minEig, math.Abs(dot), got.lowerBound, want.lowerBound)
			if math.Abs(math.Sqrt(nv)-1) > 1e-12 || math.Abs(vsv-got.minEig) > 1e-12*normS {
				t.Errorf("seed %d, %d parts: the parts' vector has norm %.15g and v^T S v %g, reported %g", seed, k, math.Sqrt(nv), vsv, got.minEig)
			}
			// The central eigensolver stops at a residual of 1e-6 ||S||.
			if math.Abs(got.minEig-want.minEig) > 1e-6*normS || got.minEig > want.minEig+1e-12*normS {
				t.Errorf("seed %d, %d parts: min eig %.12g by parts, central %.12g", seed, k, got.minEig, want.minEig)
			}
			if math.Abs(dot) < 1-1e-6 {
				t.Errorf("seed %d, %d parts: |<v, v_central>| = %.12f", seed, k, math.Abs(dot))
			}
			if got.hasLower != want.hasLower || math.Abs(got.lowerBound-want.lowerBound) > 1e-6*math.Abs(want.lowerBound) {
				t.Errorf("seed %d, %d parts: weak bound %v %.12g, central %v %.12g", seed, k, got.hasLower, got.lowerBound, want.hasLower, want.lowerBound)
			}
			// The escapes.
			xc, decC := escape(newManifold(q, d, x.R+1, 1), x, want.vector)
			xp, decP, err := escapeByParts(lp, x.N)
			if err != nil {
				t.Fatal(err)
			}
			fc, fp := posegraph.TraceCost(q, xc, sparse.NewBlocks(xc.R, xc.B, xc.N)), posegraph.TraceCost(q, xp, sparse.NewBlocks(xp.R, xp.B, xp.N))
			t.Logf("seed %d, %d parts: escape decrease %.12g by parts, %.12g central; next level's F %.12g, %.12g", seed, k, decP, decC, fp, fc)
			// The central vector is accurate to its eigensolver's tolerance
			// (the parts' Rayleigh quotient is the lower, so theirs is
			// the better), and the steps are long (alpha up to sqrt(n)):
			// the points agree to that accuracy, about 1e-6 of F.
			if decC <= 0 || math.Abs(decP-decC) > 1e-7*(fc+decC) || math.Abs(fp-fc) > 1e-7*fc {
				t.Errorf("seed %d, %d parts: escape decrease %.12g by parts, %.12g central; F %.12g, %.12g", seed, k, decP, decC, fp, fc)
			}
			// The same point up to the sign of the new row.
			r := x.R
			worst := [2]float64{}
			for s, sign := range []float64{1, -1} {
				for i := 0; i < x.N; i++ {
					bc, bp := xc.Block(i), xp.Block(i)
					for e := range bc {
						f := 1.0
						if e/x.B == r {
							f = sign
						}
						worst[s] = math.Max(worst[s], math.Abs(bp[e]-f*bc[e]))
					}
				}
			}
			if math.Min(worst[0], worst[1]) > 1e-4 {
				t.Errorf("seed %d, %d parts: the escaped points differ by %.3g (%.3g with the new row's sign flipped)", seed, k, worst[0], worst[1])
			}
		}
	}
	if saddles == 0 {
		t.Skip("no saddle")
	}
}

// failingEig is localParts whose parts fail (an agent gone) at the
// failAt-th EigStep or at any committed lift.
type failingEig struct {
	*localParts
	steps, failAt int
	corrupt       bool // the committed lift succeeds with a pose off the manifold
}

func (f *failingEig) EigStep(s float64, start, solve bool) (EigSums, error) {
	f.steps++
	if f.steps == f.failAt {
		return EigSums{}, errors.New("agent 1 did not answer")
	}
	return f.localParts.EigStep(s, start, solve)
}

func (f *failingEig) EigLift(alpha float64, commit bool) (float64, *blockmat.Blocks, error) {
	if commit && f.corrupt {
		v, x, err := f.localParts.EigLift(alpha, commit)
		x.Block(7)[0] += 1e-3
		return v, x, err
	}
	if commit {
		return 0, nil, errors.New("agent 2 did not answer")
	}
	return f.localParts.EigLift(alpha, commit)
}

// TestEscapeByPartsFallsBack: when the parts fail during the inverse
// iteration, the check finds the eigenvector of the point at hand (the
// central eigensolver, in the parts' order); when they fail during the
// escape, or return a point off the manifold, the staircase escapes along
// that eigenvector from the point at hand, with the central escape's
// decrease.
func TestEscapeByPartsFallsBack(t *testing.T) {
	sp := newIntelSaddle(t, 1)
	g, x, d, opts, q, m := sp.g, sp.x, sp.g.D, sp.opts, sp.q, sp.m
	part := runsPartition(q.N, 4)
	ref, want := sp.centralCheck(t, part)
	if want.psd || want.vector == nil {
		t.Skip("not a saddle")
	}
	_, decC := escape(newManifold(q, d, x.R+1, 1), x, want.vector)

	lp := newLocalParts(t, q, part, ref.anchor)
	lp.x = x
	fe := &failingEig{localParts: lp, failAt: 3}
	c := newCertifier(q, d, opts.GapTol, opts.GapAbs, opts.EigTol, nil, opts.Seed)
	c.usePartsProver(fe)
	got, err := c.check(m, x)
	if err != nil {
		t.Fatal(err)
	}
	if got.psd || got.partsVector || got.vector == nil || got.method != "eigensolver" || got.minEig != want.minEig {
		t.Errorf("failed inverse iteration: parts vector %v, vector %v, method %s, min eig %g (central %g)",
			got.partsVector, got.vector != nil, got.method, got.minEig, want.minEig)
	}

	fe.failAt, fe.steps = -1, 0
	c = newCertifier(q, d, opts.GapTol, opts.GapAbs, opts.EigTol, nil, opts.Seed)
	c.usePartsProver(fe)
	got, err = c.check(m, x)
	if err != nil {
		t.Fatal(err)
	}
	if !got.partsVector {
		t.Fatalf("no vector by parts (method %s)", got.method)
	}
	t.Logf("inverse iteration by parts: %d steps", fe.steps)
	opts.Logger = slog.New(slog.DiscardHandler)
	r := &Run{g: g, opts: opts, q: q, cert: c}
	xn, dec := r.escape(x, got, x.R)
	t.Logf("escape after the parts failed: decrease %.12g, central %.12g", dec, decC)
	if xn.R != x.R+1 || dec != decC {
		t.Errorf("escape after the parts failed: rank %d, decrease %.12g, central %.12g", xn.R, dec, decC)
	}
	// A point off the manifold from the parts is refused for the same
	// fallback.
	fe.corrupt = true
	lp.x = x
	c = newCertifier(q, d, opts.GapTol, opts.GapAbs, opts.EigTol, nil, opts.Seed)
	c.usePartsProver(fe)
	if got, err = c.check(m, x); err != nil || !got.partsVector {
		t.Fatalf("no vector by parts (%v)", err)
	}
	r.cert = c
	if xn, dec = r.escape(x, got, x.R); xn.R != x.R+1 || dec != decC {
		t.Errorf("escape to a corrupted point: rank %d, decrease %.12g, central %.12g", xn.R, dec, decC)
	}
}

// lateEig is localParts whose inverse iteration outlasts the deadline: at
// its first shifted factorization the certifier's deadline moves to the
// past, as if that factorization had taken the time left.
type lateEig struct {
	*localParts
	c *certifier
}

func (l *lateEig) ProveFactor(sh ProofShift) (bool, error) {
	if sh.Tau > 0 {
		l.c.deadline = time.Now().Add(-time.Second)
	}
	return l.localParts.ProveFactor(sh)
}

// TestEscapeByPartsStopsAtDeadline: when the deadline passes while the
// parts search for the saddle's eigenvector, the check ends timed out
// without a central factorization (which would start after the deadline).
func TestEscapeByPartsStopsAtDeadline(t *testing.T) {
	sp := newIntelSaddle(t, 1)
	x, d, opts, q, m := sp.x, sp.g.D, sp.opts, sp.q, sp.m
	part := runsPartition(q.N, 4)
	ref, want := sp.centralCheck(t, part)
	if want.psd {
		t.Skip("not a saddle")
	}
	lp := newLocalParts(t, q, part, ref.anchor)
	lp.x = x
	c := newCertifier(q, d, opts.GapTol, opts.GapAbs, opts.EigTol, nil, opts.Seed)
	c.usePartsProver(&lateEig{localParts: lp, c: c})
	c.deadline = time.Now().Add(time.Hour)
	got, err := c.check(m, x)
	if err != nil {
		t.Fatal(err)
	}
	if got.psd || !got.timedOut || got.vector != nil || got.partsVector || c.dd != nil || c.chol != nil {
		t.Errorf("psd %v, timed out %v, vector %v, by parts %v, factored centrally %v",
			got.psd, got.timedOut, got.vector != nil, got.partsVector, c.dd != nil || c.chol != nil)
	}
}
