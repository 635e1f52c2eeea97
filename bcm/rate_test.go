package bcm

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bcmsync/bcmsync/internal/smalldense"
	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
)

// TestRateBound checks Theorem 1 and Corollary 1 of Tian et al. in
// expectation on small random SO(3) instances (docs/design.md section 4): after
//
//	K_u = 2 d n C1 (F(Y0) - F*) / eps   uniform iterations, or
//	K_i = 2 d C2 (F(Y0) - F*) / eps     importance iterations,
//
// with C1 = max_i sum_{j != i} ||Q_ji||_* and C2 = sum_{i != j} ||Q_ij||_*,
// the average over 100 seeded runs of min_{k <= K} ||grad F(Y_k)||^2 is at
// most eps. F* is the best value of long cyclic runs from several starts.
// eps is chosen so that K_u is a few thousand iterations, and the bound is
// checked for every smaller K with its eps(K); the test logs how many
// iterations the average actually needed.
func TestRateBound(t *testing.T) {
	const (
		d, r, n = 3, 5, 8
		runs    = 100
		kMax    = 3000 // K_u for the chosen eps
	)
	rng := rand.New(rand.NewPCG(10, 10))
	for inst := 0; inst < 3; inst++ {
		g := randomGraph(rng, d, n, 8, 0.3)
		q := g.Laplacian(posegraph.Rotations)
		s := New(q, d, posegraph.Rotations)

		// C1 and C2 from the off-diagonal blocks.
		c1, c2 := 0.0, 0.0
		for i := 0; i < n; i++ {
			row := 0.0
			for p := q.RowPtr[i]; p < q.RowPtr[i+1]; p++ {
				if p != q.Diag[i] {
					row += smalldense.Nuclear(q.Block(p), d, d)
				}
			}
			c1 = math.Max(c1, row)
			c2 += row
		}

		// F* from long runs.
		fStar := math.Inf(1)
		for seed := uint64(0); seed < 5; seed++ {
			x := sparse.NewBlocks(r, d, n)
			RandomStiefel(x, d, 1000+seed)
			res, err := s.Solve(context.Background(), x, Options{GradTol: 1e-14, MaxSweeps: 100000})
			if err != nil {
				t.Fatal(err)
			}
			fStar = math.Min(fStar, res.F)
		}

		y0 := sparse.NewBlocks(r, d, n)
		RandomStiefel(y0, d, uint64(inst))
		f0 := s.Cost(y0)
		gap := f0 - fStar
		eps := 2 * d * n * c1 * gap / kMax
		kU := int(math.Ceil(2 * d * n * c1 * gap / eps))
		kI := int(math.Ceil(2 * d * c2 * gap / eps))

		for _, rule := range []Rule{Uniform, Importance} {
			k := kU
			if rule == Importance {
				k = kI
			}
			// avg[j] accumulates min_{k' <= j} ||grad F(Y_k')||^2 over runs.
			avg := make([]float64, k+1)
			nq := sparse.NewBlocks(r, d, n)
			x := sparse.NewBlocks(r, d, n)
			for run := 0; run < runs; run++ {
				copy(x.Data, y0.Data)
				q.MulBlocks(nq, x)
				gn, _ := s.gradNorms(x, nq)
				best := gn * gn
				avg[0] += best
				step := 0
				s.onStep = func(int, float64) {
					step++
					if step > k {
						return
					}
					q.MulBlocks(nq, x)
					gn, _ := s.gradNorms(x, nq)
					best = math.Min(best, gn*gn)
					avg[step] += best
				}
				sweeps := (k + n - 1) / n
				if _, err := s.Solve(context.Background(), x, Options{Rule: rule, Seed: uint64(run), MaxSweeps: sweeps}); err != nil {
					t.Fatal(err)
				}
				s.onStep = nil
				if step < k {
					t.Fatalf("%v: only %d of %d iterations ran", rule, step, k)
				}
			}
			needed := -1
			for j := range avg {
				avg[j] /= runs
				if needed < 0 && avg[j] <= eps {
					needed = j
				}
			}
			t.Logf("instance %d %-10v: C1 %.4g C2 %.4g F0-F* %.4g eps %.4g (||grad F(Y0)||^2 = %.4g): theorem K = %d, needed %d (%.0fx loose); E min ||grad||^2 after K = %.3g",
				inst, rule, c1, c2, gap, eps, avg[0], k, needed, float64(k)/math.Max(1, float64(needed)), avg[k])
			if avg[k] > eps {
				t.Fatalf("%v: average min ||grad||^2 after K = %d is %g > eps = %g", rule, k, avg[k], eps)
			}
			// The theorem holds for every eps: after K iterations the
			// average is at most eps(K) = K_formula * eps / K.
			worst := 0.0 // the largest avg / eps(K') over K' <= K: how tight it gets
			for j := 1; j <= k; j++ {
				e := float64(k) * eps / float64(j)
				if avg[j] > e {
					t.Fatalf("%v: average min ||grad||^2 after %d iterations is %g > %g", rule, j, avg[j], e)
				}
				worst = math.Max(worst, avg[j]/e)
			}
			t.Logf("instance %d %-10v: over all K' <= K the average reaches at most %.3g of the bound eps(K')", inst, rule, worst)
		}
	}
}
