package g2o

import (
	"fmt"
	"math"
	"strconv"

	"github.com/bcmsync/bcmsync/posegraph"
)

// Prior records (see the package documentation), as g2o lays them out:
//
//	EDGE_PRIOR_SE2      pose x y theta I11 I12 I13 I22 I23 I33
//	EDGE_PRIOR_SE2_XY   pose x y I11 I12 I22
//	EDGE_SE3_PRIOR      pose offset x y z qx qy qz qw I11 ... I66   (21 values)
//	EDGE_SE3_XYZ_PRIOR  pose offset x y z I11 I12 I13 I22 I23 I33
//
// A pose prior's error is g2o's relative-pose error between the
// measurement and the pose, an EDGE_SE2's or EDGE_SE3:QUAT's, so its
// information matrix becomes kappa and tau by the same rules
// (SE2Precisions, SE3Precisions). A position prior's error is the pose's
// translation less the measurement; its matrix becomes tau as a landmark
// observation's does (ObservationPrecision). The 3-D records name a sensor
// offset (PARAMS_SE3OFFSET): EDGE_SE3_PRIOR measures the pose composed
// with it, which offsetPrior turns into an ordinary pose prior;
// EDGE_SE3_XYZ_PRIOR's error does not use it. posegraph's priors.go models
// them with a world vertex.

// priorRecord is a prior before its pose id is mapped to an index.
type priorRecord struct {
	id int
	p  posegraph.Prior
}

// prior reads one of the four prior records: kind says which quantity, d
// the dimension.
func (p *parser) prior(d int, kind posegraph.PriorKind) *ParseError {
	if err := p.setDim(d); err != nil {
		return err
	}
	ids := 1
	if d == 3 {
		ids = 2 // pose, sensor offset
	}
	nm, ni := d, d*(d+1)/2 // a position and its matrix
	if kind == posegraph.PosePrior {
		nm, ni = 3, 6
		if d == 3 {
			nm, ni = 7, 21
		}
	}
	if err := p.count(ids, nm+ni); err != nil {
		return err
	}
	id, err := p.parseID(1)
	if err != nil {
		return err
	}
	var off *sensorOffset
	if d == 3 {
		var err *ParseError
		if off, err = p.offset(2); err != nil {
			return err
		}
	}
	if err := p.parseVals(ids + 1); err != nil {
		return err
	}
	v := &p.vals
	r := priorRecord{id: id, p: posegraph.Prior{Kind: kind, Line: p.line, R: posegraph.Identity(d).R}}
	r.p.Meas = p.alloc(nm)
	copy(r.p.Meas, v[:nm])
	r.p.Info = p.alloc(ni)
	copy(r.p.Info, v[nm:nm+ni])
	var perr error
	switch {
	case kind == posegraph.PositionPrior:
		copy(r.p.T[:d], v[:d])
		r.p.Tau, perr = ObservationPrecision(r.p.Info)
	case d == 2:
		r.p.R = RotationFromAngle(v[2])
		r.p.T = [3]float64{v[0], v[1]}
		r.p.Kappa, r.p.Tau, perr = SE2Precisions(r.p.Info)
	default:
		rot, ok := RotationFromQuat(v[3], v[4], v[5], v[6])
		if !ok {
			return p.errorf("%s has a zero quaternion", string(p.fields[0]))
		}
		r.p.R = rot
		r.p.T = [3]float64{v[0], v[1], v[2]}
		info := r.p.Info
		if off != nil && !off.identity {
			// The record as read, then its offset, for writers.
			r.p.Meas = p.alloc(nm + 8)
			copy(r.p.Meas, v[:nm])
			r.p.Meas[nm] = float64(off.id)
			copy(r.p.Meas[nm+1:], off.vals[:])
			var w [21]float64
			z := offsetPrior(&r.p.R, &r.p.T, &off.pose, r.p.Info, w[:])
			r.p.R, r.p.T, info = z.R, z.T, w[:]
		}
		r.p.Kappa, r.p.Tau, perr = SE3Precisions(info)
	}
	if perr != nil {
		return p.errorf("%s: %v", string(p.fields[0]), perr)
	}
	if kind == posegraph.PosePrior {
		if err := InfoPositiveDefinite(r.p.Info); err != nil {
			if p.opts.StrictInfo {
				return p.errorf("%s: %v", string(p.fields[0]), err)
			}
			if p.notPD == 0 {
				p.notPDFirst, p.notPDMsg = p.line, err.Error()
			}
			p.notPD++
		}
	}
	p.priors = append(p.priors, r)
	return nil
}

