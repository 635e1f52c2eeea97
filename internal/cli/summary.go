package cli

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	bsync "github.com/bcmsync/bcmsync/sync"
)

// printSummary prints the human-readable result of a solve: what was
// solved, the status in a sentence, the objective and its proof, the
// times, then notes (one per line: what was written where, what was
// dropped, where the written translations come from).
func printSummary(w io.Writer, r *bsync.Report, notes []string) {
	var b strings.Builder
	problem := strings.Replace(r.Problem, "d", fmt.Sprint(r.D), 1)
	if r.Landmarks > 0 {
		fmt.Fprintf(&b, "%s: %s, n=%d poses + %d landmarks, m=%d edges (%d observations)\n",
			r.File, problem, r.N, r.Landmarks, r.M, r.Observations)
	} else {
		fmt.Fprintf(&b, "%s: %s, n=%d poses, m=%d edges\n", r.File, problem, r.N, r.M)
	}
	if r.Priors > 0 {
		fmt.Fprintf(&b, "  %d priors (in m): the estimate is in the priors' world frame\n", r.Priors)
		if r.HeadingFree {
			where := "measure one point"
			if r.D == 3 {
				where = "lie on one line"
			}
			fmt.Fprintf(&b, "  warning: the position priors %s and no pose prior fixes the heading: every rotation\n"+
				"           about it fits them as well, so the estimate's heading is arbitrary (add a pose prior, or fixes elsewhere)\n", where)
		}
	}
	fmt.Fprintf(&b, "  %s\n", statusSentence(r))
	fmt.Fprintf(&b, "  objective F        %.12g   (initial %.6g, %s)\n", r.Objective, r.InitialObjective, r.Init)
	if r.Estimate != "" && r.Estimate != string(bsync.EstimateRounded) {
		fmt.Fprintf(&b, "  estimate           %s (the relaxation's F %.12g)\n", r.Estimate, r.RelaxationObjective)
	}
	checked := lastChecked(r)
	switch {
	case r.DualBound != nil:
		fmt.Fprintf(&b, "  dual bound         %.12g   (proven: no estimate has F below it)\n", *r.DualBound)
		fmt.Fprintf(&b, "  suboptimality      <= %.3g %s; allowed %.3g %s\n", *r.SuboptimalityBound,
			relativeNote(*r.SuboptimalityBound, r.Objective), r.GapAllowed, allowanceNote(r))
	case checked:
		fmt.Fprintf(&b, "  no bound: S = Q - Lambda is not positive semidefinite at the last point\n")
	default:
		fmt.Fprintf(&b, "  no bound: the certificate did not run at the last point\n")
	}
	if r.DualBound != nil && r.ExpectedObjectiveSD > 0 {
		if z := (*r.DualBound - r.ExpectedObjective) / r.ExpectedObjectiveSD; z > bsync.InconsistentZ {
			fmt.Fprintf(&b, "  inconsistent data  F* >= %.6g is %.0f sd above %.6g, F at the truth for measurements as precise as their weights say:\n", *r.DualBound, z, r.ExpectedObjective)
			fmt.Fprintf(&b, "                     some measurements contradict the others (wrong loop closures?); try --robust gnc-tls\n")
		}
	}
	if note := precisionNote(r); note != "" {
		fmt.Fprintf(&b, "  %s\n", note)
	}
	on := "every pose"
	if r.EtaPoses == 1 {
		on = "one anchor pose"
	}
	switch {
	case r.Eta > 0 && provenByParts(r):
		fmt.Fprintf(&b, "  lambda_min(S)      not estimated: proven by the agents' factors (certificate shift eta %.3g on %s)\n", r.Eta, on)
	case r.Eta > 0:
		fmt.Fprintf(&b, "  lambda_min(S)      %.3g   (certificate shift eta %.3g on %s)\n", r.MinEigenvalue, r.Eta, on)
	case checked:
		fmt.Fprintf(&b, "  lambda_min(S)      %.3g\n", r.MinEigenvalue)
	}
	if r.Robust != nil {
		printRobust(&b, r)
	}
	t := r.Timings
	fmt.Fprintf(&b, "  time %.3fs: parse %.3f, init %.3f, optimize %.3f, certify %.3f, round %.3f\n",
		t.Total, t.Parse, t.Init, t.Optimize, t.Certify, t.Round)
	for _, n := range notes {
		fmt.Fprintf(&b, "  %s\n", n)
	}
	io.WriteString(w, b.String())
}

