package cli

import (
	"fmt"

	"github.com/bcmsync/bcmsync/g2o"
	"github.com/bcmsync/bcmsync/posegraph"
)

// readEstimates reads the files plot and view draw without solving: the
// first is the graph, drawn at its VERTEX estimates; each later one (an
// optimizer's output) is an estimate of the same poses, paired with them
// by vertex id, never by position in the file, so a file of other ids is
// an error rather than a wrong picture. A later file needs only VERTEX
// lines: many optimizers write no edges. Both commands read through here
// so that their flags (--lenient) apply to every picture they draw.
func readEstimates(files []string, ro g2o.ReadOptions) (*posegraph.Graph, [][]posegraph.Pose, error) {
	g, err := readGraph(files[0], ro)
	if err != nil {
		return nil, nil, lenientHint(err)
	}
	first := make([]posegraph.Pose, g.N())
	for i := range first {
		if !g.HasInitial[i] {
			what := "pose"
			if g.IsLandmark(i) {
				what = "landmark"
			}
			return nil, nil, fmt.Errorf("%s: %s %d has no VERTEX line to draw", g.Source, what, g.IDs[i])
		}
		first[i] = g.Initial[i]
	}
	ests := [][]posegraph.Pose{first}
	for _, file := range files[1:] {
		poses, err := readEstimateOf(g, g.Source, file, ro)
		if err != nil {
			return nil, nil, err
		}
		ests = append(ests, poses)
	}
	return g, ests, nil
}

// readEstimateOf reads the VERTEX records of file as poses of g (read from
// gFile), in g's pose order.
func readEstimateOf(g *posegraph.Graph, gFile, file string, ro g2o.ReadOptions) ([]posegraph.Pose, error) {
	fh, name, err := openInput(file)
	if err != nil {
		return nil, err
	}
	tr, err := g2o.ReadVertices(fh, name, ro)
	fh.Close()
	if err != nil {
		return nil, lenientHint(err)
	}
	if tr.D != g.D {
		return nil, fmt.Errorf("%s: %d-D vertices, but %s is %d-D", name, tr.D, gFile, g.D)
	}
	at := make(map[int]int, g.N())
	for i, id := range g.IDs {
		at[id] = i
	}
	poses := make([]posegraph.Pose, g.N())
	for k, s := range tr.Stamps {
		i, ok := at[int(s)] // ReadVertices's stamps are exact ids
		if !ok {
			return nil, &g2o.ParseError{File: name, Line: tr.Lines[k],
				Msg: fmt.Sprintf("vertex %d is not a vertex of %s (the estimate is paired with it by vertex id)", int(s), gFile)}
		}
		poses[i] = tr.Poses[k]
	}
	if len(tr.Stamps) < g.N() {
		// Stamps are distinct ids of g, so some id of g is missing.
		have := make(map[int]bool, len(tr.Stamps))
		for _, s := range tr.Stamps {
			have[int(s)] = true
		}
		for _, id := range g.IDs {
			if !have[id] {
				return nil, fmt.Errorf("%s: no VERTEX line for vertex %d of %s (%d of its %d vertices are there)",
					name, id, gFile, len(tr.Stamps), g.N())
			}
		}
	}
	return poses, nil
}
