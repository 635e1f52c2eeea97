package sync

import (
	"github.com/bcmsync/bcmsync/posegraph"
	"github.com/bcmsync/bcmsync/rounding"
)

// Priors (posegraph's priors.go) are edges from the world vertex W, so the
// solver, the certificate and the rounding need nothing of their own: W is
// the gauge anchor, with the identity as its input estimate, and the
// estimate comes out in the priors' world frame. Two things do:
//
//   - the chordal and odometry initializations need each vertex's
//     rotation seen by some edge with kappa > 0, and W has none when its
//     priors are all position priors (GPS). They initialize the graph
//     without W, then place W where the priors put it for that estimate
//     (placeWorld), a closed form;
//   - rotation synchronization has no use for position priors (their
//     kappa is 0): SolveWith drops them, and W with them when no pose
//     prior is left (posegraph.Graph.WithoutPositionPriors).

// initWithoutWorld initializes g, whose world vertex is w, by opts.Init
// on the graph without w, and places w by placeWorld. ok is false when
// the rest of the graph is not connected without w (the priors join its
// parts): the caller then initializes g as it is.
func initWithoutWorld(g *posegraph.Graph, opts Options, order []int, w int) (x []posegraph.Pose, ok bool, err error) {
	h := g.WithoutPriors()
	if len(h.Components()) > 1 {
		return nil, false, nil
	}
	var ho []int
	if order != nil {
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
	xh, err := initialize(h, opts, ho)
	if err != nil {
		return nil, true, err
	}
	x = make([]posegraph.Pose, g.N())
	copy(x[:w], xh[:w])
	copy(x[w+1:], xh[w:])
	x[w] = placeWorld(g, x, w, opts.Problem)
	rounding.ToGauge(g, x)
	if opts.Problem == posegraph.Rotations {
		for i := range x {
			x[i].T = [3]float64{}
		}
	}
	return x, true, nil
}

// placeWorld returns the pose of the world vertex w that minimizes the
// priors' terms of F for the other vertices at x: with the translation
// at its optimum t_W = abar - R_W bbar (the tau-weighted means of the
// poses' positions a and the measured ones b), the terms are a constant
// less 2 <R_W, M>, where
//
//	M = sum kappa R_i R^T + sum tau (a - abar)(b - bbar)^T,
//
// so R_W is the rotation nearest to M (orthogonal Procrustes). For
// Rotations only the first sum is taken and t_W = 0.
func placeWorld(g *posegraph.Graph, x []posegraph.Pose, w int, prob posegraph.Problem) posegraph.Pose {
	d := g.D
	var m [9]float64
	var abar, bbar [3]float64
	sw := 0.0
	poses := prob == posegraph.Poses
	for k := range g.Edges {
		e := &g.Edges[k]
		if e.Prior == posegraph.NoPrior {
			continue
		}
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
		if poses {
			sw += e.Tau
			for a := 0; a < d; a++ {
				abar[a] += e.Tau * x[e.J].T[a]
				bbar[a] += e.Tau * e.T[a]
			}
		}
	}
	if poses && sw > 0 {
		for a := 0; a < d; a++ {
			abar[a] /= sw
			bbar[a] /= sw
		}
		for k := range g.Edges {
			e := &g.Edges[k]
			if e.Prior == posegraph.NoPrior {
				continue
			}
			for a := 0; a < d; a++ {
				for c := 0; c < d; c++ {
					m[a*d+c] += e.Tau * (x[e.J].T[a] - abar[a]) * (e.T[c] - bbar[c])
				}
			}
		}
	}
	p := posegraph.Pose{R: rounding.NearestRotation(m[:d*d], d)}
	if poses {
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