// precisionNote says, for a solve that ended uncertified for want of
// convergence or precision, when the edge weights span so many decades
// that double precision's rounding of the heaviest terms (1.1e-16 of them)
// exceeds what the gradient tolerance asks of the lightest: then no
// number of iterations is sure to converge or certify.
func precisionNote(r *bsync.Report) string {
	const eps = 1.1e-16
	switch bsync.Status(r.Status) {
	case bsync.Bounded, bsync.BelowPrecision, bsync.IterationLimit, bsync.NotCertified:
	default:
		return ""
	}
	if !(eps*r.WeightSpread > r.Options.GradTol) {
		return ""
	}
	return fmt.Sprintf("precision          the edge weights span a factor of %.2g: double precision rounds the heaviest terms to "+
		"%.2g of the lightest, more than --grad-tol %g asks, so the solve may not converge or certify however long it runs",
		r.WeightSpread, eps*r.WeightSpread, r.Options.GradTol)
}

// lastIterationCapped returns the level (or the rank-d refinement) whose
// trust region the iteration limit stopped, if the report has one.
func lastIterationCapped(r *bsync.Report) (bsync.Level, bool) {
	for k := len(r.Levels) - 1; k >= 0; k-- {
		if r.Levels[k].RTRStop == "iterations" {
			return r.Levels[k], true
		}
	}
	return bsync.Level{}, false
}

// provenByParts reports whether the last level's proof was made by a
// distributed run's parts, which estimate no lambda_min(S) (the report's
// min_eigenvalue is then 0, not a measurement).
func provenByParts(r *bsync.Report) bool {
	return len(r.Levels) > 0 && r.Levels[len(r.Levels)-1].EigMethod == bsync.MethodCholeskyParts
}

// lastChecked reports whether the certificate ran at the staircase's last
// level (a time limit can stop a solve before it does).
func lastChecked(r *bsync.Report) bool {
	return len(r.Levels) > 0 && r.Levels[len(r.Levels)-1].EigMethod != ""
}

// allowanceNote says which term of max(gap-tol max(unit, |F|), gap-abs) set
// the allowance, with the flag that changes it.
func allowanceNote(r *bsync.Report) string {
	switch r.GapAllowedBy {
	case "gap_tol*|F|":
		return fmt.Sprintf("(--gap-tol %g times |F|)", r.Options.GapTol)
	case "gap_tol*unit":
		return fmt.Sprintf("(--gap-tol %g times the unit of F %.3g, 1e7 rounding floors, as |F| is below it)", r.Options.GapTol, r.FUnit)
	case "gap_abs":
		return fmt.Sprintf("(--gap-abs %g)", r.Options.GapAbs)
	}
	return ""
}

// relativeNote qualifies a suboptimality bound: relative to |F| where that
// means something, absolute where F is 0 or not above the bound itself (a
// noise-free graph has F* = 0, and dividing by F printed +Inf or 1e+20;
// a relative bound of 1 says no more than F* >= 0).
func relativeNote(bound, f float64) string {
	if rel := bound / math.Abs(f); f != 0 && math.Abs(bound) < math.Abs(f) && !math.IsNaN(rel) {
		return fmt.Sprintf("(relative %.2g)", rel)
	}
	return "(absolute: F is not above the bound, as where F* = 0, so no relative bound)"
}

