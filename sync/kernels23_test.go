package sync

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
	"github.com/bcmsync/bcmsync/rounding"
)

// TestKernels23 checks the unrolled SE(2) kernels bit for bit against the
// generic loops they replace, as TestKernels34 does the SE(3) ones: each
// per-pose operation of the trust region at random points of ranks 2 and
// 3 (and 4 for the two that take any r), on random vectors with some
// entries -0 and on vectors of -0 only; then a whole solve of a graph
// whose relaxation is not tight, which escapes to rank 3 and refines at
// rank 2, and must take the same path to the same bits.
func TestKernels23(t *testing.T) {
	g := notTightGraph(t)
	q := g.Laplacian(posegraph.Poses)
	rng := rand.New(rand.NewPCG(5, 6))
	for _, r := range []int{2, 3, 4} {
		x := g.Lift(rounding.Random(g, 7), posegraph.Poses, r)
		m := newManifold(q, 2, r, 1)
		if r > 2 {
			// Rotate the lifted blocks out of the first two rows.
			for k := range x.Data {
				x.Data[k] += 0.1 * rng.NormFloat64()
			}
			m.retract(x, x, m.newBlocks())
		}
		lam := multipliers(m, x)
		k := 3
		if r == 3 {
			k = 6
		}
		var p *hessianPrecond
		if r <= 3 {
			// The full form of the Hessian's basis at r = 3 (the split
			// form keeps the generic loops).
			p = newHessianPrecond(q, 2, sparse.BlockAMD(q, 0), 1e-9*q.MaxDiag())
			p.fullAt = 3
			p.setRank(r)
			if p.split || p.k != k {
				t.Fatalf("r=%d: basis of %d (split %v), want the full %d", r, p.k, p.split, k)
			}
			for i := 0; i < q.N; i++ {
				p.complete(p.works[0], p.w[i*r*r:(i+1)*r*r], x.Block(i))
			}
		}
		v, z := kernelVectors(m, k, rng)
		cases := kernelCases(m, x, v, lam, z, p)
		compareKernels(t, fmt.Sprintf("r=%d", r), &kernels23, cases, v.Data, z)
	}

	res := compareSolves(t, &kernels23, g, Options{Seed: 1})
	if res.Rank != 3 || res.Refine == nil {
		t.Fatalf("solve: rank %d, refinement %v: the graph should escape to rank 3 and refine at rank 2", res.Rank, res.Refine != nil)
	}
}
