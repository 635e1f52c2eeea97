// Package leveltest is the conformance suite of sync.LevelOptimizer: it
// runs sync.SolveWith with an optimizer on small generated graphs and
// checks every call the staircase makes against the interface's contract,
// for Solve's own optimizer and for any other (the distributed
// coordinator's, a user's).
package leveltest

import (
	"context"
	"math"
	"testing"

	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/posegraph"
	"github.com/bcmsync/bcmsync/posegraph/blockmat"
	"github.com/bcmsync/bcmsync/rounding"
	bsync "github.com/bcmsync/bcmsync/sync"
)

// Factory returns a new optimizer for one solve of g for the problem
// prob (the distributed coordinator's needs its agents started on g; the
// factory registers their cleanup with t).
type Factory func(t *testing.T, g *posegraph.Graph, prob posegraph.Problem) bsync.LevelOptimizer

// Case is one graph of the suite.
type Case struct {
	Name    string
	Problem posegraph.Problem
	Graph   func() (*posegraph.Graph, error)
}

// Cases are the suite's graphs: a 2-D pose graph, a 3-D lattice and a
// noisy rotation graph on which the staircase climbs (escapes, proof
// refinements, the rank-d fallback's rounding).
var Cases = []Case{
	{"manhattan-se2", posegraph.Poses, func() (*posegraph.Graph, error) {
		g, _, err := datasets.Manhattan(150, 8, datasets.Config{Kappa: 100, Tau: 10, LoopProb: 0.3, Seed: 2})
		return g, err
	}},
	{"cube-se3", posegraph.Poses, func() (*posegraph.Graph, error) {
		g, _, err := datasets.Cube(3, 3, 3, datasets.Config{Kappa: 30, Tau: 4, LoopProb: 0.4, Seed: 9})
		return g, err
	}},
	{"manhattan-so2-climbs", posegraph.Rotations, func() (*posegraph.Graph, error) {
		g, _, err := datasets.Manhattan(150, 8, datasets.Config{Kappa: 3, Tau: 1, LoopProb: 0.5, Seed: 2})
		return g, err
	}},
}

// Check runs SolveWith with optimizers from newOpt on every Case and
// checks:
//
//   - Init returns an estimate of the graph's size and names an
//     initialization;
//   - every Optimize call: a call that started no stage leaves F as it was
//     and reports TimeLimit; otherwise F does not increase (to 1e-8 of F:
//     momentum may raise it by rounding), the Stiefel parts stay on
//     St(d, r), lv.F is F at the point returned, Converged means lv.RelGrad
//     is at most goal.Tol, and a call without steps leaves F where it was;
//   - an optimizer that certifies and rounds by parts
//     (bsync.PartsProviders) gives the trace of Lambda at the point it is
//     given and the central rounding of it, and a lift by parts of a
//     saddle escape (bsync.PartsEigen) is on the manifold with the F it
//     reports (see checked.PartsProver);
//   - the solve ends with the status and, to 1e-6 relative, the objective
//     of Solve's.
func Check(t *testing.T, newOpt Factory) {
	for _, c := range Cases {
		t.Run(c.Name, func(t *testing.T) {
			g, err := c.Graph()
			if err != nil {
				t.Fatal(err)
			}
			opts := bsync.Options{Problem: c.Problem}
			want, err := bsync.Solve(context.Background(), g, opts)
			if err != nil {
				t.Fatal(err)
			}
			m := &checked{errorf: t.Errorf, inner: newOpt(t, g, c.Problem)}
			res, err := bsync.SolveWith(context.Background(), g, opts, m)
			if err != nil {
				t.Fatal(err)
			}
			if m.calls == 0 {
				t.Fatal("the staircase never called Optimize")
			}
			if res.Status != want.Status || math.Abs(res.Objective-want.Objective) > 1e-6*math.Max(1, math.Abs(want.Objective)) {
				t.Errorf("%s with F %.12g; Solve: %s with F %.12g", res.Status, res.Objective, want.Status, want.Objective)
			}
			if res.Method == "" {
				t.Error("no method name in the result")
			}
			if _, ok := m.inner.(bsync.PartsProviders); ok {
				t.Logf("by parts: %d provers, %d tests, %d roundings, %d escapes", m.parts, m.proofs, m.roundings, m.escapes)
			}
		})
	}
}

// checked forwards to inner and reports each breach of the contract
// through errorf.
type checked struct {
	errorf func(format string, args ...any)
	inner  bsync.LevelOptimizer
	calls  int
	work   *blockmat.Blocks
	// parts, proofs and roundings count the optimizer's certificate and
	// rounding by parts (bsync.PartsProviders).
	parts, proofs, roundings, escapes int
}

