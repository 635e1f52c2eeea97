package covariance_test

import (
	"context"
	"math"
	"testing"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/stat/distuv"

	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/posegraph"
	bsync "github.com/bcmsync/bcmsync/sync"
	"github.com/bcmsync/bcmsync/sync/covariance"
)

// TestEmpiricalSpread checks the covariances against the spread of the
// certified optimum over independent noise draws of one generated graph
// (datasets.Redraw at the graph's weights), the statistical meaning the
// package documentation gives them. Each draw is solved and certified,
// with the anchor at its true pose, and its error e_i (t^_i - t_i,
// Log(R_i^T R^_i)) is compared with the covariances computed at that
// draw's optimum:
//
//   - the sum over vertices of e_i^T C_ii^{-1} e_i has mean K, the number
//     of free coordinates, and, for Gaussian errors with the joint
//     covariance C, variance 2 sum_ij tr(C_ii^{-1} C_ij C_jj^{-1} C_ji)
//     (C from the dense oracle): its average over the draws must lie
//     within 4 standard errors of K;
//   - for the pose farthest from the anchor, and for its joint with a
//     pose a quarter of the way there, each entry of the sample covariance
//     must lie within z standard errors, sqrt((C_aa C_bb + C_ab^2) / N),
//     of the computed one, and each mean error within z sqrt(C_aa / N) of
//     0, z the two-sided Bonferroni bound for all these checks at a
//     family-wise level of 1e-3 (4.5 for the 3-D joint's 156 checks).
//
// The draws are seeded, so the test is deterministic; a correct
// covariance fails a check with probability 1e-4 (the sum) or 1e-3 (the
// entries). The noise (0.02 rad, 0.05 m) keeps the linearization's bias
// far below the standard errors. The test has power: with every rotation
// coordinate's variance doubled (C's rotation rows and columns scaled by
// sqrt 2), the factor by which the g2o convention differs in 2-D, the
// first statistic moves beyond its bound (by 7 and 12 standard errors at
// 300 draws), which the test checks too.
func TestEmpiricalSpread(t *testing.T) {
	draws := 300
	if testing.Short() {
		draws = 150
	}
	const sigmaR, sigmaT = 0.02, 0.05
	cfg := datasets.Config{Kappa: 1 / (2 * sigmaR * sigmaR), Tau: 1 / (sigmaT * sigmaT), LoopProb: 1, Seed: 3}
	man, mt, err := datasets.Manhattan(40, 4, cfg)
	if err != nil {
		t.Fatal(err)
	}
	manL, mtL, err := datasets.AddLandmarks(man, mt, datasets.LandmarkConfig{N: 5, Tau: cfg.Tau, Range: 2, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	cube, ct, err := datasets.Cube(3, 3, 2, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		g     *posegraph.Graph
		truth []posegraph.Pose
	}{{"manhattan+landmarks", manL, mtL}, {"cube", cube, ct}} {
		t.Run(tc.name, func(t *testing.T) {
			empirical(t, tc.g, tc.truth, draws)
		})
	}
}

func empirical(t *testing.T, g *posegraph.Graph, truth []posegraph.Pose, draws int) {
	d, n := g.D, g.N()
	anchor := g.Anchor()
	// The pose farthest from the anchor and one about halfway.
	far, mid := anchor, anchor
	dist := func(i int) float64 {
		s := 0.0
		for a := 0; a < d; a++ {
			s += (truth[i].T[a] - truth[anchor].T[a]) * (truth[i].T[a] - truth[anchor].T[a])
		}
		return s
	}
	for i := 0; i < g.NumPoses(); i++ {
		if dist(i) > dist(far) {
			far = i
		}
	}
	for i := 0; i < g.NumPoses(); i++ {
		if i != far && math.Abs(dist(i)-dist(far)/4) < math.Abs(dist(mid)-dist(far)/4) {
			mid = i
		}
	}
	p := covariance.PoseDim(d)
	w := 2 * p
	var (
		sumT, sumT2    float64
		meanE          = make([]float64, w)
		sampE          = make([]float64, w*w)
		avgC           = make([]float64, w*w)
		oracle, layout = (*mat.Dense)(nil), coords{}
	)
	for k := 0; k < draws; k++ {
		gr, err := datasets.Redraw(g, truth, uint64(1000+k))
		if err != nil {
			t.Fatal(err)
		}
		gr.Initial = append([]posegraph.Pose(nil), gr.Initial...)
		gr.Initial[anchor] = truth[anchor]
		res, err := bsync.Solve(context.Background(), gr, bsync.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Certified {
			t.Fatalf("draw %d: %s", k, res.Status)
		}
		cov, err := covariance.Compute(res.Graph, res.Poses, covariance.Options{Pairs: [][2]int{{far, mid}}})
		if err != nil {
			t.Fatal(err)
		}
		if k == 0 {
			oracle, layout = denseCovariance(t, res.Graph, res.Poses, anchor)
		}
		errs := make([][]float64, n)
		for i := 0; i < n; i++ {
			e := make([]float64, cov.Size(i))
			for a := 0; a < d; a++ {
				e[a] = res.Poses[i].T[a] - truth[i].T[a]
			}
			if !g.IsLandmark(i) {
				var rel [9]float64
				for a := 0; a < d; a++ {
					for b := 0; b < d; b++ {
						for c := 0; c < d; c++ {
							rel[a*d+b] += truth[i].R[c*d+a] * res.Poses[i].R[c*d+b]
						}
					}
				}
				lw := logRot(d, rel)
				copy(e[d:], lw[:p-d])
			}
			errs[i] = e
			if i == anchor {
				for _, v := range e {
					if math.Abs(v) > 1e-9 {
						t.Fatalf("draw %d: the anchor moved by %g", k, v)
					}
				}
				continue
			}
			sumT += mahalanobis(t, cov.Marginal(i), e)
			if !g.IsLandmark(i) {
				c2 := append([]float64(nil), cov.Marginal(i)...)
				for a := 0; a < p; a++ {
					for b := 0; b < p; b++ {
						if a >= d {
							c2[a*p+b] *= math.Sqrt2
						}
						if b >= d {
							c2[a*p+b] *= math.Sqrt2
						}
					}
				}
				sumT2 += mahalanobis(t, c2, e)
			} else {
				sumT2 += mahalanobis(t, cov.Marginal(i), e)
			}
		}
		joint := cov.Joints[0].Cov
		e := append(append([]float64(nil), errs[far]...), errs[mid]...)
		for a := 0; a < w; a++ {
			meanE[a] += e[a] / float64(draws)
			for b := 0; b < w; b++ {
				sampE[a*w+b] += e[a] * e[b] / float64(draws)
				avgC[a*w+b] += joint[a*w+b] / float64(draws)
			}
		}
	}
	// The Mahalanobis sum.
	K, variance := 0.0, 0.0
	blocks := []int{}
	for i := 0; i < n; i++ {
		if i != anchor {
			blocks = append(blocks, i)
			K += float64(layout.size[i])
		}
	}
	sub := func(i, j int) *mat.Dense {
		m := mat.NewDense(layout.size[i], layout.size[j], nil)
		for a := 0; a < layout.size[i]; a++ {
			for b := 0; b < layout.size[j]; b++ {
				m.Set(a, b, oracle.At(layout.off[i]+a, layout.off[j]+b))
			}
		}
		return m
	}
	invs := map[int]*mat.Dense{}
	for _, i := range blocks {
		var inv mat.Dense
		if err := inv.Inverse(sub(i, i)); err != nil {
			t.Fatal(err)
		}
		invs[i] = &inv
	}
	for _, i := range blocks {
		for _, j := range blocks {
			var a, b, c mat.Dense
			a.Mul(invs[i], sub(i, j))
			b.Mul(invs[j], sub(j, i))
			c.Mul(&a, &b)
			variance += 2 * mat.Trace(&c)
		}
	}
	mean := sumT / float64(draws)
	se := math.Sqrt(variance / float64(draws))
	t.Logf("%d draws: mean of sum e^T C^-1 e = %.2f, expected %g +- %.2f (%.1f se)", draws, mean, K, se, (mean-K)/se)
	zs := distuv.UnitNormal.Quantile(1 - 1e-4/2)
	if math.Abs(mean-K) > zs*se {
		t.Errorf("mean Mahalanobis sum %.3f, expected %g: %.1f standard errors off", mean, K, (mean-K)/se)
	}
	if z := (K - sumT2/float64(draws)) / se; z < zs {
		t.Errorf("with the rotation variances doubled the statistic moves by only %.1f standard errors: the test has no power", z)
	} else {
		t.Logf("with the rotation variances doubled: %.1f standard errors off", z)
	}
	// The far pose and its joint with the middle one, entry by entry.
	N := float64(draws)
	checks := float64(w*w + w)
	zmax := distuv.UnitNormal.Quantile(1 - 1e-3/(2*checks))
	worst := 0.0
	for a := 0; a < w; a++ {
		if z := math.Abs(meanE[a]) / math.Sqrt(avgC[a*w+a]/N); z > zmax {
			t.Errorf("coordinate %d of the pair (%d, %d): mean error %.3g is %.1f standard errors from 0", a, far, mid, meanE[a], z)
		}
		for b := 0; b < w; b++ {
			s := sampE[a*w+b] - meanE[a]*meanE[b]*N/(N-1)
			s *= N / (N - 1)
			c := avgC[a*w+b]
			se := math.Sqrt((avgC[a*w+a]*avgC[b*w+b] + c*c) / N)
			z := math.Abs(s-c) / se
			worst = max(worst, z)
			if z > zmax {
				t.Errorf("joint of (%d, %d) entry (%d, %d): sample %.4g, computed %.4g (%.1f standard errors)", far, mid, a, b, s, c, z)
			}
		}
	}
	t.Logf("joint of the far pose %d and pose %d: worst entry %.1f standard errors (bound %.2f)", far, mid, worst, zmax)
}

// mahalanobis returns e^T C^{-1} e for the k x k covariance c.
func mahalanobis(t *testing.T, c []float64, e []float64) float64 {
	k := len(e)
	var ch mat.Cholesky
	if !ch.Factorize(mat.NewSymDense(k, append([]float64(nil), c...))) {
		t.Fatal("a marginal covariance is not positive definite")
	}
	x := mat.NewVecDense(k, nil)
	if err := ch.SolveVecTo(x, mat.NewVecDense(k, append([]float64(nil), e...))); err != nil {
		t.Fatal(err)
	}
	return mat.Dot(x, mat.NewVecDense(k, e))
}
