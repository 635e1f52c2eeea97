package sync

import (
	"math"
	"testing"

	"github.com/bcmsync/bcmsync/bcm"
	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
	"github.com/bcmsync/bcmsync/rounding"
)

// TestTranslationProjector: projecting a point's translations leaves its
// Y blocks, makes the translation part of X Q vanish (the translations
// minimize F given Y), centres them, does not raise F, and leaves nq = X Q;
// at every rank and with any anchor.
func TestTranslationProjector(t *testing.T) {
	for _, d := range []int{2, 3} {
		for _, anchor := range []int{0, 11} {
			g, _ := noisyGraph(d, 80, 30, 0.1, 0.1, 7)
			if anchor != 0 {
				g.Fixed = []int{anchor}
			}
			q := g.Laplacian(posegraph.Poses)
			order := make([]int, q.N)
			for i := range order {
				order[i] = i
			}
			plan := rounding.NewPlan(g, order, nil)
			for _, r := range []int{d, d + 2} {
				m := newManifold(q, d, r, 1)
				x := sparse.NewBlocks(r, q.B, q.N)
				bcm.RandomStiefel(x, d, uint64(r))
				before := &sparse.Blocks{R: x.R, B: x.B, N: x.N, Data: append([]float64(nil), x.Data...)}
				nq := m.newBlocks()
				m.mulQ(nq, x)
				f0 := inner(x, nq)
				tp, err := newTranslationProjector(plan, q.N)
				if err != nil {
					t.Fatal(err)
				}
				if err := tp.project(m, x, nq); err != nil {
					t.Fatal(err)
				}
				check := m.newBlocks()
				m.mulQ(check, x)
				f1 := inner(x, check)
				if f1 > f0 {
					t.Errorf("d=%d r=%d: F rose from %v to %v", d, r, f0, f1)
				}
				b := q.B
				var sum [16]float64
				scale := 0.0
				for k, v := range check.Data {
					scale = math.Max(scale, math.Abs(v))
					if nq.Data[k] != v {
						t.Fatalf("d=%d r=%d: nq is not X Q at %d", d, r, k)
					}
				}
				for i := 0; i < q.N; i++ {
					xi, bi, ni := x.Block(i), before.Block(i), check.Block(i)
					for a := 0; a < r; a++ {
						for c := 0; c < d; c++ {
							if xi[a*b+c] != bi[a*b+c] {
								t.Fatalf("d=%d r=%d: Y of pose %d changed", d, r, i)
							}
						}
						if math.Abs(ni[a*b+d]) > 1e-9*scale {
							t.Errorf("d=%d r=%d: translation gradient %g at pose %d", d, r, ni[a*b+d], i)
						}
						sum[a] += xi[a*b+d]
					}
				}
				for a := 0; a < r; a++ {
					if math.Abs(sum[a]) > 1e-9*float64(q.N) {
						t.Errorf("d=%d r=%d: translations not centred: sum %g", d, r, sum[a])
					}
				}
			}
		}
	}
}
