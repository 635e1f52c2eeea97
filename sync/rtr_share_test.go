package sync

import (
	"context"
	"math"
	"testing"

	"github.com/bcmsync/bcmsync/bcm"
	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
)

// Large trust regions keep tCG's direction and its Hessian product in the
// storage of the point's gradient and X Q, make those again after tCG, and
// the step's Hessian product from the step (shareMinBytes). Every step
// must be the one the separate vectors give, bit for bit: F, acceptance,
// inner iterations, factorizations and the final point, at rank d and
// above it (where steps are rejected and retried), from a random start.
// (Shared storage keeps no tcgQuarter, so neither run replays.)
func TestSharedDirectionStorage(t *testing.T) {
	g := notTightGraph(t)
	d := g.D
	q := g.Laplacian(posegraph.Poses)
	type run struct {
		x    *sparse.Blocks
		recs []Record
		res  rtrResult
	}
	solve := func(rank int, share bool) run {
		x := sparse.NewBlocks(rank, q.B, q.N)
		bcm.RandomStiefel(x, d, 3)
		m := newManifold(q, d, rank, 1)
		hp := newHessianPrecond(q, d, nil, 1e-12*q.MaxDiag())
		var out run
		rr, err := rtr(context.Background(), m, x, nil, hp, rtrOptions{GradTol: 1e-10, MaxIter: 300, share: share, noReplay: true,
			OnRecord: func(it int, rec Record) { out.recs = append(out.recs, rec) }})
		if err != nil {
			t.Fatal(err)
		}
		out.x, out.res = x, rr
		return out
	}
	for _, rank := range []int{d, d + 1} {
		sep, shared := solve(rank, false), solve(rank, true)
		if sep.res != shared.res {
			t.Fatalf("rank %d: %+v with shared storage, %+v without", rank, shared.res, sep.res)
		}
		if len(sep.recs) != len(shared.recs) {
			t.Fatalf("rank %d: %d records with shared storage, %d without", rank, len(shared.recs), len(sep.recs))
		}
		rejected := 0
		for k, rec := range sep.recs {
			got := shared.recs[k]
			if math.Float64bits(got.F) != math.Float64bits(rec.F) || math.Float64bits(got.GradNorm) != math.Float64bits(rec.GradNorm) ||
				got.Accepted != rec.Accepted || got.Inner != rec.Inner || got.Factorizations != rec.Factorizations {
				t.Fatalf("rank %d step %d: %+v with shared storage, %+v without", rank, k, got, rec)
			}
			if k > 0 && !rec.Accepted {
				rejected++
			}
		}
		for k, v := range sep.x.Data {
			if math.Float64bits(v) != math.Float64bits(shared.x.Data[k]) {
				t.Fatalf("rank %d: final point differs at %d: %v with shared storage, %v without", rank, k, shared.x.Data[k], v)
			}
		}
		if sep.res.Iterations < 2 {
			t.Fatalf("rank %d: %d steps: the test exercises nothing", rank, sep.res.Iterations)
		}
		t.Logf("rank %d: %d steps (%d rejected), %d inner iterations, stop %s", rank, sep.res.Iterations, rejected, sep.res.InnerIterations, sep.res.Stop)
	}
}
