package posegraph

import (
	"fmt"
	"strconv"
	"strings"

	"gonum.org/v1/gonum/mat"
)

// Dim returns the dimension d of p, 2 or 3, read from its layout: a 2-D
// pose keeps its rotation in R[0:4] (stride 2) and leaves R[4:9] zero, while
// the last row of a 3-D rotation, R[6:9], is a unit vector and never zero.
// So a Pose needs no separate field for d, and res.Poses[i].Rotation() works
// without the graph at hand. The zero Pose, which is no rotation, reads as
// 2-D.
func (p Pose) Dim() int {
	if p.R[6] != 0 || p.R[7] != 0 || p.R[8] != 0 {
		return 3
	}
	return 2
}

// Rotation returns the d x d rotation as a new matrix (d = p.Dim()).
func (p Pose) Rotation() *mat.Dense {
	d := p.Dim()
	return mat.NewDense(d, d, append([]float64(nil), p.R[:d*d]...))
}

// Translation returns the d entries of the translation as a new slice
// (d = p.Dim()).
func (p Pose) Translation() []float64 {
	return append([]float64(nil), p.T[:p.Dim()]...)
}

// String prints the pose as "R=[[r11 r12] [r21 r22]] t=[x y]" (d x d and d
// entries), each number in %g.
func (p Pose) String() string {
	return p.text("%g")
}

// Format implements fmt.Formatter, so a pose prints d x d whatever the
// verb: %v and %s print as String does, the number verbs (%f, %.3f, %e,
// %g, ...) apply to every entry, and %#v prints the Go struct with its
// fixed-size arrays.
func (p Pose) Format(f fmt.State, verb rune) {
	switch verb {
	case 'v', 's':
		if verb == 'v' && f.Flag('#') {
			fmt.Fprintf(f, "posegraph.Pose{R:%#v, T:%#v}", p.R, p.T)
			return
		}
		verb = 'g'
	case 'e', 'E', 'f', 'F', 'g', 'G':
	default:
		fmt.Fprintf(f, "%%!%c(posegraph.Pose=%s)", verb, p.String())
		return
	}
	var spec strings.Builder
	spec.WriteByte('%')
	for _, c := range "+- 0" {
		if f.Flag(int(c)) {
			spec.WriteRune(c)
		}
	}
	if w, ok := f.Width(); ok {
		spec.WriteString(strconv.Itoa(w))
	}
	if prec, ok := f.Precision(); ok {
		spec.WriteByte('.')
		spec.WriteString(strconv.Itoa(prec))
	}
	spec.WriteRune(verb)
	fmt.Fprint(f, p.text(spec.String()))
}

// text prints the pose with num, a one-number format, for every entry.
func (p Pose) text(num string) string {
	d := p.Dim()
	var b strings.Builder
	b.WriteString("R=[")
	for a := 0; a < d; a++ {
		if a > 0 {
			b.WriteByte(' ')
		}
		b.WriteByte('[')
		for c := 0; c < d; c++ {
			if c > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, num, p.R[a*d+c])
		}
		b.WriteByte(']')
	}
	b.WriteString("] t=[")
	for a := 0; a < d; a++ {
		if a > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, num, p.T[a])
	}
	b.WriteByte(']')
	return b.String()
}
