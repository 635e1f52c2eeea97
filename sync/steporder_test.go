package sync

import (
	"context"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/g2o"
	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
)

// TestIncrementalKeepsOrder replays growing graphs (poses only, and with
// landmarks, whose numbering shifts as poses arrive before them) and
// checks that the steps after the first use the kept order
// (sparse.ReorderBlocks) and reorder only part of the graph, with a fresh
// order only at the growth checks, and that every step certifies. That
// each step's optimum is a cold solve's is TestIncrementalStepsMatchColdSolves'.
func TestIncrementalKeepsOrder(t *testing.T) {
	for _, tc := range growingGraphs(t, 9) {
		t.Run(tc.name, func(t *testing.T) {
			batches, err := Replay(tc.g, 20)
			if err != nil {
				t.Fatal(err)
			}
			inc, err := NewIncremental(tc.g.D, Options{})
			if err != nil {
				t.Fatal(err)
			}
			kept, reordered, blocks := 0, 0, 0
			for k := range batches {
				res := solveStep(t, inc, batches, k)
				if res.Options.order != nil || res.Options.warmStep {
					t.Fatalf("step %d: the result's Options carry the Incremental's state (a solve with them would share its order)", k)
				}
				o := &inc.order
				if k == 0 && !o.fresh {
					t.Fatalf("step 0: no fresh order")
				}
				if k > 0 && !o.fresh {
					kept++
					reordered += o.reordered
					blocks += res.Graph.N()
				}
			}
			if kept < len(batches)/2 {
				t.Fatalf("%d of %d steps kept the order", kept, len(batches))
			}
			if reordered >= blocks {
				t.Fatalf("the kept steps reordered %d of %d blocks", reordered, blocks)
			}
			t.Logf("%d of %d steps kept the order, reordering %d of their %d blocks", kept, len(batches), reordered, blocks)
		})
	}
}

// TestIncrementalCopiesTranslationFactor replays growing graphs (poses
// only, and with landmarks, whose numbering shifts) with the translation
// factor copied from the last step where it did not change and without,
// and checks that every step's result is the same to the bit (the copied
// factor is a fresh factorization's) and that the steps copy most of it.
func TestIncrementalCopiesTranslationFactor(t *testing.T) {
	defer func() { copyTranslationFactor = true }()
	for _, tc := range growingGraphs(t, 5) {
		t.Run(tc.name, func(t *testing.T) {
			batches, err := Replay(tc.g, 12)
			if err != nil {
				t.Fatal(err)
			}
			var runs [2][]*Result
			var copied, supernodes int
			for r, on := range []bool{true, false} {
				copyTranslationFactor = on
				inc, err := NewIncremental(tc.g.D, Options{})
				if err != nil {
					t.Fatal(err)
				}
				for k := range batches {
					res := solveStep(t, inc, batches, k)
					runs[r] = append(runs[r], res)
					u := inc.order.reuse
					if u.Supernodes == 0 || u.Copied > u.Supernodes {
						t.Fatalf("step %d: translation factor reuse %+v", k, u)
					}
					if on {
						copied += u.Copied
						supernodes += u.Supernodes
					} else if u.Copied != 0 {
						t.Fatalf("step %d: %d supernodes copied with copying off", k, u.Copied)
					}
				}
			}
			for k := range runs[0] {
				a, b := runs[0][k], runs[1][k]
				if math.Float64bits(a.Objective) != math.Float64bits(b.Objective) {
					t.Fatalf("step %d: F %v copied, %v not", k, a.Objective, b.Objective)
				}
				for i := range a.Poses {
					if a.Poses[i] != b.Poses[i] {
						t.Fatalf("step %d: pose %d %v copied, %v not", k, i, a.Poses[i], b.Poses[i])
					}
				}
			}
			if copied < supernodes/6 {
				t.Fatalf("%d of %d supernodes copied over the steps", copied, supernodes)
			}
			t.Logf("%d of %d supernodes copied over %d steps", copied, supernodes, len(batches))
		})
	}
}

