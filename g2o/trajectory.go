package g2o

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/bcmsync/bcmsync/posegraph"
)

// Trajectory is a sequence of stamped poses: a TUM file's lines, or the
// VERTEX records of a g2o file stamped with their vertex ids. It is what
// trajectory evaluation compares, with no edges and no weights.
type Trajectory struct {
	// D is 2 for g2o SE(2) vertices, 3 for SE(3) vertices, TUM and
	// KITTI files.
	D int
	// Format is the file's format. A KITTI file has no time stamps: its
	// Stamps are the pose numbers 0, 1, 2, ..., and its poses are matched
	// with another trajectory's by order.
	Format TrajectoryFormat
	Stamps []float64
	Poses  []posegraph.Pose
	// Lines holds the source line of each pose, for messages.
	Lines []int
	// Landmark marks the entries that are landmark vertices (VERTEX_XY,
	// VERTEX_TRACKXYZ; their Poses carry the position and R = I); nil
	// when there are none. They are not part of the trajectory: see
	// PosesOnly.
	Landmark []bool
	Source   string
}

// PosesOnly returns t without its landmark entries (t itself when it has
// none): the trajectory that error metrics compare.
func (t *Trajectory) PosesOnly() *Trajectory {
	if t.Landmark == nil {
		return t
	}
	out := &Trajectory{D: t.D, Source: t.Source, Format: t.Format}
	for k, l := range t.Landmark {
		if !l {
			out.Stamps = append(out.Stamps, t.Stamps[k])
			out.Poses = append(out.Poses, t.Poses[k])
			out.Lines = append(out.Lines, t.Lines[k])
		}
	}
	return out
}

// IsTUMPath reports whether path names a TUM trajectory by its extension,
// .tum or .txt (case-insensitive), as the command-line tools decide in
// which format to write a trajectory (ReadTrajectoryFile reads the format
// from the content).
func IsTUMPath(path string) bool {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".tum", ".txt":
		return true
	}
	return false
}

// ReadTrajectoryFile reads the trajectory at path in the format its
// content shows, whatever the file's extension (SniffTrajectory): TUM,
// KITTI poses, or the pose VERTEX records of a g2o or TORO file
// (ReadVertices, landmark vertices left out: they are not part of a
// trajectory).
func ReadTrajectoryFile(path string) (*Trajectory, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadTrajectory(f, path)
}

// ReadTrajectory reads a trajectory from r, named name in messages, in the
// format its content shows (SniffTrajectory), as ReadTrajectoryFile does.
// It reads r whole first, so r may be a stream such as standard input.
func ReadTrajectory(r io.Reader, name string) (*Trajectory, error) {
	b, err := io.ReadAll(skipBOM(r))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	format, err := SniffTrajectory(bytes.NewReader(b), name)
	if err != nil {
		return nil, err
	}
	r = bytes.NewReader(b)
	switch format {
	case FormatTUM:
		return ReadTUM(r, name)
	case FormatKITTI:
		return ReadKITTI(r, name)
	}
	t, err := ReadVertices(r, name, ReadOptions{})
	if err != nil {
		return nil, err
	}
	if t = t.PosesOnly(); len(t.Poses) == 0 {
		return nil, &ParseError{File: name, Msg: "only landmark vertices: a trajectory needs pose VERTEX lines"}
	}
	return t, nil
}

// maxExactStamp bounds the vertex ids used as stamps: beyond 2^53 two ids
// can be the same float64.
const maxExactStamp = 1 << 53

