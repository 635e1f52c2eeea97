package datasets

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"

	"github.com/bcmsync/bcmsync/posegraph"
)

// OutlierConfig says how AddOutliers corrupts a graph with wrong loop
// closures, the failure a place-recognition front end produces: an edge
// between two unrelated poses with a measurement that has nothing to do with
// them, written with a confident information matrix.
type OutlierConfig struct {
	// Fraction is the number of outliers relative to the graph's edge count
	// (0.05 adds round(0.05 m) edges); Count, when positive, sets the number
	// directly instead.
	Fraction float64
	Count    int
	// MaxTranslation bounds each coordinate of the outlier's measured
	// translation, drawn uniformly from [-MaxTranslation, MaxTranslation]
	// (0: 5, in the graph's units). The measured rotation is uniform on
	// SO(d) (Haar): in 2-D an angle uniform in (-pi, pi].
	MaxTranslation float64
	// Kappa and Tau are the precisions written on every outlier (0: the
	// median over the graph's own edges, so an outlier is as confident as
	// a typical inlier and cannot be told apart by its weight).
	Kappa, Tau float64
	// Seed selects the random stream.
	Seed uint64
}

// outlierStream is the PCG stream of AddOutliers, apart from the generators'.
const outlierStream = 0x5eed_0003

// AddOutliers returns a copy of g with wrong loop closures appended after
// its edges, and a mask over the new graph's edges that is true exactly for
// the outliers (the ground truth for measuring outlier rejection). Each
// outlier joins two distinct poses that are not consecutive (|i - j| > 1 in
// index order, so it can never pass for odometry) with a random relative
// pose; the input graph is not changed. The same graph and configuration
// give the same bits.
func AddOutliers(g *posegraph.Graph, cfg OutlierConfig) (*posegraph.Graph, []bool, error) {
	n, m, d := g.N(), g.M(), g.D
	count := cfg.Count
	if count <= 0 {
		if !(cfg.Fraction >= 0) || math.IsInf(cfg.Fraction, 0) {
			return nil, nil, fmt.Errorf("datasets: outliers: Fraction = %g must be a finite number >= 0", cfg.Fraction)
		}
		count = int(math.Round(cfg.Fraction * float64(m)))
	}
	if count > 0 && n < 3 {
		return nil, nil, fmt.Errorf("datasets: outliers: a graph of %d poses has no pair of non-consecutive poses", n)
	}
	maxT := cfg.MaxTranslation
	if maxT == 0 {
		maxT = 5
	}
	if !(maxT > 0) || math.IsInf(maxT, 0) {
		return nil, nil, fmt.Errorf("datasets: outliers: MaxTranslation = %g must be positive and finite", cfg.MaxTranslation)
	}
	kappa, tau, err := wrongWeights(g, cfg.Kappa, cfg.Tau, "outliers")
	if err != nil {
		return nil, nil, err
	}

	out := *g
	out.Edges = make([]posegraph.Edge, m, m+count)
	copy(out.Edges, g.Edges)
	mask := make([]bool, m+count)
	rng := rand.New(rand.NewPCG(cfg.Seed, outlierStream))
	for k := 0; k < count; k++ {
		var i, j int
		for {
			i, j = rng.IntN(n), rng.IntN(n)
			if i-j > 1 || j-i > 1 {
				break
			}
		}
		e := posegraph.Edge{I: i, J: j, R: randomRotation(rng, d), Kappa: kappa, Tau: tau}
		for a := 0; a < d; a++ {
			e.T[a] = maxT * (2*rng.Float64() - 1)
		}
		out.Edges = append(out.Edges, e)
		mask[m+k] = true
	}
	return &out, mask, nil
}

// wrongWeights returns the precisions to write on wrong closures: kappa and
// tau, each the median over g's edges where 0, checked positive and
// finite (what names the generator in the error).
func wrongWeights(g *posegraph.Graph, kappa, tau float64, what string) (float64, float64, error) {
	if kappa == 0 || tau == 0 {
		mk, mt := medianWeights(g)
		if kappa == 0 {
			kappa = mk
		}
		if tau == 0 {
			tau = mt
		}
	}
	if !(kappa > 0) || !(tau > 0) || math.IsInf(kappa, 0) || math.IsInf(tau, 0) {
		return 0, 0, fmt.Errorf("datasets: %s: Kappa = %g and Tau = %g must be positive and finite", what, kappa, tau)
	}
	return kappa, tau, nil
}

// medianWeights returns the median kappa and tau over g's edges (1 and 1
// for a graph without edges).
func medianWeights(g *posegraph.Graph) (kappa, tau float64) {
	if g.M() == 0 {
		return 1, 1
	}
	ks, ts := make([]float64, g.M()), make([]float64, g.M())
	for k, e := range g.Edges {
		ks[k], ts[k] = e.Kappa, e.Tau
	}
	sort.Float64s(ks)
	sort.Float64s(ts)
	return ks[len(ks)/2], ts[len(ts)/2]
}