// BenchmarkTranslationReuse replays a benchmark graph in 50 steps, as
// `bcmsync replay FILE --steps 50` does, and reports how much of each
// step's translation factor was copied from the last step's
// (rounding.Plan.RefactorFrom): the supernodes and the flops copied over
// the replay, and the median step's fraction of flops copied.
func BenchmarkTranslationReuse(b *testing.B) {
	dir := datasets.SuiteOrSkip(b)
	for _, name := range []string{"intel", "city10000"} {
		b.Run(name, func(b *testing.B) {
			g, err := g2o.ReadFile(filepath.Join(dir, name+".g2o"), g2o.ReadOptions{})
			if err != nil {
				b.Fatal(err)
			}
			batches, err := Replay(g, 50)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				inc, err := NewIncremental(g.D, Options{})
				if err != nil {
					b.Fatal(err)
				}
				var sn, snCopied int
				var fl, flCopied float64
				var frac []float64
				for k := range batches {
					res := solveStep(b, inc, batches, k)
					u := inc.order.reuse
					sn, snCopied = sn+u.Supernodes, snCopied+u.Copied
					fl, flCopied = fl+u.Flops, flCopied+u.CopiedFlops
					frac = append(frac, u.CopiedFlops/u.Flops)
					b.Logf("step %d: %d of %d supernodes, %.3g of %.3g flops copied; order fresh %v, %d of %d blocks reordered",
						k, u.Copied, u.Supernodes, u.CopiedFlops, u.Flops, inc.order.fresh, inc.order.reordered, len(res.Poses))
				}
				slices.Sort(frac)
				b.ReportMetric(float64(snCopied)/float64(sn), "supernodes-copied")
				b.ReportMetric(flCopied/fl, "flops-copied")
				b.ReportMetric(frac[len(frac)/2], "median-step-flops-copied")
			}
		})
	}
}

