package posegraph

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/bcmsync/bcmsync/internal/graphs"
)

// Pose is an element of SE(d) (or SO(d), ignoring T). R is the d x d rotation,
// row-major with stride d (entry (a, b) is R[a*d+b]); T holds the first d
// entries of the translation. The fixed-size arrays keep a million poses in
// one allocation; Rotation and Translation give them d x d and d long (Dim
// reads d from the layout), and a Pose prints that way.
type Pose struct {
	R [9]float64
	T [3]float64
}

// Identity returns the identity pose of SE(d).
func Identity(d int) Pose {
	var p Pose
	for a := 0; a < d; a++ {
		p.R[a*d+a] = 1
	}
	return p
}

// Edge is a relative measurement of pose J seen from pose I: R ~ R_I^T R_J,
// T ~ R_I^T (t_J - t_I), with isotropic precisions Kappa (rotation) and Tau
// (translation), both > 0.
type Edge struct {
	I, J       int
	R          [9]float64
	T          [3]float64
	Kappa, Tau float64

	// The record as read, so a writer can reproduce it bit for bit:
	// Meas holds the file's measurement values (dx dy dth for SE(2),
	// x y z qx qy qz qw for SE(3), quaternion as written, not normalized;
	// a 3-D pose prior read through a sensor offset continues with the
	// offset's id and its x y z qx qy qz qw, 15 values, while R, T, Kappa
	// and Tau are those of the prior it equals: docs/priors.md),
	// Info the information matrix's upper triangle in g2o order (6 or 21
	// values). Both are empty for edges made in memory. Edges read from
	// one file share one Info array where their matrices are equal bit
	// for bit, as they mostly are: give an edge a new array rather than
	// write into its Info.
	Meas []float64
	Info []float64
	// Line is the edge's line in its source file (0 if none).
	Line int
	// Prior marks a prior (priors.go): an edge from the world vertex
	// to the pose it measures. NoPrior for every other edge.
	Prior PriorKind
}

// Graph is a pose graph. Poses are indexed 0..n-1; IDs maps an index back to
// the id the file used, so results can be written under the original ids.
type Graph struct {
	D     int
	IDs   []int
	Edges []Edge
	// Initial holds the file's VERTEX estimates; HasInitial[i] says whether
	// pose i had one (files with no VERTEX lines leave them all false).
	Initial    []Pose
	HasInitial []bool
	// Fixed lists the indices of FIX'ed poses, in file order.
	Fixed []int
	// Landmark marks the vertices that are landmarks (see landmarks.go):
	// nil or all false for a pure pose graph, else one entry per vertex,
	// with the landmarks after all poses.
	Landmark []bool
	// Source names the file the graph came from, for messages.
	Source string
	// VertexLines holds, for a graph read from a file, the line of each
	// vertex's VERTEX record in Source (0 for a vertex without one); nil
	// for a graph made in memory. Messages about a vertex (CheckScale)
	// name it.
	VertexLines []int
	// RawRotations says that the edge rotations are SE-Sync's reading of a
	// 3-D file (g2o.ReadOptions.RawQuaternions): Eigen's toRotationMatrix
	// of each quaternion as printed, not normalized. A printed quaternion
	// q = s u (u unit, |s^2 - 1| up to a few 1e-6 in published files) gives
	// R_e = I + s^2 (R(u) - I), which is not orthogonal, while SE-Sync
	// still puts kappa I in Q's diagonal blocks and reports tr(X Q X^T).
	// On poses in SO(d) that is the edge objective plus the constant
	// sum_e kappa_e (d - ||R_e||_F^2), and the 3-D optima in
	// REFERENCE.tsv are minima of it. With the flag set, Validate accepts
	// rotations off orthogonal by up to RawRotationTol and Cost adds the
	// constant, so Cost equals tr(X Q X^T) for Q = Laplacian. Laplacian
	// itself is the same either way.
	RawRotations bool
}

// RawRotationTol is how far from a rotation (||R^T R - I||_F + |det R - 1|)
// Validate lets an edge measurement be when Graph.RawRotations is set: far
// above the few 1e-6 that rounding a printed unit quaternion causes, far
// below a measurement that is not meant as a rotation.
const RawRotationTol = 1e-4

// rotationTol is the same bound for exact readings: normalized quaternions
// and angles are rotations to rounding error.
const rotationTol = 1e-6

// N is the number of poses.
func (g *Graph) N() int { return len(g.IDs) }

// M is the number of edges.
func (g *Graph) M() int { return len(g.Edges) }

// Anchor is the pose whose input estimate fixes the gauge: the world
// vertex when the graph has priors (priors.go), else the first FIX'ed
// pose (FIX'ed landmarks do not count: they cannot fix a rotation), else
// pose 0.
func (g *Graph) Anchor() int {
	if w := g.World(); w >= 0 {
		return w
	}
	for _, f := range g.Fixed {
		if !g.IsLandmark(f) {
			return f
		}
	}
	return 0
}

