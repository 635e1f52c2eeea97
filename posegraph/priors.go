package posegraph

import (
	"fmt"
	"math"
	"slices"
)

// Priors are unary measurements: a pose, or the position of a pose,
// given in a world frame (a GPS fix, a surveyed start, a map). They are
// modelled exactly, inside the same problem, with one more pose: the
// world vertex W, whose pose is the world frame's in the estimate's frame.
// A prior is then an edge from W to its pose (Edge.Prior says which kind):
//
//   - a pose prior measures the pose in the world frame, R ~ R_W^T R_i,
//     T ~ R_W^T (t_i - t_W): an ordinary relative measurement from W,
//     with its kappa and tau, whose term is
//     kappa ||R_i - R_W R||_F^2 + tau ||t_i - t_W - R_W T||^2;
//   - a position prior measures the position alone, T ~ R_W^T (t_i - t_W):
//     a pose-to-point term with W as the observer and the pose's
//     translation as the point, as a landmark observation is (Kappa = 0,
//     R = I), whose term is tau ||t_i - t_W - R_W T||^2.
//
// The objective stays tr(X Q X^T) with Q = Laplacian, so the solver, the
// certificate and the rounding see one more vertex and nothing else: the
// certificate covers the problem with its priors. F is invariant under a
// rigid motion of all poses, W's included, so fixing W at the identity
// (W is the gauge anchor, see Anchor) gives the estimate in the priors'
// world frame, where a pose prior's term reads
// kappa ||R_i - R||^2 + tau ||t_i - T||^2 and a position prior's
// tau ||t_i - T||^2.
//
// The world vertex is a pose vertex (the last pose, before any landmark)
// that only prior edges touch; WithPriors adds it. Its id is one more than
// the largest id of the graph's other vertices; writers leave it out.

// PriorKind says what a prior measures; NoPrior marks the edges that are
// not priors.
type PriorKind uint8

const (
	// NoPrior is a relative measurement or a landmark observation.
	NoPrior PriorKind = iota
	// PosePrior measures a pose (rotation and translation) in the world
	// frame.
	PosePrior
	// PositionPrior measures a pose's position (translation) in the world
	// frame, as a GPS fix does.
	PositionPrior
)

func (k PriorKind) String() string {
	switch k {
	case NoPrior:
		return "none"
	case PosePrior:
		return "pose"
	case PositionPrior:
		return "position"
	}
	return fmt.Sprintf("PriorKind(%d)", uint8(k))
}

// Prior is a unary measurement of pose Pose (an index of the graph it is
// added to) in the world frame: for a PosePrior R and T, with precisions
// Kappa and Tau as for an Edge; for a PositionPrior T alone, with Tau
// (Kappa must be 0 and R is ignored). Meas, Info and Line are, as for an
// Edge, the record as read (g2o's measurement values and information
// upper triangle), for writers; empty for priors made in memory.
type Prior struct {
	Kind       PriorKind
	Pose       int
	R          [9]float64
	T          [3]float64
	Kappa, Tau float64
	Meas, Info []float64
	Line       int
}

// World returns the index of the world vertex, the first end of every
// prior edge, or -1 when the graph has no prior.
func (g *Graph) World() int {
	for k := range g.Edges {
		if g.Edges[k].Prior != NoPrior {
			return g.Edges[k].I
		}
	}
	return -1
}

// HasPriors reports whether any edge is a prior.
func (g *Graph) HasPriors() bool { return g.World() >= 0 }

// MeasuresRotation reports whether edge e has a rotation term: false for a
// landmark observation and a position prior, whose Kappa is 0.
func (g *Graph) MeasuresRotation(e *Edge) bool {
	return e.Prior != PositionPrior && !g.IsLandmark(e.I) && !g.IsLandmark(e.J)
}

// Priors returns the graph's priors, in edge order, with Pose the index
// of the pose each measures.
func (g *Graph) Priors() []Prior {
	var ps []Prior
	for k := range g.Edges {
		e := &g.Edges[k]
		if e.Prior == NoPrior {
			continue
		}
		ps = append(ps, Prior{Kind: e.Prior, Pose: e.J, R: e.R, T: e.T, Kappa: e.Kappa, Tau: e.Tau,
			Meas: e.Meas, Info: e.Info, Line: e.Line})
	}
	return ps
}

