package datasets

import (
	"fmt"

	"github.com/bcmsync/bcmsync/posegraph"
)

// Corridor returns a 2-D graph of the kind that is hard for a trust region
// preconditioned by the Hessian at its first points: a long corridor
// walked out and back, with few loop closures. The robot takes n - 1
// unit steps: the first half goes out along a corridor of straight
// segments of segment poses, turning left or right (at random) by 90
// degrees between segments; the second half comes back along the same
// corridor, half a unit to the side, facing the other way. Every gap
// poses of the way back, the pose beside one of the way out (the same
// place in the corridor) is a candidate closure, kept with probability
// LoopProb; so the graph is one long chain whose two halves are tied
// together at a few places, and a closure's loop is up to 2 gap poses
// long.
//
// With a high translation precision (Tau well above Kappa) and few
// closures, the rotations of the chain are stiffly coupled to positions
// far along it: the chordal initialization's rotation errors, which
// accumulate between closures, become large position errors, and the
// problem's conditioning is that of a long elastic chain. For example,
// n = 15000, segment = 300, gap = 500, LoopProb = 1, Kappa = 1000,
// Tau = 10000 has 15 closures and is of the size and shape of a long
// public corridor data set.
func Corridor(n, segment, gap int, cfg Config) (*posegraph.Graph, []posegraph.Pose, error) {
	if err := cfg.check("Corridor"); err != nil {
		return nil, nil, err
	}
	if n < 4 || segment < 1 || gap < 1 {
		return nil, nil, fmt.Errorf("datasets: Corridor: need n >= 4, segment >= 1 and gap >= 1, have %d, %d and %d", n, segment, gap)
	}
	b := newBuilder(2, cfg, fmt.Sprintf("corridor(n=%d,segment=%d,gap=%d)", n, segment, gap))
	dirs := [4][2]int{{1, 0}, {0, 1}, {-1, 0}, {0, -1}}
	out := (n + 1) / 2 // poses of the way out; the way back has n - out
	// The way out: unit steps along the corridor's centre line, turning at
	// the end of each segment. head[i] is the heading at pose i.
	pos := make([][2]float64, out)
	head := make([]int, out)
	h := 0
	for i := 1; i < out; i++ {
		if i%segment == 0 {
			h = (h + 1 + 2*b.rng.IntN(2)) % 4
		}
		head[i-1] = h
		pos[i] = [2]float64{pos[i-1][0] + float64(dirs[h][0]), pos[i-1][1] + float64(dirs[h][1])}
	}
	head[out-1] = head[out-2]
	b.truth = make([]posegraph.Pose, n)
	for i := 0; i < out; i++ {
		c, s := float64(dirs[head[i]][0]), float64(dirs[head[i]][1])
		b.truth[i].R = [9]float64{c, -s, s, c}
		b.truth[i].T = [3]float64{pos[i][0], pos[i][1]}
	}
	// The way back: pose out+k is beside pose out-1-k, half a unit to its
	// right (the corridor's other side), facing back; at a corner it steps
	// across diagonally.
	for k := 0; k < n-out; k++ {
		i := out - 1 - k
		c, s := float64(dirs[head[i]][0]), float64(dirs[head[i]][1])
		p := &b.truth[out+k]
		p.R = [9]float64{-c, s, -s, -c}
		p.T = [3]float64{pos[i][0] + 0.5*s, pos[i][1] - 0.5*c}
	}
	for j := 1; j < n; j++ {
		b.odometry(j)
		if k := j - out; k > 0 && k%gap == 0 && b.keep() {
			b.measure(out-1-k, j)
		}
	}
	g, truth := b.graph()
	return g, truth, nil
}
