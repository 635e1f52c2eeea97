package distributed

import (
	"context"
	"flag"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
	"github.com/bcmsync/bcmsync/rounding"
	bsync "github.com/bcmsync/bcmsync/sync"
)

// allHops is the oracle of hops: every pair's distance in g's edges, by
// relaxing until nothing changes (Bellman-Ford on unit weights), -1 for
// pairs in different components.
func allHops(g *posegraph.Graph) [][]int {
	n := g.N()
	d := make([][]int, n)
	for i := range d {
		d[i] = make([]int, n)
		for j := range d[i] {
			d[i][j] = math.MaxInt32
		}
		d[i][i] = 0
	}
	for changed := true; changed; {
		changed = false
		for _, e := range g.Edges {
			for s := 0; s < n; s++ {
				for _, ij := range [][2]int{{e.I, e.J}, {e.J, e.I}} {
					if v := d[s][ij[0]] + 1; v < d[s][ij[1]] {
						d[s][ij[1]], changed = v, true
					}
				}
			}
		}
	}
	for i := range d {
		for j := range d[i] {
			if d[i][j] == math.MaxInt32 {
				d[i][j] = -1
			}
		}
	}
	return d
}

// overlapSets, publishedPoses and readGraph against the all-pairs
// distances: the halo is every other part's pose within h hops of the
// part, the ring those h+1 away, what a part publishes is its poses within
// h+1 hops of another part's (so every pose an agent reads is published
// by its owner), and the read graph joins the parts within h+1 hops; at
// h = 0 the ring is the agent's public neighbours and the read graph the
// agent graph. Random partitions of the 2-D and 3-D test graphs, which
// need not be connected parts.
func TestOverlapSets(t *testing.T) {
	for _, d := range []int{2, 3} {
		g := testGraph(t, d)
		dist := allHops(g)
		adj := poseAdjacency(g)
		rng := rand.New(rand.NewPCG(uint64(d), 7))
		for _, K := range []int{2, 3, 5} {
			p := &Partition{K: K, Part: make([]int, g.N())}
			for i := range p.Part {
				p.Part[i] = rng.IntN(K)
			}
			for h := 0; h <= 4; h++ {
				nb := p.readGraph(g, h, overlapReads(poseAdjacency(g), p, h))
				for k := 0; k < K; k++ {
					halo, ring := overlapSets(adj, p, k, h)
					var wantHalo, wantRing, wantPub []int
					wantNb := map[int]bool{}
					for i := 0; i < g.N(); i++ {
						near, nearOther := -1, -1 // distance to part k, to another part
						for j := 0; j < g.N(); j++ {
							if dd := dist[i][j]; dd >= 0 {
								if p.Part[j] == k && (near < 0 || dd < near) {
									near = dd
								}
								if p.Part[j] != k && (nearOther < 0 || dd < nearOther) {
									nearOther = dd
								}
							}
						}
						switch {
						case p.Part[i] == k:
							if nearOther >= 0 && nearOther <= h+1 {
								wantPub = append(wantPub, i)
							}
						case near >= 1 && near <= h:
							wantHalo = append(wantHalo, i)
							wantNb[p.Part[i]] = true
						case near == h+1:
							wantRing = append(wantRing, i)
							wantNb[p.Part[i]] = true
						}
					}
					if !slices.Equal(halo, wantHalo) || !slices.Equal(ring, wantRing) {
						t.Fatalf("d=%d K=%d h=%d part %d: halo %v ring %v, want %v %v", d, K, h, k, halo, ring, wantHalo, wantRing)
					}
					if pub := publishedPoses(adj, p, k, h); !slices.Equal(pub, wantPub) {
						t.Fatalf("d=%d K=%d h=%d part %d: publishes %v, want %v", d, K, h, k, pub, wantPub)
					}
					var want []int
					for q := range wantNb {
						want = append(want, q)
					}
					slices.Sort(want)
					if !slices.Equal(nb[k], want) {
						t.Fatalf("d=%d K=%d h=%d part %d: reads from %v, want %v", d, K, h, k, nb[k], want)
					}
					if h == 0 {
						l, err := newLocal(g, p, k, posegraph.Poses, d, true)
						if err != nil {
							t.Fatal(err)
						}
						if !slices.Equal(ring, l.pub) || !slices.Equal(nb[k], p.AgentGraph(g)[k]) {
							t.Fatalf("d=%d K=%d part %d: the ring at overlap 0 is not the public neighbours", d, K, k)
						}
					}
				}
			}
		}
	}
}