func (c *checked) Method(r *bsync.Run) bsync.MethodInfo {
	info := c.inner.Method(r)
	if info.Name == "" || !(info.FirstTol > 0) || info.MinTol < 0 || info.MaxRefinements < 0 {
		c.errorf("Method: %+v", info)
	}
	return info
}

func (c *checked) Init(ctx context.Context, r *bsync.Run) ([]posegraph.Pose, bsync.Init, error) {
	poses, name, err := c.inner.Init(ctx, r)
	if err == nil && (len(poses) != r.Graph().N() || name == "") {
		c.errorf("Init: %d poses for %d, initialization %q", len(poses), r.Graph().N(), name)
	}
	return poses, name, err
}

func (c *checked) Optimize(ctx context.Context, r *bsync.Run, x *blockmat.Blocks, goal bsync.Goal, lv *bsync.Level) (bsync.Outcome, error) {
	c.calls++
	f0 := c.cost(r, x)
	out, err := c.inner.Optimize(ctx, r, x, goal, lv)
	if err != nil {
		return out, err
	}
	f := c.cost(r, x)
	tol := 1e-8 * math.Max(1, math.Abs(f0))
	switch {
	case !out.Started:
		if out.Limit != bsync.TimeLimit || math.Abs(f-f0) > tol {
			c.errorf("Optimize (phase %d) started nothing but reports %q and moved F from %.12g to %.12g", goal.Phase, out.Limit, f0, f)
		}
		return out, err
	case f > f0+tol:
		c.errorf("Optimize (phase %d, rank %d) raised F from %.15g to %.15g", goal.Phase, x.R, f0, f)
	case out.Steps == 0 && math.Abs(f-f0) > tol:
		c.errorf("Optimize (phase %d) took no step but moved F from %.15g to %.15g", goal.Phase, f0, f)
	}
	if math.Abs(lv.F-f) > tol {
		c.errorf("Optimize (phase %d, rank %d): lv.F %.15g, F at the point %.15g", goal.Phase, x.R, lv.F, f)
	}
	if out.Converged && !(lv.RelGrad <= goal.Tol) {
		c.errorf("Optimize (phase %d) converged at relative gradient %g, tolerance %g", goal.Phase, lv.RelGrad, goal.Tol)
	}
	if dev := stiefelDeviation(x, r.Graph().D); dev > 1e-9 {
		c.errorf("Optimize (phase %d, rank %d): a Stiefel part is %g off St(d, r)", goal.Phase, x.R, dev)
	}
	return out, err
}

// cost returns F(X) = tr(X Q X^T).
func (c *checked) cost(r *bsync.Run, x *blockmat.Blocks) float64 {
	if c.work == nil || c.work.R != x.R || c.work.N != x.N {
		c.work = blockmat.NewBlocks(x.R, x.B, x.N)
	}
	return posegraph.TraceCost(r.Q(), x, c.work)
}

// stiefelDeviation returns the largest |(Y_i^T Y_i - I)_ac| over x's
// blocks (Y_i the first d columns).
func stiefelDeviation(x *blockmat.Blocks, d int) float64 {
	dev := 0.0
	b := x.B
	for i := 0; i < x.N; i++ {
		xi := x.Block(i)
		for a := 0; a < d; a++ {
			for c := 0; c < d; c++ {
				s := 0.0
				for k := 0; k < x.R; k++ {
					s += xi[k*b+a] * xi[k*b+c]
				}
				if a == c {
					s--
				}
				dev = math.Max(dev, math.Abs(s))
			}
		}
	}
	return dev
}

// PartsProver and PartsRounder forward an inner optimizer's
// (bsync.PartsProviders), checked: the partition fits the graph and its
// anchor is a pose, every ProveLambda returns the trace of Lambda at the
// point given (to 1e-9 relative), and every rounding by parts is the
// central rounding (rounding.Round and RecoverTranslations) to 1e-9, in
// the gauge (rounding.ToGauge).
func (c *checked) PartsProver(r *bsync.Run) bsync.PartsProver {
	pp, ok := c.inner.(bsync.PartsProviders)
	if !ok {
		return nil
	}
	p := pp.PartsProver(r)
	if p == nil {
		return nil
	}
	part, anchor := p.ProofPartition()
	if len(part) != r.Graph().N() || anchor < 0 || anchor >= len(part) {
		c.errorf("ProofPartition: a partition of %d poses for %d, anchor %d", len(part), r.Graph().N(), anchor)
	}
	c.parts++
	cp := &checkedProver{PartsProver: p, c: c, r: r}
	if pe, ok := p.(bsync.PartsEigen); ok {
		return &checkedEigen{checkedProver: cp, pe: pe}
	}
	return cp
}

// checkedEigen is a checkedProver whose parts also escape saddles
// (bsync.PartsEigen), checked: the sums are finite, |v|^2 > 0 after a
// solve, and a committed lift is a point of the next rank on the
// manifold whose F is the F the parts summed (to 1e-9 relative).
type checkedEigen struct {
	*checkedProver
	pe bsync.PartsEigen
}

