package datasets

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/bcmsync/bcmsync/posegraph"
)

// LandmarkConfig says how AddLandmarks scatters point landmarks around a
// trajectory and which poses observe them.
type LandmarkConfig struct {
	// N is the number of landmarks (> 0).
	N int
	// Range is the sensor's range: every pose within Range of a landmark
	// observes it (0: 3, in the graph's units). Each landmark is placed
	// uniformly in the ball of radius Range around a random pose, so at
	// least that pose sees it.
	Range float64
	// MaxObservers, when positive, keeps only the nearest MaxObservers
	// poses of each landmark's observers (a sensor that tracks a feature
	// for a while), bounding the degree on dense trajectories.
	MaxObservers int
	// Tau is the precision written on every observation, > 0. Unless
	// NoiseFree is set, the measured position is R_i^T (l - t_i) plus
	// N(0, I/Tau) noise, so tau ||l - t_i - R_i z||^2 is twice its
	// negative log-likelihood, as for the pose edges.
	Tau       float64
	NoiseFree bool
	// Seed selects the random streams (placement and noise apart, so a
	// NoiseFree graph observes the same landmarks from the same poses).
	Seed uint64
}

// PCG streams of AddLandmarks, apart from the generators' and AddOutliers'.
const (
	landmarkStream      = 0x5eed_0004
	landmarkNoiseStream = 0x5eed_0005
)

// AddLandmarks returns a copy of g with lc.N landmarks after its poses, and
// the ground truth extended with their true positions (as poses with R = I,
// posegraph's convention). truth must be g's ground truth (any generator's
// second result). Landmark k gets the id (largest pose id) + 1 + k, and an
// initial estimate from its first observer's initial pose and measurement,
// the guess a robot's front end would make. Observations follow the pose
// edges, in landmark order, each landmark's observers by ascending pose
// index.
func AddLandmarks(g *posegraph.Graph, truth []posegraph.Pose, lc LandmarkConfig) (*posegraph.Graph, []posegraph.Pose, error) {
	if lc.Range == 0 {
		lc.Range = 3
	}
	switch {
	case g == nil || len(truth) != g.N() || g.N() == 0:
		return nil, nil, fmt.Errorf("datasets: AddLandmarks: need a graph and its ground truth of the same length")
	case g.HasLandmarks():
		return nil, nil, fmt.Errorf("datasets: AddLandmarks: %s has landmarks already", g.Source)
	case lc.N <= 0:
		return nil, nil, fmt.Errorf("datasets: AddLandmarks: N = %d must be positive", lc.N)
	case !(lc.Range > 0) || math.IsInf(lc.Range, 0):
		return nil, nil, fmt.Errorf("datasets: AddLandmarks: Range = %g must be positive and finite", lc.Range)
	case !(lc.Tau > 0) || math.IsInf(lc.Tau, 0):
		return nil, nil, fmt.Errorf("datasets: AddLandmarks: Tau = %g must be positive and finite", lc.Tau)
	case lc.MaxObservers < 0:
		return nil, nil, fmt.Errorf("datasets: AddLandmarks: MaxObservers = %d must not be negative", lc.MaxObservers)
	}
	d, n := g.D, g.N()
	rng := rand.New(rand.NewPCG(lc.Seed, landmarkStream))
	noise := rand.New(rand.NewPCG(lc.Seed, landmarkNoiseStream))

	out := &posegraph.Graph{
		D: d, Source: fmt.Sprintf("%s+landmarks(n=%d,range=%g,seed=%d)", g.Source, lc.N, lc.Range, lc.Seed),
		RawRotations: g.RawRotations,
		IDs:          append(make([]int, 0, n+lc.N), g.IDs...),
		Edges:        append([]posegraph.Edge(nil), g.Edges...),
		Fixed:        append([]int(nil), g.Fixed...),
		Landmark:     make([]bool, n, n+lc.N),
	}
	if len(g.Initial) == n {
		out.Initial = append(make([]posegraph.Pose, 0, n+lc.N), g.Initial...)
	}
	if len(g.HasInitial) == n {
		out.HasInitial = append(make([]bool, 0, n+lc.N), g.HasInitial...)
	}
	tr := append(make([]posegraph.Pose, 0, n+lc.N), truth...)
	maxID := g.IDs[0]
	for _, id := range g.IDs {
		maxID = max(maxID, id)
	}

	grid := newPoseGrid(truth, d, lc.Range)
	var near []nearPose
	for k := 0; k < lc.N; k++ {
		l := posegraph.Identity(d)
		ci := rng.IntN(n)
		c := truth[ci].T
		off := ballPoint(rng, d, lc.Range)
		for a := 0; a < d; a++ {
			l.T[a] = c[a] + off[a]
		}
		near = grid.within(near[:0], truth, l.T, lc.Range)
		if len(near) == 0 {
			// Only rounding at the ball's edge can get here.
			near = append(near, nearPose{ci, lc.Range})
		}
		if lc.MaxObservers > 0 && len(near) > lc.MaxObservers {
			sortNear(near, func(p, q nearPose) bool { return p.dist < q.dist || p.dist == q.dist && p.i < q.i })
			near = near[:lc.MaxObservers]
		}
		sortNear(near, func(p, q nearPose) bool { return p.i < q.i })
		j := n + k
		out.IDs = append(out.IDs, maxID+1+k)
		out.Landmark = append(out.Landmark, true)
		tr = append(tr, l)
		first := -1
		for _, o := range near {
			e := posegraph.Edge{I: o.i, J: j, R: posegraph.Identity(d).R, Tau: lc.Tau}
			pi := &truth[o.i]
			for a := 0; a < d; a++ {
				s := 0.0
				for c := 0; c < d; c++ {
					s += pi.R[c*d+a] * (l.T[c] - pi.T[c])
				}
				e.T[a] = s
			}
			if !lc.NoiseFree {
				sd := 1 / math.Sqrt(lc.Tau)
				for a := 0; a < d; a++ {
					e.T[a] += sd * noise.NormFloat64()
				}
			}
			if first < 0 {
				first = len(out.Edges)
			}
			out.Edges = append(out.Edges, e)
		}
		if out.Initial != nil {
			guess := posegraph.Identity(d)
			has := false
			if e := &out.Edges[first]; out.HasInitial == nil || out.HasInitial[e.I] {
				p := &out.Initial[e.I]
				for a := 0; a < d; a++ {
					s := p.T[a]
					for c := 0; c < d; c++ {
						s += p.R[a*d+c] * e.T[c]
					}
					guess.T[a] = s
				}
				has = true
			}
			out.Initial = append(out.Initial, guess)
			if out.HasInitial != nil {
				out.HasInitial = append(out.HasInitial, has)
			}
		}
	}
	return out, tr, nil
}

