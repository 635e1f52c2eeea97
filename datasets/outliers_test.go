package datasets

import (
	"math"
	"reflect"
	"testing"
)

func TestAddOutliers(t *testing.T) {
	for _, d := range []int{2, 3} {
		g, _, err := Geometric(d, 200, 3, Config{Kappa: 100, Tau: 50, LoopProb: 0.3, Seed: 4})
		if err != nil {
			t.Fatal(err)
		}
		orig := append(g.Edges[:0:0], g.Edges...)
		out, mask, err := AddOutliers(g, OutlierConfig{Fraction: 0.1, Seed: 9})
		if err != nil {
			t.Fatal(err)
		}
		want := int(math.Round(0.1 * float64(len(orig))))
		if out.M() != len(orig)+want || len(mask) != out.M() {
			t.Fatalf("d=%d: %d edges, mask %d; want %d + %d", d, out.M(), len(mask), len(orig), want)
		}
		if !reflect.DeepEqual(g.Edges, orig) {
			t.Fatalf("d=%d: the input graph's edges changed", d)
		}
		if err := out.Validate(); err != nil {
			t.Fatalf("d=%d: %v", d, err)
		}
		mk, mt := medianWeights(g)
		outliers := 0
		for k, e := range out.Edges {
			if k < len(orig) {
				if mask[k] || !reflect.DeepEqual(e, orig[k]) {
					t.Fatalf("d=%d: inlier %d changed or flagged", d, k)
				}
				continue
			}
			if !mask[k] {
				t.Fatalf("d=%d: appended edge %d not flagged", d, k)
			}
			outliers++
			if e.I-e.J <= 1 && e.J-e.I <= 1 {
				t.Errorf("d=%d: outlier %d joins %d and %d, not a loop closure", d, k, e.I, e.J)
			}
			if e.Kappa != mk || e.Tau != mt {
				t.Errorf("d=%d: outlier weights %g, %g; want the medians %g, %g", d, e.Kappa, e.Tau, mk, mt)
			}
			for a := 0; a < d; a++ {
				if math.Abs(e.T[a]) > 5 {
					t.Errorf("d=%d: outlier translation %v outside [-5, 5]", d, e.T)
				}
			}
		}
		if outliers != want {
			t.Fatalf("d=%d: %d outliers, want %d", d, outliers, want)
		}
		again, _, _ := AddOutliers(g, OutlierConfig{Fraction: 0.1, Seed: 9})
		if !reflect.DeepEqual(again.Edges, out.Edges) {
			t.Fatalf("d=%d: the same seed gave different outliers", d)
		}
	}
}

func TestAddOutliersErrors(t *testing.T) {
	g, _, err := Geometric(2, 50, 3, Config{Kappa: 100, Tau: 50, LoopProb: 0.3, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []OutlierConfig{
		{Fraction: -0.1},
		{Fraction: math.NaN()},
		{Count: 3, MaxTranslation: -1},
		{Count: 3, Kappa: -1},
	} {
		if _, _, err := AddOutliers(g, cfg); err == nil {
			t.Errorf("%+v: no error", cfg)
		}
	}
	out, mask, err := AddOutliers(g, OutlierConfig{Count: 7, Kappa: 5000, Tau: 500, MaxTranslation: 2})
	if err != nil || out.M() != g.M()+7 || !mask[out.M()-1] {
		t.Fatalf("Count 7: %v, %d edges", err, out.M())
	}
	if e := out.Edges[out.M()-1]; e.Kappa != 5000 || e.Tau != 500 {
		t.Fatalf("explicit weights not written: %g, %g", e.Kappa, e.Tau)
	}
}
