package sync

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/g2o"
	"github.com/bcmsync/bcmsync/posegraph"
)

// saddle is a rotation graph with heavy noise whose random start at rank d
// ends at a saddle (see TestStaircaseEscapesSaddle).
type saddle struct {
	d    int
	seed uint64
}

// saddleInstances were found by searching seeds; they are fixed so the
// tests are deterministic.
func saddleInstances() []saddle { return []saddle{{2, 4}, {3, 1}} }

func (c saddle) graph() *posegraph.Graph {
	g, _ := noisyGraph(c.d, 12, 14, 1.0, 0.3, c.seed)
	return g
}

func (c saddle) options() Options {
	return Options{Problem: posegraph.Rotations, Init: InitRandom, Seed: c.seed, MaxRank: 6}
}

// With heavy rotation noise and a random start at rank d, the first level
// ends at a critical point that is not a global minimum: the certificate
// fails, the staircase escapes along the negative eigenvector to rank d+1
// and beyond, and certifies there.
func TestStaircaseEscapesSaddle(t *testing.T) {
	for _, c := range saddleInstances() {
		g := c.graph()
		res, err := Solve(context.Background(), g, c.options())
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Levels) < 2 {
			t.Fatalf("d=%d: the staircase did not climb (levels %+v)", c.d, res.Levels)
		}
		first := res.Levels[0]
		if first.Certified || first.MinEigenvalue >= -res.Eta || first.EscapeDecrease <= 0 {
			t.Errorf("d=%d: first level should fail the certificate and escape: %+v", c.d, first)
		}
		for k := 1; k < len(res.Levels); k++ {
			prev, cur := res.Levels[k-1], res.Levels[k]
			if cur.Rank != prev.Rank+1 {
				t.Errorf("d=%d: rank went %d -> %d", c.d, prev.Rank, cur.Rank)
			}
			// The escape decreases F and the next level does not undo it.
			if cur.F > prev.F-prev.EscapeDecrease*(1-1e-9) {
				t.Errorf("d=%d: level %d ends at F=%g, above level %d's %g minus its escape %g", c.d, k, cur.F, k-1, prev.F, prev.EscapeDecrease)
			}
		}
		last := res.Levels[len(res.Levels)-1]
		if !last.Certified || !res.Certified || res.Rank <= c.d {
			t.Fatalf("d=%d: want a certificate above rank d, got status %q at rank %d", c.d, res.Status, res.Rank)
		}
		if res.MinEigenvalue < -res.Eta || res.SuboptimalityBound < 0 || res.SuboptimalityBound > res.GapAllowed {
			t.Errorf("d=%d: final min eigenvalue %g (eta %g), suboptimality bound %g (allowed %g)", c.d, res.MinEigenvalue, res.Eta, res.SuboptimalityBound, res.GapAllowed)
		}
		// The certified optimum is no worse than any other start finds.
		other, err := Solve(context.Background(), g, Options{Problem: posegraph.Rotations, Seed: 99, MaxRank: 6})
		if err != nil {
			t.Fatal(err)
		}
		if other.Objective < res.Objective*(1-1e-9) {
			t.Errorf("d=%d: a chordal start found F=%g below the certified %g", c.d, other.Objective, res.Objective)
		}
	}
}

// When the relaxation's solution has rank > d, rounding is not tight: the
// status says so, and the bound F(rounded) - tr(Lambda) is positive and
// reported.
func TestRoundingNotTightIsReported(t *testing.T) {
	g, _ := noisyGraph(3, 12, 14, 1.0, 0.3, 2)
	res, err := Solve(context.Background(), g, Options{Problem: posegraph.Rotations, Init: InitRandom, Seed: 2, MaxRank: 6})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != CertifiedRelaxation || res.Certified {
		t.Fatalf("status %q, want %q", res.Status, CertifiedRelaxation)
	}
	if !(res.SuboptimalityBound > 0) || res.Objective < res.DualBound || res.RelaxationObjective > res.Objective {
		t.Errorf("bounds inconsistent: F(rounded)=%g relaxation=%g dual=%g gap=%g", res.Objective, res.RelaxationObjective, res.DualBound, res.SuboptimalityBound)
	}
}

