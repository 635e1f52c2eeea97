package bcm

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
)

// BenchmarkUpdate measures one block update (gather G_i, polar factor,
// write back) on a random SE(d) graph of average degree about 4, the
// density of the benchmark graphs. Run with -benchtime=3x or 1s.
func BenchmarkUpdate(b *testing.B) {
	for _, kind := range []posegraph.Problem{posegraph.Poses, posegraph.Rotations} {
		for d := 2; d <= 3; d++ {
			rng := rand.New(rand.NewPCG(1, uint64(d)))
			g := randomGraph(rng, d, 2000, 2000, 0.1)
			q := g.Laplacian(kind)
			for r := 3; r <= 10; r++ {
				if r < d {
					continue
				}
				b.Run(fmt.Sprintf("%v/d=%d/r=%d", kind, d, r), func(b *testing.B) {
					s := New(q, d, kind)
					x := sparse.NewBlocks(r, q.B, q.N)
					RandomStiefel(x, d, 1)
					sw := newSweeper(s, x, 1)
					b.ReportAllocs()
					b.ResetTimer()
					i := 0
					for b.Loop() {
						sw.update(sw.k[0], i)
						if i++; i == q.N {
							i = 0
						}
					}
				})
			}
		}
	}
}

// BenchmarkSweep times one Parallel sweep on the large benchmark graphs at
// r = 5 with 1 and 2 threads.
func BenchmarkSweep(b *testing.B) {
	for _, file := range []string{"city10000.g2o", "torus3D.g2o"} {
		g := loadG2O(b, file)
		q := g.Laplacian(posegraph.Poses)
		for _, th := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/threads=%d", file, th), func(b *testing.B) {
				s := New(q, g.D, posegraph.Poses)
				x := sparse.NewBlocks(5, q.B, q.N)
				RandomStiefel(x, g.D, 1)
				sw := newSweeper(s, x, th)
				sw.parallel() // colour once outside the timing
				b.ResetTimer()
				for b.Loop() {
					sw.parallel()
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(q.N), "ns/update")
			})
		}
	}
}

// BenchmarkIntel reports the sweeps and seconds each rule needs to reach
// RelGradNorm 1e-3 and 1e-6 on intel (SE(2), r = 5) from a random start and
// from the file's VERTEX guesses lifted, capped at 15 s per run, without and
// (+trans) with the exact translation step. Run with -benchtime=1x.
func BenchmarkIntel(b *testing.B) {
	g := loadG2O(b, "intel.g2o")
	q := g.Laplacian(posegraph.Poses)
	for _, start := range []string{"random", "vertex"} {
		for _, rt := range []struct {
			rule  Rule
			trans bool
		}{{Cyclic, false}, {Uniform, false}, {Importance, false}, {Greedy, false}, {Parallel, false}, {Cyclic, true}, {Parallel, true}} {
			rule := rt.rule
			label := rule.String()
			if rt.trans {
				label += "+trans"
			}
			b.Run(start+"/"+label, func(b *testing.B) {
				for b.Loop() {
					s := New(q, 2, posegraph.Poses)
					var x *sparse.Blocks
					if start == "random" {
						x = sparse.NewBlocks(5, q.B, q.N)
						RandomStiefel(x, 2, 1)
					} else {
						x = g.Lift(g.Initial, posegraph.Poses, 5)
					}
					var at3, at6 Record
					res, err := s.Solve(context.Background(), x, Options{Rule: rule, SolveTranslations: rt.trans, GradTol: 1e-6, MaxTime: 15 * time.Second, Progress: func(r Record) {
						if at3.Sweep == 0 && r.RelGradNorm <= 1e-3 {
							at3 = r
						}
					}})
					if err != nil {
						b.Fatal(err)
					}
					if res.Status == GradientConverged {
						at6 = res.History[len(res.History)-1]
					}
					b.Logf("%s %s: 1e-3 at sweep %d (%.3fs); 1e-6: %v at sweep %d (%.3fs); final: %d sweeps, rel grad %.3g, F %.10g (F* 52.3482275933)", start, label,
						at3.Sweep, at3.Elapsed.Seconds(), res.Status, at6.Sweep, at6.Elapsed.Seconds(), res.Sweeps, res.RelGradNorm, res.F)
					b.ReportMetric(float64(at3.Sweep), "sweeps@1e-3")
					b.ReportMetric(at3.Elapsed.Seconds(), "s@1e-3")
					b.ReportMetric(float64(at6.Sweep), "sweeps@1e-6")
					b.ReportMetric(at6.Elapsed.Seconds(), "s@1e-6")
				}
			})
		}
	}
}

// BenchmarkLarge runs the Parallel rule from the files' VERTEX guesses lifted
// to r = 5 on the larger graphs, with and without the translation step,
// capped at 10 s, and logs F, the relative gradient and when 1e-3 and 1e-6
// were reached. Run with -benchtime=1x.
func BenchmarkLarge(b *testing.B) {
	for _, file := range []string{"city10000.g2o", "sphere2500.g2o", "torus3D.g2o"} {
		g := loadG2O(b, file)
		q := g.Laplacian(posegraph.Poses)
		for _, tr := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/trans=%v", file, tr), func(b *testing.B) {
				for b.Loop() {
					x := g.Lift(g.Initial, posegraph.Poses, 5)
					s := New(q, g.D, posegraph.Poses)
					res, err := s.Solve(context.Background(), x, Options{Rule: Parallel, SolveTranslations: tr, GradTol: 1e-6, MaxTime: 10 * time.Second})
					if err != nil {
						b.Fatal(err)
					}
					var at3 Record
					for _, r := range res.History {
						if r.RelGradNorm <= 1e-3 {
							at3 = r
							break
						}
					}
					b.Logf("%s trans=%v: F %.8g -> %.10g, rel grad %.3g after %d sweeps, %v (%v); 1e-3 at sweep %d (%.2fs)", file, tr,
						res.History[0].F, res.F, res.RelGradNorm, res.Sweeps, res.Elapsed.Round(time.Millisecond), res.Status, at3.Sweep, at3.Elapsed.Seconds())
				}
			})
		}
	}
}

// BenchmarkGatherVsScatter compares the two bookkeepings of a cyclic sweep:
// gathering G_i from the neighbours (what Cyclic, Uniform and Parallel do)
// against maintaining N = X Q by scatter updates (what Importance and Greedy
// need for their weights), on a random SE(3) graph of average degree ~4.
func BenchmarkGatherVsScatter(b *testing.B) {
	rng := rand.New(rand.NewPCG(2, 2))
	g := randomGraph(rng, 3, 5000, 5000, 0.1)
	q := g.Laplacian(posegraph.Poses)
	s := New(q, 3, posegraph.Poses)
	x := sparse.NewBlocks(5, q.B, q.N)
	RandomStiefel(x, 3, 1)
	sw := newSweeper(s, x, 1)
	b.Run("gather", func(b *testing.B) {
		for b.Loop() {
			sw.cyclic()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*q.N), "ns/update")
	})
	b.Run("scatter", func(b *testing.B) {
		s.record(x, 1)
		k := sw.k[0]
		for b.Loop() {
			for i := 0; i < q.N; i++ {
				xi := x.Block(i)
				copy(sw.old, xi)
				k.fromN(q, x, s.nq, i)
				k.step(xi, q.Block(q.Diag[i]), true)
				sw.updateN(i)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*q.N), "ns/update")
	})
}
