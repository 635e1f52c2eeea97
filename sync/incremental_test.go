package sync_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/posegraph"
	bsync "github.com/bcmsync/bcmsync/sync"
)

// prefixGraph returns g's graph induced by the vertices with the given ids,
// in that order, without g's initial estimates (so its anchor, its first
// pose, goes to the identity, as an Incremental's does): the graph a cold
// solve of the same prefix solves.
func prefixGraph(g *posegraph.Graph, ids []int) *posegraph.Graph {
	at := make(map[int]int, g.N())
	for i, id := range g.IDs {
		at[id] = i
	}
	idx := make([]int, len(ids))
	for k, id := range ids {
		idx[k] = at[id]
	}
	s := g.Subgraph(idx)
	s.Initial, s.HasInitial = nil, nil
	return s
}

// sameAsCold fails unless res, an Incremental's step, is certified and
// equals a cold certified Solve of the same prefix: F to 1e-9 relative, the
// poses (both in the gauge of the same anchor) to 1e-6.
func sameAsCold(t *testing.T, step int, g *posegraph.Graph, res *bsync.Result) {
	t.Helper()
	if !res.Certified {
		t.Fatalf("step %d: %s", step, res.Status)
	}
	cold, err := bsync.Solve(context.Background(), prefixGraph(g, res.Graph.IDs), bsync.Options{})
	if err != nil {
		t.Fatalf("step %d: cold solve: %v", step, err)
	}
	if !cold.Certified {
		t.Fatalf("step %d: cold solve: %s", step, cold.Status)
	}
	if rel := math.Abs(res.Objective-cold.Objective) / math.Max(1, math.Abs(cold.Objective)); rel > 1e-9 {
		t.Errorf("step %d: F = %.15g, cold F = %.15g (%.2g relative)", step, res.Objective, cold.Objective, rel)
	}
	d := g.D
	for i := range res.Poses {
		p, q := res.Poses[i], cold.Poses[i]
		for a := 0; a < d*d; a++ {
			if math.Abs(p.R[a]-q.R[a]) > 1e-6 {
				t.Fatalf("step %d: pose id %d: rotation %v, cold %v", step, res.Graph.IDs[i], p.R[:d*d], q.R[:d*d])
			}
		}
		for a := 0; a < d; a++ {
			if math.Abs(p.T[a]-q.T[a]) > 1e-6*math.Max(1, math.Abs(q.T[a])) {
				t.Fatalf("step %d: pose id %d: translation %v, cold %v", step, res.Graph.IDs[i], p.T[:d], q.T[:d])
			}
		}
	}
}