// Components returns the connected components, each a sorted list of pose
// indices, largest first (ties by smallest index).
func (g *Graph) Components() [][]int {
	n := g.N()
	u := graphs.NewUnionFind(n)
	for _, e := range g.Edges {
		u.Union(e.I, e.J)
	}
	// Components in the order of their first pose, each listing its poses
	// in order: count them, then fill one backing array.
	comp := make([]int, n) // the component of pose i, by first appearance
	var sizes []int
	for i := 0; i < n; i++ {
		if r := u.Find(i); r == i {
			comp[i] = len(sizes)
			sizes = append(sizes, 0)
		} else {
			comp[i] = comp[r] // the root is the component's first pose
		}
		sizes[comp[i]]++
	}
	all := make([]int, n)
	comps := make([][]int, len(sizes))
	at := 0
	for k, sz := range sizes {
		comps[k] = all[at : at : at+sz]
		at += sz
	}
	for i := 0; i < n; i++ {
		comps[comp[i]] = append(comps[comp[i]], i)
	}
	sort.SliceStable(comps, func(a, b int) bool { return len(comps[a]) > len(comps[b]) })
	return comps
}

// DisconnectedError reports a graph with more than one connected component.
type DisconnectedError struct {
	Source string
	Sizes  []int // component sizes, largest first
}

func (e *DisconnectedError) Error() string {
	src := e.Source
	if src == "" {
		src = "graph"
	}
	return fmt.Sprintf("%s: pose graph is disconnected: %d components of sizes %v (a certified solve needs one; use the largest component)", src, len(e.Sizes), e.Sizes)
}

// Validate checks the graph's structure: d in {2, 3}, at least one pose,
// edge endpoints in range and distinct, finite measurements, proper
// rotations (to 1e-6, or to RawRotationTol with RawRotations), positive
// finite precisions, landmark observations that go from a pose to a
// landmark with Kappa = 0 (landmarks.go), and one connected component (a
// *DisconnectedError otherwise; landmarks count as vertices, so poses
// linked only through a common landmark are connected). A connected graph
// is then checked for numbers beyond what double precision can solve and
// certify (CheckScale, scale.go).
func (g *Graph) Validate() error { return g.ValidateFor(Poses) }

// validateStructure is Validate without the scale checks.
func (g *Graph) validateStructure() error {
	if g.D != 2 && g.D != 3 {
		return fmt.Errorf("%s: dimension %d is not 2 or 3", g.src(), g.D)
	}
	n := g.N()
	if n == 0 {
		return fmt.Errorf("%s: graph has no poses", g.src())
	}
	if len(g.Initial) != 0 && len(g.Initial) != n || len(g.HasInitial) != 0 && len(g.HasInitial) != n {
		return fmt.Errorf("%s: %d poses but %d initial estimates", g.src(), n, len(g.Initial))
	}
	// Ascending ids (a file's) are distinct when neighbours differ; a map
	// is for the others.
	if !slices.IsSorted(g.IDs) {
		seen := make(map[int]int, n)
		for i, id := range g.IDs {
			if k, ok := seen[id]; ok {
				return fmt.Errorf("%s: id %d names poses %d and %d", g.src(), id, k, i)
			}
			seen[id] = i
		}
	} else {
		for i := 1; i < len(g.IDs); i++ {
			if g.IDs[i] == g.IDs[i-1] {
				return fmt.Errorf("%s: id %d names poses %d and %d", g.src(), g.IDs[i], i-1, i)
			}
		}
	}
	if err := g.validateLandmarks(); err != nil {
		return err
	}
	if err := g.validatePriors(); err != nil {
		return err
	}
	tol := rotationTol
	if g.RawRotations {
		tol = RawRotationTol
	}
	for k := range g.Edges {
		e := &g.Edges[k]
		if e.I < 0 || e.I >= n || e.J < 0 || e.J >= n {
			return fmt.Errorf("%s: edge (%d, %d) has an endpoint outside 0..%d", g.where(k), e.I, e.J, n-1)
		}
		if e.I == e.J {
			return fmt.Errorf("%s: edge from pose %d to itself", g.where(k), g.IDs[e.I])
		}
		if g.IsLandmark(e.I) || g.IsLandmark(e.J) || e.Prior == PositionPrior {
			continue // validateLandmarks and validatePriors check them
		}
		if !(e.Kappa > 0) || !(e.Tau > 0) || math.IsInf(e.Kappa, 0) || math.IsInf(e.Tau, 0) {
			return fmt.Errorf("%s: precisions kappa=%g tau=%g must be positive and finite", g.where(k), e.Kappa, e.Tau)
		}
		for _, v := range e.R[:g.D*g.D] {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("%s: rotation is not finite", g.where(k))
			}
		}
		for _, v := range e.T[:g.D] {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("%s: translation is not finite", g.where(k))
			}
		}
		if dev := rotationDeviation(e.R[:], g.D); dev > tol {
			if g.RawRotations {
				return fmt.Errorf("%s: measurement is not a rotation even in SE-Sync's raw reading "+
					"(||R^T R - I|| + |det R - 1| = %.3g > %g: is the quaternion far from unit norm?)", g.where(k), dev, tol)
			}
			return fmt.Errorf("%s: measurement is not a rotation (||R^T R - I|| + |det R - 1| = %.3g)", g.where(k), dev)
		}
	}
	if comps := g.Components(); len(comps) > 1 {
		sizes := make([]int, len(comps))
		for i, c := range comps {
			sizes[i] = len(c)
		}
		return &DisconnectedError{Source: g.Source, Sizes: sizes}
	}
	return nil
}