// The trust-region records account for every step: per level their tCG
// iterations add up to the level's; a level's first step makes its
// preconditioner and a step after a rejected one keeps it; a rejected step
// leaves F; above rank d the split form factors H and S; and each step
// names a preconditioner and what it cost. The saddle instances climb from
// rank d, where the d = 3 Hessian factors with raised pivots, to the
// split form, where S does not factor at first and the full Hessian
// serves the rest of the rank (one factorization a step, none of Q).
func TestStepRecordsAddUp(t *testing.T) {
	raised, split, onQ := 0, 0, 0
	for _, c := range saddleInstances() {
		g := c.graph()
		res, err := Solve(context.Background(), g, c.options())
		if err != nil {
			t.Fatal(err)
		}
		for _, lv := range res.Levels {
			inner, steps := 0, 0
			var prev *Record
			for k := range res.History {
				h := &res.History[k]
				if h.Rank != lv.Rank {
					continue
				}
				if h.Phase == "rtr" {
					where := fmt.Sprintf("d=%d rank %d iter %d", c.d, lv.Rank, h.Iter)
					steps++
					inner += h.Inner
					if h.Inner < 1 {
						t.Errorf("%s: a step with %d inner iterations", where, h.Inner)
					}
					first := prev == nil || prev.Phase != "rtr"
					switch {
					case first && h.Factorizations < 1:
						t.Errorf("%s: the level's first step made no factor", where)
					case !first && !prev.Accepted && h.Factorizations != 0:
						t.Errorf("%s: %d factorizations after a rejected step, at the same point", where, h.Factorizations)
					}
					if !first && !h.Accepted && h.F != prev.F {
						t.Errorf("%s: rejected, but F %g -> %g", where, prev.F, h.F)
					}
					switch h.Precond {
					case "hessian":
						if h.Factorizations > 0 && !slices.Contains(shiftLadder, h.Shift) {
							t.Errorf("%s: shift %g is not on the ladder", where, h.Shift)
						}
					case "q":
						onQ++
						if h.Shift != 0 || h.Raised != 0 {
							t.Errorf("%s: Q's factor with shift %g and %d raised pivots", where, h.Shift, h.Raised)
						}
					default:
						t.Errorf("%s: preconditioner %q", where, h.Precond)
					}
					if h.Raised > 0 {
						raised++
					}
					if lv.Rank > c.d && h.Precond == "hessian" && h.Factorizations >= 2 {
						// The split form factors H and then S (or,
						// when S fails, switches to the full form).
						split++
					}
					if h.FactorSeconds < 0 || (h.Factorizations == 0) != (h.FactorSeconds == 0) {
						t.Errorf("%s: %d factorizations in %g s", where, h.Factorizations, h.FactorSeconds)
					}
				}
				prev = h
			}
			resumedFactors(t, fmt.Sprintf("d=%d", c.d), res.History, lv.Rank)
			if inner != lv.RTRInner || steps != lv.RTRIterations {
				t.Errorf("d=%d rank %d: records count %d steps and %d inner iterations, the level %d and %d", c.d, lv.Rank, steps, inner, lv.RTRIterations, lv.RTRInner)
			}
		}
	}
	if raised == 0 || split == 0 || onQ != 0 {
		t.Errorf("the instances should cover raised pivots (%d steps) and the split form's factors (%d), and never need Q's factor (%d steps)", raised, split, onQ)
	}
}

