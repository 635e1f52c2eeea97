package datasets

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/bcmsync/bcmsync/internal/smalldense"
	"github.com/bcmsync/bcmsync/posegraph"
)

// AliasingConfig says how AddAliasing corrupts a graph with perceptual
// aliasing, the failure of place recognition in repetitive surroundings (a
// corridor that looks like another): a group of wrong loop closures that
// agree with each other. Each group claims that one stretch of consecutive
// poses lies at a wrong pose relative to another stretch, with one closure
// per pose of the stretch, and every closure of the group agrees with the
// odometry inside both stretches. Random wrong closures (AddOutliers)
// disagree with everything; a group supports itself, which is what
// misleads a robust solver that judges each edge by its residual alone.
type AliasingConfig struct {
	// Groups is the number of groups (> 0); Size the length of each
	// stretch, so the number of closures per group (0: 5).
	Groups, Size int
	// MaxTranslation bounds each coordinate of the wrong relative
	// translation claimed between the stretches' first poses, drawn
	// uniformly from [-MaxTranslation, MaxTranslation] (0: 5, in the
	// graph's units); the claimed relative rotation is uniform on SO(d).
	MaxTranslation float64
	// Kappa and Tau are the precisions written on every wrong closure (0:
	// the median over the graph's own edges, as AddOutliers). Unless
	// NoiseFree is set, each closure also carries noise of that precision
	// (the model of Config), as a front end's measurement would.
	Kappa, Tau float64
	NoiseFree  bool
	// Seed selects the random streams.
	Seed uint64
}

// PCG streams of AddAliasing, apart from the other generators'.
const (
	aliasingStream      = 0x5eed_0006
	aliasingNoiseStream = 0x5eed_0007
)

// AddAliasing returns a copy of g with cfg.Groups groups of mutually
// consistent wrong loop closures appended after its edges, and a mask over
// the new graph's edges that is true exactly for them. poses, indexed like
// g, is the geometry the groups agree with: g's ground truth for a
// generated graph, or an estimate consistent with its odometry (such as its
// certified optimum) for a recorded one.
//
// Group k takes two stretches of Size consecutive poses, a..a+Size-1 and
// b..b+Size-1, that share no pose with each other or with another group's
// stretches and are not adjacent (|a - b| > Size), draws a wrong relative
// pose T of b's frame seen from a's, and for each offset s measures
//
//	Z_s = (X_a^-1 X_{a+s})^-1  T  (X_b^-1 X_{b+s})
//
// between poses a+s and b+s: the stretch b..b+Size-1 placed rigidly at T
// from a, so the closures agree with each other and with each stretch's
// own relative poses. The input graph is not changed; the same graph,
// poses and configuration give the same bits.
func AddAliasing(g *posegraph.Graph, poses []posegraph.Pose, cfg AliasingConfig) (*posegraph.Graph, []bool, error) {
	d, m := g.D, g.M()
	np := g.NumPoses()
	size := cfg.Size
	if size == 0 {
		size = 5
	}
	maxT := cfg.MaxTranslation
	if maxT == 0 {
		maxT = 5
	}
	switch {
	case len(poses) != g.N():
		return nil, nil, fmt.Errorf("datasets: aliasing: %d poses given for a graph of %d vertices", len(poses), g.N())
	case cfg.Groups <= 0:
		return nil, nil, fmt.Errorf("datasets: aliasing: Groups = %d must be positive", cfg.Groups)
	case size < 1:
		return nil, nil, fmt.Errorf("datasets: aliasing: Size = %d must be positive", cfg.Size)
	case !(maxT > 0) || math.IsInf(maxT, 0):
		return nil, nil, fmt.Errorf("datasets: aliasing: MaxTranslation = %g must be positive and finite", cfg.MaxTranslation)
	case 2*size*cfg.Groups+size+1 > np:
		// Two disjoint, non-adjacent stretches per group need at least
		// this many poses; far fewer would make the search below slow.
		return nil, nil, fmt.Errorf("datasets: aliasing: %d groups of stretches of %d need more than the graph's %d poses", cfg.Groups, size, np)
	}
	kappa, tau, err := wrongWeights(g, cfg.Kappa, cfg.Tau, "aliasing")
	if err != nil {
		return nil, nil, err
	}

	count := cfg.Groups * size
	out := *g
	out.Edges = make([]posegraph.Edge, m, m+count)
	copy(out.Edges, g.Edges)
	mask := make([]bool, m+count)
	rng := rand.New(rand.NewPCG(cfg.Seed, aliasingStream))
	noise := rand.New(rand.NewPCG(cfg.Seed, aliasingNoiseStream))
	used := make([]bool, np)
	free := func(a int) bool {
		for s := 0; s < size; s++ {
			if used[a+s] {
				return false
			}
		}
		return true
	}
	for k := 0; k < cfg.Groups; k++ {
		a, b := -1, -1
		for try := 0; try < 1000 && a < 0; try++ {
			x, y := rng.IntN(np-size+1), rng.IntN(np-size+1)
			if x-y > size || y-x > size {
				if free(x) && free(y) {
					a, b = x, y
				}
			}
		}
		if a < 0 {
			return nil, nil, fmt.Errorf("datasets: aliasing: found no free pair of stretches of %d poses for group %d of %d", size, k+1, cfg.Groups)
		}
		for s := 0; s < size; s++ {
			used[a+s], used[b+s] = true, true
		}
		wrong := posegraph.Pose{R: randomRotation(rng, d)}
		for c := 0; c < d; c++ {
			wrong.T[c] = maxT * (2*rng.Float64() - 1)
		}
		for s := 0; s < size; s++ {
			inA := posegraph.Between(&poses[a], &poses[a+s], d)
			inB := posegraph.Between(&poses[b], &poses[b+s], d)
			tb := posegraph.Compose(&wrong, &inB, d)
			z := posegraph.Between(&inA, &tb, d) // inA^-1 T inB
			e := posegraph.Edge{I: a + s, J: b + s, R: z.R, T: z.T, Kappa: kappa, Tau: tau}
			if !cfg.NoiseFree {
				rn := rotNoise(noise, d, kappa)
				e.R = smalldense.Mul(&e.R, &rn, d)
				sd := 1 / math.Sqrt(tau)
				for c := 0; c < d; c++ {
					e.T[c] += sd * noise.NormFloat64()
				}
			}
			mask[len(out.Edges)] = true
			out.Edges = append(out.Edges, e)
		}
	}
	return &out, mask, nil
}
