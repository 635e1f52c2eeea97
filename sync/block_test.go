package sync

import (
	"context"
	"math"
	"testing"

	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
	"github.com/bcmsync/bcmsync/rounding"
)

// blockCase is a noisy graph at a random point lifted to rank r, and a
// block problem of its first n poses (the others fixed).
func blockCase(t *testing.T, d, r int, prob posegraph.Problem) (*posegraph.Graph, *sparse.BlockSym, *sparse.Blocks, *BlockProblem) {
	t.Helper()
	g, _ := noisyGraph(d, 60, 20, 0.05, 0.05, uint64(40+d))
	q := g.Laplacian(prob)
	x := g.Lift(rounding.Random(g, 7), prob, r)
	if r > d {
		perturbRows(x, d, 3)
	}
	p, err := NewBlockProblem(q, 25, d)
	if err != nil {
		t.Fatal(err)
	}
	return g, q, x, p
}

// A block's cost differs from F by a constant (F's part in the fixed
// poses), its trust-region steps lower F and leave the fixed blocks as
// they were, and enough of them reach the block's own critical point
// (from a random start, 30 to 50 steps: superlinear at the end).
func TestBlockProblemDescends(t *testing.T) {
	for _, prob := range []posegraph.Problem{posegraph.Poses, posegraph.Rotations} {
		for _, d := range []int{2, 3} {
			for _, r := range []int{d, d + 1} {
				_, q, x, p := blockCase(t, d, r, prob)
				work := sparse.NewBlocks(x.R, x.B, x.N)
				fixed := append([]float64(nil), x.Data[25*x.R*x.B:]...)
				f0, c0 := posegraph.TraceCost(q, x, work), p.Cost(x)
				prev := f0
				for it := 0; it < 60; it++ {
					if _, err := p.TrustRegion(context.Background(), x, 1, 0); err != nil {
						t.Fatal(err)
					}
					f := posegraph.TraceCost(q, x, work)
					if f > prev+1e-12*math.Abs(prev) {
						t.Fatalf("%v d=%d r=%d step %d: F rose from %.15g to %.15g", prob, d, r, it, prev, f)
					}
					prev = f
				}
				for k, v := range x.Data[25*x.R*x.B:] {
					if v != fixed[k] {
						t.Fatalf("%v d=%d r=%d: a fixed block moved", prob, d, r)
					}
				}
				if gap := (p.Cost(x) - c0) - (prev - f0); math.Abs(gap) > 1e-9*math.Abs(f0) {
					t.Errorf("%v d=%d r=%d: the block's cost fell by %g, F by %g", prob, d, r, c0-p.Cost(x), f0-prev)
				}
				_, g2, n2 := p.Stats(x)
				if rel := math.Sqrt(g2 / n2); rel > 1e-8 {
					t.Errorf("%v d=%d r=%d: the block's relative gradient is %.3g after 60 steps", prob, d, r, rel)
				}
			}
		}
	}
}

// The block's Riemannian Hessian, with the linear term of the fixed
// poses, matches the second difference of its cost along the retraction
// (a second-order retraction: exact to O(h^2)).
func TestBlockProblemHessian(t *testing.T) {
	for _, d := range []int{2, 3} {
		_, _, x, p := blockCase(t, d, d+1, posegraph.Poses)
		xb := p.at(x)
		m := p.m
		nq := m.newBlocks()
		m.mulQ(nq, xb)
		lam := make([]float64, m.n*d*d)
		m.lambda(lam, xb, nq)
		v := m.newBlocks()
		for k := range v.Data {
			v.Data[k] = math.Sin(float64(k) * 0.7)
		}
		m.proj(v, xb, v)
		hv, work := m.newBlocks(), m.newBlocks()
		m.hess(hv, xb, v, lam, work)
		want := inner(v, hv)
		curve := func(h float64) float64 {
			y := *x
			y.Data = append([]float64(nil), x.Data...)
			yb := p.at(&y)
			hvv := m.newBlocks()
			for k := range hvv.Data {
				hvv.Data[k] = h * v.Data[k]
			}
			m.retract(yb, yb, hvv)
			return p.Cost(&y)
		}
		h := 1e-4
		f0 := p.Cost(x)
		fd := (curve(h) - 2*f0 + curve(-h)) / (h * h)
		if math.Abs(fd-want) > 1e-4*math.Abs(want) {
			t.Errorf("d=%d: <v, Hess v> = %.10g, second difference of the block's cost %.10g", d, want, fd)
		}
	}
}

