package trajeval

import (
	"math"
	"slices"
	"testing"
)

// square returns the unit square's corners (0,0), (1,0), (1,1), (0,1) as
// poses with identity rotations, in dimension d.
func square(d int) []Pose {
	ps := make([]Pose, 4)
	for k, xy := range [][2]float64{{0, 0}, {1, 0}, {1, 1}, {0, 1}} {
		ps[k].R = Identity(d).R
		ps[k].T[0], ps[k].T[1] = xy[0], xy[1]
	}
	return ps
}

// TestEvaluateByHand: on the unit square, move pose 2 by (0.3, 0.4) and
// turn pose 1 by 90 degrees about z. Without alignment:
//
//	ATE     = [0, 0, 0.5, 0],  ATE rot = [0, 90, 0, 0]
//	pair (0,1): P0^-1 P1 = (Rz(90), (1,0)), Q0^-1 Q1 = (I, (1,0)): 0 and 90 deg
//	pair (1,2): P1^-1 P2 = (Rz(-90), Rz(90)^T (0.3, 1.4)) = (.., (1.4, -0.3)),
//	            Q1^-1 Q2 = (I, (0, 1)): ||(1.4, -1.3)|| and 90 deg
//	pair (2,3): P = (I, (-1.3, -0.4)), Q = (I, (-1, 0)): 0.5 and 0 deg
func TestEvaluateByHand(t *testing.T) {
	for _, d := range []int{2, 3} {
		ref := square(d)
		est := square(d)
		est[2].T[0] += 0.3
		est[2].T[1] += 0.4
		if d == 2 {
			est[1].R = rot2(math.Pi / 2)
		} else {
			est[1].R = rotZ(math.Pi / 2)
		}
		res, err := Evaluate(d, est, ref, Options{Align: AlignNone})
		if err != nil {
			t.Fatal(err)
		}
		check := func(name string, got, want []float64) {
			t.Helper()
			if len(got) != len(want) {
				t.Errorf("d=%d %s: %v, want %v", d, name, got, want)
				return
			}
			for k := range got {
				if math.Abs(got[k]-want[k]) > 1e-13 {
					t.Errorf("d=%d %s: %v, want %v", d, name, got, want)
					return
				}
			}
		}
		check("ATE", res.ATE, []float64{0, 0, 0.5, 0})
		check("ATE rot", res.ATERot, []float64{0, 90, 0, 0})
		check("RPE", res.RPE, []float64{0, math.Hypot(1.4, 1.3), 0.5})
		check("RPE rot", res.RPERot, []float64{90, 90, 0})
		if !slices.Equal(res.Pairs, [][2]int{{0, 1}, {1, 2}, {2, 3}}) {
			t.Errorf("pairs %v", res.Pairs)
		}

		// delta 2: consecutive pairs (0,2) only; all pairs (0,2), (1,3).
		res, err = Evaluate(d, est, ref, Options{Align: AlignNone, Delta: 2})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(res.Pairs, [][2]int{{0, 2}}) {
			t.Errorf("delta 2 pairs %v", res.Pairs)
		}
		check("RPE delta 2", res.RPE, []float64{0.5})
		res, err = Evaluate(d, est, ref, Options{Align: AlignNone, Delta: 2, AllPairs: true})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(res.Pairs, [][2]int{{0, 2}, {1, 3}}) {
			t.Errorf("all pairs %v", res.Pairs)
		}
		// (1,3): P1^-1 P3 = (Rz(-90), Rz(90)^T (-1, 1)) = (.., (1, 1)); Q = (I, (-1, 1)).
		check("RPE all pairs", res.RPE, []float64{0.5, 2})
		check("RPE rot all pairs", res.RPERot, []float64{0, 90})
	}
}

