package rounding

import (
	"github.com/bcmsync/bcmsync/posegraph"
)

// The chordal and odometry initializations need each vertex's rotation
// seen by an edge with kappa > 0, and the world vertex of a graph with
// priors (posegraph's priors.go) has none when its priors are all
// position priors (GPS). They therefore initialize the graph without it
// and place it where the priors put it for that estimate (placeWorld), a
// closed form; with pose priors this is as good a start, and it needs no
// second path.

// aroundWorld initializes g by init on g without its world vertex w, then
// moves that estimate into the world frame: it places w by placeWorld and
// multiplies the poses by its inverse. When the rest of g falls apart
// without w (poses joined only through their priors, as an agent's share
// of a graph may be), each part is initialized and placed on its own, by
// its own priors; a part of one pose starts at the identity. The result
// is in g's gauge (w at its input pose). ok is false when g has no world
// vertex. order, if not nil, is an elimination order of g's vertices,
// passed on without w to a graph that stays whole.
func aroundWorld(g *posegraph.Graph, order []int, rotations bool,
	init func(h *posegraph.Graph, order []int) ([]posegraph.Pose, error)) (x []posegraph.Pose, ok bool, err error) {
	w := g.World()
	if w < 0 {
		return nil, false, nil
	}
	d := g.D
	h := g.WithoutPriors()
	comps := h.Components()
	var ho []int
	if order != nil && len(comps) == 1 {
		ho = make([]int, 0, len(order)-1)
		for _, i := range order {
			switch {
			case i < w:
				ho = append(ho, i)
			case i > w:
				ho = append(ho, i-1)
			}
		}
	}
	// Each part is placed by its own priors: bucket them by part once, and
	// split h in one pass, so that many parts (an agent's share of a graph
	// held together by GPS fixes) cost no more than one.
	subs := []*posegraph.Graph{h}
	if len(comps) > 1 {
		subs = h.Subgraphs(comps)
	}
	compOf := make([]int32, g.N()) // g's index -> part
	for c, comp := range comps {
		for _, i := range comp {
			if i >= w {
				i++ // h's index i is g's i+1 past the world vertex
			}
			compOf[i] = int32(c)
		}
	}
	priors := make([][]int, len(comps))
	for _, k := range priorEdges(g) {
		c := compOf[g.Edges[k].J]
		priors[c] = append(priors[c], k)
	}
	x = make([]posegraph.Pose, g.N())
	for c, comp := range comps {
		xc := []posegraph.Pose{posegraph.Identity(d)}
		if len(comp) > 1 {
			if xc, err = init(subs[c], ho); err != nil {
				return nil, true, err
			}
		}
		for k, i := range comp {
			if i >= w {
				i++
			}
			x[i] = xc[k]
		}
		p := placeWorld(g, x, rotations, priors[c])
		inv := posegraph.Inverse(&p, d)
		for _, i := range comp {
			if i >= w {
				i++
			}
			x[i] = posegraph.Compose(&inv, &x[i], d)
			if rotations {
				x[i].T = [3]float64{}
			}
		}
	}
	x[w] = posegraph.Identity(d)
	if rotations {
		rotationGauge(g, x)
	} else {
		ToGauge(g, x)
	}
	return x, true, nil
}

// priorEdges returns the indices of g's priors among its edges.
func priorEdges(g *posegraph.Graph) []int {
	var ks []int
	for k := range g.Edges {
		if g.Edges[k].Prior != posegraph.NoPrior {
			ks = append(ks, k)
		}
	}
	return ks
}

// placeWorld returns the pose of the world vertex that minimizes the
// terms of F of the priors at x (the edges of g listed in priors): with
// the translation
// at its optimum t_W = abar - R_W bbar (the tau-weighted means of the
// poses' positions a and the measured ones b), the terms are a constant
// less 2 <R_W, M>, where
//
//	M = sum kappa R_i R^T + sum tau (a - abar)(b - bbar)^T,
//
// so R_W is the rotation nearest to M (orthogonal Procrustes). For
// rotations only the first sum is taken and t_W = 0.
func placeWorld(g *posegraph.Graph, x []posegraph.Pose, rotations bool, priors []int) posegraph.Pose {
	d := g.D
	var m [9]float64
	var abar, bbar [3]float64
	sw := 0.0
	for _, k := range priors {
		e := &g.Edges[k]
		if e.Prior == posegraph.PosePrior {
			ri := &x[e.J].R
			for a := 0; a < d; a++ {
				for c := 0; c < d; c++ {
					s := 0.0
					for l := 0; l < d; l++ {
						s += ri[a*d+l] * e.R[c*d+l]
					}
					m[a*d+c] += e.Kappa * s
				}
			}
		}
		if !rotations {
			sw += e.Tau
			for a := 0; a < d; a++ {
				abar[a] += e.Tau * x[e.J].T[a]
				bbar[a] += e.Tau * e.T[a]
			}
		}
	}
	if !rotations && sw > 0 {
		for a := 0; a < d; a++ {
			abar[a] /= sw
			bbar[a] /= sw
		}
		for _, k := range priors {
			e := &g.Edges[k]
			for a := 0; a < d; a++ {
				for c := 0; c < d; c++ {
					m[a*d+c] += e.Tau * (x[e.J].T[a] - abar[a]) * (e.T[c] - bbar[c])
				}
			}
		}
	}
	p := posegraph.Pose{R: NearestRotation(m[:d*d], d)}
	if !rotations {
		for a := 0; a < d; a++ {
			s := abar[a]
			for c := 0; c < d; c++ {
				s -= p.R[a*d+c] * bbar[c]
			}
			p.T[a] = s
		}
	}
	return p
}

// SettleWorld improves a rounded estimate of a graph with priors (nothing
// to do without): the relaxation lets the world vertex's rotation range
// over O(d), and where the priors alone cannot tell a rotation from a
// reflection (two GPS fixes in 2-D, fixes on a plane in 3-D) it may come
// out reflected while the poses do not, and the rounding's projection of
// it onto SO(d) is then far from its optimum. SettleWorld places the world
// vertex where the priors put it for the other poses (placeWorld), then
// recovers the translations for it, and so on while F falls (each moves
// the other), and keeps that estimate when its F is lower. poses is
// updated in place.
func (p *Plan) SettleWorld(poses []posegraph.Pose, rotations bool) error {
	g := p.g
	w := g.World()
	if w < 0 {
		return nil
	}
	prob := posegraph.Poses
	if rotations {
		prob = posegraph.Rotations
	}
	cand := append([]posegraph.Pose(nil), poses...)
	all := priorEdges(g)
	f0 := g.Cost(poses, prob)
	f := f0
	for it := 0; it < settleSteps; it++ {
		cand[w] = placeWorld(g, cand, rotations, all)
		if rotations {
			f = g.Cost(cand, prob)
			break
		}
		if err := p.RecoverTranslations(cand); err != nil {
			return err
		}
		fn := g.Cost(cand, prob)
		done := !(fn < f*(1-1e-12))
		f = fn
		if done {
			break
		}
	}
	if f < f0 {
		copy(poses, cand)
	}
	return nil
}

// settleSteps bounds SettleWorld's alternation of the world vertex's
// placement and the translations' recovery, each exact given the other:
// F falls at every step, and each costs a solve with the translation
// system's factor, which the plan keeps.
const settleSteps = 50
