package cli

import (
	"github.com/bcmsync/bcmsync/posegraph"
)

// The priors' world vertex (posegraph's priors.go) is no vertex of the
// file, and nothing to draw: the pictures show a graph with priors
// without it and without the prior edges, in the world frame the
// estimate is in.

// fileVertices is g without its world vertex, with the means to carry
// per-vertex and per-edge data over: poses drops the world vertex's entry
// and edge maps an edge index of g to one of the graph (-1 for a prior).
type fileVertices struct {
	g     *posegraph.Graph
	world int
	edge  []int
}

func withoutWorld(g *posegraph.Graph) fileVertices {
	fv := fileVertices{g: g.WithoutPriors(), world: g.World()}
	if fv.world < 0 {
		return fv
	}
	fv.edge = make([]int, g.M())
	k := 0
	for i := range g.Edges {
		fv.edge[i] = -1
		if g.Edges[i].Prior == posegraph.NoPrior {
			fv.edge[i] = k
			k++
		}
	}
	return fv
}

// poses returns x (indexed like the graph with the world vertex) without
// the world vertex's entry; x itself when there is none, or x is nil.
func (fv fileVertices) poses(x []posegraph.Pose) []posegraph.Pose {
	if fv.world < 0 || x == nil {
		return x
	}
	out := make([]posegraph.Pose, 0, len(x)-1)
	out = append(out, x[:fv.world]...)
	return append(out, x[fv.world+1:]...)
}

// edges maps edge indices of the graph with priors to fv.g's, leaving the
// priors out.
func (fv fileVertices) edges(ks []int) []int {
	if fv.world < 0 {
		return ks
	}
	var out []int
	for _, k := range ks {
		if k >= 0 && k < len(fv.edge) && fv.edge[k] >= 0 {
			out = append(out, fv.edge[k])
		}
	}
	return out
}
