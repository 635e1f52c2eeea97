package datasets

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/bcmsync/bcmsync/internal/smalldense"
	"github.com/bcmsync/bcmsync/posegraph"
)

// redrawStream is the PCG stream of Redraw's noise.
const redrawStream = 0x5eed_0006

// Redraw returns a copy of g in which every measurement is drawn anew from
// the true vertices truth (g's ground truth, as the generators return it)
// with the noise the edge's own weights state: a pose edge's rotation
// times a Langevin(I, kappa_e) rotation on the right and its translation
// plus N(0, I/tau_e), a landmark observation plus N(0, I/tau_e) (see the
// noise model above). The structure, the weights, the ids, the FIX'ed
// vertices and the initial estimates are g's; each edge's recorded file
// values (Meas, Info) are dropped, since they no longer describe it. It
// serves Monte-Carlo studies: the same graph under independent noise, one
// draw per seed, as when checking that the spread of the optimum matches
// its computed covariance.
func Redraw(g *posegraph.Graph, truth []posegraph.Pose, seed uint64) (*posegraph.Graph, error) {
	if g == nil || len(truth) != g.N() {
		return nil, fmt.Errorf("datasets: Redraw: need a graph and its ground truth of the same length")
	}
	d := g.D
	if d != 2 && d != 3 {
		return nil, fmt.Errorf("datasets: Redraw: dimension %d is not 2 or 3", d)
	}
	rng := rand.New(rand.NewPCG(seed, redrawStream))
	out := *g
	out.Edges = make([]posegraph.Edge, len(g.Edges))
	out.Source = fmt.Sprintf("%s+redraw(seed=%d)", g.Source, seed)
	for k, e := range g.Edges {
		if e.I < 0 || e.I >= len(truth) || e.J < 0 || e.J >= len(truth) {
			return nil, fmt.Errorf("datasets: Redraw: edge %d (%d, %d) has an endpoint outside 0..%d", k, e.I, e.J, len(truth)-1)
		}
		pi, pj := &truth[e.I], &truth[e.J]
		e.Meas, e.Info = nil, nil
		dt := [3]float64{pj.T[0] - pi.T[0], pj.T[1] - pi.T[1], pj.T[2] - pi.T[2]}
		e.T = smalldense.MulTVec(&pi.R, &dt, d)
		if g.IsLandmark(e.J) {
			e.R = posegraph.Identity(d).R
		} else {
			if !(e.Kappa > 0) || math.IsInf(e.Kappa, 0) {
				return nil, fmt.Errorf("datasets: Redraw: edge %d has kappa = %g", k, e.Kappa)
			}
			e.R = smalldense.MulTN(&pi.R, &pj.R, d)
			rn := rotNoise(rng, d, e.Kappa)
			e.R = smalldense.Mul(&e.R, &rn, d)
		}
		if !(e.Tau > 0) || math.IsInf(e.Tau, 0) {
			return nil, fmt.Errorf("datasets: Redraw: edge %d has tau = %g", k, e.Tau)
		}
		sd := 1 / math.Sqrt(e.Tau)
		for a := 0; a < d; a++ {
			e.T[a] += sd * rng.NormFloat64()
		}
		out.Edges[k] = e
	}
	return &out, nil
}
