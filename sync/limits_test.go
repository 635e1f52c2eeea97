package sync

import (
	"context"
	"io"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/bcmsync/bcmsync/posegraph"
)

// stageNames lists a result's stages by name and rank.
func stageNames(res *Result) []Stage {
	out := make([]Stage, len(res.Stages))
	for k, s := range res.Stages {
		out[k] = Stage{Name: s.Name, Rank: s.Rank}
	}
	return out
}

// No stage starts after the time limit, checked from the stage records:
// the limit is set to each stage's start in an unlimited run (and between
// them), so that it passes before, during and after every kind of stage
// (initialization, BCM, trust region, certificate, escape, rounding,
// refinement, the estimate's own certificate). Every recorded start lies
// within the limit; a run whose stages differ from the unlimited run's
// says TimeLimit unless its proof certifies what it returns; and whatever
// was cut, the estimate is returned: n poses, a finite F, and a bound only
// where one was proven. A limit that passes
// before the initialization returns the file's own poses.
func TestNoStageAfterDeadline(t *testing.T) {
	tight, _ := noisyGraph(3, 120, 40, 0.05, 0.05, 3)
	cut := 0
	for _, g := range []*posegraph.Graph{notTightGraph(t), tight} {
		full, err := Solve(context.Background(), g, Options{Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		want := stageNames(full)
		var limits []time.Duration
		for k, s := range full.Stages {
			at := time.Duration(s.Start * float64(time.Second))
			limits = append(limits, at, at+time.Duration(s.Seconds*float64(time.Second))/2)
			if k == 0 {
				limits = append(limits, time.Nanosecond)
			}
		}
		for _, limit := range limits {
			res, err := Solve(context.Background(), g, Options{Seed: 1, TimeLimit: limit})
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range res.Stages {
				if s.Start > limit.Seconds() {
					t.Errorf("limit %v: stage %s at rank %d started at %.6fs", limit, s.Name, s.Rank, s.Start)
				}
			}
			if !slices.Equal(stageNames(res), want) {
				// Cut short: stopped by the limit, unless what was proven
				// before it already certifies the estimate returned (the
				// rounding skipped, say, with the level's proof in hand).
				cut++
				if res.Status != TimeLimit && !res.Certified {
					t.Errorf("limit %v: stages %v (unlimited: %v) but status %q", limit, stageNames(res), want, res.Status)
				}
			}
			if len(res.Poses) != g.N() || math.IsNaN(res.Objective) || math.IsInf(res.Objective, 0) ||
				res.Objective != g.Cost(res.Poses, posegraph.Poses) {
				t.Fatalf("limit %v: %d poses, F %g", limit, len(res.Poses), res.Objective)
			}
			if res.HasBound && !(res.DualBound <= res.Objective*(1+1e-12)) {
				t.Errorf("limit %v: bound %g above F %g", limit, res.DualBound, res.Objective)
			}
			if res.Certified && !(res.SuboptimalityBound <= res.GapAllowed) {
				t.Errorf("limit %v: certified with bound %g above the allowance %g", limit, res.SuboptimalityBound, res.GapAllowed)
			}
			if err := NewReport("g", res).WriteJSON(io.Discard); err != nil {
				t.Errorf("limit %v: the report does not encode: %v", limit, err)
			}
		}
	}
	if cut == 0 {
		t.Error("no limit cut a solve short: the test checked nothing")
	}

	// Before the initialization: the file's own poses, no bound.
	g := notTightGraph(t)
	res, err := Solve(context.Background(), g, Options{TimeLimit: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != TimeLimit || len(res.Stages) != 0 || res.HasBound || !slices.Equal(res.Poses, g.Initial) {
		t.Errorf("1ns: status %q, %d stages, bound %v, poses the file's %v", res.Status, len(res.Stages), res.HasBound, slices.Equal(res.Poses, g.Initial))
	}
}

// The trust region's iteration cap is reported as itself: a level that
// reaches Options.MaxIterations before converging ends the solve with
// IterationLimit (not TimeLimit, as it was), its rtr_stop says
// "iterations", and the cap does not apply where it is not reached.
func TestIterationLimitReported(t *testing.T) {
	g, _ := noisyGraph(2, 60, 20, 0.05, 0.05, 5)
	res, err := Solve(context.Background(), g, Options{Init: InitRandom, Seed: 3, MaxIterations: 2})
	if err != nil {
		t.Fatal(err)
	}
	last := res.Levels[len(res.Levels)-1]
	if res.Status != IterationLimit || last.RTRStop != "iterations" || last.RTRIterations != 2 || res.Certified {
		t.Errorf("MaxIterations 2: status %q, last level stopped by %q after %d steps", res.Status, last.RTRStop, last.RTRIterations)
	}
	if rep := NewReport("g", res); rep.Options.MaxIterations != 2 || rep.Status != string(IterationLimit) {
		t.Errorf("report: max_iterations %d, status %q", rep.Options.MaxIterations, rep.Status)
	}
	res, err = Solve(context.Background(), g, Options{Init: InitRandom, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Certified {
		t.Errorf("default cap: %s", res.Status)
	}
	if _, err := Solve(context.Background(), g, Options{MaxIterations: -1}); err == nil {
		t.Error("MaxIterations -1: no error")
	}
}

// A level whose certificate holds but whose bound misses the allowance
// goes on from the same point at a hundredth of the gradient tolerance:
// from a loose GradTol the proof is refined until it meets the allowance,
// and the level records its refinements, their steps and a certificate
// stage each.
func TestProofRefinedToAllowance(t *testing.T) {
	refined := 0
	for _, d := range []int{2, 3} {
		g, _ := noisyGraph(d, 200, 60, 0.05, 0.05, 7)
		for _, tol := range []float64{1e-2, 1e-3} {
			res, err := Solve(context.Background(), g, Options{GradTol: tol})
			if err != nil {
				t.Fatal(err)
			}
			lv := res.Levels[len(res.Levels)-1]
			certs := 0
			for _, s := range res.Stages {
				if s.Name == "certificate" && s.Rank == lv.Rank {
					certs++
				}
			}
			refined += lv.ProofRefinements
			if !res.Certified || certs > lv.ProofRefinements+1 || lv.RelGrad > tol*math.Pow(1e-2, float64(lv.ProofRefinements)) {
				t.Errorf("d=%d tol %g: %s with bound %g (allowed %g) after %d refinements, %d certificates, relative gradient %g",
					d, tol, res.Status, res.SuboptimalityBound, res.GapAllowed, lv.ProofRefinements, certs, lv.RelGrad)
			}
		}
	}
	if refined == 0 {
		t.Error("no level refined its proof: the test checked nothing")
	}
}

// The robust mode takes the trust region's iteration cap in its stride:
// the cap bounds the certified solves (GNC's local solves have budgets of
// their own, RobustOptions), and the result's status is the final
// certified solve's, honest either way: certified with its proof, or the
// iteration limit. The consistency stage is off so that GNC runs.
func TestRobustIterationLimit(t *testing.T) {
	_, bad, _, _, _ := robustCase{2, 0.1}.graphs(t)
	res, err := SolveRobust(context.Background(), bad, Options{MaxIterations: 1}, RobustOptions{NoConsistency: true})
	if err != nil {
		t.Fatal(err)
	}
	rr := res.Robust
	if rr == nil || len(rr.Iterations) < 2 || rr.Iterations[0].Stage != StageGNC {
		t.Fatalf("robust account: %d solves, stop %q", len(rr.Iterations), rr.Stop)
	}
	if res.Certified != (res.Status == Certified) || res.Certified && !(res.SuboptimalityBound <= res.GapAllowed) ||
		!res.Certified && res.Status != IterationLimit {
		t.Errorf("status %q, certified %v, bound %g, allowed %g (%s)", res.Status, res.Certified, res.SuboptimalityBound, res.GapAllowed, rr.Describe())
	}
}
