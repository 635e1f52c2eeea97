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
// with it, and only the identity is read (as for EDGE_SE3_TRACKXYZ);
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
	if d == 3 {
		if err := p.offset(2); err != nil {
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
		r.p.Kappa, r.p.Tau, perr = SE3Precisions(r.p.Info)
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
func appendPrior(b []byte, g *posegraph.Graph, e *posegraph.Edge) []byte {
	d := g.D
	b = append(b, priorTag(d, e.Prior)...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(g.IDs[e.J]), 10)
	if d == 3 {
		b = append(b, " 0"...)
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
	if len(e.Meas) == nm {
		b = appendFloats(b, e.Meas)
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