// An agent builds its rows from its part's graph (partGraph: the edges at
// its poses and its halo's, without the records as read), so that the
// graph as read can go first (and its chordal estimate from its poses'
// subgraph without those records, ownGraph), and
// under an overlap without its part's own
// translation factor (its updates are the overlap's): its rows are those
// made from the whole graph to the bit, it reads the same parts
// (readParts, neighbourParts), and its updates are the same bits as with
// the whole graph and the factor.
func TestAgentRowsFromPartGraph(t *testing.T) {
	for _, d := range []int{2, 3} {
		g := testGraph(t, d)
		poses := rounding.Random(g, 5)
		xg := g.Lift(poses, posegraph.Poses, d)
		p, _ := BFS(g, 3)
		adj := poseAdjacency(g)
		for k := 0; k < p.K; k++ {
			for _, h := range []int{0, 1, 2} {
				var ls [2]*local
				for v := range ls {
					var l *local
					var err error
					if v == 0 {
						if l, err = newLocal(g, p, k, posegraph.Poses, d, true); err == nil && h > 0 {
							l.ov, _, err = newOverlap(g, adj, p, l, h)
						}
					} else {
						var plan overlapPlan
						if h > 0 {
							plan = planOverlap(adj, p, k, h)
						}
						sub := partGraph(g, p, k, plan.halo)
						if h == 2 {
							// The records as read do not enter it: the estimate is
							// the subgraph's, with them or without.
							want, wc, wn, err1 := localChordal(g.Subgraph(p.Owned(k)), posegraph.Poses)
							got, gc, gn, err2 := localChordal(ownGraph(g, p.Owned(k)), posegraph.Poses)
							if err1 != nil || err2 != nil || !slices.Equal(got, want) || !slices.Equal(gc, wc) || gn != wn {
								t.Fatalf("d=%d part %d: the chordal estimate from the part's graph differs (%v, %v)", d, k, err1, err2)
							}
						}
						for _, e := range sub.Edges {
							if e.Meas != nil || e.Info != nil {
								t.Fatalf("d=%d part %d: the part's graph keeps the records as read", d, k)
							}
						}
						got := readParts(sub, p, k)
						a := &agent{k: k, opts: AgentOptions{Problem: posegraph.Poses}}
						if l, err = a.buildRows(sub, p, h, plan); err == nil {
							var want []int
							for q := range neighbourParts(l, p) {
								want = append(want, q)
							}
							slices.Sort(want)
							if !slices.Equal(got, want) {
								t.Fatalf("d=%d part %d h=%d: reads parts %v, its rows %v", d, k, h, got, want)
							}
						}
					}
					if err != nil {
						t.Fatal(err)
					}
					for gi, li := range l.globalToLocal {
						l.setPose(li, poses[gi])
					}
					if l.ov != nil {
						for gi := range g.IDs {
							l.ov.store(gi, xg.Block(gi)) // the halo and ring as published
						}
					}
					for it := 0; it < 3; it++ {
						if err := l.improve(1, 1); err != nil {
							t.Fatal(err)
						}
					}
					ls[v] = l
				}
				a, b := ls[0], ls[1]
				if (b.chol != nil) != (h == 0) || a.chol == nil && a.nFree > 0 {
					t.Fatalf("d=%d part %d h=%d: the part's translation factor made %v", d, k, h, b.chol != nil)
				}
				sameRows(t, a.q, b.q)
				if h > 0 {
					sameRows(t, a.ov.ext.q, b.ov.ext.q)
				}
				for i, v := range a.x.Data {
					if math.Float64bits(v) != math.Float64bits(b.x.Data[i]) {
						t.Fatalf("d=%d part %d h=%d: entry %d is %v from the part's graph, %v from the whole graph", d, k, h, i, b.x.Data[i], v)
					}
				}
			}
		}
	}
}

