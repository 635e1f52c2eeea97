package sync

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/g2o"
	"github.com/bcmsync/bcmsync/posegraph"
)

// robustCase is a synthetic graph corrupted with random wrong loop
// closures (datasets.AddOutliers, as confident as a typical inlier).
type robustCase struct {
	d        int
	fraction float64
}

func (c robustCase) graphs(t testing.TB) (clean, corrupted *posegraph.Graph, mask []bool, kappa, tau float64) {
	kappa, tau = 200, 100
	n, radius := 150, 2.5
	if c.d == 3 {
		radius = 2.2
	}
	g, _, err := datasets.Geometric(c.d, n, radius, datasets.Config{Kappa: kappa, Tau: tau, LoopProb: 0.3, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	out, mask, err := datasets.AddOutliers(g, datasets.OutlierConfig{Fraction: c.fraction, Seed: 11})
	if err != nil {
		t.Fatal(err)
	}
	return g, out, mask, kappa, tau
}

// trajectoryError returns the largest rotation angle between matching poses
// and the absolute trajectory error (root mean square translation
// difference). Both solves express their answer in the input's gauge (the
// anchor keeps its input pose), so no alignment is needed.
func trajectoryError(d int, a, b []posegraph.Pose) (maxAngle, ate float64) {
	for i := range a {
		m := mul(d, transpose(d, a[i].R), b[i].R)
		tr := 0.0
		for k := 0; k < d; k++ {
			tr += m[k*d+k]
		}
		// tr = 2 cos theta (2-D) or 1 + 2 cos theta (3-D).
		c := (tr - float64(d-2)) / 2
		maxAngle = math.Max(maxAngle, math.Acos(math.Max(-1, math.Min(1, c))))
		for k := 0; k < d; k++ {
			v := a[i].T[k] - b[i].T[k]
			ate += v * v
		}
	}
	return maxAngle, math.Sqrt(ate / float64(len(a)))
}

// TestRobustRejectsOutliers: on 2-D and 3-D graphs with 5%, 10% and 20%
// wrong loop closures, GNC-TLS rejects every outlier, keeps at least 99% of
// the inliers, certifies the final (inlier) problem, and its estimate is
// within the noise of the clean graph's certified optimum: the largest
// rotation difference is below one noise standard deviation per axis,
// 1/sqrt(2 kappa), and the ATE below the translation noise's 1/sqrt(tau).
// The plain solve of the corrupted graph, for contrast, is far off.
func TestRobustRejectsOutliers(t *testing.T) {
	for _, c := range []robustCase{{2, 0.05}, {2, 0.10}, {2, 0.20}, {3, 0.05}, {3, 0.10}, {3, 0.20}} {
		for _, gncOnly := range []bool{false, true} {
			if gncOnly && c.fraction != 0.10 {
				continue
			}
			name := fmt.Sprintf("d=%d/%g", c.d, c.fraction)
			if gncOnly {
				name += "/gnc-only"
			}
			t.Run(name, func(t *testing.T) { testRejectsOutliers(t, c, gncOnly) })
		}
	}
}

// testRejectsOutliers is one case of TestRobustRejectsOutliers; gncOnly
// skips the consistency stage, so that GNC and the TLS check do the whole
// job.
func testRejectsOutliers(t *testing.T, c robustCase, gncOnly bool) {
	{
		{
			clean, bad, mask, kappa, tau := c.graphs(t)
			ref, err := Solve(context.Background(), clean, Options{})
			if err != nil || !ref.Certified {
				t.Fatalf("clean solve: %v, %+v", err, ref)
			}
			res, err := SolveRobust(context.Background(), bad, Options{}, RobustOptions{NoConsistency: gncOnly})
			if err != nil {
				t.Fatal(err)
			}
			rr := res.Robust
			if rr == nil || !rr.Converged || !res.Certified {
				t.Fatalf("robust solve: status %q, stop %q", res.Status, rr.Stop)
			}
			if res.Status != Certified || !strings.HasPrefix(rr.Describe(), "robust: of the ") {
				t.Errorf("status %q, %q", res.Status, rr.Describe())
			}
			checkTLS(t, res)
			if gncOnly && (rr.Consistency.Candidates != 0 || len(rr.Iterations) < 3) {
				t.Errorf("GNC alone: consistency %+v, %d solves", rr.Consistency, len(rr.Iterations))
			}
			outliers, inliers, missed, lost := 0, 0, 0, 0
			for k, w := range rr.Weights {
				if w != 0 && w != 1 {
					t.Errorf("edge %d: converged with weight %g", k, w)
				}
				if mask[k] {
					outliers++
					if w != 0 {
						missed++
					}
				} else {
					inliers++
					if w == 0 {
						lost++
					}
				}
			}
			if missed > 0 {
				t.Errorf("%d of %d outliers kept", missed, outliers)
			}
			if float64(lost) > 0.01*float64(inliers) {
				t.Errorf("%d of %d inliers rejected (more than 1%%)", lost, inliers)
			}
			if res.Graph.M() != len(rr.Kept) || len(rr.Kept)+len(rr.Rejected) != bad.M() {
				t.Errorf("kept %d + rejected %d edges, input %d, solved graph %d", len(rr.Kept), len(rr.Rejected), bad.M(), res.Graph.M())
			}
			rot, ate := trajectoryError(c.d, ref.Poses, res.Poses)
			t.Logf("%d outliers, %d of %d inliers rejected, %d solves, final mu %.3g; max rotation error %.2e rad, ATE %.2e",
				outliers, lost, inliers, len(rr.Iterations), rr.Mu, rot, ate)
			if rot > 1/math.Sqrt(2*kappa) || ate > 1/math.Sqrt(tau) {
				t.Errorf("against the clean optimum: max rotation error %g rad (noise %g), ATE %g (noise %g)",
					rot, 1/math.Sqrt(2*kappa), ate, 1/math.Sqrt(tau))
			}
			// The first solve is the plain one: the outliers ruin it.
			plain, err := Solve(context.Background(), bad, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if prot, pate := trajectoryError(c.d, ref.Poses, plain.Poses); prot < 10/math.Sqrt(2*kappa) && pate < 10/math.Sqrt(tau) {
				t.Errorf("the plain solve is already close (rotation %g, ATE %g): the test does not test rejection", prot, pate)
			}
		}
	}
}

// TestRobustSchedule checks GNC's mu schedule on a graph with 10% wrong
// loop closures and no consistency stage: the first solve is unweighted
// (mu 0); the second uses mu_0 = c^2 / (2 max r_e^2 - c^2), which leaves
// every weight positive and some fractional; each later one 1.4 times the
// one before (the default MuStep), until MaxIterations updates stop the
// run, not converged; the certified solve of the last weights follows.
func TestRobustSchedule(t *testing.T) {
	_, bad, _, _, _ := robustCase{2, 0.1}.graphs(t)
	res, err := SolveRobust(context.Background(), bad, Options{}, RobustOptions{NoConsistency: true, MaxIterations: 3})
	if err != nil {
		t.Fatal(err)
	}
	rr := res.Robust
	its := rr.Iterations
	if len(its) != 5 || rr.Stop != "iterations" || rr.Converged || its[4].Stage != StageCertify {
		t.Fatalf("%d solves, stop %q; want 4 GNC solves, a certified one and iterations", len(its), rr.Stop)
	}
	if !strings.Contains(rr.Describe(), "not converged") {
		t.Errorf("%q does not say GNC stopped early", rr.Describe())
	}
	// The last weights' solve may certify their optimum, but the weights
	// did not settle: the run is not certified (review D2).
	if res.Status != RobustUnsettled || res.Certified || its[4].Status != string(Certified) {
		t.Errorf("status %q (certified %v), the final solve's %q; want %q from a certified final solve", res.Status, res.Certified, its[4].Status, RobustUnsettled)
	}
	if its[0].Mu != 0 || its[0].Inliers != bad.M() {
		t.Errorf("first solve: mu %g, %d inliers of %d edges", its[0].Mu, its[0].Inliers, bad.M())
	}
	if its[1].Rejected != 0 || its[1].Fractional == 0 {
		t.Errorf("at mu_0 %g: %d rejected, %d fractional; want none and some", its[1].Mu, its[1].Rejected, its[1].Fractional)
	}
	for k := 2; k < 4; k++ {
		if want := 1.4 * its[k-1].Mu; math.Abs(its[k].Mu-want) > 1e-12*want {
			t.Errorf("solve %d: mu %g, want %g", k, its[k].Mu, want)
		}
	}
}

// TestRobustRotationsUntrustedOdometry runs the rotation-only problem with
// odometry checked like every other edge: the threshold then has
// d(d-1)/2 degrees of freedom. A random outlier's rotation alone can agree
// with the truth to within the noise (in 2-D with kappa = 200 and
// c^2 = 10.8, about one in twenty lands within 0.16 rad): such an edge is
// no outlier of the rotation problem: the estimate moves a little to fit it
// as it would for a noisy inlier (one of those in 2-D has a term of 11.5 at
// the clean optimum, just above c^2, and within it at the robust one). So
// the test asks that every outlier whose term at the clean graph's optimum
// exceeds 2 c^2 is rejected, that at least 99% of the inliers stay, and
// that the rotations are within three noise standard deviations
// 3/sqrt(2 kappa) of the clean optimum (in 3-D, where no outlier is
// consistent, they agree to 3e-8).
func TestRobustRotationsUntrustedOdometry(t *testing.T) {
	for _, d := range []int{2, 3} {
		clean, bad, mask, kappa, _ := robustCase{d, 0.1}.graphs(t)
		opts := Options{Problem: posegraph.Rotations}
		ref, err := Solve(context.Background(), clean, opts)
		if err != nil || !ref.Certified {
			t.Fatalf("d=%d: clean solve: %v %+v", d, err, ref)
		}
		res, err := SolveRobust(context.Background(), bad, opts, RobustOptions{CheckOdometry: true})
		if err != nil {
			t.Fatal(err)
		}
		rr := res.Robust
		if rr.DOF != d*(d-1)/2 || !rr.Converged || !res.Certified {
			t.Fatalf("d=%d: dof %d, stop %q, status %q", d, rr.DOF, rr.Stop, res.Status)
		}
		for k := range rr.Trusted {
			if rr.Trusted[k] {
				t.Fatalf("d=%d: edge %d trusted with CheckOdometry", d, k)
			}
		}
		atRef := bad.EdgeCosts(nil, ref.Poses, posegraph.Rotations)
		lost, inliers, consistent := 0, 0, 0
		for k, w := range rr.Weights {
			if mask[k] && w != 0 {
				if atRef[k] > 2*rr.Threshold {
					t.Errorf("d=%d: outlier %d (term %g at the clean optimum, c^2 %g) has weight %g", d, k, atRef[k], rr.Threshold, w)
				}
				consistent++
			}
			if !mask[k] {
				inliers++
				if w == 0 {
					lost++
				}
			}
		}
		if float64(lost) > 0.01*float64(inliers) {
			t.Errorf("d=%d: %d of %d inliers rejected", d, lost, inliers)
		}
		rot, _ := trajectoryError(d, ref.Poses, res.Poses)
		t.Logf("d=%d: %d outliers kept as consistent, %d of %d inliers rejected, max rotation error %.2e", d, consistent, lost, inliers, rot)
		if rot > 3/math.Sqrt(2*kappa) {
			t.Errorf("d=%d: max rotation error %g against the clean optimum (noise %g)", d, rot, 1/math.Sqrt(2*kappa))
		}
	}
}

// TestWeightedGraph checks the weighted graph by hand on a 4-pose chain
// 0-1-2-3 with a closure 0-2: weights scale kappa, tau and the recorded
// information matrix; a zero-weight closure is left out; a zero-weight
// chain edge that alone joins pose 3 is kept at weight 1 and reported.
func TestWeightedGraph(t *testing.T) {
	id := posegraph.Identity(2)
	e := func(i, j int) posegraph.Edge {
		return posegraph.Edge{I: i, J: j, R: id.R, Kappa: 10, Tau: 4, Info: []float64{4, 0, 0, 4, 0, 10}}
	}
	g := &posegraph.Graph{D: 2, IDs: []int{0, 1, 2, 3}, Edges: []posegraph.Edge{e(0, 1), e(1, 2), e(2, 3), e(0, 2)}}
	wg, kept, bridged := weightedGraph(g, []float64{1, 0.5, 0, 0})
	if fmt.Sprint(kept) != "[0 1 2]" || fmt.Sprint(bridged) != "[2]" {
		t.Fatalf("kept %v bridged %v, want [0 1 2] and [2]", kept, bridged)
	}
	if h := wg.Edges[1]; h.Kappa != 5 || h.Tau != 2 || fmt.Sprint(h.Info) != "[2 0 0 2 0 5]" {
		t.Errorf("half-weight edge: kappa %g tau %g info %v", h.Kappa, h.Tau, h.Info)
	}
	if h := wg.Edges[2]; h.Kappa != 10 || h.Tau != 4 {
		t.Errorf("bridge: kappa %g tau %g, want its full weight", h.Kappa, h.Tau)
	}
	if fmt.Sprint(g.Edges[1].Info) != "[4 0 0 4 0 10]" || g.Edges[1].Kappa != 10 {
		t.Errorf("the input graph changed: %+v", g.Edges[1])
	}
	if err := wg.Validate(); err != nil {
		t.Error(err)
	}
}

// TestWarmStart: a solve started from a certified optimum (Options.
// InitialPoses) returns the same optimum; a warm start of the wrong length
// or with a non-finite entry is an error, not a panic.
func TestWarmStart(t *testing.T) {
	g, _, _, _, _ := robustCase{3, 0}.graphs(t)
	ref, err := Solve(context.Background(), g, Options{})
	if err != nil || !ref.Certified {
		t.Fatalf("%v %+v", err, ref)
	}
	res, err := Solve(context.Background(), g, Options{InitialPoses: ref.Poses})
	if err != nil || !res.Certified {
		t.Fatalf("%v %+v", err, res)
	}
	if math.Abs(res.InitialObjective-ref.Objective) > 1e-9*ref.Objective || math.Abs(res.Objective-ref.Objective) > 1e-9*ref.Objective {
		t.Errorf("warm start: initial F %g, final %g, want the optimum %g", res.InitialObjective, res.Objective, ref.Objective)
	}
	if _, err := Solve(context.Background(), g, Options{InitialPoses: ref.Poses[1:]}); err == nil || !strings.Contains(err.Error(), "initial poses") {
		t.Errorf("short warm start: %v", err)
	}
	bad := append([]posegraph.Pose(nil), ref.Poses...)
	bad[3].T[1] = math.NaN()
	if _, err := Solve(context.Background(), g, Options{InitialPoses: bad}); err == nil || !strings.Contains(err.Error(), "not finite") {
		t.Errorf("NaN warm start: %v", err)
	}
}

// TestRobustTimeLimit: a time limit ends the loop with an answer and an
// honest status, not an error.
func TestRobustTimeLimit(t *testing.T) {
	_, bad, _, _, _ := robustCase{2, 0.1}.graphs(t)
	res, err := SolveRobust(context.Background(), bad, Options{TimeLimit: time.Millisecond}, RobustOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rr := res.Robust
	if rr.Converged || rr.Stop != "time limit" || res.Certified || !strings.Contains(rr.Describe(), "not converged, stopped by time limit") {
		t.Errorf("stop %q, status %q (%s), certified %v", rr.Stop, res.Status, rr.Describe(), res.Certified)
	}
	if len(res.Poses) != bad.N() {
		t.Errorf("%d poses for %d", len(res.Poses), bad.N())
	}
}

// TestRobustReport: the report's robust section survives a JSON round trip
// and names each rejected edge by its file ids and source line (the graph
// goes through a g2o file so its edges have lines).
func TestRobustReport(t *testing.T) {
	_, bad, mask, _, _ := robustCase{2, 0.05}.graphs(t)
	var buf bytes.Buffer
	if err := g2o.Write(&buf, bad, nil); err != nil {
		t.Fatal(err)
	}
	text := strings.Split(buf.String(), "\n")
	g, err := g2o.Read(strings.NewReader(buf.String()), "bad.g2o", g2o.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := SolveRobust(context.Background(), g, Options{}, RobustOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var js bytes.Buffer
	if err := NewReport("bad.g2o", res).WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	rep, err := ReadReport(&js)
	if err != nil {
		t.Fatal(err)
	}
	rr := rep.Robust
	if rr == nil || !rr.Converged || rr.InputEdges != g.M() || len(rr.Edges) != g.M() || rr.Inliers+len(rr.Rejected) != g.M() {
		t.Fatalf("robust section %+v", rr)
	}
	if rep.M != rr.Inliers || !rep.Certified || !rr.TrustOdometry || rr.DOF != 3 || rr.Quantile != DefaultRobustQuantile {
		t.Errorf("m %d, inliers %d, certified %v, trust %v, dof %d, quantile %g", rep.M, rr.Inliers, rep.Certified, rr.TrustOdometry, rr.DOF, rr.Quantile)
	}
	outliers := 0
	for _, m := range mask {
		if m {
			outliers++
		}
	}
	if len(rr.Rejected) != outliers {
		t.Errorf("%d rejected, %d outliers", len(rr.Rejected), outliers)
	}
	for _, e := range rr.Rejected {
		if !mask[e.Edge] || e.Weight != 0 || e.Residual <= rr.Threshold {
			t.Errorf("rejected %+v: outlier %v, threshold %g", e, mask[e.Edge], rr.Threshold)
		}
		want := fmt.Sprintf("EDGE_SE2 %d %d ", e.From, e.To)
		if e.Line < 1 || e.Line > len(text) || !strings.HasPrefix(text[e.Line-1], want) {
			t.Errorf("rejected %+v: line %d does not start with %q", e, e.Line, want)
		}
	}
}

// TestRobustTimeLimitGNCOnly: a time limit that ends the run inside GNC's
// first local solve still gives an answer with an honest status.
func TestRobustTimeLimitGNCOnly(t *testing.T) {
	_, bad, _, _, _ := robustCase{2, 0.1}.graphs(t)
	res, err := SolveRobust(context.Background(), bad, Options{TimeLimit: time.Nanosecond}, RobustOptions{NoConsistency: true})
	if err != nil {
		t.Fatal(err)
	}
	if rr := res.Robust; rr.Converged || rr.Stop != "time limit" || res.Certified || len(res.Poses) != bad.N() {
		t.Errorf("stop %q, status %q, certified %v, %d poses", rr.Stop, res.Status, res.Certified, len(res.Poses))
	}
}
