package sync

import (
	"fmt"
	"slices"

	"github.com/bcmsync/bcmsync/posegraph"
)

// Batch is what arrives at one step of a replay (Replay): vertices named
// by id, and the edges, whose I and J are ids too (Incremental's
// convention).
type Batch struct {
	Poses, Landmarks []int
	Edges            []posegraph.Edge
}

// Replay splits g into steps batches as an online run would receive it:
// the poses in id order, about as many at each step, each with the edges
// whose endpoints have both arrived; a landmark arrives with its first
// observation, the world vertex of a graph with priors (posegraph's
// priors.go) with the first prior, so that each prior arrives with its
// pose. Fed to an Incremental in turn, the batches add up to g
// (its edges in the order each batch lists them). steps is clamped to
// 1..the number of poses.
func Replay(g *posegraph.Graph, steps int) ([]Batch, error) {
	np := g.NumPoses()
	if np == 0 {
		return nil, fmt.Errorf("%s: nothing to replay: no poses", g.Source)
	}
	steps = min(max(steps, 1), np)
	poses := make([]int, 0, np)
	for i := range g.IDs {
		if !g.IsLandmark(i) {
			poses = append(poses, i)
		}
	}
	slices.SortStableFunc(poses, func(a, b int) int { return g.IDs[a] - g.IDs[b] })
	w := g.World()
	if w >= 0 {
		// The priors' world vertex is no pose of the run's: it arrives
		// with the first prior (its id, one above the file's, would sort
		// it last, and every prior would wait for the last step), and
		// the steps before it solve the odometry anchored at the first
		// pose, as a robot does before its first fix.
		poses = slices.DeleteFunc(poses, func(i int) bool { return i == w })
		np = len(poses)
		if np == 0 {
			return nil, fmt.Errorf("%s: nothing to replay: no poses", g.Source)
		}
		steps = min(steps, np)
	}
	// step[i] is the step at which vertex i arrives (-1: not yet known).
	step := make([]int, g.N())
	for i := range step {
		step[i] = -1
	}
	out := make([]Batch, steps)
	for k, i := range poses {
		s := k * steps / np
		step[i] = s
		out[s].Poses = append(out[s].Poses, g.IDs[i])
	}
	if w >= 0 {
		for _, e := range g.Edges {
			if e.Prior != posegraph.NoPrior && (step[w] < 0 || step[e.J] < step[w]) {
				step[w] = step[e.J]
			}
		}
		out[step[w]].Poses = append(out[step[w]].Poses, g.IDs[w])
	}
	// A landmark arrives with its first observer.
	for k := range g.Edges {
		e := &g.Edges[k]
		for _, v := range [2]int{e.I, e.J} {
			if g.IsLandmark(v) {
				other := e.I + e.J - v
				if s := step[other]; s >= 0 && !g.IsLandmark(other) && (step[v] < 0 || s < step[v]) {
					step[v] = s
				}
			}
		}
	}
	for i := range g.IDs {
		if g.IsLandmark(i) {
			if step[i] < 0 {
				return nil, fmt.Errorf("%s: landmark %d is observed by no pose", g.Source, g.IDs[i])
			}
			out[step[i]].Landmarks = append(out[step[i]].Landmarks, g.IDs[i])
		}
	}
	for _, e := range g.Edges {
		s := max(step[e.I], step[e.J])
		e.I, e.J = g.IDs[e.I], g.IDs[e.J]
		out[s].Edges = append(out[s].Edges, e)
	}
	return out, nil
}

// Add adds b to inc: its poses, its landmarks, then its edges. On an
// error, what was added before it stays added.
func (b *Batch) Add(inc *Incremental) error {
	if err := inc.AddPoses(b.Poses...); err != nil {
		return err
	}
	if err := inc.AddLandmarks(b.Landmarks...); err != nil {
		return err
	}
	return inc.AddEdges(b.Edges...)
}
