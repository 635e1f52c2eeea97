package posegraph

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// TestPoseDim checks that d is read back from the layout for identities
// and for many random rotations of both dimensions, including rotations
// whose last row has zeros in it (a quarter turn about x).
func TestPoseDim(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, d := range []int{2, 3} {
		if got := Identity(d).Dim(); got != d {
			t.Errorf("Identity(%d).Dim() = %d", d, got)
		}
		for k := 0; k < 1000; k++ {
			p := Pose{R: randomRotation(rng, d)}
			if got := p.Dim(); got != d {
				t.Fatalf("random %d-D rotation %v: Dim() = %d", d, p.R, got)
			}
		}
	}
	// About x by 90 degrees: rows (1 0 0), (0 0 -1), (0 1 0).
	if got := (Pose{R: [9]float64{1, 0, 0, 0, 0, -1, 0, 1, 0}}).Dim(); got != 3 {
		t.Errorf("quarter turn about x: Dim() = %d", got)
	}
}

// TestPoseAccessors compares Rotation with the d x d matrix built by hand
// and checks that the accessors return copies.
func TestPoseAccessors(t *testing.T) {
	th := 0.3
	c, s := math.Cos(th), math.Sin(th)
	p2 := Pose{R: [9]float64{c, -s, s, c}, T: [3]float64{1, -2}}
	want2 := mat.NewDense(2, 2, []float64{c, -s, s, c})
	if got := p2.Rotation(); !mat.Equal(got, want2) {
		t.Errorf("2-D Rotation =\n%v\nwant\n%v", mat.Formatted(got), mat.Formatted(want2))
	}
	if tr := p2.Translation(); len(tr) != 2 || tr[0] != 1 || tr[1] != -2 {
		t.Errorf("2-D Translation = %v", tr)
	}
	// About z by th, embedded in 3-D.
	p3 := Pose{R: [9]float64{c, -s, 0, s, c, 0, 0, 0, 1}, T: [3]float64{1, 2, 3}}
	want3 := mat.NewDense(3, 3, []float64{c, -s, 0, s, c, 0, 0, 0, 1})
	if got := p3.Rotation(); !mat.Equal(got, want3) {
		t.Errorf("3-D Rotation =\n%v", mat.Formatted(got))
	}
	if tr := p3.Translation(); len(tr) != 3 || tr[2] != 3 {
		t.Errorf("3-D Translation = %v", tr)
	}
	// R R^T = I through the returned matrix: a rotation, not a 3x3 view of
	// the 2-D pose's padding.
	var rrt mat.Dense
	rrt.Mul(p2.Rotation(), p2.Rotation().T())
	if !mat.EqualApprox(&rrt, mat.NewDiagDense(2, []float64{1, 1}), 1e-15) {
		t.Errorf("R R^T =\n%v", mat.Formatted(&rrt))
	}
	// Copies: writing to them leaves the pose alone.
	p2.Rotation().Set(0, 0, 7)
	p2.Translation()[0] = 7
	if p2.R[0] != c || p2.T[0] != 1 {
		t.Errorf("accessors alias the pose: %v", p2)
	}
}

// TestPoseFormat checks that poses print d x d with every verb.
func TestPoseFormat(t *testing.T) {
	p2 := Pose{R: [9]float64{0, -1, 1, 0}, T: [3]float64{1.5, -2}}
	p3 := Identity(3)
	p3.T = [3]float64{1, 2, 3}
	for _, c := range []struct {
		format string
		p      Pose
		want   string
	}{
		{"%v", p2, "R=[[0 -1] [1 0]] t=[1.5 -2]"},
		{"%s", p2, "R=[[0 -1] [1 0]] t=[1.5 -2]"},
		{"%.2f", p2, "R=[[0.00 -1.00] [1.00 0.00]] t=[1.50 -2.00]"},
		{"%5.1f", p2, "R=[[  0.0  -1.0] [  1.0   0.0]] t=[  1.5  -2.0]"},
		{"%+g", p2, "R=[[+0 -1] [+1 +0]] t=[+1.5 -2]"},
		{"%v", p3, "R=[[1 0 0] [0 1 0] [0 0 1]] t=[1 2 3]"},
		{"%.1e", p3, "R=[[1.0e+00 0.0e+00 0.0e+00] [0.0e+00 1.0e+00 0.0e+00] [0.0e+00 0.0e+00 1.0e+00]] t=[1.0e+00 2.0e+00 3.0e+00]"},
		{"%d", p2, "%!d(posegraph.Pose=R=[[0 -1] [1 0]] t=[1.5 -2])"},
	} {
		if got := fmt.Sprintf(c.format, c.p); got != c.want {
			t.Errorf("Sprintf(%q) = %q, want %q", c.format, got, c.want)
		}
	}
	if got := p2.String(); got != "R=[[0 -1] [1 0]] t=[1.5 -2]" {
		t.Errorf("String() = %q", got)
	}
	// In a slice, as a result's poses print.
	if got := fmt.Sprint([]Pose{p2}); got != "[R=[[0 -1] [1 0]] t=[1.5 -2]]" {
		t.Errorf("Sprint(slice) = %q", got)
	}
	if got := fmt.Sprintf("%#v", p2); !strings.HasPrefix(got, "posegraph.Pose{R:[9]float64{0, -1, 1, 0, 0, 0, 0, 0, 0}") {
		t.Errorf("%%#v = %q", got)
	}
}

// ExamplePose_Rotation reads a 2-D pose as a 2 x 2 matrix and a
// translation of two entries.
func ExamplePose_Rotation() {
	p := Pose{R: [9]float64{0, -1, 1, 0}, T: [3]float64{3, 4}} // a quarter turn, then (3, 4)
	fmt.Println(p.Dim())
	fmt.Println(mat.Formatted(p.Rotation()))
	fmt.Println(p.Translation())
	fmt.Printf("%.1f\n", p)
	// Output:
	// 2
	// ⎡ 0  -1⎤
	// ⎣ 1   0⎦
	// [3 4]
	// R=[[0.0 -1.0] [1.0 0.0]] t=[3.0 4.0]
}
