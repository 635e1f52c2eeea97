package sync

import (
	"context"
	"errors"
	"fmt"

	"github.com/bcmsync/bcmsync/posegraph"
)

// Incremental solves a pose graph that grows: a robotics back end adds
// poses, landmarks and measurements as they come and asks for the
// certified optimum after each batch. Each Solve is a certified solve of
// the graph so far, on sync's one staircase (SolveWith), whose Result
// means what Solve's means. What makes it cheaper than a cold solve is
// where it starts: the last certified estimate for the vertices it covers,
// and each new vertex placed by composing the measurement that links it to
// a placed one (its odometry, for a pose; its first observation, for a
// landmark). That start is near the new optimum when the batch is small:
// the chordal initialization (an ordering and a factorization of its own)
// is skipped, and the staircase's first level, at rank d, needs a few
// trust-region steps. The start is passed as Options.InitialPoses
// (InitGiven), the warm start SolveRobust's solves use, so each step runs
// the one staircase unchanged, with its records and its checks.
//
// The fill-reducing order is kept from step to step where the graph did
// not change (stepOrder): the vertices the new edges reach and their
// ancestors in the last step's elimination tree are reordered with the
// new vertices, iSAM2's way, and a fresh order is made only when the
// graph has grown by half and is kept only if it is cheaper. (The
// last order with the new vertices merely appended made the
// factorizations costlier by far more than the ordering saves:
// docs/online.md.) The symbolic analyses are made afresh from that order,
// one block analysis a step shared by all its factorizations, the
// translation system's included, with the certificate's anchor (the
// lightest pose of the factor's trailing clique) moved last in it before
// any factorization (anchorLast), so that the certificate need not
// analyse again in its own order; the Hessian and S, of one block size in
// 2-D, share one expanded analysis too (sparse.BlockSymbolic.Analyze). The translation system's numeric factor
// (the tau-weighted Laplacian's, which changes only where the new edges
// are) copies from the last step's the supernodes whose subtree did not
// change and computes only the rest (stepOrder.refactorFrom,
// sparse.Cholesky.FactorizeBlocksFrom): the same factor, bit for bit, as
// a fresh factorization. The factors' storage is kept too: every
// solve gives its factors back when it ends (Run.release), and the next
// step's, a little larger, are made in that storage instead of new. A
// warm step also skips what its start makes redundant: it runs one BCM
// sweep, not five (warmBCMSweeps), its trust region stops at a relative
// gradient of 1e-7, not 1e-9 (warmGradTol: the certificate, of the
// step's own S, is what vouches for the point), and its certificate's
// inverse iteration starts from the point itself (certifier.nullStart).
//
// Each step's certificate is its own: a factorization of that step's S,
// no estimate is called certified because an earlier one was.
//
// Vertices are named by id, as a file names them: AddEdges takes edges
// whose I and J are ids, not indices. Result.Graph is the graph a Solve
// solved, its IDs the vertices' ids (poses in arrival order, then the
// landmarks in arrival order), and Result.Poses are indexed like it.
//
// A vertex that no chain of measurements links to the first pose added
// cannot be placed: such a graph is disconnected, and Solve returns the
// *posegraph.DisconnectedError Solve would, keeping everything added, so
// that a later Solve, after the measurement that links it, goes on. With
// Options.LargestComponent, Solve instead solves the vertices linked to
// the first pose (Result.Graph lists them) and the others wait for their
// link. Before any edge links a vertex to the first pose, Solve returns an
// error wrapping ErrNoEdges.
//
// An Incremental is not safe for concurrent use.
type Incremental struct {
	// Source names the graph in messages ("" : "graph"). RawRotations is
	// posegraph.Graph.RawRotations for every graph solved. Set them before
	// the first Solve.
	Source       string
	RawRotations bool

	d    int
	opts Options
	// The vertices in arrival order: their ids, which are landmarks, and
	// the index of each id.
	ids      []int
	landmark []bool
	index    map[int]int
	// edges holds the measurements, I and J arrival indices.
	edges []posegraph.Edge
	// est holds the last certified estimate by arrival index, placed[k]
	// whether vertex k has one.
	est    []posegraph.Pose
	placed []bool
	// solves counts the Solve calls that ran the staircase.
	solves int
	// order is the fill-reducing order kept across Solve's steps, and
	// orderEdges the edges (a prefix of edges) of the graph it was made
	// for.
	order      stepOrder
	orderEdges int
}

