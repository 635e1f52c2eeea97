package g2o

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"

	"github.com/bcmsync/bcmsync/posegraph"
)

// Write writes g in g2o format: a VERTEX line per pose under its original id
// (VERTEX_SE2 for d = 2, VERTEX_SE3:QUAT for d = 3) holding poses[i], then a
// FIX line per fixed pose, then the edges. With poses nil the vertices hold
// g.Initial where g.HasInitial says there is an estimate, the identity
// otherwise.
//
// An edge that carries the values it was read with (Meas and Info of the
// right lengths) is written with them, so reading the output gives the same
// measurement and precisions bit for bit; TORO input comes out as g2o
// EDGE_SE2 with the information matrix in g2o order. An edge made in memory
// is written from R, T, Kappa and Tau: an angle or unit quaternion and the
// isotropic information matrix diag(tau, tau, kappa) (2-D) or
// diag(tau, tau, tau, 2 kappa, 2 kappa, 2 kappa) (3-D), which the reader
// turns back into kappa and tau. Clear Meas and Info after changing R, T,
// Kappa or Tau of an edge that was read from a file.
//
// Landmarks are written as VERTEX_XY / VERTEX_TRACKXYZ with their
// positions (poses[i].T), their observations as EDGE_SE2_XY /
// EDGE_SE3_TRACKXYZ (sensor offset 0, declared the identity by a
// PARAMS_SE3OFFSET line at the top of a 3-D file), from Meas and Info when
// they have the right lengths, else from T and the isotropic tau I.
// Priors are written as the records they came from (appendPrior), an
// EDGE_SE3_PRIOR read with a sensor offset with its PARAMS_SE3OFFSET line.
//
// Numbers are written in the shortest form that parses back to the same
// float64. Read numbers poses by ascending id, so a graph whose IDs are not
// ascending reads back with its poses in another order.
func Write(w io.Writer, g *posegraph.Graph, poses []posegraph.Pose) error {
	if err := checkWritable(g, poses); err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	b := make([]byte, 0, 512)
	vtag, etag := "VERTEX_SE2 ", "EDGE_SE2 "
	if g.D == 3 {
		vtag, etag = "VERTEX_SE3:QUAT ", "EDGE_SE3:QUAT "
	}
	offs := priorOffsets(g)
	if g.D == 3 && (hasObservations(g) || g.HasPriors()) {
		// EDGE_SE3_TRACKXYZ and the 3-D priors name a sensor offset; g2o
		// needs it declared.
		b = appendOffset(b[:0], offs.identity, identityOffset[:])
		for _, o := range offs.lines {
			b = appendOffset(b, o.id, o.vals[:])
		}
		if _, err := bw.Write(b); err != nil {
			return err
		}
	}
	world := g.World()
	for i, id := range g.IDs {
		if i == world {
			continue // the priors' world frame is implicit in the file
		}
		x := poseAt(g, poses, i)
		if g.IsLandmark(i) {
			b = appendLandmarkVertex(b[:0], g.D, id, x.T)
		} else {
			b = append(b[:0], vtag...)
			b = strconv.AppendInt(b, int64(id), 10)
			b = appendPose(b, g.D, x.R, x.T)
		}
		b = append(b, '\n')
		if _, err := bw.Write(b); err != nil {
			return err
		}
	}
	for _, i := range g.Fixed {
		if i == world {
			continue
		}
		b = append(b[:0], "FIX "...)
		b = strconv.AppendInt(b, int64(g.IDs[i]), 10)
		b = append(b, '\n')
		if _, err := bw.Write(b); err != nil {
			return err
		}
	}
	nm, ni := 3, 6
	if g.D == 3 {
		nm, ni = 7, 21
	}
	var info [21]float64
	for k := range g.Edges {
		e := &g.Edges[k]
		if e.Prior != posegraph.NoPrior {
			b = appendPrior(b[:0], g, e, offs.idOf(e))
			if _, err := bw.Write(b); err != nil {
				return err
			}
			continue
		}
		if g.IsLandmark(e.J) {
			b = appendObservation(b[:0], g, e, offs.identity)
			if _, err := bw.Write(b); err != nil {
				return err
			}
			continue
		}
		b = append(b[:0], etag...)
		b = strconv.AppendInt(b, int64(g.IDs[e.I]), 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(g.IDs[e.J]), 10)
		if len(e.Meas) == nm {
			b = appendFloats(b, e.Meas)
		} else {
			b = appendPose(b, g.D, e.R, e.T)
		}
		if len(e.Info) == ni {
			b = appendFloats(b, e.Info)
		} else {
			poseInfo(info[:ni], g.D, e.Kappa, e.Tau)
			b = appendFloats(b, info[:ni])
		}
		b = append(b, '\n')
		if _, err := bw.Write(b); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// WriteTUM writes one line "timestamp tx ty tz qx qy qz qw" per pose (not
// per landmark), the
// trajectory format of the TUM RGB-D benchmark read by evo and similar
// tools. The timestamp is the vertex id; 2-D poses get z = 0 and a
// quaternion about the z axis. With poses nil it writes the initial
// estimates as Write does.
func WriteTUM(w io.Writer, g *posegraph.Graph, poses []posegraph.Pose) error {
	if err := checkWritable(g, poses); err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	b := make([]byte, 0, 256)
	world := g.World()
	for i, id := range g.IDs {
		if g.IsLandmark(i) || i == world {
			continue // a trajectory holds poses only
		}
		x := poseAt(g, poses, i)
		r := x.R
		if g.D == 2 {
			r = [9]float64{x.R[0], x.R[1], 0, x.R[2], x.R[3], 0, 0, 0, 1}
		}
		qx, qy, qz, qw := QuatFromRotation(r)
		b = strconv.AppendInt(b[:0], int64(id), 10)
		b = appendFloats(b, []float64{x.T[0], x.T[1], x.T[2], qx, qy, qz, qw})
		b = append(b, '\n')
		if _, err := bw.Write(b); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// checkWritable rejects what would produce a file Read cannot read back, or
// would index out of range.
func checkWritable(g *posegraph.Graph, poses []posegraph.Pose) error {
	if g == nil {
		return fmt.Errorf("g2o: nil graph")
	}
	src := g.Source
	if src == "" {
		src = "graph"
	}
	if g.D != 2 && g.D != 3 {
		return fmt.Errorf("g2o: %s: dimension %d is not 2 or 3", src, g.D)
	}
	n := len(g.IDs)
	if poses != nil && len(poses) != n {
		return fmt.Errorf("g2o: %s: %d poses for %d vertices", src, len(poses), n)
	}
	for i := 0; i < n; i++ {
		x := poseAt(g, poses, i)
		if !finite(x.R[:g.D*g.D]) || !finite(x.T[:g.D]) {
			return fmt.Errorf("g2o: %s: pose of vertex %d is not finite", src, g.IDs[i])
		}
	}
	ids := slices.Clone(g.IDs)
	slices.Sort(ids)
	for k := 1; k < n; k++ {
		if ids[k] == ids[k-1] {
			return fmt.Errorf("g2o: %s: id %d names two poses", src, ids[k])
		}
	}
	for _, f := range g.Fixed {
		if f < 0 || f >= n {
			return fmt.Errorf("g2o: %s: fixed pose index %d outside 0..%d", src, f, n-1)
		}
	}
	for k := range g.Edges {
		e := &g.Edges[k]
		if e.I < 0 || e.I >= n || e.J < 0 || e.J >= n {
			return fmt.Errorf("g2o: %s: edge %d (%d, %d) has an endpoint outside 0..%d", src, k, e.I, e.J, n-1)
		}
		if !finite(e.R[:g.D*g.D]) || !finite(e.T[:g.D]) || !finite(e.Meas) || !finite(e.Info) ||
			!finite([]float64{e.Kappa, e.Tau}) {
			return fmt.Errorf("g2o: %s: edge %d (%d, %d) has a value that is not finite", src, k, g.IDs[e.I], g.IDs[e.J])
		}
		if e.Prior != posegraph.NoPrior {
			if err := checkPriorWritable(g, k, e, src); err != nil {
				return err
			}
			continue
		}
		if g.IsLandmark(e.J) {
			if len(e.Info) != g.D*(g.D+1)/2 && (!(e.Tau > 0) || math.IsInf(e.Tau, 0)) {
				return fmt.Errorf("g2o: %s: observation %d (%d, %d) has precision tau=%g that no information matrix gives",
					src, k, g.IDs[e.I], g.IDs[e.J], e.Tau)
			}
			continue
		}
		if len(e.Info) != infoLen(g.D) && (!(e.Kappa > 0) || !(e.Tau > 0) || math.IsInf(2*e.Kappa, 0)) {
			return fmt.Errorf("g2o: %s: edge %d (%d, %d) has precisions kappa=%g tau=%g that no information matrix gives",
				src, k, g.IDs[e.I], g.IDs[e.J], e.Kappa, e.Tau)
		}
	}
	return nil
}

// infoLen is the number of values of an information matrix in dimension d.
func infoLen(d int) int {
	if d == 2 {
		return 6
	}
	return 21
}

func finite(v []float64) bool {
	for _, x := range v {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return false
		}
	}
	return true
}

func poseAt(g *posegraph.Graph, poses []posegraph.Pose, i int) posegraph.Pose {
	if poses != nil {
		return poses[i]
	}
	if i < len(g.Initial) && i < len(g.HasInitial) && g.HasInitial[i] {
		return g.Initial[i]
	}
	return posegraph.Identity(g.D)
}

// appendPose appends " x y th" (2-D) or " x y z qx qy qz qw" (3-D).
func appendPose(b []byte, d int, r [9]float64, t [3]float64) []byte {
	if d == 2 {
		return appendFloats(b, []float64{t[0], t[1], AngleFromRotation(r)})
	}
	qx, qy, qz, qw := QuatFromRotation(r)
	return appendFloats(b, []float64{t[0], t[1], t[2], qx, qy, qz, qw})
}

func appendFloats(b []byte, v []float64) []byte {
	for _, x := range v {
		b = append(b, ' ')
		b = strconv.AppendFloat(b, x, 'g', -1, 64)
	}
	return b
}