// neighbourParts is readParts' oracle: the parts whose poses l's rows
// read, its neighbours' public poses and, with an overlap, its halo's and
// its ring's, found from the rows made.
func neighbourParts(l *local, p *Partition) map[int]bool {
	s := map[int]bool{}
	for _, q := range l.owner {
		s[q] = true
	}
	if o := l.ov; o != nil {
		for _, gi := range o.halo {
			s[p.Part[gi]] = true
		}
		for _, q := range o.ext.owner {
			s[q] = true
		}
	}
	return s
}

// sameRows fails unless a and b are the same rows to the bit.
func sameRows(t *testing.T, a, b *sparse.BlockSym) {
	t.Helper()
	if a.N != b.N || !slices.Equal(a.RowPtr, b.RowPtr) || !slices.Equal(a.ColIdx, b.ColIdx) || !slices.Equal(a.Diag, b.Diag) {
		t.Fatal("the rows' patterns differ")
	}
	for i, v := range a.Val {
		if math.Float64bits(v) != math.Float64bits(b.Val[i]) {
			t.Fatalf("the rows' entry %d differs: %v and %v", i, v, b.Val[i])
		}
	}
}

// An agent's memory outside its part (outsideBytes) counted from the
// graph: a row of Q at a pose outside the part has a block for the pose
// and one for each neighbour whose edge the agent holds (a halo pose all
// of its neighbours; a ring or neighbour public pose those in the part or
// the halo), and the agent holds a block of the variable for each such
// pose, and a second one for each halo pose (as published).
func TestOutsideBytes(t *testing.T) {
	for _, d := range []int{2, 3} {
		g := testGraph(t, d)
		adj := poseAdjacency(g)
		p, _ := BFS(g, 3)
		for _, h := range []int{0, 1, 3} {
			for k := 0; k < p.K; k++ {
				l, err := newLocal(g, p, k, posegraph.Poses, d, true)
				if err != nil {
					t.Fatal(err)
				}
				halo, ring := []int(nil), l.pub
				if h > 0 {
					if l.ov, _, err = newOverlap(g, adj, p, l, h); err != nil {
						t.Fatal(err)
					}
					halo, ring = overlapSets(adj, p, k, h)
				}
				inHalo := map[int]bool{}
				for _, i := range halo {
					inHalo[i] = true
				}
				b := d + 1
				rowBytes := func(i int, held func(int) bool) int {
					blocks := 1
					for _, j := range adj[i] {
						if held(j) {
							blocks++
						}
					}
					return blocks*(b*b*8+8) + 16
				}
				own := func(j int) bool { return p.Part[j] == k }
				want := 0
				blk := d * b * 8
				for _, i := range l.pub { // the part's own rows' neighbours
					want += blk + rowBytes(i, own)
				}
				if h > 0 {
					for _, i := range halo {
						want += 2*blk + rowBytes(i, func(int) bool { return true })
					}
					for _, i := range ring {
						want += blk + rowBytes(i, func(j int) bool { return own(j) || inHalo[j] })
					}
				}
				if got := l.outsideBytes(); got != want {
					t.Errorf("d=%d h=%d part %d: %d bytes outside the part, want %d", d, h, k, got, want)
				}
			}
		}
	}
}

