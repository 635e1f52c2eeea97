package sync

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/posegraph"
)

// landmarkCase is `bcmsync generate manhattan -n 400 --landmarks 40` (the
// command's default noise and range) in memory: a 2-D graph whose landmark
// observations outnumber its pose edges.
func landmarkCase(t testing.TB) (*posegraph.Graph, []posegraph.Pose) {
	g, truth, err := datasets.Manhattan(400, 20, datasets.Config{Kappa: 500, Tau: 400, LoopProb: 1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	g, truth, err = datasets.AddLandmarks(g, truth, datasets.LandmarkConfig{N: 40, Range: 3, Tau: 400, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	return g, truth
}

// chanceRejections is how many of m inlier terms a threshold at chi-squared
// probability p may cut without the test calling it a defect: the binomial
// mean m (1 - p) plus four standard deviations, plus one. At the optimum the
// terms are smaller than at the truth, so the true count is below the mean.
func chanceRejections(m int, p float64) int {
	mean := float64(m) * (1 - p)
	return int(mean+4*math.Sqrt(mean)) + 1
}

// TestRobustLandmarksClean is the regression test of the robust mode that
// kept 40 of 1,065 landmark observations and called the result certified:
// on a clean graph with landmarks, an observation is an edge like any other
// (its own chi-squared dimension, d), so robust mode keeps all of them but
// what the quantile predicts, and certifies the plain optimum.
func TestRobustLandmarksClean(t *testing.T) {
	g, _ := landmarkCase(t)
	obs := 0
	for k := range g.Edges {
		if g.IsObservation(&g.Edges[k]) {
			obs++
		}
	}
	plain, err := Solve(context.Background(), g, Options{})
	if err != nil || !plain.Certified {
		t.Fatalf("plain solve: %v %v", err, plain.Status)
	}
	res := solveRobust(t, g, Options{})
	rr := res.Robust
	lostObs, lostEdges := 0, 0
	for _, k := range rr.Rejected {
		if g.IsObservation(&g.Edges[k]) {
			lostObs++
		} else {
			lostEdges++
		}
	}
	if rr.ObservationDOF != 2 {
		t.Errorf("observation dof %d, want 2", rr.ObservationDOF)
	}
	t.Logf("%d observations, %d pose edges; rejected %d observations and %d pose edges; F %.10g (plain %.10g)",
		obs, g.M()-obs, lostObs, lostEdges, res.Objective, plain.Objective)
	if lostObs > chanceRejections(obs, rr.Quantile) || lostEdges > chanceRejections(g.M()-obs, rr.Quantile) {
		t.Errorf("rejected %d of %d observations and %d of %d pose edges: more than chance (quantile %g)",
			lostObs, obs, lostEdges, g.M()-obs, rr.Quantile)
	}
	if got := res.Graph.M(); got != g.M()-len(rr.Rejected) {
		t.Errorf("the certified graph has %d edges, want %d - %d", got, g.M(), len(rr.Rejected))
	}
	if len(rr.Rejected) == 0 {
		if math.Abs(res.Objective-plain.Objective) > 1e-7*plain.Objective {
			t.Errorf("F %.12g, the plain optimum %.12g", res.Objective, plain.Objective)
		}
		if _, ate := trajectoryError(2, plain.Poses, res.Poses); ate > 1e-6 {
			t.Errorf("ATE %g against the plain optimum", ate)
		}
	}
}

// TestRobustLandmarksWrongObservations: observations of the wrong place (a
// landmark matched to another feature) are outliers like wrong loop
// closures. A tenth of the observations are moved to random positions
// within 5 m in their pose's frame. The reference is the optimum of the
// graph without them (the inlier graph): every wrong observation whose
// term there exceeds the threshold is rejected, no more than 1% of the
// true observations are lost, and the estimate is within the noise of the
// reference.
func TestRobustLandmarksWrongObservations(t *testing.T) {
	g, _ := landmarkCase(t)
	bad := *g
	bad.Edges = append([]posegraph.Edge(nil), g.Edges...)
	wrong := make([]bool, g.M())
	rng := rand.New(rand.NewPCG(5, 6))
	nobs := 0
	for k := range bad.Edges {
		e := &bad.Edges[k]
		if !g.IsObservation(e) {
			continue
		}
		nobs++
		if rng.Float64() < 0.1 {
			wrong[k] = true
			for a := 0; a < 2; a++ {
				e.T[a] = 5 * (2*rng.Float64() - 1)
			}
		}
	}
	clean := *g
	clean.Edges = nil
	for k, e := range g.Edges {
		if !wrong[k] {
			clean.Edges = append(clean.Edges, e)
		}
	}
	ref, err := Solve(context.Background(), &clean, Options{})
	if err != nil || !ref.Certified {
		t.Fatalf("inlier graph: %v %v", err, ref.Status)
	}
	res := solveRobust(t, &bad, Options{})
	rr := res.Robust
	atRef := bad.EdgeCosts(nil, ref.Poses, posegraph.Poses)
	nwrong, inside, lost := 0, 0, 0
	for k, w := range rr.Weights {
		switch {
		case wrong[k]:
			nwrong++
			if atRef[k] <= rr.ObservationThreshold {
				inside++ // consistent by chance: no outlier of TLS
			} else if w != 0 {
				t.Errorf("wrong observation %d (term %.3g at the reference) kept with weight %g", k, atRef[k], w)
			}
		case g.IsObservation(&g.Edges[k]) && w == 0:
			lost++
		}
	}
	_, ate := trajectoryError(2, ref.Poses, res.Poses)
	t.Logf("%d wrong observations of %d (%d within c^2 at the reference), %d true ones rejected; ATE %.2g", nwrong, nobs, inside, lost, ate)
	if float64(lost) > 0.01*float64(nobs-nwrong) {
		t.Errorf("%d of %d true observations rejected", lost, nobs-nwrong)
	}
	if ate > 1/math.Sqrt(400) {
		t.Errorf("ATE %g against the reference (noise %g)", ate, 1/math.Sqrt(400))
	}
}