func (p *checkedEigen) EigStep(s float64, start, solve bool) (bsync.EigSums, error) {
	sums, err := p.pe.EigStep(s, start, solve)
	if err == nil && (!(sums.Norm2 > 0) || math.IsInf(sums.Norm2, 0) || math.IsNaN(sums.VSV) || math.IsNaN(sums.SV2)) {
		p.c.errorf("EigStep: sums %+v", sums)
	}
	return sums, err
}

func (p *checkedEigen) EigLift(alpha float64, commit bool) (float64, *blockmat.Blocks, error) {
	f, x, err := p.pe.EigLift(alpha, commit)
	if err != nil || !commit {
		return f, x, err
	}
	d := p.r.Graph().D
	if x == nil || x.N != p.r.Graph().N() {
		p.c.errorf("EigLift: no point, or one of the wrong size")
		return f, x, err
	}
	if dev := stiefelDeviation(x, d); dev > 1e-9 {
		p.c.errorf("EigLift: a Stiefel part of the lifted point is %g off St(d, %d)", dev, x.R)
	}
	if want := p.c.cost(p.r, x); !(math.Abs(f-want) <= 1e-9*math.Max(1, math.Abs(want))) {
		p.c.errorf("EigLift: F %.15g summed by the parts, %.15g at the lifted point", f, want)
	}
	p.c.escapes++
	return f, x, err
}

func (c *checked) PartsRounder(r *bsync.Run) bsync.PartsRounder {
	pp, ok := c.inner.(bsync.PartsProviders)
	if !ok {
		return nil
	}
	p := pp.PartsRounder(r)
	if p == nil {
		return nil
	}
	return &checkedRounder{p: p, c: c, r: r}
}

type checkedProver struct {
	bsync.PartsProver
	c *checked
	r *bsync.Run
}

func (p *checkedProver) ProveLambda(x *blockmat.Blocks) (float64, error) {
	tr, err := p.PartsProver.ProveLambda(x)
	if err != nil {
		return tr, err
	}
	want := traceLambda(p.r.Q(), x, p.r.Graph().D)
	if !(math.Abs(tr-want) <= 1e-9*math.Max(1, math.Abs(want))) { // NaN fails too
		p.c.errorf("ProveLambda: tr(Lambda) %.15g, at the point %.15g", tr, want)
	}
	p.c.proofs++
	return tr, nil
}

type checkedRounder struct {
	p bsync.PartsRounder
	c *checked
	r *bsync.Run
}

func (p *checkedRounder) RoundByParts(x *blockmat.Blocks) ([]posegraph.Pose, error) {
	got, err := p.p.RoundByParts(x)
	if err != nil {
		return got, err
	}
	g := p.r.Graph()
	d := g.D
	want := rounding.Round(x, d)
	if x.B > d {
		if err := rounding.RecoverTranslations(g, want); err != nil {
			return got, err
		}
	}
	if len(got) != len(want) {
		p.c.errorf("RoundByParts: %d poses for %d", len(got), len(want))
		return got, nil
	}
	// U_d is defined up to a rotation where the top eigenvalues of Y Y^T
	// are close (at rank d they may all be): compare in the gauge.
	rounding.ToGauge(g, want)
	gauged := append([]posegraph.Pose(nil), got...)
	rounding.ToGauge(g, gauged)
	for i := range gauged {
		for k := 0; k < 9; k++ {
			if !(math.Abs(gauged[i].R[k]-want[i].R[k]) <= 1e-9) {
				p.c.errorf("RoundByParts: pose %d's rotation %v, rounded centrally %v", i, gauged[i].R, want[i].R)
				return got, nil
			}
		}
		for k := 0; k < 3; k++ {
			if !(math.Abs(gauged[i].T[k]-want[i].T[k]) <= 1e-9*(1+math.Abs(want[i].T[k]))) {
				p.c.errorf("RoundByParts: pose %d's translation %v, rounded centrally %v", i, gauged[i].T, want[i].T)
				return got, nil
			}
		}
	}
	p.c.roundings++
	return got, nil
}

// traceLambda returns tr(Lambda(X)) = sum_i tr(Y_i^T (X Q)_Y,i).
func traceLambda(q *blockmat.BlockSym, x *blockmat.Blocks, d int) float64 {
	nq := blockmat.NewBlocks(x.R, x.B, x.N)
	q.MulBlocks(nq, x)
	b, s := x.B, 0.0
	for i := 0; i < x.N; i++ {
		xi, ni := x.Block(i), nq.Block(i)
		for k := 0; k < x.R; k++ {
			for a := 0; a < d; a++ {
				s += xi[k*b+a] * ni[k*b+a]
			}
		}
	}
	return s
}
