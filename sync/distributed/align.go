package distributed

import (
	"fmt"

	"github.com/bcmsync/bcmsync/internal/smalldense"
	"github.com/bcmsync/bcmsync/posegraph"
	"github.com/bcmsync/bcmsync/rounding"
)

// The distributed initialization: each agent's chordal estimate of its own
// poses, moved into its aligned neighbours' frame through the shared edges.

// localChordal is the chordal estimate of sub, the subgraph of the own
// poses (ownGraph), in its own frame (its first pose at the identity); a
// part whose subgraph is disconnected gets each component's estimate,
// each in its own frame, and the alignment through shared edges joins
// them only as far as the edges reach.
func localChordal(sub *posegraph.Graph, kind posegraph.Problem) ([]posegraph.Pose, []int, int, error) {
	sub.Fixed = nil
	out := make([]posegraph.Pose, sub.N())
	compOf := make([]int, sub.N())
	comps := sub.Components()
	cgs := []*posegraph.Graph{sub}
	if len(comps) > 1 {
		cgs = sub.Subgraphs(comps) // one pass over the edges, not one per component
	}
	for ci, comp := range comps {
		cg := cgs[ci]
		var poses []posegraph.Pose
		var err error
		switch {
		case len(comp) == 1:
			poses = []posegraph.Pose{posegraph.Identity(sub.D)}
		case kind == posegraph.Rotations:
			poses, err = rounding.ChordalRotations(cg)
		default:
			poses, err = rounding.Chordal(cg)
		}
		if err != nil {
			return nil, nil, 0, fmt.Errorf("chordal estimate of its poses: %w", err)
		}
		for c, i := range comp {
			out[i] = poses[c]
			compOf[i] = ci
		}
	}
	return out, compOf, len(comps), nil
}

// ownGraph is g's subgraph on the own poses (Subgraph) without the
// records as read (Meas, Info, which would hold on to the parse's arrays):
// localChordal's input, made before the agent lets g go.
func ownGraph(g *posegraph.Graph, own []int) *posegraph.Graph {
	sub := g.Subgraph(own)
	for i := range sub.Edges {
		sub.Edges[i].Meas, sub.Edges[i].Info = nil, nil
	}
	return sub
}

// align moves the own chordal estimate (mu held) into the frame of the
// neighbours named in needs, through the shared edges to them: each edge
// predicts an own pose from a neighbour's, and the rigid motion A that
// best maps the local estimates onto the predictions (rotation: the
// nearest rotation to sum_e kappa_e Rpred_e Rloc_e^T; translation: the
// tau-weighted mean of tpred - R_A tloc) is applied to every own pose.
// With no such edge (the first agent) nothing moves.
func (a *agent) align(needs []need) {
	l, d, b := a.l, a.l.d, a.l.b
	aligned := map[int]bool{}
	for _, n := range needs {
		aligned[n.Part] = true
	}
	nc := a.ncomp
	m := make([][9]float64, nc)
	tsum := make([][3]float64, nc)
	wsum := make([]float64, nc)
	npred := make([]int, nc)
	type pred struct {
		li   int
		r    [9]float64
		t    [3]float64
		kap  float64
		tauw float64
	}
	var preds []pred
	for _, e := range a.edges {
		var own, other int
		var forward bool
		switch {
		case a.p.Part[e.J] == l.part && aligned[a.p.Part[e.I]]:
			own, other, forward = e.J, e.I, true
		case a.p.Part[e.I] == l.part && aligned[a.p.Part[e.J]]:
			own, other, forward = e.I, e.J, false
		default:
			continue
		}
		blk := l.x.Block(l.globalToLocal[other])
		var ro [9]float64
		var to [3]float64
		for r := 0; r < d; r++ {
			for c := 0; c < d; c++ {
				ro[r*d+c] = blk[r*b+c]
			}
			if b > d {
				to[r] = blk[r*b+d]
			}
		}
		var pr pred
		pr.li, pr.kap, pr.tauw = l.globalToLocal[own], e.Kappa, e.Tau
		// forward: x_own = x_other * (R_e, t_e); else x_own = x_other * (R_e, t_e)^-1.
		for r := 0; r < d; r++ {
			for c := 0; c < d; c++ {
				s := 0.0
				for k := 0; k < d; k++ {
					if forward {
						s += ro[r*d+k] * e.R[k*d+c]
					} else {
						s += ro[r*d+k] * e.R[c*d+k]
					}
				}
				pr.r[r*d+c] = s
			}
		}
		for r := 0; r < d; r++ {
			s := to[r]
			for k := 0; k < d; k++ {
				if forward {
					s += ro[r*d+k] * e.T[k]
				} else {
					s -= pr.r[r*d+k] * e.T[k]
				}
			}
			pr.t[r] = s
		}
		preds = append(preds, pr)
		loc := a.chordal[pr.li]
		ci := a.comp[pr.li]
		npred[ci]++
		for r := 0; r < d; r++ {
			for c := 0; c < d; c++ {
				for k := 0; k < d; k++ {
					m[ci][r*d+c] += e.Kappa * pr.r[r*d+k] * loc.R[c*d+k]
				}
			}
		}
	}
	ras := make([][9]float64, nc)
	for ci := range ras {
		if npred[ci] == 0 {
			ras[ci] = posegraph.Identity(d).R
			continue
		}
		smalldense.NearestRotation(ras[ci][:d*d], m[ci][:d*d], d)
	}
	if b > d {
		for _, pr := range preds {
			loc := a.chordal[pr.li]
			ci := a.comp[pr.li]
			ra := &ras[ci]
			for r := 0; r < d; r++ {
				s := pr.t[r]
				for k := 0; k < d; k++ {
					s -= ra[r*d+k] * loc.T[k]
				}
				tsum[ci][r] += pr.tauw * s
			}
			wsum[ci] += pr.tauw
		}
	}
	for li, loc := range a.chordal {
		ci := a.comp[li]
		ra := &ras[ci]
		var p posegraph.Pose
		for r := 0; r < d; r++ {
			for c := 0; c < d; c++ {
				s := 0.0
				for k := 0; k < d; k++ {
					s += ra[r*d+k] * loc.R[k*d+c]
				}
				p.R[r*d+c] = s
			}
			if b > d {
				s := 0.0
				if wsum[ci] > 0 {
					s = tsum[ci][r] / wsum[ci]
				}
				for k := 0; k < d; k++ {
					s += ra[r*d+k] * loc.T[k]
				}
				p.T[r] = s
			}
		}
		l.setPose(li, p)
	}
}