// offsetPrior turns an EDGE_SE3_PRIOR with measurement Z = (r, t),
// information matrix info (21 values, g2o order) and sensor offset O into
// the ordinary pose prior it equals: it returns Z' = Z O^-1 and writes its
// information matrix into out (21 values).
//
// g2o's error is e(Z^-1 X O), e(D) = (translation of D, vector part of
// D's unit quaternion with w >= 0), weighted by info. Z^-1 X O =
// O^-1 (Z'^-1 X) O: zero exactly where the error of the prior Z' is, and
// a conjugation by O^-1 of it. Near zero, e(O^-1 D' O) = J e(D') + O(|e|^2)
// with J = [[Ro^T, -2 Ro^T [to]x], [0, Ro^T]] (O's inverse adjoint in g2o's
// coordinates, the 2 because the quaternion's vector part is half the
// rotation vector): the rotation part exactly (a conjugated quaternion's
// vector part is rotated), the translation to first order, as
// Ro^T (t' + (R' - I) to) with (R' - I) to = 2 q' x to + O(|q'|^2). So the
// Gaussian g2o's cost describes has the information matrix J^T info J on
// the prior Z', which the conversion to kappa and tau then reads as any
// EDGE_SE3:QUAT's.
func offsetPrior(r *[9]float64, t *[3]float64, o *posegraph.Pose, info, out []float64) posegraph.Pose {
	var z posegraph.Pose
	for a := 0; a < 3; a++ {
		for b := 0; b < 3; b++ {
			var s float64
			for c := 0; c < 3; c++ {
				s += r[a*3+c] * o.R[b*3+c] // R Ro^T
			}
			z.R[a*3+b] = s
		}
	}
	for a := 0; a < 3; a++ {
		s := t[a]
		for c := 0; c < 3; c++ {
			s -= z.R[a*3+c] * o.T[c]
		}
		z.T[a] = s
	}
	// J, 6 x 6, row-major.
	var j [36]float64
	to := &o.T
	cross := [9]float64{0, -to[2], to[1], to[2], 0, -to[0], -to[1], to[0], 0} // [to]x
	for a := 0; a < 3; a++ {
		for b := 0; b < 3; b++ {
			rt := o.R[b*3+a] // Ro^T[a][b]
			j[a*6+b] = rt
			j[(a+3)*6+b+3] = rt
			var s float64
			for c := 0; c < 3; c++ {
				s += o.R[c*3+a] * cross[c*3+b]
			}
			j[a*6+b+3] = -2 * s
		}
	}
	var w, wj [36]float64
	unpackUpper(w[:], info, 6)
	for a := 0; a < 6; a++ { // W J
		for b := 0; b < 6; b++ {
			var s float64
			for c := 0; c < 6; c++ {
				s += w[a*6+c] * j[c*6+b]
			}
			wj[a*6+b] = s
		}
	}
	k := 0
	for a := 0; a < 6; a++ { // J^T (W J), upper triangle
		for b := a; b < 6; b++ {
			var s float64
			for c := 0; c < 6; c++ {
				s += j[c*6+a] * wj[c*6+b]
			}
			out[k] = s
			k++
		}
	}
	return z
}