// TestEvaluateErrors: too few poses, delta too large, mismatched lengths.
func TestEvaluateErrors(t *testing.T) {
	sq := square(2)
	for name, f := range map[string]func() error{
		"one pose": func() error { _, err := Evaluate(2, sq[:1], sq[:1], Options{}); return err },
		"delta":    func() error { _, err := Evaluate(2, sq, sq, Options{Delta: 4}); return err },
		"negative": func() error { _, err := Evaluate(2, sq, sq, Options{Delta: -1}); return err },
		"lengths":  func() error { _, err := Evaluate(2, sq, sq[:3], Options{}); return err },
		"dim":      func() error { _, err := Align(4, sq, sq, AlignSE); return err },
	} {
		if f() == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestSummarize checks the statistics by hand, for odd and even counts.
func TestSummarize(t *testing.T) {
	s := Summarize([]float64{0, 0, 0.5, 0})
	want := Stats{Count: 4, RMSE: 0.25, Mean: 0.125, Median: 0, Std: math.Sqrt(0.0625 - 0.015625), Min: 0, Max: 0.5}
	if !closeStats(s, want) {
		t.Errorf("got %+v, want %+v", s, want)
	}
	s = Summarize([]float64{3, 1, 2, 10})
	want = Stats{Count: 4, RMSE: math.Sqrt(114.0 / 4), Mean: 4, Median: 2.5, Std: math.Sqrt((1 + 9 + 4 + 36) / 4.0), Min: 1, Max: 10}
	if !closeStats(s, want) {
		t.Errorf("got %+v, want %+v", s, want)
	}
	s = Summarize([]float64{5, 1, 3})
	want = Stats{Count: 3, RMSE: math.Sqrt(35.0 / 3), Mean: 3, Median: 3, Std: math.Sqrt(8.0 / 3), Min: 1, Max: 5}
	if !closeStats(s, want) {
		t.Errorf("got %+v, want %+v", s, want)
	}
	if s := Summarize(nil); s != (Stats{}) {
		t.Errorf("empty: %+v", s)
	}
}

func closeStats(a, b Stats) bool {
	c := func(x, y float64) bool { return math.Abs(x-y) <= 1e-15*math.Max(1, math.Abs(y)) }
	return a.Count == b.Count && c(a.RMSE, b.RMSE) && c(a.Mean, b.Mean) && c(a.Median, b.Median) &&
		c(a.Std, b.Std) && c(a.Min, b.Min) && c(a.Max, b.Max)
}

// TestAssociate: exact matches in stamp order, unmatched counted, repeats
// rejected.
func TestAssociate(t *testing.T) {
	a, err := Associate([]float64{5, 1, 2, 9}, []float64{0, 1, 2, 3, 5})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.Stamps, []float64{1, 2, 5}) || !slices.Equal(a.Est, []int{1, 2, 0}) ||
		!slices.Equal(a.Ref, []int{1, 2, 4}) || a.EstOnly != 1 || a.RefOnly != 2 {
		t.Errorf("got %+v", a)
	}
	if _, err := Associate([]float64{1, 1}, []float64{1}); err == nil {
		t.Error("repeated estimate stamp: no error")
	}
	if _, err := Associate([]float64{1}, []float64{2, 2}); err == nil {
		t.Error("repeated reference stamp: no error")
	}
}

// TestAssociateNearest: each estimate stamp takes the nearest reference
// stamp within the tolerance, floating-point stamps 1e-4 apart match,
// 0.01 apart match to rounding (0.02 - 0.01 is not 0.01 in binary), a
// reference pose claimed twice goes to the nearer, and the pairs come in
// the estimate's stamp order.
func TestAssociateNearest(t *testing.T) {
	est := []float64{1.0001, 0.5, 2.02, 3.3, 3.305, 9}
	ref := []float64{3.3049, 1, 0.49995, 2.01, 7}
	a, err := AssociateNearest(est, ref, 0.01)
	if err != nil {
		t.Fatal(err)
	}
	// 0.5-0.49995, 1.0001-1, 2.02-2.01 (0.01 to rounding), 3.305-3.3049
	// (nearer than 3.3, which then has no partner left); 9 has none.
	if !slices.Equal(a.Est, []int{1, 0, 2, 4}) || !slices.Equal(a.Ref, []int{2, 1, 3, 0}) ||
		!slices.Equal(a.Stamps, []float64{0.5, 1.0001, 2.02, 3.305}) || a.EstOnly != 2 || a.RefOnly != 1 {
		t.Errorf("got %+v", a)
	}
	// Tolerance 0: exact matches only, as Associate.
	a, err = AssociateNearest([]float64{5, 1, 2, 9}, []float64{0, 1, 2, 3, 5}, 0)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Associate([]float64{5, 1, 2, 9}, []float64{0, 1, 2, 3, 5})
	if !slices.Equal(a.Est, b.Est) || !slices.Equal(a.Ref, b.Ref) || a.EstOnly != b.EstOnly || a.RefOnly != b.RefOnly {
		t.Errorf("tolerance 0: %+v, exact %+v", a, b)
	}
	// Just beyond the tolerance.
	if a, _ := AssociateNearest([]float64{1}, []float64{1.0101}, 0.01); len(a.Est) != 0 {
		t.Errorf("1 and 1.0101 matched within 0.01")
	}
	for _, c := range []struct {
		est, ref []float64
		tol      float64
	}{
		{[]float64{1, 1}, []float64{1}, 0.01},
		{[]float64{1}, []float64{2, 2}, 0.01},
		{[]float64{math.NaN()}, []float64{1}, 0.01},
		{[]float64{1}, []float64{1}, -1},
		{[]float64{1}, []float64{1}, math.Inf(1)},
	} {
		if _, err := AssociateNearest(c.est, c.ref, c.tol); err == nil {
			t.Errorf("%v %v tolerance %g: no error", c.est, c.ref, c.tol)
		}
	}
	if a, err := AssociateByOrder(3, 3); err != nil || !slices.Equal(a.Est, []int{0, 1, 2}) || !slices.Equal(a.Ref, []int{0, 1, 2}) {
		t.Errorf("by order: %+v, %v", a, err)
	}
	if _, err := AssociateByOrder(3, 4); err == nil {
		t.Error("by order with 3 and 4 poses: no error")
	}
}