// ballPoint returns a point uniform in the d-ball of radius r.
func ballPoint(rng *rand.Rand, d int, r float64) [3]float64 {
	for {
		var p [3]float64
		s := 0.0
		for a := 0; a < d; a++ {
			p[a] = r * (2*rng.Float64() - 1)
			s += p[a] * p[a]
		}
		if s < r*r {
			return p
		}
	}
}

type nearPose struct {
	i    int
	dist float64
}

// sortNear is an insertion sort: observer lists are short.
func sortNear(s []nearPose, less func(p, q nearPose) bool) {
	for p := 1; p < len(s); p++ {
		for q := p; q > 0 && less(s[q], s[q-1]); q-- {
			s[q], s[q-1] = s[q-1], s[q]
		}
	}
}

// poseGrid buckets poses by cells of side Range, so the observers of a
// landmark are found among the 3^d cells around it.
type poseGrid struct {
	d     int
	side  float64
	cells map[[3]int][]int
}

func newPoseGrid(truth []posegraph.Pose, d int, side float64) *poseGrid {
	g := &poseGrid{d: d, side: side, cells: map[[3]int][]int{}}
	for i := range truth {
		c := g.cell(truth[i].T)
		g.cells[c] = append(g.cells[c], i)
	}
	return g
}

func (g *poseGrid) cell(t [3]float64) [3]int {
	var c [3]int
	for a := 0; a < g.d; a++ {
		c[a] = int(math.Floor(t[a] / g.side))
	}
	return c
}

// within appends to dst the poses closer than r (<= side) to p.
func (g *poseGrid) within(dst []nearPose, truth []posegraph.Pose, p [3]float64, r float64) []nearPose {
	c := g.cell(p)
	lo, hi := [3]int{}, [3]int{}
	for a := 0; a < g.d; a++ {
		lo[a], hi[a] = -1, 1
	}
	for x := lo[0]; x <= hi[0]; x++ {
		for y := lo[1]; y <= hi[1]; y++ {
			for z := lo[2]; z <= hi[2]; z++ {
				for _, i := range g.cells[[3]int{c[0] + x, c[1] + y, c[2] + z}] {
					s := 0.0
					for a := 0; a < g.d; a++ {
						v := truth[i].T[a] - p[a]
						s += v * v
					}
					if s < r*r {
						dst = append(dst, nearPose{i, math.Sqrt(s)})
					}
				}
			}
		}
	}
	return dst
}