// A solve with overlapping parts certifies the central optimum, with the
// agents' halos of 1, 2 and 3 hops, and an agent whose overlap is not the
// coordinator's refuses to join, saying so.
func TestOverlapSolve(t *testing.T) {
	g, central, p := lattice(t, 300, 15, 11, 4)
	// The default: every halo within its share at it (or the default at
	// its floor, 1), one beyond it a hop further (or the default at its
	// limit).
	adj := poseAdjacency(g)
	within := func(h int) bool {
		for k := 0; k < p.K; k++ {
			halo, _ := overlapSets(adj, p, k, h)
			if float64(len(halo)) > haloShare*float64(len(p.Owned(k))) {
				return false
			}
		}
		return true
	}
	auto := overlapOf(0, poseAdjacency(g), p)
	if auto < 1 || auto > 1 && !within(auto) || auto < maxAutoOverlap && within(auto+1) {
		t.Fatalf("the default overlap is %d hops", auto)
	}
	for _, h := range []int{1, 2, 3, 0} {
		res, st, err := SolveOn(context.Background(), NewMemBus(), g, p, Options{Overlap: h}, AgentOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rel := math.Abs(res.Objective-central.Objective) / central.Objective
		if res.Status != bsync.Certified || rel > 1e-7 {
			t.Errorf("overlap %d: %s, F %.12g, central %.12g", h, res.Status, res.Objective, central.Objective)
		}
		t.Logf("overlap %d: %d rounds, %.0f bytes per round", h, st.Rounds, st.RoundBytes())
	}
	bus := NewMemBus()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for k := 0; k < p.K; k++ {
		go RunAgent(ctx, bus, g, p, k, AgentOptions{Overlap: 2}) //nolint:errcheck // the run fails first
	}
	_, _, err := Solve(ctx, bus, g, p, Options{Overlap: 1})
	if err == nil || !strings.Contains(err.Error(), "overlap") {
		t.Fatalf("agents at overlap 2 joined a coordinator at 1: %v", err)
	}
}

// overlapGraphs, when set, makes TestOverlapRounds run on these benchmark
// graphs (docs/distributed.md, "Overlapping parts"):
//
//	go test ./sync/distributed -run TestOverlapRounds -v -bcmsync.dist.overlap.graphs intel.g2o,sphere2500.g2o,parking-garage.g2o
var overlapGraphs = flag.String("bcmsync.dist.overlap.graphs", "", "benchmark graphs of TestOverlapRounds (skipped without)")

// overlapHops lists the overlaps TestOverlapRounds runs (0: the default,
// -1: none).
var overlapHops = flag.String("bcmsync.dist.overlap.hops", "-1,1,2,4,6,8,10,12,0", "comma-separated overlaps of TestOverlapRounds (0: the default, -1: none)")

// TestOverlapRounds solves benchmark graphs in 4 spectral parts at each
// overlap and logs the rounds, the traffic per round and the time (which
// depends on the load; the rounds do not). It asserts that every run is
// certified at the central optimum (1e-6 relative); the rest is
// measurement.
func TestOverlapRounds(t *testing.T) {
	if *overlapGraphs == "" {
		t.Skip("-bcmsync.dist.overlap.graphs not set")
	}
	for _, name := range strings.Split(*overlapGraphs, ",") {
		g, central := suiteGraph(t, name)
		p, err := Spectral(g, 4)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range strings.Split(*overlapHops, ",") {
			h, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				t.Fatalf("-bcmsync.dist.overlap.hops: %q", f)
			}
			t0 := time.Now()
			res, st, err := SolveOn(context.Background(), NewMemBus(), g, p, Options{Overlap: h}, AgentOptions{})
			if err != nil {
				t.Fatal(err)
			}
			rel := (res.Objective - central.Objective) / central.Objective
			if !res.Certified || math.Abs(rel) > 1e-6 {
				t.Errorf("%s, overlap %d: %s, F %.12g, central %.12g", name, h, res.Status, res.Objective, central.Objective)
			}
			t.Logf("%s overlap %d (hops %d): %d rounds, %.0f bytes per round, F - F* %.2g relative, %.1f s",
				name, h, overlapOf(h, poseAdjacency(g), p), st.Rounds, st.RoundBytes(), rel, time.Since(t0).Seconds())
		}
	}
}

// newOverlap is newOverlapOf with the plan made from adj at overlap h.
func newOverlap(g *posegraph.Graph, adj [][]int, p *Partition, l *local, h int) (*overlap, []int, error) {
	return newOverlapOf(g, p, l, planOverlap(adj, p, l.part, h))
}