// placePriors maps the priors' pose ids to g's indices and adds them with
// the world vertex (posegraph.Graph.WithPriors). A prior on an id that no
// VERTEX or EDGE record names, or that is a landmark, is an error at its
// line.
func (p *parser) placePriors(g *posegraph.Graph) (*posegraph.Graph, *ParseError) {
	if len(p.priors) == 0 {
		return g, nil
	}
	at := make(map[int]int, g.N())
	for i, id := range g.IDs {
		at[id] = i
	}
	ps := make([]posegraph.Prior, len(p.priors))
	for k, r := range p.priors {
		i, ok := at[r.id]
		p.line = r.p.Line
		if !ok {
			return nil, p.errorf("prior on vertex %d, which no VERTEX or EDGE record names", r.id)
		}
		if g.IsLandmark(i) {
			return nil, p.errorf("prior on vertex %d, a landmark (line %d); priors measure poses", r.id, p.landmarks[r.id])
		}
		if len(p.verts) > 0 && !g.HasInitial[i] {
			return nil, p.errorf("prior on vertex %d, which no VERTEX line declares "+
				"(a file with VERTEX lines must declare every vertex its records name)", r.id)
		}
		ps[k] = r.p
		ps[k].Pose = i
	}
	return g.WithPriors(ps), nil
}

// priorTag returns the g2o record name of a prior of the given kind in
// dimension d.
func priorTag(d int, kind posegraph.PriorKind) string {
	switch {
	case d == 2 && kind == posegraph.PosePrior:
		return "EDGE_PRIOR_SE2"
	case d == 2:
		return "EDGE_PRIOR_SE2_XY"
	case kind == posegraph.PosePrior:
		return "EDGE_SE3_PRIOR"
	}
	return "EDGE_SE3_XYZ_PRIOR"
}

// appendPrior appends prior edge e of g as the record it came from: with
// Meas and Info when they have the right lengths, else from R, T and the
// isotropic information matrix that Read turns back into Kappa and Tau.
func appendPrior(b []byte, g *posegraph.Graph, e *posegraph.Edge, offset int) []byte {
	d := g.D
	b = append(b, priorTag(d, e.Prior)...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(g.IDs[e.J]), 10)
	if d == 3 {
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(offset), 10)
	}
	if e.Prior == posegraph.PositionPrior {
		ni := d * (d + 1) / 2
		if len(e.Meas) == d {
			b = appendFloats(b, e.Meas)
		} else {
			b = appendFloats(b, e.T[:d])
		}
		if len(e.Info) == ni {
			b = appendFloats(b, e.Info)
		} else {
			var info [6]float64
			isotropic(info[:ni], d, e.Tau)
			b = appendFloats(b, info[:ni])
		}
		return append(b, '\n')
	}
	nm, ni := 3, 6
	if d == 3 {
		nm, ni = 7, 21
	}
	if len(e.Meas) == nm || hasOffset(d, e) {
		b = appendFloats(b, e.Meas[:nm])
	} else {
		b = appendPose(b, d, e.R, e.T)
	}
	if len(e.Info) == ni {
		b = appendFloats(b, e.Info)
	} else {
		var info [21]float64
		poseInfo(info[:ni], d, e.Kappa, e.Tau)
		b = appendFloats(b, info[:ni])
	}
	return append(b, '\n')
}

// offsetMeasLen is the length of the Meas of an EDGE_SE3_PRIOR read with a
// sensor offset that is not the identity: the record's 7 measurement
// values, then the offset's id and its 7 values as read.
const offsetMeasLen = 15

// hasOffset reports whether prior edge e of a d-dimensional graph carries
// a sensor offset in its Meas.
func hasOffset(d int, e *posegraph.Edge) bool {
	return d == 3 && e.Prior == posegraph.PosePrior && len(e.Meas) == offsetMeasLen
}

// offsetLine is a PARAMS_SE3OFFSET line to write.
type offsetLine struct {
	id   int
	vals [7]float64
}