// ErrNoEdges is the error (wrapped) of an incremental Solve before any
// edge links a vertex to the first pose: there is nothing to solve yet.
var ErrNoEdges = errors.New("nothing to solve yet")

// NewIncremental returns an empty incremental solver of dimension d (2 or
// 3) that solves with opts (Options.Init and Options.InitialPoses apply
// to the first Solve only: later ones start from the last certified
// estimate, and run one BCM sweep per level unless Options.BCMMaxSweeps
// says otherwise, to the gradient tolerance 1e-7 unless Options.GradTol
// does: see warmBCMSweeps and warmGradTol).
func NewIncremental(d int, opts Options) (*Incremental, error) {
	if d != 2 && d != 3 {
		return nil, fmt.Errorf("incremental solver: dimension %d is not 2 or 3", d)
	}
	full := opts.WithDefaults(d)
	if err := full.check(d); err != nil {
		return nil, err
	}
	return &Incremental{d: d, opts: opts, index: make(map[int]int)}, nil
}

// AddPoses adds poses with the given ids. An id already added is an error,
// and then nothing is added.
func (inc *Incremental) AddPoses(ids ...int) error { return inc.add(ids, false) }

// AddLandmarks adds landmarks (points that poses observe; see
// posegraph's landmarks.go) with the given ids. An id already added is an
// error, and then nothing is added.
func (inc *Incremental) AddLandmarks(ids ...int) error { return inc.add(ids, true) }

func (inc *Incremental) add(ids []int, landmark bool) error {
	seen := make(map[int]bool, len(ids))
	for _, id := range ids {
		if _, ok := inc.index[id]; ok || seen[id] {
			return fmt.Errorf("%s: id %d is added twice", inc.src(), id)
		}
		seen[id] = true
	}
	for _, id := range ids {
		inc.index[id] = len(inc.ids)
		inc.ids = append(inc.ids, id)
		inc.landmark = append(inc.landmark, landmark)
		inc.est = append(inc.est, posegraph.Identity(inc.d))
		inc.placed = append(inc.placed, false)
	}
	return nil
}

// AddEdges adds measurements between vertices already added, named by id
// in I and J (a landmark observation goes from a pose to a landmark, with
// Kappa 0 and R the identity). Each is checked as posegraph.Graph.Validate
// checks an edge; on an error nothing is added.
func (inc *Incremental) AddEdges(edges ...posegraph.Edge) error {
	add := make([]posegraph.Edge, 0, len(edges))
	for _, e := range edges {
		i, okI := inc.index[e.I]
		j, okJ := inc.index[e.J]
		if !okI || !okJ {
			missing := e.I
			if okI {
				missing = e.J
			}
			return fmt.Errorf("%s: edge (%d, %d)%s names id %d, which was not added", inc.src(), e.I, e.J, lineNote(e.Line), missing)
		}
		// The edge alone, in a graph of its two vertices, gets every check
		// Validate makes of an edge, with its messages.
		two := &posegraph.Graph{D: inc.d, IDs: []int{e.I, e.J}, Source: inc.Source, RawRotations: inc.RawRotations}
		if inc.landmark[i] || inc.landmark[j] {
			two.Landmark = []bool{inc.landmark[i], inc.landmark[j]}
		}
		one := e
		one.I, one.J = 0, 1
		if e.I == e.J {
			one.J = 0
			two.IDs = two.IDs[:1]
			if two.Landmark != nil {
				two.Landmark = two.Landmark[:1]
			}
		}
		two.Edges = []posegraph.Edge{one}
		if err := two.Validate(); err != nil {
			return fmt.Errorf("edge (%d, %d): %w", e.I, e.J, err)
		}
		e.I, e.J = i, j
		add = append(add, e)
	}
	inc.edges = append(inc.edges, add...)
	return nil
}

func lineNote(line int) string {
	if line > 0 {
		return fmt.Sprintf(" on line %d", line)
	}
	return ""
}

func (inc *Incremental) src() string {
	if inc.Source == "" {
		return "graph"
	}
	return inc.Source
}

// NumVertices and NumEdges count what was added so far.
func (inc *Incremental) NumVertices() int { return len(inc.ids) }

// NumEdges counts the edges added so far.
func (inc *Incremental) NumEdges() int { return len(inc.edges) }