// resumedFactors checks the trust-region records of one rank against
// resumeFrom's rule: after an accepted step whose factor was shifted by
// resumeShift or more, or was made by the rule, is still shifted and
// landed below the factor it replaced, the next step refactors, at a shift
// no lower than one rung below that factor's. It returns how many such
// refactorizations it saw.
func resumedFactors(t *testing.T, name string, hist []Record, rank int) int {
	t.Helper()
	n := 0
	var prev *Record
	due, dueShift, lastRung := false, 0.0, -1
	for k := range hist {
		h := &hist[k]
		if h.Rank != rank {
			continue
		}
		if h.Phase != "rtr" {
			prev, due, lastRung = h, false, -1
			continue
		}
		first := prev == nil || prev.Phase != "rtr"
		resumed := !first && prev.Accepted && due
		if resumed {
			n++
			if h.Factorizations == 0 || h.Shift < dueShift {
				t.Errorf("%s rank %d iter %d: due from shift %g, %d factorizations at shift %g", name, rank, h.Iter, dueShift, h.Factorizations, h.Shift)
			}
		}
		if h.Factorizations > 0 && h.Precond == "hessian" {
			rung := slices.Index(shiftLadder, h.Shift)
			if rung < 0 {
				t.Fatalf("%s rank %d iter %d: shift %g is no rung of the ladder", name, rank, h.Iter, h.Shift)
			}
			from := resumeFrom(rung, resumed, lastRung)
			due, dueShift, lastRung = from >= 0, shiftLadder[max(from, 0)], rung
		}
		prev = h
	}
	return n
}

// TestResumeFrom checks the rule's table on the ladder 0, 1e-5, 1e-4,
// 1e-3, 1e-2: a fresh factor is refactored from one rung below its own
// when shifted by resumeShift (1e-4) or more; a resumed one when it is
// still shifted and below the factor it replaced, so the 10^6-pose grid's
// first factor at 1e-4 leads to a refactorization from 1e-5, one at 1e-5
// made so to one from 0, and a resumed factor that needed its
// predecessor's shift again (or more) ends the chain.
func TestResumeFrom(t *testing.T) {
	if len(shiftLadder) != 5 || resumeShift != shiftLadder[2] {
		t.Fatalf("the table below is for the ladder 0, 1e-5, 1e-4, 1e-3, 1e-2 and resumeShift 1e-4, not %v and %g", shiftLadder, resumeShift)
	}
	for rung, want := range []int{-1, -1, 1, 2, 3} {
		if got := resumeFrom(rung, false, -1); got != want {
			t.Errorf("fresh factor at rung %d (shift %g): from %d, want %d", rung, shiftLadder[rung], got, want)
		}
	}
	for _, c := range []struct{ rung, prev, want int }{
		{1, 2, 0}, {2, 3, 1}, {3, 4, 2}, // landed lower: go on down
		{0, 1, -1},                         // exact: done
		{1, 1, -1}, {2, 2, -1}, {3, 2, -1}, // the same shift or more: stop
	} {
		if got := resumeFrom(c.rung, true, c.prev); got != c.want {
			t.Errorf("resumed factor at rung %d replacing rung %d: from %d, want %d", c.rung, c.prev, got, c.want)
		}
	}
}

// TestShiftedFactorServesOnePoint solves smallGrid3D after one BCM sweep,
// where its first Hessian factors only shifted by 1e-3 of its diagonal
// (above resumeShift; after five sweeps the modified factorization
// factors it since raiseLimit is 1e-1): the next accepted point must
// refactor, from the rung below, whatever its inner iterations, and so on
// while the factor stays shifted and lands lower.
func TestShiftedFactorServesOnePoint(t *testing.T) {
	dir := datasets.SuiteOrSkip(t)
	g, err := g2o.ReadFile(filepath.Join(dir, "smallGrid3D.g2o"), g2o.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Solve(context.Background(), g, Options{BCMMaxSweeps: 1})
	if err != nil {
		t.Fatal(err)
	}
	if n := resumedFactors(t, "smallGrid3D", res.History, res.Rank); n < 3 {
		t.Errorf("%d refactorizations by resumeFrom's rule, want 3 (after 1e-3, 1e-4, then 1e-5)", n)
	}
	// The ladder steps down one rung a point: 1e-3, 1e-4, 1e-5, exact.
	var shifts []float64
	for _, h := range res.History {
		if h.Phase == "rtr" && h.Factorizations > 0 && len(shifts) < 4 {
			shifts = append(shifts, h.Shift)
		}
	}
	if !slices.Equal(shifts, []float64{1e-3, 1e-4, 1e-5, 0}) {
		t.Errorf("the first four factors' shifts are %v, want [1e-3 1e-4 1e-5 0]", shifts)
	}
}