// MomentumInner is <grad F, X_B - X_prev>: 0 before a recorded point and
// at it, and after a step it matches the derivative of F along the
// retraction of the step's tangent part (central differences; the
// gradient is tangent, so only that part counts).
func TestBlockMomentumInner(t *testing.T) {
	for _, prob := range []posegraph.Problem{posegraph.Poses, posegraph.Rotations} {
		for _, d := range []int{2, 3} {
			for _, r := range []int{d, d + 1} {
				_, q, x, p := blockCase(t, d, r, prob)
				if v := p.MomentumInner(x); v != 0 {
					t.Fatalf("%v d=%d r=%d: %g before a point was recorded", prob, d, r, v)
				}
				p.Momentum(x, 0)
				if v := p.MomentumInner(x); v != 0 {
					t.Fatalf("%v d=%d r=%d: %g at the recorded point", prob, d, r, v)
				}
				if _, err := p.TrustRegion(context.Background(), x, 2, 0); err != nil {
					t.Fatal(err)
				}
				got := p.MomentumInner(x)
				xb := p.at(x)
				step, tan := sparse.NewBlocks(x.R, x.B, p.n), sparse.NewBlocks(x.R, x.B, p.n)
				for k := range step.Data {
					step.Data[k] = xb.Data[k] - p.last[k]
				}
				p.m.proj(tan, xb, step)
				work := sparse.NewBlocks(x.R, x.B, x.N)
				at := func(h float64) float64 {
					y := &sparse.Blocks{R: x.R, B: x.B, N: x.N, Data: append([]float64(nil), x.Data...)}
					yb := &sparse.Blocks{R: x.R, B: x.B, N: p.n, Data: y.Data[:p.n*x.R*x.B]}
					v := sparse.NewBlocks(x.R, x.B, p.n)
					for k := range v.Data {
						v.Data[k] = h * tan.Data[k]
					}
					p.m.retract(yb, xb, v)
					return posegraph.TraceCost(q, y, work)
				}
				const h = 1e-5
				want := (at(h) - at(-h)) / (2 * h)
				if math.Abs(got-want) > 1e-5*math.Abs(want) || want == 0 {
					t.Errorf("%v d=%d r=%d: MomentumInner %.10g, the derivative along the step %.10g", prob, d, r, got, want)
				}
			}
		}
	}
}

// A block problem reads Q_BB in its rows of Q (a view and the rows' ends
// in it) instead of holding a copy, with the same bits as the copy that it
// held before: the trust region's steps, the momentum, the statistics and
// the cost, from the same point, before and after its factor is let go
// and made again; and with the trust region's vectors kept from one run
// to the next (rtrBuffers), let go with the factor, the same bits as with
// vectors made for each run. One that only takes steps makes no scratch
// for the statistics.
func TestBlockProblemHoldsRowsOnce(t *testing.T) {
	for _, prob := range []posegraph.Problem{posegraph.Poses, posegraph.Rotations} {
		for _, d := range []int{2, 3} {
			for _, r := range []int{d, d + 1} {
				_, q, x, p := blockCase(t, d, r, prob)
				if &p.qbb.Val[0] != &q.Val[0] || p.ends == nil {
					t.Fatalf("%v d=%d r=%d: the block problem copied Q_BB", prob, d, r)
				}
				c, err := NewBlockProblem(q, 25, d)
				if err != nil {
					t.Fatal(err)
				}
				c.qbb, c.ends = c.bbCopy(), nil // the copy, as before
				steps, err := NewBlockProblem(q, 25, d)
				if err != nil {
					t.Fatal(err)
				}
				z := sparse.NewBlocks(x.R, x.B, x.N)
				copy(z.Data, x.Data)
				if _, err := steps.TrustRegion(context.Background(), z, 2, 0); err != nil {
					t.Fatal(err)
				}
				if steps.nq != nil || steps.g != nil {
					t.Fatalf("%v d=%d r=%d: a block problem that only takes steps made the statistics' scratch", prob, d, r)
				}
				y := sparse.NewBlocks(x.R, x.B, x.N)
				copy(y.Data, x.Data)
				same := func(step string, a, b float64) {
					t.Helper()
					if math.Float64bits(a) != math.Float64bits(b) {
						t.Fatalf("%v d=%d r=%d %s: %v, with the copy %v", prob, d, r, step, a, b)
					}
				}
				sameX := func(step string) {
					t.Helper()
					for k := range x.Data {
						same(step, x.Data[k], y.Data[k])
					}
				}
				for it := 0; it < 4; it++ {
					fa, ga, na := p.Stats(x)
					fb, gb, nb := c.Stats(y)
					same("F", fa, fb)
					same("gradient", ga, gb)
					same("norm", na, nb)
					p.Momentum(x, 0.5)
					c.Momentum(y, 0.5)
					sameX("momentum")
					for _, bp := range []*BlockProblem{p, c} {
						z := x
						if bp == c {
							// and the trust region's vectors and solver made
							// for each run, as before they were kept
							z, c.buffers, c.solver = y, &rtrBuffers{}, nil
						}
						if _, err := bp.TrustRegion(context.Background(), z, 3, 0); err != nil {
							t.Fatal(err)
						}
					}
					sameX("trust region")
					same("momentum inner", p.MomentumInner(x), c.MomentumInner(y))
					same("cost", p.Cost(x), c.Cost(y))
					if it == 1 {
						p.ReleaseFactor()
						c.ReleaseFactor()
						if p.solver != nil || len(p.buffers.blocks) != 0 {
							t.Fatalf("%v d=%d r=%d: the trust region's vectors kept past ReleaseFactor", prob, d, r)
						}
					} else if len(p.buffers.blocks) == 0 || p.solver == nil {
						t.Fatalf("%v d=%d r=%d: the trust region's vectors not kept", prob, d, r)
					}
				}
			}
		}
	}
}