func manhattan(t *testing.T, n int, seed uint64) (*posegraph.Graph, []posegraph.Pose) {
	t.Helper()
	g, truth, err := datasets.Manhattan(n, 8, datasets.Config{Kappa: 100, Tau: 25, LoopProb: 0.5, Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	return g, truth
}

func TestIncrementalStepsMatchColdSolves(t *testing.T) {
	g2, truth2 := manhattan(t, 150, 1)
	g3, _, err := datasets.Sphere(6, 12, datasets.Config{Kappa: 200, Tau: 50, LoopProb: 0.5, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	gl, _, err := datasets.AddLandmarks(g2, truth2, datasets.LandmarkConfig{N: 20, Range: 2, MaxObservers: 4, Tau: 50, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		g    *posegraph.Graph
	}{{"manhattan", g2}, {"sphere", g3}, {"landmarks", gl}} {
		t.Run(tc.name, func(t *testing.T) {
			batches, err := bsync.Replay(tc.g, 6)
			if err != nil {
				t.Fatal(err)
			}
			inc, err := bsync.NewIncremental(tc.g.D, bsync.Options{})
			if err != nil {
				t.Fatal(err)
			}
			for k := range batches {
				if err := batches[k].Add(inc); err != nil {
					t.Fatal(err)
				}
				res, err := inc.Solve(context.Background())
				if err != nil {
					t.Fatalf("step %d: %v", k, err)
				}
				if k > 0 && res.Options.Init != bsync.InitGiven {
					t.Errorf("step %d: initialized by %q, not warm-started", k, res.Options.Init)
				}
				sameAsCold(t, k, tc.g, res)
			}
			if inc.NumVertices() != tc.g.N() || inc.NumEdges() != tc.g.M() {
				t.Errorf("replayed %d vertices and %d edges of %d and %d", inc.NumVertices(), inc.NumEdges(), tc.g.N(), tc.g.M())
			}
		})
	}
}

// TestIncrementalRandomArrivals feeds the poses in random orders that keep
// the graph connected (each new pose linked to one arrived), each with the
// edges whose ends have both arrived, in batches of random sizes.
func TestIncrementalRandomArrivals(t *testing.T) {
	g, _ := manhattan(t, 80, 4)
	adj := make([][]int, g.N())
	for _, e := range g.Edges {
		adj[e.I] = append(adj[e.I], e.J)
		adj[e.J] = append(adj[e.J], e.I)
	}
	for seed := uint64(1); seed <= 3; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		// A random growth order: each next pose is a random neighbour of
		// the poses arrived.
		arrived := make([]bool, g.N())
		first := rng.IntN(g.N())
		order, frontier := []int{first}, append([]int(nil), adj[first]...)
		arrived[first] = true
		for len(frontier) > 0 {
			k := rng.IntN(len(frontier))
			v := frontier[k]
			frontier = append(frontier[:k], frontier[k+1:]...)
			if arrived[v] {
				continue
			}
			arrived[v] = true
			order = append(order, v)
			frontier = append(frontier, adj[v]...)
		}
		inc, err := bsync.NewIncremental(g.D, bsync.Options{})
		if err != nil {
			t.Fatal(err)
		}
		in := make([]bool, g.N())
		added := make([]bool, g.M())
		for step, lo := 0, 0; lo < len(order); step++ {
			hi := min(len(order), lo+1+rng.IntN(20))
			for _, v := range order[lo:hi] {
				if err := inc.AddPoses(g.IDs[v]); err != nil {
					t.Fatal(err)
				}
				in[v] = true
			}
			for k, e := range g.Edges {
				if !added[k] && in[e.I] && in[e.J] {
					added[k] = true
					e.I, e.J = g.IDs[e.I], g.IDs[e.J]
					if err := inc.AddEdges(e); err != nil {
						t.Fatal(err)
					}
				}
			}
			lo = hi
			res, err := inc.Solve(context.Background())
			if err != nil {
				t.Fatalf("seed %d step %d: %v", seed, step, err)
			}
			if res.Graph.IDs[0] != g.IDs[first] {
				t.Fatalf("seed %d: the anchor is id %d, not the first pose added, %d", seed, res.Graph.IDs[0], g.IDs[first])
			}
			sameAsCold(t, step, g, res)
		}
	}
}

// TestIncrementalNoNewEdges solves twice with nothing added between: the
// second solve starts at the certified optimum and returns it.
func TestIncrementalNoNewEdges(t *testing.T) {
	g, _ := manhattan(t, 60, 5)
	inc := feedAll(t, g)
	first, err := inc.Solve(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	again, err := inc.Solve(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sameAsCold(t, 1, g, again)
	if rel := math.Abs(again.Objective-first.Objective) / first.Objective; rel > 1e-12 {
		t.Errorf("F moved from %.15g to %.15g with nothing added", first.Objective, again.Objective)
	}
	if again.InitialObjective > first.Objective*(1+1e-9) {
		t.Errorf("second solve started at F = %.15g, above the last optimum %.15g", again.InitialObjective, first.Objective)
	}
}

// feedAll adds all of g to a new Incremental.
func feedAll(t *testing.T, g *posegraph.Graph) *bsync.Incremental {
	t.Helper()
	inc, err := bsync.NewIncremental(g.D, bsync.Options{})
	if err != nil {
		t.Fatal(err)
	}
	batches, err := bsync.Replay(g, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := batches[0].Add(inc); err != nil {
		t.Fatal(err)
	}
	return inc
}

// TestIncrementalDisconnectedStep adds a pose with no edge: Solve returns
// Solve's disconnection error and keeps everything, and solves once the
// pose's edge arrives; with LargestComponent the pose waits instead.
func TestIncrementalDisconnectedStep(t *testing.T) {
	g, _ := manhattan(t, 40, 6)
	last := g.N() - 1
	var edges []posegraph.Edge // the edges of the last pose
	rest := prefixGraph(g, g.IDs[:last])
	for _, e := range g.Edges {
		if e.I == last || e.J == last {
			edges = append(edges, e)
		}
	}
	for _, largest := range []bool{false, true} {
		inc, err := bsync.NewIncremental(g.D, bsync.Options{LargestComponent: largest})
		if err != nil {
			t.Fatal(err)
		}
		b, err := bsync.Replay(rest, 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := b[0].Add(inc); err != nil {
			t.Fatal(err)
		}
		if _, err := inc.Solve(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := inc.AddPoses(g.IDs[last]); err != nil {
			t.Fatal(err)
		}
		res, err := inc.Solve(context.Background())
		if !largest {
			if !posegraph.IsDisconnected(err) {
				t.Fatalf("a pose without edges: got %v, want a disconnection error", err)
			}
		} else {
			if err != nil {
				t.Fatal(err)
			}
			if res.Graph.N() != last {
				t.Fatalf("with LargestComponent the unlinked pose should wait: solved %d vertices, want %d", res.Graph.N(), last)
			}
			sameAsCold(t, 1, g, res)
		}
		byID := make([]posegraph.Edge, len(edges))
		for k, e := range edges {
			e.I, e.J = g.IDs[e.I], g.IDs[e.J]
			byID[k] = e
		}
		if err := inc.AddEdges(byID...); err != nil {
			t.Fatal(err)
		}
		res, err = inc.Solve(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if res.Graph.N() != g.N() {
			t.Fatalf("after its edge arrived: solved %d vertices, want %d", res.Graph.N(), g.N())
		}
		sameAsCold(t, 2, g, res)
	}
}

// TestIncrementalOnlyLoopClosures adds every pose with its odometry, then
// the loop closures alone.
func TestIncrementalOnlyLoopClosures(t *testing.T) {
	g, _ := manhattan(t, 120, 7)
	inc, err := bsync.NewIncremental(g.D, bsync.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := inc.AddPoses(g.IDs...); err != nil {
		t.Fatal(err)
	}
	var odometry, closures []posegraph.Edge // by index, as in g
	for _, e := range g.Edges {
		if e.J == e.I+1 {
			odometry = append(odometry, e)
		} else {
			closures = append(closures, e)
		}
	}
	if len(closures) < 5 {
		t.Fatalf("only %d loop closures", len(closures))
	}
	add := func(edges []posegraph.Edge) {
		for _, e := range edges {
			e.I, e.J = g.IDs[e.I], g.IDs[e.J]
			if err := inc.AddEdges(e); err != nil {
				t.Fatal(err)
			}
		}
	}
	add(odometry)
	res, err := inc.Solve(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Objective > 1e-12*float64(g.M()) {
		t.Errorf("a chain solves exactly, F = %g", res.Objective)
	}
	// Two steps of closures alone, each compared with a cold solve of the
	// graph so far.
	sofar := *g
	half := len(closures)/2 + 1
	for lo := 0; lo < len(closures); lo += half {
		hi := min(len(closures), lo+half)
		add(closures[lo:hi])
		res, err = inc.Solve(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		sofar.Edges = append(append([]posegraph.Edge(nil), odometry...), closures[:hi]...)
		sameAsCold(t, lo, &sofar, res)
	}
	if res.Graph.M() != g.M() {
		t.Fatalf("solved %d edges of %d", res.Graph.M(), g.M())
	}
}

func TestIncrementalErrors(t *testing.T) {
	if _, err := bsync.NewIncremental(4, bsync.Options{}); err == nil {
		t.Error("dimension 4 accepted")
	}
	if _, err := bsync.NewIncremental(2, bsync.Options{GapTol: -1}); err == nil {
		t.Error("a negative GapTol accepted")
	}
	inc, err := bsync.NewIncremental(2, bsync.Options{})
	if err != nil {
		t.Fatal(err)
	}
	inc.Source = "online"
	if _, err := inc.Solve(context.Background()); err == nil {
		t.Error("an empty solver solved")
	}
	if err := inc.AddPoses(9); err != nil {
		t.Fatal(err)
	}
	if _, err := inc.Solve(context.Background()); !errors.Is(err, bsync.ErrNoEdges) {
		t.Errorf("a pose alone: %v, want ErrNoEdges", err)
	}
	if err := inc.AddPoses(1, 2, 2); err == nil || !strings.Contains(err.Error(), "id 2") {
		t.Errorf("an id twice: %v", err)
	}
	if inc.NumVertices() != 1 {
		t.Errorf("a failed AddPoses added %d vertices", inc.NumVertices()-1)
	}
	if err := inc.AddPoses(1, 2); err != nil {
		t.Fatal(err)
	}
	e := posegraph.Edge{I: 1, J: 3, R: posegraph.Identity(2).R, Kappa: 1, Tau: 1}
	if err := inc.AddEdges(e); err == nil || !strings.Contains(err.Error(), "id 3") {
		t.Errorf("an edge to an id not added: %v", err)
	}
	e.J, e.Kappa = 2, 0
	if err := inc.AddEdges(e); err == nil || !strings.Contains(err.Error(), "precisions") {
		t.Errorf("an edge with kappa 0: %v", err)
	}
	e.Kappa, e.T[0] = 1, math.NaN()
	if err := inc.AddEdges(e); err == nil || !strings.Contains(err.Error(), "not finite") {
		t.Errorf("an edge with a NaN: %v", err)
	}
	e.T[0], e.J = 0, 1
	if err := inc.AddEdges(e); err == nil {
		t.Error("an edge from a pose to itself accepted")
	}
	if inc.NumEdges() != 0 {
		t.Errorf("failed AddEdges added %d edges", inc.NumEdges())
	}
	lm, err := bsync.NewIncremental(2, bsync.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := lm.AddLandmarks(7); err != nil {
		t.Fatal(err)
	}
	if _, err := lm.Solve(context.Background()); err == nil || !strings.Contains(err.Error(), "pose first") {
		t.Errorf("a landmark first: %v", err)
	}
}

// TestReplayBatches checks Replay's split: every vertex and edge once, the
// poses in id order, each edge in the batch where its second end arrives,
// each landmark with its first observation.
func TestReplayBatches(t *testing.T) {
	g, truth := manhattan(t, 50, 8)
	g, _, err := datasets.AddLandmarks(g, truth, datasets.LandmarkConfig{N: 10, Range: 2, Tau: 50, Seed: 9})
	if err != nil {
		t.Fatal(err)
	}
	batches, err := bsync.Replay(g, 7)
	if err != nil {
		t.Fatal(err)
	}
	if len(batches) != 7 {
		t.Fatalf("%d batches, want 7", len(batches))
	}
	at := make(map[int]int) // id -> batch
	lastPose, edges := -1, 0
	for k, b := range batches {
		if len(b.Poses) < 50/7 || len(b.Poses) > 50/7+1 {
			t.Errorf("batch %d has %d poses", k, len(b.Poses))
		}
		for _, id := range b.Poses {
			if id <= lastPose {
				t.Errorf("pose %d after %d", id, lastPose)
			}
			lastPose = id
			at[id] = k
		}
		for _, id := range b.Landmarks {
			at[id] = k
		}
		for _, e := range b.Edges {
			ki, okI := at[e.I]
			kj, okJ := at[e.J]
			if !okI || !okJ || max(ki, kj) != k {
				t.Errorf("edge (%d, %d) in batch %d, its ends in %d and %d", e.I, e.J, k, ki, kj)
			}
		}
		edges += len(b.Edges)
	}
	if len(at) != g.N() || edges != g.M() {
		t.Errorf("replayed %d vertices and %d edges of %d and %d", len(at), edges, g.N(), g.M())
	}
	// A landmark's batch is its first observer's.
	for _, e := range g.Edges {
		if g.IsLandmark(e.J) && at[g.IDs[e.J]] > at[g.IDs[e.I]] {
			t.Errorf("landmark %d arrives after its observer %d", g.IDs[e.J], g.IDs[e.I])
		}
	}
}

// TestIncrementalRobust replays a graph with wrong loop closures through
// SolveRobust: every step certifies, every outlier that has arrived is
// rejected, and the last step reaches the batch robust solve's optimum.
func TestIncrementalRobust(t *testing.T) {
	clean, _ := manhattan(t, 120, 10)
	g, outlier, err := datasets.AddOutliers(clean, datasets.OutlierConfig{Count: 4, Seed: 11})
	if err != nil {
		t.Fatal(err)
	}
	batches, err := bsync.Replay(g, 4)
	if err != nil {
		t.Fatal(err)
	}
	inc, err := bsync.NewIncremental(g.D, bsync.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ro := bsync.DefaultRobustOptions()
	var res *bsync.Result
	for k := range batches {
		if err := batches[k].Add(inc); err != nil {
			t.Fatal(err)
		}
		if res, err = inc.SolveRobust(context.Background(), ro); err != nil {
			t.Fatal(err)
		}
		if !res.Certified {
			t.Fatalf("step %d: %s", k, res.Status)
		}
	}
	batch, err := bsync.SolveRobust(context.Background(), g, bsync.Options{}, ro)
	if err != nil || !batch.Certified {
		t.Fatalf("batch: %v %v", err, batch.Status)
	}
	if rel := math.Abs(res.Objective-batch.Objective) / batch.Objective; rel > 1e-6 {
		t.Errorf("last step F = %.12g, batch F = %.12g", res.Objective, batch.Objective)
	}
	// The last step's edges are g's edges in the batches' order: find the
	// outliers by their ends.
	type pair struct{ i, j int }
	wrong := map[pair]bool{}
	for k, e := range g.Edges {
		if outlier[k] {
			wrong[pair{g.IDs[e.I], g.IDs[e.J]}] = true
		}
	}
	in := res.Robust.Input
	rejected := 0
	for _, k := range res.Robust.Rejected {
		e := in.Edges[k]
		if wrong[pair{in.IDs[e.I], in.IDs[e.J]}] {
			rejected++
		}
	}
	if rejected != len(wrong) {
		t.Errorf("rejected %d of the %d outliers", rejected, len(wrong))
	}
}