// Solve solves the graph added so far, certified as Solve certifies, from
// the last certified estimate with the new vertices composed onto it (the
// first Solve initializes as Options.Init says). The Result is Solve's.
// On an error the solver is as it was before the call.
func (inc *Incremental) Solve(ctx context.Context) (*Result, error) {
	return inc.solve(func(g *posegraph.Graph, opts Options) (*Result, error) {
		opts.order = &inc.order
		return SolveWith(ctx, g, opts, nil)
	})
}

// SolveRobust is Solve with SolveRobust's outlier rejection: graduated
// non-convexity and the TLS check run on the whole graph so far, warm
// started from the last certified estimate (so a wrong loop closure that
// arrives at some step is judged against the map the earlier steps
// certified). Result.Graph is then the inlier graph, and the estimate
// kept for the next step is its certified optimum.
func (inc *Incremental) SolveRobust(ctx context.Context, ro RobustOptions) (*Result, error) {
	return inc.solve(func(g *posegraph.Graph, opts Options) (*Result, error) {
		return SolveRobust(ctx, g, opts, ro)
	})
}

func (inc *Incremental) solve(solve func(*posegraph.Graph, Options) (*Result, error)) (*Result, error) {
	if len(inc.ids) == 0 || inc.landmark[0] {
		return nil, fmt.Errorf("%s: an incremental solve needs a pose first: the first vertex added anchors the map", inc.src())
	}
	start, reached := inc.place()
	g, verts := inc.graph(reached)
	if len(verts) < len(inc.ids) && !inc.opts.LargestComponent {
		// Validate of the whole graph makes the error Solve would.
		all := make([]bool, len(inc.ids))
		for k := range all {
			all[k] = true
		}
		whole, _ := inc.graph(all)
		if err := whole.Validate(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%s: %d vertices are not linked to the first pose", inc.src(), len(inc.ids)-len(verts))
	}
	if g.M() == 0 {
		// F is identically 0: nothing to estimate, and nothing a
		// certificate could say.
		return nil, fmt.Errorf("%s: %w: %d vertices and no edges linking them", inc.src(), ErrNoEdges, g.N())
	}
	opts := inc.opts
	opts.LargestComponent = false
	// Rotation synchronization drops the position priors, and the world
	// vertex with them when no pose prior is left (SolveWith): its poses
	// are then those of verts without the world vertex, in order.
	solved := verts
	if opts.Problem == posegraph.Rotations && g.HasPriors() && g.WithoutPositionPriors().N() < g.N() {
		w := g.World()
		solved = append(append([]int(nil), verts[:w]...), verts[w+1:]...)
	}
	if inc.solves > 0 {
		opts.Init, opts.InitialPoses = InitGiven, make([]posegraph.Pose, len(solved))
		opts.warmStep = true
		if opts.BCMMaxSweeps == 0 {
			opts.BCMMaxSweeps = warmBCMSweeps
		}
		if opts.GradTol == 0 {
			opts.GradTol = warmGradTol
		}
		for k, v := range solved {
			opts.InitialPoses[k] = start[v]
		}
	}
	inc.markTouched(solved)
	res, err := solve(g, opts)
	if inc.order.kept {
		inc.orderEdges = len(inc.edges)
	}
	if err != nil {
		return nil, err
	}
	inc.solves++
	if res.Status == Certified && len(res.Poses) == len(solved) {
		for k, v := range solved {
			inc.est[v], inc.placed[v] = res.Poses[k], true
		}
	}
	return res, nil
}

// markTouched prepares the kept order (stepOrder) for a solve of the
// vertices solved (arrival indices, in the graph's order): the vertices
// that an edge the kept order's graph lacked reaches (an edge added
// since, or one to a vertex it did not hold).
func (inc *Incremental) markTouched(solved []int) {
	o := &inc.order
	o.kept = false
	at := make([]int, len(inc.ids))
	for k := range at {
		at[k] = -1
	}
	for k, v := range solved {
		at[v] = k
	}
	had := make([]bool, len(inc.ids))
	for _, v := range o.prev {
		had[v] = true
	}
	o.solved, o.at = solved, at
	o.touched = make([]bool, len(solved))
	for k, e := range inc.edges {
		i, j := at[e.I], at[e.J]
		if i < 0 || j < 0 {
			continue
		}
		if k >= inc.orderEdges || !had[e.I] || !had[e.J] {
			o.touched[i], o.touched[j] = true, true
		}
	}
}

// warmBCMSweeps is the BCM sweeps of a warm step (unless
// Options.BCMMaxSweeps sets them). From the last certified estimate, one
// sweep places the new vertices about as well as five (the trust region's
// first Newton step does the rest); the four more sweeps, each with its
// exact translation solve and its objective, cost more than the
// trust-region steps they spare (docs/online.md).
const warmBCMSweeps = 1

// warmGradTol is the trust region's gradient tolerance (Options.GradTol)
// on a warm step, unless Options.GradTol sets one. The default, 1e-9, is
// for a cold solve, whose point nothing else vouches for. A warm step's
// trust region reaches 1e-7 about where it would stop at 1e-9 but one
// more step (its stale factor's tCG needs three inner iterations for the
// first and one or two for the next); that step moves F by about 1e-14
// relative, and each step's certificate, a fresh factorization of its own
// S, still proves the optimum to the same bound (docs/online.md: every
// step of the suite's replays certified at rank 2 or 3 as before, 14%
// fewer trust-region steps on city10000).
const warmGradTol = 1e-7

// place returns the start of the next solve by arrival index: the last
// certified estimate where there is one, and the other vertices placed by
// composing measurements from placed ones, breadth first (the first pose
// at the identity when nothing is placed); reached marks the vertices
// placed.
func (inc *Incremental) place() (start []posegraph.Pose, reached []bool) {
	d := inc.d
	start = append([]posegraph.Pose(nil), inc.est...)
	reached = append([]bool(nil), inc.placed...)
	var queue []int
	for k, p := range reached {
		if p {
			queue = append(queue, k)
		}
	}
	if len(queue) == 0 {
		start[0], reached[0] = posegraph.Identity(d), true
		queue = append(queue, 0)
	}
	// The edges that touch a vertex not yet placed, by vertex.
	adj := make(map[int][]int)
	for k := range inc.edges {
		e := &inc.edges[k]
		if !reached[e.I] || !reached[e.J] {
			adj[e.I] = append(adj[e.I], k)
			adj[e.J] = append(adj[e.J], k)
		}
	}
	for len(queue) > 0 && len(adj) > 0 {
		v := queue[0]
		queue = queue[1:]
		for _, k := range adj[v] {
			e := &inc.edges[k]
			u := e.J
			if u == v {
				u = e.I
			}
			if reached[u] {
				continue
			}
			m := e.Measurement()
			switch {
			case inc.landmark[u]:
				// A landmark is seen from pose v: its position is v's
				// translation plus v's rotation of the measurement.
				p := posegraph.Compose(&start[v], &m, d)
				start[u] = posegraph.Identity(d)
				start[u].T = p.T
			case inc.landmark[v]:
				// A pose placed from a landmark it observes has no rotation
				// measured: keep the identity, and put the landmark where
				// the measurement says.
				start[u] = posegraph.Identity(d)
				for a := 0; a < d; a++ {
					start[u].T[a] = start[v].T[a] - m.T[a]
				}
			case u == e.J:
				start[u] = posegraph.Compose(&start[v], &m, d)
			default:
				inv := posegraph.Inverse(&m, d)
				start[u] = posegraph.Compose(&start[v], &inv, d)
			}
			reached[u] = true
			queue = append(queue, u)
		}
		delete(adj, v)
	}
	return start, reached
}

// graph returns the graph of the vertices marked in keep, poses in arrival
// order then landmarks in arrival order, and the arrival index of each of
// its vertices.
func (inc *Incremental) graph(keep []bool) (*posegraph.Graph, []int) {
	var verts []int
	hasLandmarks := false
	for pass := 0; pass < 2; pass++ {
		for k, l := range inc.landmark {
			if keep[k] && l == (pass == 1) {
				verts = append(verts, k)
				hasLandmarks = hasLandmarks || l
			}
		}
	}
	at := make([]int, len(inc.ids))
	for k := range at {
		at[k] = -1
	}
	g := &posegraph.Graph{D: inc.d, Source: inc.Source, RawRotations: inc.RawRotations, IDs: make([]int, len(verts))}
	if hasLandmarks {
		g.Landmark = make([]bool, len(verts))
	}
	for k, v := range verts {
		at[v] = k
		g.IDs[k] = inc.ids[v]
		if hasLandmarks {
			g.Landmark[k] = inc.landmark[v]
		}
	}
	g.Edges = make([]posegraph.Edge, 0, len(inc.edges))
	for _, e := range inc.edges {
		if at[e.I] >= 0 && at[e.J] >= 0 {
			e.I, e.J = at[e.I], at[e.J]
			g.Edges = append(g.Edges, e)
		}
	}
	return g, verts
}
