package sync

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"

	"github.com/bcmsync/bcmsync/posegraph"
)

// TestReportRelativeGapFinite checks that the report's relative bound is
// null, and the JSON valid, where F is 0 or so small that bound / |F|
// overflows, and the ratio itself otherwise.
func TestReportRelativeGapFinite(t *testing.T) {
	g := &posegraph.Graph{D: 2, IDs: []int{0, 1}}
	for _, c := range []struct {
		f, bound float64
		want     any // the decoded relative_suboptimality_bound
	}{
		{0, 1e-9, nil},
		{0, 0, nil},
		{5e-324, 1e-9, nil}, // the ratio overflows to +Inf
		{-5e-324, 1, nil},
		{100, 1e-4, 1e-6},
		{-100, 1e-4, 1e-6},
	} {
		res := &Result{Graph: g, Objective: c.f, HasBound: true, DualBound: c.f - c.bound, SuboptimalityBound: c.bound}
		var buf bytes.Buffer
		if err := NewReport("x.g2o", res).WriteJSON(&buf); err != nil {
			t.Errorf("F = %g, bound %g: WriteJSON: %v", c.f, c.bound, err)
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
			t.Fatalf("F = %g: invalid JSON: %v", c.f, err)
		}
		got, ok := m["relative_suboptimality_bound"]
		if !ok {
			t.Errorf("F = %g: key missing", c.f)
			continue
		}
		if c.want == nil {
			if got != nil {
				t.Errorf("F = %g, bound %g: relative %v, want null", c.f, c.bound, got)
			}
			continue
		}
		if v, ok := got.(float64); !ok || math.Abs(v-c.want.(float64)) > 1e-18 {
			t.Errorf("F = %g, bound %g: relative %v, want %v", c.f, c.bound, got, c.want)
		}
	}
}
