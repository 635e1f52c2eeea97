package sync

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/posegraph"
)

// aliasingCase is a datasets.Geometric graph with groups of mutually
// consistent wrong loop closures (datasets.AddAliasing), measured from the
// truth like its own edges.
func aliasingCase(t testing.TB, d int) (clean, bad *posegraph.Graph, mask []bool) {
	radius := 2.5
	if d == 3 {
		radius = 2.2
	}
	g, truth, err := datasets.Geometric(d, 220, radius, datasets.Config{Kappa: 200, Tau: 100, LoopProb: 0.3, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	bad, mask, err = datasets.AddAliasing(g, truth, datasets.AliasingConfig{Groups: 8, Size: 5, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	return g, bad, mask
}

// robustOutcome counts a robust solve's verdicts against the ground truth
// mask, judged at the clean graph's optimum ref: wrong closures whose term
// there exceeds c^2 (the outliers TLS can see) and how many of them were
// kept, wrong ones within c^2 (consistent by chance, counted apart), and
// the true loop closures (not odometry) and how many were lost.
type robustOutcome struct {
	wrong, inside, missed int
	closures, lost        int
}

func outcome(g *posegraph.Graph, rr *RobustResult, mask []bool, ref []posegraph.Pose, prob posegraph.Problem) robustOutcome {
	var o robustOutcome
	at := g.EdgeCosts(nil, ref, prob)
	for k, w := range rr.Weights {
		switch {
		case mask[k] && at[k] <= rr.Thresholds[k]:
			o.inside++
		case mask[k]:
			o.wrong++
			if w != 0 {
				o.missed++
			}
		case !isOdometry(g, &g.Edges[k]):
			o.closures++
			if w == 0 {
				o.lost++
			}
		}
	}
	return o
}

// solveRobust runs the robust mode on g and asserts that it converged,
// certified and passes checkTLS.
func solveRobust(t *testing.T, g *posegraph.Graph, opts Options) *Result {
	t.Helper()
	res, err := SolveRobust(context.Background(), g, opts, RobustOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rr := res.Robust; !rr.Converged || !res.Certified {
		t.Fatalf("status %q, stop %q", res.Status, rr.Stop)
	}
	checkTLS(t, res)
	return res
}

// checkTLS asserts what the run's last stage checked, at the returned
// estimate: every kept edge but the trusted odometry and the bridges is
// within its c^2, every rejected edge above it, and each rejected edge
// names the stage that rejected it.
func checkTLS(t *testing.T, res *Result) {
	t.Helper()
	rr := res.Robust
	r2 := rr.Input.EdgeCosts(nil, res.Poses, res.Problem)
	bridged := map[int]bool{}
	for _, k := range rr.Bridged {
		bridged[k] = true
	}
	for k, w := range rr.Weights {
		if rr.Trusted[k] || bridged[k] {
			continue
		}
		if w == 1 && r2[k] > rr.Thresholds[k]*(1+1e-9) || w == 0 && r2[k] <= rr.Thresholds[k] {
			t.Errorf("edge %d: weight %g with term %g, c^2 %g", k, w, r2[k], rr.Thresholds[k])
		}
		if w == 0 && rr.Stages[k] != StageConsistency && rr.Stages[k] != StageGNC {
			t.Errorf("edge %d rejected by stage %q", k, rr.Stages[k])
		}
	}
}

// TestRobustAliasing: 8 groups of 5 wrong closures that agree with each
// other and with the odometry inside the stretches they join, in 2-D and
// 3-D. At least 95% of the wrong closures TLS can see are rejected, at
// most 1% of the true loop closures lost, the run converges and certifies,
// and the estimate is within the noise of the clean graph's optimum. Pure
// GNC (no consistency stage), for contrast, is not asked to succeed.
func TestRobustAliasing(t *testing.T) {
	for _, d := range []int{2, 3} {
		t.Run(fmt.Sprintf("d=%d", d), func(t *testing.T) {
			clean, bad, mask := aliasingCase(t, d)
			ref, err := Solve(context.Background(), clean, Options{})
			if err != nil || !ref.Certified {
				t.Fatalf("clean solve: %v %v", err, ref.Status)
			}
			res := solveRobust(t, bad, Options{})
			rr := res.Robust
			o := outcome(bad, rr, mask, ref.Poses, posegraph.Poses)
			rot, ate := trajectoryError(d, ref.Poses, res.Poses)
			t.Logf("%d wrong closures visible to TLS (%d within c^2), %d kept; %d of %d true closures lost; rotation %.2g rad, ATE %.2g; consistency %+v",
				o.wrong, o.inside, o.missed, o.lost, o.closures, rot, ate, rr.Consistency)
			if float64(o.missed) > 0.05*float64(o.wrong) || float64(o.lost) > 0.01*float64(o.closures) {
				t.Errorf("%d of %d wrong closures kept, %d of %d true ones lost", o.missed, o.wrong, o.lost, o.closures)
			}
			if rot > 1/math.Sqrt(2*200) || ate > 1/math.Sqrt(100) {
				t.Errorf("rotation %g rad, ATE %g against the clean optimum", rot, ate)
			}
			plain, err := Solve(context.Background(), bad, Options{MaxRank: d + 2})
			if err != nil {
				t.Fatal(err)
			}
			if prot, pate := trajectoryError(d, ref.Poses, plain.Poses); prot < 10/math.Sqrt(2*200) && pate < 10/math.Sqrt(100) {
				t.Errorf("the plain solve is already close (rotation %g, ATE %g): the test does not test rejection", prot, pate)
			}
		})
	}
}

// TestRobustRotations holds the rotation-only problem (rotation averaging)
// to the same rejection targets, in 2-D and 3-D, with trusted odometry so
// that the consistency stage runs on rotation cycles: random wrong closures
// (10%) and aliasing groups. A random rotation can agree with the truth to
// within c^2 (1 or 3 degrees of freedom): those are counted apart.
func TestRobustRotations(t *testing.T) {
	for _, d := range []int{2, 3} {
		for _, kind := range []string{"random", "aliasing"} {
			t.Run(fmt.Sprintf("d=%d/%s", d, kind), func(t *testing.T) {
				var clean, bad *posegraph.Graph
				var mask []bool
				if kind == "random" {
					clean, bad, mask, _, _ = robustCase{d, 0.1}.graphs(t)
				} else {
					clean, bad, mask = aliasingCase(t, d)
				}
				opts := Options{Problem: posegraph.Rotations}
				ref, err := Solve(context.Background(), clean, opts)
				if err != nil || !ref.Certified {
					t.Fatalf("clean solve: %v %v", err, ref.Status)
				}
				res := solveRobust(t, bad, opts)
				rr := res.Robust
				if rr.DOF != d*(d-1)/2 {
					t.Errorf("dof %d", rr.DOF)
				}
				o := outcome(bad, rr, mask, ref.Poses, posegraph.Rotations)
				rot, _ := trajectoryError(d, ref.Poses, res.Poses)
				t.Logf("%d wrong closures visible to TLS (%d within c^2), %d kept; %d of %d true closures lost; rotation %.2g rad",
					o.wrong, o.inside, o.missed, o.lost, o.closures, rot)
				if float64(o.missed) > 0.05*float64(o.wrong) || float64(o.lost) > 0.01*float64(o.closures) {
					t.Errorf("%d of %d wrong closures kept, %d of %d true ones lost", o.missed, o.wrong, o.lost, o.closures)
				}
				if rot > 3/math.Sqrt(2*200) {
					t.Errorf("rotation error %g rad against the clean optimum", rot)
				}
			})
		}
	}
}

// TestRobustCheckPutsBack: the consistency stage judges cycles with the
// noise scale it measures, so a true closure it sets aside comes back when
// the TLS check finds it within c^2. The graph's measurements are a
// hundred times more precise (in variance) than its weights claim, as in
// real files, and one true closure carries an extra error: its term at the
// optimum is within c^2, its cycle's norm beyond ten times the scaled gate.
// The stage sets it aside; the check puts it back, nothing is rejected, and
// the estimate is the plain optimum.
func TestRobustCheckPutsBack(t *testing.T) {
	g, _, err := datasets.Geometric(2, 150, 2.5, datasets.Config{Kappa: 20000, Tau: 10000, LoopProb: 0.3, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	for k := range g.Edges {
		g.Edges[k].Kappa, g.Edges[k].Tau = 200, 100
	}
	// The closure with the shortest cycle gets a translation error of
	// 0.3 along x: a term of at most tau 0.3^2 = 9 < c^2 = 16.3.
	pick := -1
	for k, e := range g.Edges {
		if !isOdometry(g, &e) && (pick < 0 || absInt(e.J-e.I) < absInt(g.Edges[pick].J-g.Edges[pick].I)) {
			pick = k
		}
	}
	g.Edges[pick].T[0] += 0.3
	res, err := SolveRobust(context.Background(), g, Options{}, RobustOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rr := res.Robust
	checkTLS(t, res)
	t.Logf("consistency %+v; %d rejected, %d checks, term of the closure %.3g (c^2 %.3g)", rr.Consistency, len(rr.Rejected), rr.Checks, rr.Residuals[pick], rr.Threshold)
	if rr.Consistency.Rejected == 0 || rr.Checks < 2 {
		t.Fatalf("the stage set aside %d closures, %d checks: the test does not test the check", rr.Consistency.Rejected, rr.Checks)
	}
	if !rr.Converged || !res.Certified || len(rr.Rejected) != 0 || rr.Weights[pick] != 1 {
		t.Errorf("stop %q, status %q, %d rejected, the closure's weight %g", rr.Stop, res.Status, len(rr.Rejected), rr.Weights[pick])
	}
	plain, err := Solve(context.Background(), g, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(res.Objective-plain.Objective) > 1e-7*plain.Objective {
		t.Errorf("F %.12g, the plain optimum %.12g", res.Objective, plain.Objective)
	}
}

func absInt(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