// WithPriors returns a copy of g with the priors ps added as edges from
// its world vertex, which it adds first when g has none: a pose vertex
// after the last pose (landmark indices move up by one), with the id one
// above the largest of g and the identity as its initial estimate (it is
// the anchor: see Graph.Anchor). ps index g's vertices as they are
// (before the insertion); a position prior's R is set to the identity.
// The priors are checked by Validate.
func (g *Graph) WithPriors(ps []Prior) *Graph {
	h := *g
	h.Edges = slices.Clone(g.Edges)
	w := g.World()
	inserted := w < 0 && len(ps) > 0
	if inserted {
		w = g.NumPoses()
		h.insertVertex(w)
	}
	for _, p := range ps {
		j := p.Pose
		if inserted && j >= w {
			j++ // the world vertex was inserted before it
		}
		e := Edge{I: w, J: j, R: p.R, T: p.T, Kappa: p.Kappa, Tau: p.Tau, Meas: p.Meas, Info: p.Info,
			Line: p.Line, Prior: p.Kind}
		if p.Kind == PositionPrior {
			e.R = Identity(g.D).R
		}
		h.Edges = append(h.Edges, e)
	}
	return &h
}

// insertVertex inserts the world vertex at index w (the first landmark's,
// or N) into h, whose slices it replaces by new ones.
func (h *Graph) insertVertex(w int) {
	id := 0
	for k, v := range h.IDs {
		if k == 0 || v >= id {
			id = v + 1
		}
	}
	h.IDs = slices.Insert(slices.Clone(h.IDs), w, id)
	if len(h.Initial) > 0 || len(h.HasInitial) > 0 {
		h.Initial = slices.Insert(slices.Clone(h.Initial), w, Identity(h.D))
		h.HasInitial = slices.Insert(slices.Clone(h.HasInitial), w, true)
	}
	if len(h.Landmark) > 0 {
		h.Landmark = slices.Insert(slices.Clone(h.Landmark), w, false)
	}
	if h.VertexLines != nil {
		h.VertexLines = slices.Insert(slices.Clone(h.VertexLines), w, 0)
	}
	shift := func(i int) int {
		if i >= w {
			return i + 1
		}
		return i
	}
	for k := range h.Edges {
		h.Edges[k].I, h.Edges[k].J = shift(h.Edges[k].I), shift(h.Edges[k].J)
	}
	fixed := make([]int, len(h.Fixed))
	for k, f := range h.Fixed {
		fixed[k] = shift(f)
	}
	h.Fixed = fixed
}

// InWorldFrame returns x (indexed like g) with every vertex moved by the
// inverse of the world vertex's pose, x_i <- x_W^{-1} x_i, so that the
// world vertex is the identity: the estimate in the priors' world frame.
// F is invariant under this motion. Without priors it returns x.
func (g *Graph) InWorldFrame(x []Pose) []Pose {
	w := g.World()
	if w < 0 {
		return x
	}
	d := g.D
	inv := Inverse(&x[w], d)
	out := make([]Pose, len(x))
	for i := range x {
		out[i] = Compose(&inv, &x[i], d)
	}
	return out
}

// validatePriors checks the priors' structure: one world vertex, a pose
// that no other edge touches, priors on poses only (not on W itself, not
// on a landmark), a position prior with Kappa = 0, R = I and a positive
// finite Tau, and a world rotation that some prior observes.
func (g *Graph) validatePriors() error {
	w := g.World()
	if w < 0 {
		return nil
	}
	n := g.N()
	if w >= n || g.IsLandmark(w) {
		return fmt.Errorf("%s: the world vertex (index %d) is not a pose", g.src(), w)
	}
	observed := false
	for k := range g.Edges {
		e := &g.Edges[k]
		if e.I < 0 || e.I >= n || e.J < 0 || e.J >= n {
			continue // Validate reports it
		}
		at := g.where(k)
		if e.Prior == NoPrior {
			if e.I == w || e.J == w {
				return fmt.Errorf("%s: edge (%d, %d) touches the world vertex %d, which only priors may", at, g.IDs[e.I], g.IDs[e.J], g.IDs[w])
			}
			continue
		}
		if e.I != w {
			return fmt.Errorf("%s: prior on pose %d starts at vertex %d, not at the world vertex %d", at, g.IDs[e.J], g.IDs[e.I], g.IDs[w])
		}
		if e.J == w || g.IsLandmark(e.J) {
			return fmt.Errorf("%s: a prior must measure a pose, not vertex %d", at, g.IDs[e.J])
		}
		switch e.Prior {
		case PosePrior:
			observed = true
		case PositionPrior:
			if e.Kappa != 0 {
				return fmt.Errorf("%s: position prior on pose %d has kappa=%g; it measures no rotation, so kappa must be 0", at, g.IDs[e.J], e.Kappa)
			}
			if e.R != Identity(g.D).R {
				return fmt.Errorf("%s: position prior on pose %d must have R = I", at, g.IDs[e.J])
			}
			if !(e.Tau > 0) || math.IsInf(e.Tau, 0) {
				return fmt.Errorf("%s: position prior precision tau=%g must be positive and finite", at, e.Tau)
			}
			for _, v := range e.T[:g.D] {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					return fmt.Errorf("%s: measured position is not finite", at)
				}
				if v != 0 {
					observed = true
				}
			}
		default:
			return fmt.Errorf("%s: unknown prior kind %v", at, e.Prior)
		}
	}
	if !observed {
		return fmt.Errorf("%s: the priors leave the world frame's rotation unobserved (no pose prior, and every "+
			"position prior measures the origin): add a pose prior, or a position prior away from the origin", g.src())
	}
	return nil
}

