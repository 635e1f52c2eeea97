package rounding

import (
	"fmt"

	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
)

// Plan is the linear algebra of one graph's initialization and rounding
// for one elimination order of its poses, made on first use and kept: a
// solve initializes, rounds and may round again, and each time it needs
// the same translation system (the tau-weighted Laplacian anchored at
// g.Anchor()), which a Plan factors once. Its results are bit for bit
// those of ChordalOrdered, ChordalRotationsOrdered and
// RecoverTranslationsOrdered with the same order.
//
// A Plan also serves as bcm's translation step (bcm.TranslationSolver):
// that step solves the same system.
type Plan struct {
	g     *posegraph.Graph
	order []int
	sym   *sparse.BlockSymbolic

	ts      *translationSystem // nil until first needed
	checked bool               // the graph passed checkGraph
	// from, until ts is made: an earlier plan whose translation factor
	// ts copies from where the system did not change (RefactorFrom).
	from *groundedSource
	// keep: ts keeps its matrix for a later plan to copy from (set by
	// RefactorFrom); a plan that is not asked holds no such record.
	keep bool
}

// NewPlan returns the plan for g (validated, connected) and order, an
// elimination order of all its poses (order[k] = the pose eliminated
// k-th). sym, if not nil, is the block analysis of g's pose graph pattern
// in that order (sparse.AnalyzeBlockPattern of Q with the order), which
// the chordal system, of that pattern, then shares.
func NewPlan(g *posegraph.Graph, order []int, sym *sparse.BlockSymbolic) *Plan {
	return &Plan{g: g, order: order, sym: sym}
}

// Chordal is ChordalOrdered(g, order).
func (p *Plan) Chordal() ([]posegraph.Pose, error) {
	g := p.g
	if x, ok, err := aroundWorld(g, p.order, false, ChordalOrdered); ok {
		return x, err // priors.go: the plan's analysis is of the graph with its world vertex
	}
	if g.HasLandmarks() {
		return chordalLandmarks(g, p.order)
	}
	poses, _, err := chordalRotationsWith(g, p.order, posegraph.Poses, p.sym)
	if err != nil {
		return nil, err
	}
	if err := p.RecoverTranslations(poses); err != nil {
		return nil, err
	}
	ToGauge(g, poses)
	return poses, nil
}

// ChordalRotations is ChordalRotationsOrdered(g, order).
func (p *Plan) ChordalRotations() ([]posegraph.Pose, error) {
	if x, ok, err := aroundWorld(p.g, p.order, true, ChordalRotationsOrdered); ok {
		return x, err // priors.go
	}
	poses, _, err := chordalRotationsWith(p.g, p.order, posegraph.Rotations, p.sym)
	if err != nil {
		return nil, err
	}
	rotationGauge(p.g, poses)
	return poses, nil
}

// RecoverTranslations is RecoverTranslationsOrdered(g, poses, order),
// with the translation system factored once for every call.
func (p *Plan) RecoverTranslations(poses []posegraph.Pose) error {
	g := p.g
	if err := checkPoses(g, poses); err != nil {
		return err
	}
	if g.N() == 1 {
		return nil
	}
	ts, err := p.translations()
	if err != nil {
		return err
	}
	return ts.recover(g, poses)
}

// translations returns the factored translation system, made on first use.
func (p *Plan) translations() (*translationSystem, error) {
	if p.ts != nil {
		return p.ts, nil
	}
	g := p.g
	if !p.checked {
		if err := checkGraph(g); err != nil {
			return nil, err
		}
		p.checked = true
	}
	var ts *translationSystem
	var err error
	if p.order != nil {
		// The grounded system shares the plan's analysis of Q's pattern.
		if _, err := reducedOrder(p.order, g.N(), g.Anchor()); err != nil {
			return nil, fmt.Errorf("%s: translation recovery: %w", source(g), err)
		}
		ts, err = newGroundedSystem(g, blockPerm(p.order, 1), p.sym, p.from, p.keep)
		if p.from != nil {
			// The earlier factor has served: its storage goes to the
			// next factorization of about its size (the next step's
			// translation system), not one step later.
			p.from.ts.chol.Release()
			p.from = nil
		}
	} else {
		ts, err = newTranslationSystem(g, nil)
	}
	if err != nil {
		return nil, err
	}
	p.ts = ts
	return ts, nil
}

// RefactorFrom lets p's translation system, when it is factored, copy
// from prev's factor the part that did not change: the columns of L
// whose subtree of the elimination tree holds no changed row of the
// system (sparse.Cholesky.FactorizeBlocksFrom). poseMap[i] is the pose of
// p's graph that pose i of prev's became (-1: none). The factor is the
// one p would make without it, bit for bit; what is copied depends on
// how much of p's order keeps prev's (sync's Incremental keeps it where
// the graph did not change). prev's factor must stay unreleased until p's
// is made; p holds prev until then, and then releases prev's translation
// factor (sparse.Cholesky.Release: prev solves no translations after
// that). A prev with no factored system (or nil), or a plan without an
// order, copies nothing. Either way p's system keeps its matrix, and its
// factor the record of it, for a later plan's RefactorFrom: a plan that no
// RefactorFrom named keeps neither.
func (p *Plan) RefactorFrom(prev *Plan, poseMap []int) {
	p.from, p.keep = nil, true
	if prev == nil || prev.ts == nil || !prev.ts.grounded || prev.ts.lap == nil || len(poseMap) != prev.ts.lap.N {
		return
	}
	p.from = &groundedSource{ts: prev.ts, poseMap: poseMap}
}

// TranslationsOnly returns a plan that holds p's factored translation
// system alone (if p made it), for a later RefactorFrom: it keeps neither
// p's graph nor its graph's edges alive (a graph's edges are scanned by
// every collection while they live); the system's matrix shares the
// pattern of Q's analysis. The system moves: p factors it again if it is
// used after.
func (p *Plan) TranslationsOnly() *Plan {
	if p == nil {
		return nil
	}
	q := &Plan{ts: p.ts}
	p.ts = nil
	return q
}

// Reuse is what the translation system's factorization copied from the
// earlier plan's (RefactorFrom): supernodes and flops (the sum of the
// squared column counts of L) copied, of the factor's, all zero before
// the system is made or when nothing could be copied from.
type Reuse struct {
	Supernodes, Copied int
	Flops, CopiedFlops float64
}

// Reused reports what p's translation factor copied (Reuse).
func (p *Plan) Reused() Reuse {
	if p == nil || p.ts == nil {
		return Reuse{}
	}
	r := p.ts.reuse
	return Reuse{Supernodes: r.Supernodes, Copied: r.Copied, Flops: r.Flops, CopiedFlops: r.CopiedFlops}
}

// Release lets a later factorization reuse the storage of the plan's
// factored translation system (sparse.Cholesky.Release); a later use of
// the plan factors it again.
func (p *Plan) Release() {
	if p != nil && p.ts != nil {
		p.ts.chol.Release()
		p.ts = nil
	}
	if p != nil {
		p.from = nil
	}
}

// Anchor is the pose whose translation the translation system holds
// (g.Anchor()).
func (p *Plan) Anchor() int { return p.g.Anchor() }

// SolveTranslations solves the translation system L x = rhs, L the
// tau-weighted Laplacian without the anchor's row and column, for the
// n-1 unknowns of the poses other than the anchor, in pose order (pose i
// at i, or at i-1 after the anchor).
func (p *Plan) SolveTranslations(x, rhs []float64) error {
	if p.g.N() == 1 {
		return nil
	}
	ts, err := p.translations()
	if err != nil {
		return err
	}
	ts.solve(x, rhs)
	return nil
}
