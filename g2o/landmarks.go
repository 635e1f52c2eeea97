package g2o

import (
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/bcmsync/bcmsync/posegraph"
)

// Landmark records (see the package documentation):
//
//	VERTEX_XY        id x y
//	EDGE_SE2_XY      pose landmark x y I11 I12 I22
//	VERTEX_TRACKXYZ  id x y z
//	EDGE_SE3_TRACKXYZ pose landmark offset x y z I11 I12 I13 I22 I23 I33
//	PARAMS_SE3OFFSET id x y z qx qy qz qw
//
// An observation measures the landmark's position in the pose's frame. Its
// information matrix becomes the isotropic precision tau = d / tr(inv(I)),
// the rule docs/design.md section 2 applies to a pose edge's translation block;
// it must be positive definite. The offset of EDGE_SE3_TRACKXYZ names a
// sensor offset (PARAMS_SE3OFFSET): only the identity offset is supported,
// and a file that declares none is read as if every offset were the
// identity, as files written by simple generators assume.

// landmarkVertex reads VERTEX_XY (d = 2) or VERTEX_TRACKXYZ (d = 3).
func (p *parser) landmarkVertex(d int) *ParseError {
	if err := p.setDim(d); err != nil {
		return err
	}
	id, err := p.idRecord(d)
	if err != nil {
		return err
	}
	v := vertex{id: id, line: p.line, pose: posegraph.Identity(d)}
	copy(v.pose.T[:d], p.vals[:d])
	*p.readVerts.next() = v
	p.markLandmark(id)
	if p.landmarkLines == nil {
		p.landmarkLines = make(map[int]bool)
	}
	p.landmarkLines[p.line] = true
	return nil
}

// markLandmark remembers that the current line names id as a landmark.
func (p *parser) markLandmark(id int) {
	if p.landmarks == nil {
		p.landmarks = make(map[int]int)
	}
	if _, ok := p.landmarks[id]; !ok {
		p.landmarks[id] = p.line
	}
}

// observation reads EDGE_SE2_XY (d = 2) or EDGE_SE3_TRACKXYZ (d = 3).
func (p *parser) observation(d int) *ParseError {
	if err := p.setDim(d); err != nil {
		return err
	}
	ni := d * (d + 1) / 2
	ids := 2
	if d == 3 {
		ids = 3 // pose, landmark, sensor offset
	}
	if err := p.count(ids, d+ni); err != nil {
		return err
	}
	i, err := p.parseID(1)
	if err != nil {
		return err
	}
	l, err := p.parseID(2)
	if err != nil {
		return err
	}
	if i == l {
		return p.errorf("%s from vertex %d to itself", string(p.fields[0]), i)
	}
	if d == 3 {
		o, err := p.offset(3)
		if err != nil {
			return err
		}
		if o != nil && !o.nearIdentity {
			return p.errorf("EDGE_SE3_TRACKXYZ uses sensor offset %s (line %d), which is not the identity; "+
				"observations through a sensor offset are not supported", string(p.fields[3]), o.line)
		}
	}
	if err := p.parseVals(ids + 1); err != nil {
		return err
	}
	e := posegraph.Edge{I: i, J: l, Line: p.line, R: posegraph.Identity(d).R}
	copy(e.T[:d], p.vals[:d])
	e.Meas = p.alloc(d)
	copy(e.Meas, p.vals[:d])
	e.Info = p.alloc(ni)
	copy(e.Info, p.vals[d:d+ni])
	tau, perr := ObservationPrecision(e.Info)
	if perr != nil {
		return p.errorf("%s: %v", string(p.fields[0]), perr)
	}
	e.Tau = tau
	*p.readEdges.next() = e
	p.markLandmark(l)
	return nil
}

// sensorOffset is a PARAMS_SE3OFFSET declaration: its values as read
// (id, then x y z qx qy qz qw), the pose they give (quaternion normalized, as g2o
// does), its line, whether it is exactly the identity (zero translation
// and quaternion vector part) and whether it is the identity to within
// identityOffsetTol, which observations accept.
type sensorOffset struct {
	id           int
	vals         [7]float64
	pose         posegraph.Pose
	line         int
	identity     bool
	nearIdentity bool
}