// WithoutPositionPriors returns g without its position priors, which
// rotation synchronization has no use for, and without the world vertex
// when no pose prior is left (the vertices after it move down by one). It
// returns g itself when g has no position prior.
func (g *Graph) WithoutPositionPriors() *Graph {
	pose, pos := false, false
	for k := range g.Edges {
		switch g.Edges[k].Prior {
		case PosePrior:
			pose = true
		case PositionPrior:
			pos = true
		}
	}
	if !pos {
		return g
	}
	if !pose {
		return g.WithoutPriors()
	}
	h := *g
	h.Edges = make([]Edge, 0, len(g.Edges))
	for _, e := range g.Edges {
		if e.Prior != PositionPrior {
			h.Edges = append(h.Edges, e)
		}
	}
	return &h
}

// WithoutPriors returns g without its priors and its world vertex (the
// vertices after it move down by one), or g itself when it has none.
func (g *Graph) WithoutPriors() *Graph {
	w := g.World()
	if w < 0 {
		return g
	}
	keep := make([]int, 0, g.N()-1)
	for i := 0; i < g.N(); i++ {
		if i != w {
			keep = append(keep, i)
		}
	}
	return g.Subgraph(keep)
}

// PriorsFixHeading reports whether g's priors fix the rotation of the
// whole estimate about the world frame: a pose prior does, and position
// priors do when their measured points do not all coincide (2-D) or all
// lie on one line (3-D). Otherwise every rotation of the estimate about
// that point (line) fits them equally well: the optimum is a continuum
// and the returned heading is one of it (docs/priors.md). It is true for
// a graph without priors, whose anchor fixes the gauge.
func (g *Graph) PriorsFixHeading() bool {
	var points [][3]float64
	for k := range g.Edges {
		switch e := &g.Edges[k]; e.Prior {
		case PosePrior:
			return true
		case PositionPrior:
			points = append(points, e.T)
		}
	}
	if len(points) == 0 {
		return true
	}
	scale := 0.0
	for _, p := range points {
		for _, v := range p[:g.D] {
			scale = math.Max(scale, math.Abs(v))
		}
	}
	tol := 1e-12 * math.Max(1, scale)
	var dir [3]float64 // the first difference from points[0] that is not negligible
	have := false
	for _, p := range points[1:] {
		var v [3]float64
		n := 0.0
		for k := 0; k < g.D; k++ {
			v[k] = p[k] - points[0][k]
			n += v[k] * v[k]
		}
		n = math.Sqrt(n)
		switch {
		case n <= tol:
			continue
		case g.D == 2:
			return true
		case !have:
			dir, have = v, true
			continue
		}
		c := [3]float64{dir[1]*v[2] - dir[2]*v[1], dir[2]*v[0] - dir[0]*v[2], dir[0]*v[1] - dir[1]*v[0]}
		dn := math.Sqrt(dir[0]*dir[0] + dir[1]*dir[1] + dir[2]*dir[2])
		if math.Sqrt(c[0]*c[0]+c[1]*c[1]+c[2]*c[2]) > 1e-9*dn*n {
			return true
		}
	}
	return false
}