// ValidateFor is Validate for the problem prob: its scale checks are
// CheckScaleFor(prob), so a rotation problem is not refused for its
// translations or their precisions, which it ignores.
func (g *Graph) ValidateFor(prob Problem) error {
	if err := g.validateStructure(); err != nil {
		return err
	}
	return g.CheckScaleFor(prob)
}

// IsDisconnected reports whether err is (or wraps) a *DisconnectedError.
func IsDisconnected(err error) bool {
	var d *DisconnectedError
	return errors.As(err, &d)
}

func (g *Graph) src() string {
	if g.Source == "" {
		return "graph"
	}
	return g.Source
}

func (g *Graph) where(k int) string {
	if l := g.Edges[k].Line; l > 0 {
		return fmt.Sprintf("%s:%d", g.src(), l)
	}
	return fmt.Sprintf("%s: edge %d", g.src(), k)
}

func rotationDeviation(r []float64, d int) float64 {
	dev := 0.0
	for a := 0; a < d; a++ {
		for b := 0; b < d; b++ {
			s := 0.0
			for k := 0; k < d; k++ {
				s += r[k*d+a] * r[k*d+b]
			}
			if a == b {
				s--
			}
			dev += s * s
		}
	}
	return math.Sqrt(dev) + math.Abs(Det(r, d)-1)
}

// Det returns the determinant of the d x d row-major matrix r.
func Det(r []float64, d int) float64 {
	if d == 2 {
		return r[0]*r[3] - r[1]*r[2]
	}
	return r[0]*(r[4]*r[8]-r[5]*r[7]) - r[1]*(r[3]*r[8]-r[5]*r[6]) + r[2]*(r[3]*r[7]-r[4]*r[6])
}

// Subgraph returns the graph induced by the given pose indices (sorted), with
// poses renumbered in that order and only edges between them kept. IDs,
// initial estimates, FIX marks, landmark marks, vertex lines and
// RawRotations carry over (sorted indices keep the landmarks after the
// poses).
func (g *Graph) Subgraph(poses []int) *Graph {
	return g.Subgraphs([][]int{poses})[0]
}

// Subgraphs returns the subgraph (as Subgraph) induced by each of parts, in
// one pass over g's edges: splitting a graph into its components with
// Subgraph would read every edge once per component. The parts must be
// disjoint, each sorted; a pose in two parts panics.
func (g *Graph) Subgraphs(parts [][]int) []*Graph {
	n := g.N()
	part := make([]int32, n) // the part of pose i plus one; 0: none
	local := make([]int32, n)
	subs := make([]*Graph, len(parts))
	for p, poses := range parts {
		s := &Graph{D: g.D, Source: g.Source, RawRotations: g.RawRotations}
		s.IDs = make([]int, 0, len(poses))
		for k, i := range poses {
			if part[i] != 0 {
				panic("posegraph: Subgraphs: parts overlap")
			}
			part[i], local[i] = int32(p+1), int32(k)
			s.IDs = append(s.IDs, g.IDs[i])
			if len(g.Initial) > 0 {
				s.Initial = append(s.Initial, g.Initial[i])
			}
			if len(g.HasInitial) > 0 {
				s.HasInitial = append(s.HasInitial, g.HasInitial[i])
			}
			if len(g.Landmark) > 0 {
				s.Landmark = append(s.Landmark, g.Landmark[i])
			}
			if len(g.VertexLines) > 0 {
				s.VertexLines = append(s.VertexLines, g.VertexLines[i])
			}
		}
		subs[p] = s
	}
	for _, f := range g.Fixed {
		if p := part[f]; p != 0 {
			subs[p-1].Fixed = append(subs[p-1].Fixed, int(local[f]))
		}
	}
	for _, e := range g.Edges {
		if p := part[e.I]; p != 0 && p == part[e.J] {
			e.I, e.J = int(local[e.I]), int(local[e.J])
			subs[p-1].Edges = append(subs[p-1].Edges, e)
		}
	}
	return subs
}