// statusSentence says in one sentence how the solve ended, one sentence per
// status of package sync. A status this command does not know (a newer
// package sync) still prints sensibly: certified or not, its name, the rank.
func statusSentence(r *bsync.Report) string {
	s := statusWords(r)
	if r.Robust != nil {
		// The certificate is of the final weighted (inlier) graph.
		s += " (" + r.Robust.Describe + ")"
	}
	return s
}

// statusWords is statusSentence without the robust mode's qualification.
func statusWords(r *bsync.Report) string {
	switch bsync.Status(r.Status) {
	case bsync.Certified:
		return fmt.Sprintf("CERTIFIED globally optimal at rank %d", r.Rank)
	case bsync.CertifiedRelaxation:
		return fmt.Sprintf("NOT certified optimal: the relaxation is certified at rank %d, but its solution has rank above %d, "+
			"so rounding is not tight; the estimate is within the suboptimality bound below", r.Rank, r.D)
	case bsync.Bounded:
		msg := fmt.Sprintf("NOT certified to the gap tolerance: the certificate holds at rank %d, "+
			"but the bound it proves (below) is above the allowed %.3g", r.Rank, r.GapAllowed)
		if len(r.Levels) > 0 {
			lv := r.Levels[len(r.Levels)-1]
			msg += fmt.Sprintf(": the trust region stopped (%s) at relative gradient %.2g", lv.RTRStop, lv.RelGrad)
			if lv.RTRStop == "stalled" {
				msg += ", where its steps no longer lower F"
			} else {
				msg += "; a smaller --grad-tol may tighten the proof"
			}
		}
		return msg
	case bsync.BelowPrecision:
		return fmt.Sprintf("NOT certified to the gap tolerance: the certificate holds at rank %d, "+
			"but the allowed %.3g is about what double precision can prove here: at the rounding floor (--eig-tol %g) "+
			"the certificate's shift alone costs %.3g, more than the allowance, and the proof refinements did not make up for it; "+
			"the bound that was proven is printed below", r.Rank, r.GapAllowed, r.Options.EigTol, r.ShiftFloor)
	case bsync.NotCertified:
		why := "no saddle escape was found"
		if r.Rank >= r.Options.MaxRank {
			why = "the last rank --max-rank allows"
		}
		return fmt.Sprintf("NOT certified: the certificate failed at rank %d (%s)", r.Rank, why)
	case bsync.Inconsistent:
		return fmt.Sprintf("NOT certified: the measurements contradict their weights (stopped at rank %d; see below)", r.Rank)
	case bsync.TimeLimit:
		if r.Options.Limit == 0 {
			return fmt.Sprintf("NOT certified: stopped by the deadline at rank %d", r.Rank)
		}
		return fmt.Sprintf("NOT certified: stopped by the time limit (--time-limit %v) at rank %d; a larger --time-limit lets it go on",
			time.Duration(r.Options.Limit*float64(time.Second)), r.Rank)
	case bsync.IterationLimit:
		msg := fmt.Sprintf("NOT certified: stopped by the iteration limit (--max-iterations %d trust-region steps) at rank %d", r.Options.MaxIterations, r.Rank)
		if lv, ok := lastIterationCapped(r); ok {
			msg += fmt.Sprintf(", at relative gradient %.2g where %.2g is the goal", lv.RelGrad, r.Options.GradTol)
		}
		return msg + "; --max-iterations raises the limit"
	case bsync.RobustUnsettled:
		return fmt.Sprintf("NOT certified: the robust weights did not settle (GNC's cap on weight updates, or on TLS checks, stopped the run); "+
			"the solve of the last weights ended at rank %d", r.Rank)
	case bsync.Cancelled:
		return fmt.Sprintf("NOT certified: cancelled at rank %d", r.Rank)
	case bsync.Aborted:
		return fmt.Sprintf("NOT certified: aborted by an error at rank %d (%s); the estimate is the last point held", r.Rank, r.Error)
	}
	if r.Certified {
		return fmt.Sprintf("CERTIFIED (%s) at rank %d", r.Status, r.Rank)
	}
	return fmt.Sprintf("NOT certified: %s (rank %d)", r.Status, r.Rank)
}
