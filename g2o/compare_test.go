package g2o

import (
	"fmt"
	"math"
	"slices"

	"github.com/bcmsync/bcmsync/posegraph"
)

// sameGraph compares a graph g with h = read(write(g)) and describes the
// first difference, "" if none. Ids, fixed poses and edges (endpoints,
// rotation, translation, precisions and raw values) must match exactly;
// edges without raw values must match within rtol (they went through an
// angle or a quaternion). Poses are compared with rtol on rotations, since
// a rotation goes through an angle or quaternion; translations must match
// exactly. Poses without an estimate in g must be the identity in h.
func sameGraph(g, h *posegraph.Graph, rtol float64) string {
	if g.D != h.D {
		return fmt.Sprintf("d %d != %d", g.D, h.D)
	}
	if !slices.Equal(g.IDs, h.IDs) {
		return fmt.Sprintf("ids differ: %v vs %v", short(g.IDs), short(h.IDs))
	}
	if !slices.Equal(g.Fixed, h.Fixed) {
		return fmt.Sprintf("fixed %v != %v", g.Fixed, h.Fixed)
	}
	if g.M() != h.M() {
		return fmt.Sprintf("m %d != %d", g.M(), h.M())
	}
	d := g.D
	for k := range g.Edges {
		a, b := g.Edges[k], h.Edges[k]
		raw := a.Meas != nil && a.Info != nil
		tol := 0.0
		if !raw {
			tol = 1e-12
		}
		switch {
		case a.I != b.I || a.J != b.J || a.Prior != b.Prior:
			return fmt.Sprintf("edge %d: (%d, %d, prior %v) != (%d, %d, prior %v)", k, a.I, a.J, a.Prior, b.I, b.J, b.Prior)
		case !close(a.R[:d*d], b.R[:d*d], tol):
			return fmt.Sprintf("edge %d: R %v != %v", k, a.R[:d*d], b.R[:d*d])
		case !close(a.T[:d], b.T[:d], 0):
			return fmt.Sprintf("edge %d: T %v != %v", k, a.T[:d], b.T[:d])
		case !close([]float64{a.Kappa, a.Tau}, []float64{b.Kappa, b.Tau}, tol):
			return fmt.Sprintf("edge %d: kappa, tau %g, %g != %g, %g", k, a.Kappa, a.Tau, b.Kappa, b.Tau)
		case raw && (!slices.Equal(a.Meas, b.Meas) || !slices.Equal(a.Info, b.Info)):
			return fmt.Sprintf("edge %d: raw values %v %v != %v %v", k, a.Meas, a.Info, b.Meas, b.Info)
		}
	}
	id := posegraph.Identity(d)
	for i := range g.IDs {
		want := id
		if i < len(g.HasInitial) && g.HasInitial[i] {
			want = g.Initial[i]
		}
		if !h.HasInitial[i] {
			return fmt.Sprintf("pose %d lost its estimate", i)
		}
		got := h.Initial[i]
		if !close(want.R[:d*d], got.R[:d*d], rtol) || !close(want.T[:d], got.T[:d], 0) {
			return fmt.Sprintf("pose %d: %v != %v", i, want, got)
		}
	}
	return ""
}

// close reports whether a and b agree within tol (absolute for |x| <= 1,
// relative above); tol 0 demands equal bits up to the sign of zero.
func close(a, b []float64, tol float64) bool {
	for k := range a {
		if a[k] == b[k] {
			continue
		}
		if math.Abs(a[k]-b[k]) > tol*math.Max(1, math.Abs(a[k])) {
			return false
		}
	}
	return true
}

func short(ids []int) []int {
	if len(ids) > 10 {
		return ids[:10]
	}
	return ids
}
