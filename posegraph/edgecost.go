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
	d := g.D
	for k := range g.Edges {
		e := &g.Edges[k]
		ri, rj := &x[e.I].R, &x[e.J].R
		s := 0.0
		for a := 0; a < d; a++ {
			for c := 0; c < d; c++ {
				v := rj[a*d+c]
				for l := 0; l < d; l++ {
					v -= ri[a*d+l] * e.R[l*d+c]
				}
				s += v * v
			}
		}
		if g.RawRotations {
			s += float64(d)
			for _, v := range e.R[:d*d] {
				s -= v * v
			}
		}
		f := e.Kappa * s
		if p == Poses {
			s = 0
			for a := 0; a < d; a++ {
				v := x[e.J].T[a] - x[e.I].T[a]
				for l := 0; l < d; l++ {
					v -= ri[a*d+l] * e.T[l]
				}
				s += v * v
			}
			f += e.Tau * s
		}
		dst[k] = f
	}
	return dst
}