// growingGraphs returns the graphs the kept-order tests replay: a
// Manhattan grid of 400 poses (seed: its measurements), alone and with 30
// landmarks, whose numbering shifts as poses arrive before them.
func growingGraphs(t *testing.T, seed uint64) []struct {
	name string
	g    *posegraph.Graph
} {
	t.Helper()
	cfg := datasets.Config{Kappa: 100, Tau: 25, LoopProb: 0.3, Seed: seed}
	g, truth, err := datasets.Manhattan(400, 8, cfg)
	if err != nil {
		t.Fatal(err)
	}
	gl, _, err := datasets.AddLandmarks(g, truth, datasets.LandmarkConfig{N: 30, Range: 2, MaxObservers: 4, Tau: 50, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	return []struct {
		name string
		g    *posegraph.Graph
	}{{"poses", g}, {"landmarks", gl}}
}

// solveStep adds batch k to inc and solves, failing tb unless the step
// certifies.
func solveStep(tb testing.TB, inc *Incremental, batches []Batch, k int) *Result {
	tb.Helper()
	if err := batches[k].Add(inc); err != nil {
		tb.Fatal(err)
	}
	res, err := inc.Solve(context.Background())
	if err != nil {
		tb.Fatalf("step %d: %v", k, err)
	}
	if !res.Certified {
		tb.Fatalf("step %d: %s", k, res.Status)
	}
	return res
}

// TestAnchorLast checks anchorLast against the certificate's own choice:
// the pose it moves last is the anchor analyze picks on the order as it
// was, L's size and flops do not change, and analyze, given the moved
// analysis, keeps it (the anchor already last: no second analysis) and
// picks the same anchor.
func TestAnchorLast(t *testing.T) {
	moves := 0
	for _, n := range []int{30, 80, 200, 400} {
		for seed := uint64(1); seed <= 3; seed++ {
			cfg := datasets.Config{Kappa: 100, Tau: 25, LoopProb: 0.3, Seed: seed}
			g, truth, err := datasets.Manhattan(n, 8, cfg)
			if err != nil {
				t.Fatal(err)
			}
			graphs := []*posegraph.Graph{g}
			if gl, _, err := datasets.AddLandmarks(g, truth, datasets.LandmarkConfig{N: n / 10, Range: 2, MaxObservers: 4, Tau: 50, Seed: seed}); err == nil {
				graphs = append(graphs, gl)
			}
			for _, g := range graphs {
				d, opts := g.D, DefaultOptions()
				q := g.Laplacian(posegraph.Poses)
				perm := sparse.BlockOrder(q, 0)
				sym, err := sparse.AnalyzeBlockPattern(q, perm)
				if err != nil {
					t.Fatal(err)
				}
				before := newCertifier(q, d, opts.GapTol, opts.GapAbs, opts.EigTol, perm, opts.Seed)
				before.sym = sym
				if err := before.analyze(); err != nil {
					t.Fatal(err)
				}
				moved, msym := anchorLast(q, d, perm, sym)
				if msym != sym {
					moves++
				}
				order, _ := msym.Tree()
				last := len(order) - 1
				for before.free != nil && before.free[order[last]] {
					last-- // a landmark: the anchor is the last pose
				}
				if order[last] != before.anchor {
					t.Fatalf("n %d seed %d: anchorLast put pose %d last, the certificate anchors at %d", n, seed, order[last], before.anchor)
				}
				nnz0, flops0 := sparse.BlockFactorCost(q, 0, perm)
				nnz1, flops1 := sparse.BlockFactorCost(q, 0, moved)
				if nnz0 != nnz1 || flops0 != flops1 {
					t.Fatalf("n %d seed %d: moving the anchor changed L: nnz %d to %d, flops %g to %g", n, seed, nnz0, nnz1, flops0, flops1)
				}
				after := newCertifier(q, d, opts.GapTol, opts.GapAbs, opts.EigTol, moved, opts.Seed)
				after.sym = msym
				if err := after.analyze(); err != nil {
					t.Fatal(err)
				}
				if after.anchor != before.anchor {
					t.Fatalf("n %d seed %d: anchor %d after the move, %d before", n, seed, after.anchor, before.anchor)
				}
				b := q.B
				for k, p := range after.chol.Perm() {
					if p != order[k/b]*b+k%b {
						t.Fatalf("n %d seed %d: the certificate analysed another order than the moved one", n, seed)
					}
				}
			}
		}
	}
	if moves == 0 {
		t.Fatal("no graph moved its anchor: the test checks nothing")
	}
	t.Logf("%d graphs moved their anchor", moves)
}

// TestIncrementalWarmGradTol checks the warm steps' gradient tolerance:
// warmGradTol by default (the first, cold step Solve's), the caller's
// Options.GradTol when set, recorded in each Result's Options, and the
// steps' trust region stopping at it.
func TestIncrementalWarmGradTol(t *testing.T) {
	g, _, err := datasets.Manhattan(300, 8, datasets.Config{Kappa: 100, Tau: 25, LoopProb: 0.3, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	batches, err := Replay(g, 6)
	if err != nil {
		t.Fatal(err)
	}
	for _, set := range []float64{0, 1e-10} {
		inc, err := NewIncremental(g.D, Options{GradTol: set})
		if err != nil {
			t.Fatal(err)
		}
		for k := range batches {
			res := solveStep(t, inc, batches, k)
			want := set
			if want == 0 {
				want = DefaultOptions().GradTol
				if k > 0 {
					want = warmGradTol
				}
			}
			if res.Options.GradTol != want {
				t.Fatalf("GradTol %g, step %d: ran with %g, want %g", set, k, res.Options.GradTol, want)
			}
			lv := res.Levels[len(res.Levels)-1]
			if lv.RTRStop == "gradient" && res.History[len(res.History)-1].RelGrad > want {
				t.Fatalf("GradTol %g, step %d: stopped for the gradient at %g", set, k, res.History[len(res.History)-1].RelGrad)
			}
		}
	}
}
