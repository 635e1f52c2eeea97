package plots

import (
	"fmt"

	"github.com/bcmsync/bcmsync/posegraph"
)

// EdgeCosts returns each edge's term of the objective at the poses x
// (docs/design.md section 1, no factor 1/2):
//
//	c_e = kappa_e ||R_j - R_i Rt_e||_F^2 + tau_e ||t_j - t_i - R_i tt_e||^2,
//
// the second term only for posegraph.Poses. The costs sum to g.Cost(x, p)
// except on a graph read with RawRotations, whose Cost adds a constant
// per edge that no estimate can change, and which a per-edge colour scale
// should not show. dst is reused when it has room.
func EdgeCosts(dst []float64, g *posegraph.Graph, x []posegraph.Pose, p posegraph.Problem) ([]float64, error) {
	if g == nil {
		return nil, fmt.Errorf("plots: no graph")
	}
	if g.D != 2 && g.D != 3 {
		return nil, fmt.Errorf("plots: %s: dimension %d is not 2 or 3", g.Source, g.D)
	}
	n := g.N()
	if len(x) != n {
		return nil, fmt.Errorf("plots: %s: %d poses given for a graph of %d", g.Source, len(x), n)
	}
	if cap(dst) < len(g.Edges) {
		dst = make([]float64, len(g.Edges))
	}
	dst = dst[:len(g.Edges)]
	for k := range g.Edges {
		e := &g.Edges[k]
		if e.I < 0 || e.I >= n || e.J < 0 || e.J >= n {
			return nil, fmt.Errorf("plots: %s: edge %d (%d, %d) has an endpoint outside 0..%d", g.Source, k, e.I, e.J, n-1)
		}
		dst[k] = g.EdgeCost(e, x, p)
	}
	return dst, nil
}