// identityOffsetTol is how far from the identity an offset that an
// EDGE_SE3_TRACKXYZ names may be (printing rounds an identity quaternion).
const identityOffsetTol = 1e-9

// offset reads field k as the id of a sensor offset and checks that a
// PARAMS_SE3OFFSET line before it declares it, when the file declares any.
// It returns the declaration (nil when the file declares none: the
// identity).
func (p *parser) offset(k int) (*sensorOffset, *ParseError) {
	off, err := p.parseID(k)
	if err != nil {
		return nil, err
	}
	if p.params == nil {
		return nil, nil
	}
	o, ok := p.params[off]
	if !ok {
		return nil, p.errorf("%s uses sensor offset %d, which no PARAMS_SE3OFFSET line before it declares", string(p.fields[0]), off)
	}
	return &o, nil
}

// offsetParams reads PARAMS_SE3OFFSET id x y z qx qy qz qw. Any rigid
// offset is read: EDGE_SE3_PRIOR models it exactly (priors.go), while an
// observation through one that is not the identity is refused at the
// observation's line.
func (p *parser) offsetParams() *ParseError {
	id, err := p.idRecord(7)
	if err != nil {
		return err
	}
	v := p.vals
	o := sensorOffset{id: id, line: p.line, pose: posegraph.Pose{T: [3]float64{v[0], v[1], v[2]}}}
	copy(o.vals[:], v[:7])
	r, ok := RotationFromQuat(v[3], v[4], v[5], v[6])
	if !ok {
		return p.errorf("PARAMS_SE3OFFSET %d has a zero quaternion", id)
	}
	o.pose.R = r
	o.identity = v[0] == 0 && v[1] == 0 && v[2] == 0 && v[3] == 0 && v[4] == 0 && v[5] == 0
	qn := math.Sqrt(v[3]*v[3] + v[4]*v[4] + v[5]*v[5] + v[6]*v[6])
	const tol = identityOffsetTol
	o.nearIdentity = math.Abs(v[0]) <= tol && math.Abs(v[1]) <= tol && math.Abs(v[2]) <= tol &&
		math.Abs(math.Abs(v[6])/qn-1) <= tol
	if p.params == nil {
		p.params = make(map[int]sensorOffset)
	}
	if first, ok := p.params[id]; ok {
		// g2o keeps the first declaration of an id; taking either one in
		// silence would read the records after it differently from g2o
		// or from what the file's author meant.
		return p.errorf("PARAMS_SE3OFFSET %d declared twice (first at line %d)", id, first.line)
	}
	p.params[id] = o
	return nil
}

// ObservationPrecision returns the isotropic precision of a landmark
// observation whose d x d information matrix (d = 2 or 3) has the upper
// triangle info, row by row (3 or 6 values): tau = d / tr(inv(I)), exact
// a for I = a I. It fails unless I is positive definite and tau is finite.
func ObservationPrecision(info []float64) (float64, error) {
	var d int
	switch len(info) {
	case 3:
		d = 2
	case 6:
		d = 3
	default:
		return 0, fmt.Errorf("an observation's information matrix needs 3 or 6 values, got %d", len(info))
	}
	var a [9]float64
	unpackUpper(a[:d*d], info, d)
	tr, err := traceInverse(a[:d*d], d, "position")
	if err != nil {
		return 0, err
	}
	tau := float64(d) / tr
	if s, ok := scalar(a[:d*d], d); ok {
		tau = s
	}
	if !(tau > 0) || math.IsInf(tau, 0) {
		return 0, fmt.Errorf("information matrix gives precision tau=%g, not positive and finite", tau)
	}
	return tau, nil
}