// ReadTUM reads a trajectory in the TUM RGB-D format, one pose per line,
//
//	timestamp tx ty tz qx qy qz qw
//
// (quaternion w last, normalized on reading), the format WriteTUM writes and
// evo reads. '#' starts a comment to the end of the line; blank lines, CRLF
// line ends and any mix of spaces and tabs are fine. The poses keep the
// file's order; a repeated time stamp, a line that is not eight finite
// numbers and a zero quaternion are *ParseErrors naming the line, and so is
// a file without poses. A leading UTF-8 byte-order mark is skipped.
func ReadTUM(r io.Reader, name string) (*Trajectory, error) {
	r = skipBOM(r)
	tr := &Trajectory{D: 3, Source: name, Format: FormatTUM}
	perr := func(line int, format string, args ...any) error {
		return &ParseError{File: name, Line: line, Msg: fmt.Sprintf(format, args...)}
	}
	first := map[float64]int{}
	var v [8]float64
	err := eachDataLine(r, name, func(line int, fields []string) error {
		if len(fields) != 8 {
			return perr(line, "%d fields; a TUM line has 8: timestamp tx ty tz qx qy qz qw", len(fields))
		}
		if err := parseFinite(v[:], fields, name, line); err != nil {
			return err
		}
		rot, ok := RotationFromQuat(v[4], v[5], v[6], v[7])
		if !ok {
			return perr(line, "zero quaternion")
		}
		if l, dup := first[v[0]]; dup {
			return perr(line, "time stamp %s repeats line %d", fields[0], l)
		}
		first[v[0]] = line
		tr.Stamps = append(tr.Stamps, v[0])
		tr.Poses = append(tr.Poses, posegraph.Pose{R: rot, T: [3]float64{v[1], v[2], v[3]}})
		tr.Lines = append(tr.Lines, line)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(tr.Poses) == 0 {
		return nil, &ParseError{File: name, Msg: "no poses: a TUM trajectory needs lines \"timestamp tx ty tz qx qy qz qw\""}
	}
	return tr, nil
}

// ReadVertices reads the VERTEX records of a g2o or TORO file as a
// trajectory stamped by vertex id, in ascending id order. Other records are
// parsed and checked as Read does but not kept, and the file need not have
// edges: a file of VERTEX lines alone is a trajectory. A vertex declared
// twice, an id beyond 2^53 (not exact as a stamp) and a file without
// vertices are *ParseErrors. A leading UTF-8 byte-order mark is skipped.
func ReadVertices(r io.Reader, name string, opts ReadOptions) (*Trajectory, error) {
	r = skipBOM(r)
	p := parser{name: name, opts: opts}
	if err := p.scan(r); err != nil {
		return nil, err
	}
	p.warn()
	if len(p.verts) == 0 {
		return nil, &ParseError{File: name, Msg: "no VERTEX records: a trajectory needs VERTEX_SE2, VERTEX_SE3:QUAT or VERTEX2 lines"}
	}
	sortVertices(p.verts)
	tr := &Trajectory{D: p.d, Source: name, Format: FormatG2O}
	for k, v := range p.verts {
		if k > 0 && v.id == p.verts[k-1].id {
			l := max(v.line, p.verts[k-1].line)
			return nil, &ParseError{File: name, Line: l, Msg: fmt.Sprintf("vertex %d declared twice (first at line %d)", v.id, min(v.line, p.verts[k-1].line))}
		}
		if id := int64(v.id); id > maxExactStamp || id < -maxExactStamp { // int64: int may be 32 bits wide
			return nil, &ParseError{File: name, Line: v.line, Msg: fmt.Sprintf("vertex id %d is beyond 2^53 and cannot serve as an exact stamp", v.id)}
		}
		tr.Stamps = append(tr.Stamps, float64(v.id))
		tr.Poses = append(tr.Poses, v.pose)
		tr.Lines = append(tr.Lines, v.line)
		if p.landmarkLines[v.line] {
			if tr.Landmark == nil {
				tr.Landmark = make([]bool, k, len(p.verts))
			}
		}
		if tr.Landmark != nil {
			tr.Landmark = append(tr.Landmark, p.landmarkLines[v.line])
		}
	}
	return tr, nil
}

// PlanarTol is how far a 3-D pose may be from the plane z = 0, in its
// position's z and in its rotation's tilt (the entries coupling z with x
// and y), for Flatten to treat it as planar: it admits the digits a
// printed trajectory loses, not real 3-D motion.
const PlanarTol = 1e-6

// Flatten returns the 2-D trajectory of a planar 3-D one: every pose with
// |z| <= PlanarTol (relative to the trajectory's extent when that exceeds
// 1) and a rotation about the z axis to PlanarTol, as WriteTUM writes 2-D
// poses. A pose that is not planar is an error naming its line. A 2-D
// trajectory is returned as it is.
func (t *Trajectory) Flatten() (*Trajectory, error) {
	if t.D == 2 {
		return t, nil
	}
	extent := 1.0
	for _, p := range t.Poses {
		for _, x := range p.T {
			extent = math.Max(extent, math.Abs(x))
		}
	}
	out := &Trajectory{D: 2, Stamps: t.Stamps, Lines: t.Lines, Landmark: t.Landmark, Source: t.Source, Format: t.Format, Poses: make([]posegraph.Pose, len(t.Poses))}
	for k, p := range t.Poses {
		r := &p.R
		if math.Abs(p.T[2]) > PlanarTol*extent || math.Abs(r[2]) > PlanarTol || math.Abs(r[5]) > PlanarTol ||
			math.Abs(r[6]) > PlanarTol || math.Abs(r[7]) > PlanarTol {
			return nil, &ParseError{File: t.Source, Line: t.Lines[k],
				Msg: fmt.Sprintf("pose is not planar (z = %g, or a rotation not about the z axis), so it cannot be compared with a 2-D trajectory", p.T[2])}
		}
		// The nearest 2-D rotation to the top-left block.
		th := math.Atan2(r[3]-r[1], r[0]+r[4])
		out.Poses[k].R = RotationFromAngle(th)
		out.Poses[k].T = [3]float64{p.T[0], p.T[1]}
	}
	return out, nil
}
