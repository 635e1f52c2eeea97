package g2o

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/bcmsync/bcmsync/internal/smalldense"
	"github.com/bcmsync/bcmsync/posegraph"
)

// TrajectoryFormat names a trajectory file's format, as SniffTrajectory
// reads it from the content.
type TrajectoryFormat string

const (
	// FormatG2O: VERTEX records of a g2o or TORO file, stamped by id.
	FormatG2O TrajectoryFormat = "g2o"
	// FormatTUM: "timestamp tx ty tz qx qy qz qw" a line.
	FormatTUM TrajectoryFormat = "tum"
	// FormatKITTI: the KITTI odometry benchmark's pose files, the 3 x 4
	// matrix [R | t] row by row, 12 numbers a line, without time stamps.
	FormatKITTI TrajectoryFormat = "kitti"
)

// SniffTrajectory tells the format of a trajectory from its first line
// that is neither blank nor a '#' comment: a g2o or TORO file starts with
// a record name (a field that is not a number), a TUM line is 8 numbers, a
// KITTI pose line 12. Anything else, and a file without such a line, is a
// *ParseError naming the line.
func SniffTrajectory(r io.Reader, name string) (TrajectoryFormat, error) {
	var format TrajectoryFormat
	err := eachDataLine(r, name, func(line int, fields []string) error {
		if _, err := strconv.ParseFloat(fields[0], 64); err != nil && !errors.Is(err, strconv.ErrRange) {
			format = FormatG2O
			return errStopLines
		}
		switch len(fields) {
		case 8:
			format = FormatTUM
		case 12:
			format = FormatKITTI
		default:
			return &ParseError{File: name, Line: line, Msg: fmt.Sprintf("%d numbers: neither a TUM line (8: timestamp tx ty tz qx qy qz qw) "+
				"nor a KITTI pose line (12: the 3x4 matrix [R | t] row by row), and a g2o line starts with a record name", len(fields))}
		}
		return errStopLines
	})
	if err != nil {
		return "", err
	}
	if format == "" {
		return "", &ParseError{File: name, Msg: "no poses: the file is empty or holds only comments"}
	}
	return format, nil
}

// kittiRotationTol bounds how far the 3 x 3 part of a KITTI pose may be
// from a rotation (||R^T R - I||_F): KITTI's files print about 7 digits,
// which leave it about 1e-6 off; it is projected onto SO(3).
const kittiRotationTol = 1e-3

// ReadKITTI reads a pose file of the KITTI odometry benchmark: each line
// is the 3 x 4 matrix [R | t] of one frame, row by row (12 numbers), the
// pose of frame k on its k-th line. The files carry no time stamps: pose k
// (0-based, counting pose lines) is stamped k, and evaluate matches KITTI
// poses by their order. R is projected onto the nearest rotation; one
// further than 1e-3 from orthogonal, or a reflection, is an error. '#'
// comments and blank lines are skipped; a line that is not 12 finite
// numbers is a *ParseError naming it, and so is a file without poses.
func ReadKITTI(r io.Reader, name string) (*Trajectory, error) {
	r = skipBOM(r)
	tr := &Trajectory{D: 3, Source: name, Format: FormatKITTI}
	perr := func(line int, format string, args ...any) error {
		return &ParseError{File: name, Line: line, Msg: fmt.Sprintf(format, args...)}
	}
	var v [12]float64
	err := eachDataLine(r, name, func(line int, fields []string) error {
		if len(fields) != 12 {
			return perr(line, "%d fields; a KITTI pose line has 12: the 3x4 matrix [R | t] row by row", len(fields))
		}
		if err := parseFinite(v[:], fields, name, line); err != nil {
			return err
		}
		var m, rot [9]float64
		for a := 0; a < 3; a++ {
			for c := 0; c < 3; c++ {
				m[a*3+c] = v[a*4+c]
			}
		}
		if dev := orthogonalityError(&m); dev > kittiRotationTol || det3(&m) <= 0 {
			return perr(line, "the 3x3 part is not a rotation (||R^T R - I|| = %.3g, det %.3g)", dev, det3(&m))
		}
		smalldense.NearestRotation(rot[:], m[:], 3)
		tr.Stamps = append(tr.Stamps, float64(len(tr.Poses)))
		tr.Poses = append(tr.Poses, posegraph.Pose{R: rot, T: [3]float64{v[3], v[7], v[11]}})
		tr.Lines = append(tr.Lines, line)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(tr.Poses) == 0 {
		return nil, &ParseError{File: name, Msg: "no poses: a KITTI pose file needs lines of 12 numbers, [R | t] row by row"}
	}
	return tr, nil
}

// orthogonalityError is ||M^T M - I||_F for a 3 x 3 row-major M.
func orthogonalityError(m *[9]float64) float64 {
	s := 0.0
	for a := 0; a < 3; a++ {
		for b := 0; b < 3; b++ {
			v := 0.0
			for c := 0; c < 3; c++ {
				v += m[c*3+a] * m[c*3+b]
			}
			if a == b {
				v--
			}
			s += v * v
		}
	}
	return math.Sqrt(s)
}

func det3(m *[9]float64) float64 {
	return m[0]*(m[4]*m[8]-m[5]*m[7]) - m[1]*(m[3]*m[8]-m[5]*m[6]) + m[2]*(m[3]*m[7]-m[4]*m[6])
}
