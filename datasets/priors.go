package datasets

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/bcmsync/bcmsync/posegraph"
)

// PriorConfig says how AddPriors puts GPS-like position priors on a
// graph's poses.
type PriorConfig struct {
	// N is the number of priors (> 0), each on another pose, at most the
	// number of poses.
	N int
	// Tau is the precision of every prior, > 0. Unless NoiseFree is set,
	// the measured position is the true one plus N(0, I/Tau) noise, so
	// tau ||t_i - T||^2 is twice its negative log-likelihood, as for the
	// pose edges.
	Tau       float64
	NoiseFree bool
	// Seed selects the random streams (the poses and the noise apart).
	Seed uint64
}

// PCG streams of AddPriors, apart from the others'.
const (
	priorStream      = 0x5eed_0006
	priorNoiseStream = 0x5eed_0007
)

// AddPriors returns a copy of g with pc.N position priors (posegraph's
// priors.go) on random poses, measuring their true positions in the
// truth's frame, which becomes the world frame, and the truth extended
// with the world vertex (the identity) at its index. truth must be g's
// ground truth. The priors follow every other edge, by ascending pose.
func AddPriors(g *posegraph.Graph, truth []posegraph.Pose, pc PriorConfig) (*posegraph.Graph, []posegraph.Pose, error) {
	switch {
	case g == nil || len(truth) != g.N() || g.N() == 0:
		return nil, nil, fmt.Errorf("datasets: AddPriors: need a graph and its ground truth of the same length")
	case g.HasPriors():
		return nil, nil, fmt.Errorf("datasets: AddPriors: %s has priors already", g.Source)
	case pc.N <= 0 || pc.N > g.NumPoses():
		return nil, nil, fmt.Errorf("datasets: AddPriors: N = %d must be in 1..%d (the poses)", pc.N, g.NumPoses())
	case !(pc.Tau > 0) || math.IsInf(pc.Tau, 0):
		return nil, nil, fmt.Errorf("datasets: AddPriors: Tau = %g must be positive and finite", pc.Tau)
	}
	d := g.D
	rng := rand.New(rand.NewPCG(pc.Seed, priorStream))
	noise := rand.New(rand.NewPCG(pc.Seed, priorNoiseStream))
	poses := rng.Perm(g.NumPoses())[:pc.N]
	slices.Sort(poses)
	ps := make([]posegraph.Prior, len(poses))
	sd := 1 / math.Sqrt(pc.Tau)
	for k, i := range poses {
		ps[k] = posegraph.Prior{Kind: posegraph.PositionPrior, Pose: i, T: truth[i].T, Tau: pc.Tau}
		if !pc.NoiseFree {
			for a := 0; a < d; a++ {
				ps[k].T[a] += sd * noise.NormFloat64()
			}
		}
	}
	out := g.WithPriors(ps)
	out.Source = fmt.Sprintf("%s+priors(n=%d,seed=%d)", g.Source, pc.N, pc.Seed)
	w := out.World()
	tr := slices.Insert(slices.Clone(truth), w, posegraph.Identity(d))
	return out, tr, nil
}