// offsetTable assigns the sensor offsets that the priors of a graph carry
// the ids they are written under: each distinct offset keeps the id it
// was read with unless another offset took it first (graphs joined in
// memory), when it gets the lowest free one. The identity, which every
// other 3-D prior and observation names, is 0 unless a carried offset
// holds 0, when it too gets the lowest free id.
type offsetTable struct {
	identity int
	lines    []offsetLine
	ids      map[[8]float64]int
}

// idOf returns the offset id to write for prior edge e.
func (t *offsetTable) idOf(e *posegraph.Edge) int {
	if id, ok := t.ids[offsetKey(e)]; ok && len(e.Meas) == offsetMeasLen {
		return id
	}
	return t.identity
}

// offsetKey is the id and values of the offset in a Meas of offsetMeasLen
// values (the zero key otherwise).
func offsetKey(e *posegraph.Edge) (k [8]float64) {
	if len(e.Meas) == offsetMeasLen {
		copy(k[:], e.Meas[7:])
	}
	return k
}

func priorOffsets(g *posegraph.Graph) offsetTable {
	var t offsetTable
	used := make(map[int]bool)
	var later [][8]float64 // offsets whose id another took first
	for k := range g.Edges {
		e := &g.Edges[k]
		if !hasOffset(g.D, e) {
			continue
		}
		key := offsetKey(e)
		if _, ok := t.ids[key]; ok {
			continue
		}
		if t.ids == nil {
			t.ids = make(map[[8]float64]int)
		}
		id := int(key[0])
		if float64(id) != key[0] || math.Abs(key[0]) > maxID || used[id] {
			id = -1
			later = append(later, key)
		} else {
			used[id] = true
		}
		t.ids[key] = id
		t.lines = append(t.lines, offsetLine{id: id, vals: [7]float64(key[1:])})
	}
	free := func() int {
		id := 0
		for used[id] {
			id++
		}
		used[id] = true
		return id
	}
	t.identity = free()
	for _, key := range later {
		id := free()
		t.ids[key] = id
		for i := range t.lines {
			if t.lines[i].id == -1 {
				t.lines[i].id = id
				break
			}
		}
	}
	return t
}

// appendOffset appends a PARAMS_SE3OFFSET line.
func appendOffset(b []byte, id int, vals []float64) []byte {
	b = append(b, "PARAMS_SE3OFFSET "...)
	b = strconv.AppendInt(b, int64(id), 10)
	b = appendFloats(b, vals)
	return append(b, '\n')
}

// isotropic fills the upper triangle of tau I (d x d) into info.
func isotropic(info []float64, d int, tau float64) {
	clear(info)
	k := 0
	for a := 0; a < d; a++ {
		info[k] = tau
		k += d - a
	}
}

// poseInfo fills the upper triangle of the isotropic information matrix
// of a pose measurement, diag(tau, tau, kappa) (2-D) or
// diag(tau I3, 2 kappa I3) (3-D), which SE2Precisions and SE3Precisions
// turn back into kappa and tau.
func poseInfo(info []float64, d int, kappa, tau float64) {
	clear(info)
	if d == 2 {
		info[0], info[3], info[5] = tau, tau, kappa
		return
	}
	// The diagonal of the 6 x 6 upper triangle sits at 0, 6, 11, 15, 18, 20.
	info[0], info[6], info[11] = tau, tau, tau
	info[15], info[18], info[20] = 2*kappa, 2*kappa, 2*kappa
}

// checkPriorWritable is checkWritable's test of a prior edge.
func checkPriorWritable(g *posegraph.Graph, k int, e *posegraph.Edge, src string) error {
	ni := g.D * (g.D + 1) / 2
	ok := e.Tau > 0
	if e.Prior == posegraph.PosePrior {
		ni = infoLen(g.D)
		ok = ok && e.Kappa > 0 && !math.IsInf(2*e.Kappa, 0)
	}
	if len(e.Info) != ni && !ok {
		return fmt.Errorf("g2o: %s: prior %d on pose %d has precisions kappa=%g tau=%g that no information matrix gives",
			src, k, g.IDs[e.J], e.Kappa, e.Tau)
	}
	return nil
}