// placeLandmarks marks g's landmarks and renumbers the vertices so that the
// poses (ascending id) come before the landmarks (ascending id), as
// posegraph requires. An id used both as a landmark and as a pose is an
// error naming the line that uses it the second way.
func (p *parser) placeLandmarks(g *posegraph.Graph) *ParseError {
	if len(p.landmarks) == 0 {
		return nil
	}
	n := len(g.IDs)
	isL := make([]bool, n)
	for id := range p.landmarks {
		if i, ok := slices.BinarySearch(g.IDs, id); ok {
			isL[i] = true
		}
	}
	conflict := func(line, id int, what string) *ParseError {
		p.line = line
		return p.errorf("vertex %d is a landmark (line %d) but %s uses it as a pose", id, p.landmarks[id], what)
	}
	// Observations first: one written backwards (landmark, pose) is
	// best reported at its own line.
	for _, e := range g.Edges {
		if e.Kappa == 0 && isL[e.I] {
			return conflict(e.Line, g.IDs[e.I], "this observation")
		}
	}
	for _, e := range g.Edges {
		if e.Kappa == 0 {
			continue
		}
		for _, v := range [2]int{e.I, e.J} {
			if isL[v] {
				return conflict(e.Line, g.IDs[v], "this edge")
			}
		}
	}
	for _, v := range p.verts {
		if _, ok := p.landmarks[v.id]; ok && !p.landmarkLines[v.line] {
			return conflict(v.line, v.id, "this VERTEX record")
		}
	}
	// New order: poses, then landmarks, each by ascending id (the old
	// order already is ascending).
	perm := make([]int, 0, n) // perm[new] = old
	for i := 0; i < n; i++ {
		if !isL[i] {
			perm = append(perm, i)
		}
	}
	for i := 0; i < n; i++ {
		if isL[i] {
			perm = append(perm, i)
		}
	}
	inv := make([]int, n)
	for k, i := range perm {
		inv[i] = k
	}
	ids := make([]int, n)
	init := make([]posegraph.Pose, n)
	has := make([]bool, n)
	g.Landmark = make([]bool, n)
	for k, i := range perm {
		ids[k], init[k], has[k], g.Landmark[k] = g.IDs[i], g.Initial[i], g.HasInitial[i], isL[i]
	}
	g.IDs, g.Initial, g.HasInitial = ids, init, has
	if g.VertexLines != nil {
		lines := make([]int, n)
		for k, i := range perm {
			lines[k] = g.VertexLines[i]
		}
		g.VertexLines = lines
	}
	for k := range g.Edges {
		g.Edges[k].I, g.Edges[k].J = inv[g.Edges[k].I], inv[g.Edges[k].J]
	}
	for k, f := range g.Fixed {
		g.Fixed[k] = inv[f]
	}
	return nil
}

// identityOffset is the values of the identity sensor offset,
// x y z qx qy qz qw.
var identityOffset = [7]float64{0, 0, 0, 0, 0, 0, 1}

func hasObservations(g *posegraph.Graph) bool {
	for k := range g.Edges {
		if g.IsLandmark(g.Edges[k].J) {
			return true
		}
	}
	return false
}

// appendLandmarkVertex appends "VERTEX_XY id x y" or "VERTEX_TRACKXYZ id x y z".
func appendLandmarkVertex(b []byte, d, id int, t [3]float64) []byte {
	if d == 2 {
		b = append(b, "VERTEX_XY "...)
	} else {
		b = append(b, "VERTEX_TRACKXYZ "...)
	}
	b = strconv.AppendInt(b, int64(id), 10)
	return appendFloats(b, t[:d])
}

// appendObservation appends an EDGE_SE2_XY or EDGE_SE3_TRACKXYZ line.
func appendObservation(b []byte, g *posegraph.Graph, e *posegraph.Edge, offset int) []byte {
	d := g.D
	if d == 2 {
		b = append(b, "EDGE_SE2_XY "...)
	} else {
		b = append(b, "EDGE_SE3_TRACKXYZ "...)
	}
	b = strconv.AppendInt(b, int64(g.IDs[e.I]), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(g.IDs[e.J]), 10)
	if d == 3 {
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(offset), 10)
	}
	if len(e.Meas) == d {
		b = appendFloats(b, e.Meas)
	} else {
		b = appendFloats(b, e.T[:d])
	}
	ni := d * (d + 1) / 2
	if len(e.Info) == ni {
		b = appendFloats(b, e.Info)
	} else {
		var info [6]float64
		if d == 2 {
			info[0], info[2] = e.Tau, e.Tau
		} else {
			info[0], info[3], info[5] = e.Tau, e.Tau, e.Tau
		}
		b = appendFloats(b, info[:ni])
	}
	return append(b, '\n')
}
