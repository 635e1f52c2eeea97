package trajeval

import (
	"errors"
	"fmt"
	"math"

	"github.com/bcmsync/bcmsync/internal/smalldense"
)

// Pose is an element of SE(d): R is the d x d rotation, row-major with
// stride d, T the first d entries of the translation. It has the layout of
// posegraph.Pose, so a posegraph.Pose converts to it directly.
type Pose struct {
	R [9]float64
	T [3]float64
}

// Alignment selects the transform applied to the estimate before the errors
// are measured.
type Alignment int

const (
	// AlignSE is the rigid motion (rotation and translation) that best
	// fits the positions: the default, since a pose graph's solution is
	// only defined up to one.
	AlignSE Alignment = iota
	// AlignNone compares the trajectories as they are.
	AlignNone
	// AlignSim adds a scale (a similarity transform), for estimates whose
	// scale is unobservable, such as monocular visual odometry.
	AlignSim
)

// String returns the name ParseAlignment accepts.
func (a Alignment) String() string {
	switch a {
	case AlignNone:
		return "none"
	case AlignSE:
		return "se"
	case AlignSim:
		return "sim"
	}
	return fmt.Sprintf("Alignment(%d)", int(a))
}

// ParseAlignment parses "none", "se" or "sim".
func ParseAlignment(s string) (Alignment, error) {
	switch s {
	case "none":
		return AlignNone, nil
	case "se":
		return AlignSE, nil
	case "sim":
		return AlignSim, nil
	}
	return 0, fmt.Errorf("unknown alignment %q (want none, se or sim)", s)
}

// Transform is the similarity x -> Scale R x + T of dimension d, mapping the
// estimate's frame to the reference's.
type Transform struct {
	R     [9]float64
	T     [3]float64
	Scale float64
}

// Identity returns the identity transform of dimension d.
func Identity(d int) Transform {
	var t Transform
	for a := 0; a < d; a++ {
		t.R[a*d+a] = 1
	}
	t.Scale = 1
	return t
}

// Apply returns the pose p moved by the transform: rotation R R_p,
// translation Scale R t_p + T.
func (tr *Transform) Apply(p Pose, d int) Pose {
	var q Pose
	q.R = smalldense.Mul(&tr.R, &p.R, d)
	for a := 0; a < d; a++ {
		s := 0.0
		for k := 0; k < d; k++ {
			s += tr.R[a*d+k] * p.T[k]
		}
		q.T[a] = tr.Scale*s + tr.T[a]
	}
	return q
}

// Align returns the transform of the given kind that best maps the
// positions of est onto those of ref (see the package documentation); est
// and ref are associated pose by pose. It needs at least one pair, and for
// AlignSim positions of est that are not all equal.
func Align(d int, est, ref []Pose, kind Alignment) (Transform, error) {
	if d != 2 && d != 3 {
		return Transform{}, fmt.Errorf("trajeval: dimension %d is not 2 or 3", d)
	}
	if len(est) != len(ref) {
		return Transform{}, fmt.Errorf("trajeval: %d estimated poses but %d reference poses", len(est), len(ref))
	}
	if len(est) == 0 {
		return Transform{}, errors.New("trajeval: no poses to align")
	}
	tr := Identity(d)
	switch kind {
	case AlignNone:
		return tr, nil
	case AlignSE, AlignSim:
	default:
		return Transform{}, fmt.Errorf("trajeval: unknown alignment %d", int(kind))
	}
	n := float64(len(est))
	var mx, my [3]float64
	for k := range est {
		for a := 0; a < d; a++ {
			mx[a] += est[k].T[a]
			my[a] += ref[k].T[a]
		}
	}
	for a := 0; a < d; a++ {
		mx[a] /= n
		my[a] /= n
	}
	// C = mean (y - my)(x - mx)^T and sigma_x^2 = mean ||x - mx||^2.
	var c [9]float64
	varX := 0.0
	for k := range est {
		var dx, dy [3]float64
		for a := 0; a < d; a++ {
			dx[a] = est[k].T[a] - mx[a]
			dy[a] = ref[k].T[a] - my[a]
			varX += dx[a] * dx[a]
		}
		for a := 0; a < d; a++ {
			for b := 0; b < d; b++ {
				c[a*d+b] += dy[a] * dx[b]
			}
		}
	}
	for a := range c[:d*d] {
		c[a] /= n
	}
	varX /= n
	smalldense.NearestRotation(tr.R[:d*d], c[:d*d], d)
	if kind == AlignSim {
		if !(varX > 0) {
			return Transform{}, errors.New("trajeval: a similarity alignment needs estimated positions that are not all equal")
		}
		dot := 0.0
		for a := range c[:d*d] {
			dot += c[a] * tr.R[a]
		}
		tr.Scale = dot / varX
		if !(tr.Scale > 0) {
			return Transform{}, fmt.Errorf("trajeval: the best scale is %g, not positive: the trajectories do not correspond", tr.Scale)
		}
	}
	for a := 0; a < d; a++ {
		s := 0.0
		for b := 0; b < d; b++ {
			s += tr.R[a*d+b] * mx[b]
		}
		tr.T[a] = my[a] - tr.Scale*s
	}
	return tr, nil
}

// RotationAngle returns the angle in radians, in [0, pi], of the d x d
// rotation r: |atan2| of its first column in 2-D; in 3-D
// atan2(|axis part|, cos part), which stays accurate near 0 and pi where
// acos((tr R - 1)/2) would not.
func RotationAngle(r *[9]float64, d int) float64 {
	if d == 2 {
		return math.Abs(math.Atan2(r[2], r[0]))
	}
	x := r[7] - r[5]
	y := r[2] - r[6]
	z := r[3] - r[1]
	sin := 0.5 * math.Sqrt(x*x+y*y+z*z)
	cos := 0.5 * (r[0] + r[4] + r[8] - 1)
	return math.Atan2(sin, cos)
}
