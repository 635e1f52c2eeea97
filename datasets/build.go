package datasets

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/bcmsync/bcmsync/internal/smalldense"
	"github.com/bcmsync/bcmsync/posegraph"
)

// Config holds what every generator shares: the noise, the loop-closure
// probability and the seed.
type Config struct {
	// Kappa and Tau are the rotation and translation precisions written on
	// every edge, both > 0. Unless NoiseFree is set, rotation noise is
	// Langevin(I, Kappa) on SO(d) (angle standard deviation about
	// 1/sqrt(2 Kappa) per axis) and translation noise N(0, I/Tau); see
	// EdgeCostMoments for the resulting cost statistics.
	Kappa, Tau float64
	// NoiseFree makes every measurement exact; Kappa and Tau are still
	// written as the edges' weights.
	NoiseFree bool
	// LoopProb is the probability, in [0, 1], that each candidate loop
	// closure of the family is kept.
	LoopProb float64
	// Seed selects the random streams. The structure (the path, which
	// closures are kept) and the noise come from separate streams, so a
	// NoiseFree graph has the same edges as the noisy one with the same
	// seed.
	Seed uint64
}

// Streams of the PCG generator: one for the structure, one for the noise.
const (
	structureStream = 0x5eed_0001
	noiseStream     = 0x5eed_0002
)

func (c Config) check(family string) error {
	if !(c.Kappa > 0) || math.IsInf(c.Kappa, 0) {
		return fmt.Errorf("datasets: %s: Kappa = %g must be positive and finite", family, c.Kappa)
	}
	if !(c.Tau > 0) || math.IsInf(c.Tau, 0) {
		return fmt.Errorf("datasets: %s: Tau = %g must be positive and finite", family, c.Tau)
	}
	if !(c.LoopProb >= 0 && c.LoopProb <= 1) {
		return fmt.Errorf("datasets: %s: LoopProb = %g is not in [0, 1]", family, c.LoopProb)
	}
	return nil
}

// builder assembles a generated graph: the true poses first, then edges in
// the order of the walk, each measured from the truth with noise.
type builder struct {
	d      int
	cfg    Config
	rng    *rand.Rand // structure
	noise  *rand.Rand
	truth  []posegraph.Pose
	edges  []posegraph.Edge
	chain  []int // chain[j] is the index in edges of odometry edge (j-1, j)
	source string
}

func newBuilder(d int, cfg Config, source string) *builder {
	return &builder{
		d:      d,
		cfg:    cfg,
		rng:    rand.New(rand.NewPCG(cfg.Seed, structureStream)),
		noise:  rand.New(rand.NewPCG(cfg.Seed, noiseStream)),
		source: fmt.Sprintf("%s,seed=%d)", strings.TrimSuffix(source, ")"), cfg.Seed),
	}
}

// keep draws one loop-closure coin. The coin is drawn whatever LoopProb is,
// so the structure stream advances identically for every LoopProb and, in
// generators that also walk at random, the walk does not depend on it.
// (Float64 is in [0, 1): p = 1 always keeps, p = 0 never does.)
func (b *builder) keep() bool {
	return b.rng.Float64() < b.cfg.LoopProb
}

// measure appends the edge (i, j) measured from the truth with noise, at
// the configuration's weights.
func (b *builder) measure(i, j int) {
	b.measureWeighted(i, j, b.cfg.Kappa, b.cfg.Tau)
}

// measureWeighted appends the edge (i, j) with weights kappa and tau,
// measured from the truth with noise drawn at those weights.
func (b *builder) measureWeighted(i, j int, kappa, tau float64) {
	d := b.d
	pi, pj := &b.truth[i], &b.truth[j]
	e := posegraph.Edge{I: i, J: j, Kappa: kappa, Tau: tau}
	e.R = smalldense.MulTN(&pi.R, &pj.R, d)
	dt := [3]float64{pj.T[0] - pi.T[0], pj.T[1] - pi.T[1], pj.T[2] - pi.T[2]}
	e.T = smalldense.MulTVec(&pi.R, &dt, d)
	if !b.cfg.NoiseFree {
		// Both draws always happen, in this order, so that the noise
		// stream advances identically for every edge.
		rn := rotNoise(b.noise, d, kappa)
		e.R = smalldense.Mul(&e.R, &rn, d)
		sd := 1 / math.Sqrt(tau)
		for a := 0; a < d; a++ {
			e.T[a] += sd * b.noise.NormFloat64()
		}
	}
	b.edges = append(b.edges, e)
}

// odometry adds the chain edge (j-1, j); every generator calls it for each
// j >= 1 before any closure ending at j.
func (b *builder) odometry(j int) {
	for len(b.chain) <= j {
		b.chain = append(b.chain, -1)
	}
	b.chain[j] = len(b.edges)
	b.measure(j-1, j)
}

// graph returns the assembled graph, with the odometry chain composed from
// the first (true) pose as the initial estimate, the dead-reckoning guess a
// robot would have.
func (b *builder) graph() (*posegraph.Graph, []posegraph.Pose) {
	n := len(b.truth)
	g := &posegraph.Graph{
		D:          b.d,
		IDs:        make([]int, n),
		Edges:      b.edges,
		Initial:    make([]posegraph.Pose, n),
		HasInitial: make([]bool, n),
		Source:     b.source,
	}
	d := b.d
	for i := range g.IDs {
		g.IDs[i] = i
		g.HasInitial[i] = true
	}
	g.Initial[0] = b.truth[0]
	for j := 1; j < n; j++ {
		e := &b.edges[b.chain[j]]
		prev := &g.Initial[j-1]
		cur := &g.Initial[j]
		cur.R = smalldense.Mul(&prev.R, &e.R, d)
		for a := 0; a < d; a++ {
			s := prev.T[a]
			for k := 0; k < d; k++ {
				s += prev.R[a*d+k] * e.T[k]
			}
			cur.T[a] = s
		}
	}
	return g, b.truth
}

// frame3 returns the rotation whose columns are x, y = z cross x and z, for
// orthonormal x and z.
func frame3(x, z [3]float64) [9]float64 {
	y := cross(z, x)
	return [9]float64{
		x[0], y[0], z[0],
		x[1], y[1], z[1],
		x[2], y[2], z[2],
	}
}

func cross(a, b [3]float64) [3]float64 {
	return [3]float64{a[1]*b[2] - a[2]*b[1], a[2]*b[0] - a[0]*b[2], a[0]*b[1] - a[1]*b[0]}
}
