package datasets

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/bcmsync/bcmsync/posegraph"
)

// MixedConfig configures Mixed: a small random pose graph whose edges
// carry weights spanning many decades, each measurement drawn at its own
// weights (so the data are consistent with them).
type MixedConfig struct {
	// D is the dimension, 2 or 3; N the number of poses, at least 2.
	D, N int
	// Closures is the number of edges beyond the odometry chain, each
	// between a distinct pair of poses not adjacent on the chain (at most
	// N(N-1)/2 - (N-1) of them).
	Closures int
	// MinWeight and MaxWeight bound every edge's kappa and tau, drawn
	// independently and log-uniformly in [MinWeight, MaxWeight]
	// (0 < MinWeight <= MaxWeight).
	MinWeight, MaxWeight float64
	// NoiseFree makes every measurement exact (the weights are still
	// drawn and written).
	NoiseFree bool
	// Seed selects the random streams (structure and weights from one,
	// noise from the other, as Config.Seed does).
	Seed uint64
}

// Mixed returns a random pose graph with per-edge weights: N poses with
// Haar-random orientations at positions uniform in a cube of side
// N^(1/D) (unit density), the odometry chain (i-1, i) through them in
// index order, and Closures more edges between random non-adjacent pairs.
// Each edge's kappa and tau are drawn log-uniformly in [MinWeight,
// MaxWeight] and its measurement is the truth with noise at exactly those
// weights (see the package's noise model), so F at the truth has the
// chi-squared distribution ExpectedCost describes. Weights spanning six
// decades make the connection Laplacian's diagonal span as many, which is
// what the certificate's scaling must cope with. The initial poses are
// the odometry composed from the first true pose, as for every family.
func Mixed(cfg MixedConfig) (*posegraph.Graph, []posegraph.Pose, error) {
	d, n := cfg.D, cfg.N
	switch {
	case d != 2 && d != 3:
		return nil, nil, fmt.Errorf("datasets: Mixed: dimension %d is not 2 or 3", d)
	case n < 2:
		return nil, nil, fmt.Errorf("datasets: Mixed: need N >= 2 poses, have %d", n)
	case cfg.Closures < 0 || cfg.Closures > n*(n-1)/2-(n-1):
		return nil, nil, fmt.Errorf("datasets: Mixed: %d closures is not in [0, %d] for %d poses", cfg.Closures, n*(n-1)/2-(n-1), n)
	case !(cfg.MinWeight > 0) || !(cfg.MaxWeight >= cfg.MinWeight) || math.IsInf(cfg.MaxWeight, 0):
		return nil, nil, fmt.Errorf("datasets: Mixed: weights [%g, %g] are not a finite positive range", cfg.MinWeight, cfg.MaxWeight)
	}
	// The builder's Kappa and Tau are unused: every edge is measured at
	// its own weights.
	b := newBuilder(d, Config{Kappa: cfg.MinWeight, Tau: cfg.MinWeight, NoiseFree: cfg.NoiseFree, Seed: cfg.Seed},
		fmt.Sprintf("mixed%dd(n=%d,closures=%d,w=%g..%g)", d, n, cfg.Closures, cfg.MinWeight, cfg.MaxWeight))
	side := math.Pow(float64(n), 1/float64(d))
	b.truth = make([]posegraph.Pose, n)
	for i := range b.truth {
		for k := 0; k < d; k++ {
			b.truth[i].T[k] = side * b.rng.Float64()
		}
		b.truth[i].R = randomRotation(b.rng, d)
	}
	logMin, logMax := math.Log(cfg.MinWeight), math.Log(cfg.MaxWeight)
	weight := func() float64 { return math.Exp(logMin + (logMax-logMin)*b.rng.Float64()) }
	b.chain = make([]int, n)
	for j := 1; j < n; j++ {
		b.chain[j] = len(b.edges)
		b.measureWeighted(j-1, j, weight(), weight())
	}
	used := map[[2]int]bool{}
	for c := 0; c < cfg.Closures; {
		i, j := b.rng.IntN(n), b.rng.IntN(n)
		if i > j {
			i, j = j, i
		}
		if j-i < 2 || used[[2]int{i, j}] {
			continue
		}
		used[[2]int{i, j}] = true
		b.measureWeighted(i, j, weight(), weight())
		c++
	}
	g, truth := b.graph()
	return g, truth, nil
}

// RandomConsistent draws the configuration of one random consistent graph
// from seed, the population on which the certified rate is measured
// (issue 24): dimension 2 or 3, 3 to 60 poses, up to two closures per pose
// (as many as the pairs allow), weights from 10 to 1e6, noise drawn at
// the stated weights. Mixed(RandomConsistent(seed)) is the graph.
func RandomConsistent(seed uint64) MixedConfig {
	rng := rand.New(rand.NewPCG(seed, 0x5eed_0003))
	n := 3 + rng.IntN(58)
	maxClosures := min(2*n, n*(n-1)/2-(n-1))
	return MixedConfig{
		D: 2 + rng.IntN(2), N: n, Closures: rng.IntN(maxClosures + 1),
		MinWeight: 10, MaxWeight: 1e6, Seed: seed,
	}
}
