package posegraph

// EdgeCosts writes each edge's term of F at the poses x into dst (grown to
// g.M() if shorter) and returns it:
//
//	r_e^2 = kappa_e ||R_j - R_i R_e||_F^2 + tau_e ||t_j - t_i - R_i t_e||^2,
//
// the rotation term alone for Rotations. With g.RawRotations each term also
// holds kappa_e (d - ||R_e||_F^2), as in Cost, so the terms sum to Cost
// exactly as Cost sums them. A robust loss needs the terms one by one: an
// edge whose term is far above what its noise allows is an outlier.
func (g *Graph) EdgeCosts(dst []float64, x []Pose, p Problem) []float64 {
	if cap(dst) < g.M() {
		dst = make([]float64, g.M())
	}
	dst = dst[:g.M()]
	for k := range g.Edges {
		e := &g.Edges[k]
		// The terms Cost adds, in its order (EdgeCost leaves out the raw
		// reading's constant; a robust loss must see the whole term).
		rot, trans := g.edgeTerms(e, x, p, g.RawRotations)
		f := e.Kappa * rot
		if p == Poses {
			f += e.Tau * trans
		}
		dst[k] = f
	}
	return dst
}
