package sync

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/bcmsync/bcmsync/internal/graphs"
	"github.com/bcmsync/bcmsync/posegraph"
	"github.com/bcmsync/bcmsync/rounding"
)

// Robust names a robust loss for outlier rejection.
type Robust string

const (
	// RobustNone is plain least squares: every edge counts in full.
	RobustNone Robust = ""
	// RobustGNCTLS is graduated non-convexity with the truncated
	// least-squares loss: SolveRobust.
	RobustGNCTLS Robust = "gnc-tls"
)

// ParseRobust checks a robust loss name ("none" or "" for none).
func ParseRobust(s string) (Robust, error) {
	switch s {
	case "", "none":
		return RobustNone, nil
	case string(RobustGNCTLS):
		return RobustGNCTLS, nil
	}
	return "", fmt.Errorf("unknown robust loss %q (want gnc-tls or none)", s)
}

// DefaultRobustQuantile is the chi-squared probability that sets the
// truncation threshold c^2 when none is given. At the true poses an inlier's
// term r_e^2 is about chi-squared with the edge's dimension (3 for SE(2), 6
// for SE(3)) under the noise model of package datasets, and at the optimum
// it is smaller still (the fit absorbs part of the noise), so an inlier is
// cut with probability below 1 - p. With p = 0.99 a graph of 10^4 loop
// closures would lose about 100 true ones to chance; at 0.999 about 10. The
// price of the higher threshold is small: an outlier that passes it is
// consistent with the noise to within c^2 (16.3 in 2-D, 22.5 in 3-D, against
// terms of 10^3 to 10^6 for the wrong closures of the tests and of intel
// with 5% outliers), so it moves the estimate by no more than a noisy
// inlier would.
const DefaultRobustQuantile = 0.999

// RobustOptions control outlier rejection (SolveRobust). A zero field
// takes its default (DefaultRobustOptions).
type RobustOptions struct {
	// Loss selects the robust loss; the one there is, RobustGNCTLS, is the
	// default (SolveRobust does not take RobustNone: without a loss, call
	// Solve).
	Loss Robust
	// Quantile is the probability p of the chi-squared quantile that sets
	// the threshold: c^2 = Quantile(p) with the edge's degrees of freedom
	// d(d-1)/2 + d (d(d-1)/2 for Rotations, whose terms have no
	// translation; d for a landmark observation, which measures a
	// position). 0: DefaultRobustQuantile.
	Quantile float64
	// Threshold, when positive, is c^2 itself, in units of F's edge terms,
	// for every edge, instead of a quantile.
	Threshold float64
	// CheckOdometry subjects odometry edges to rejection like loop
	// closures. By default they are trusted (weight 1 always): an edge
	// between poses adjacent in index order, which for a file means
	// adjacent ids in ascending order (ids i and i+1 when there are no
	// gaps). Trusted odometry keeps the weighted graph connected and the
	// gauge fixed whatever GNC rejects, and the consistency stage checks
	// loop closures against it (without it, the stage is skipped).
	CheckOdometry bool
	// NoConsistency skips the consistency stage (checkCycles): GNC alone
	// then judges every edge, starting from least squares on all of them.
	NoConsistency bool
	// MuStep is the factor by which GNC raises mu each outer iteration
	// (default 1.4, the value of Yang et al.; must exceed 1).
	MuStep float64
	// MaxIterations bounds GNC's weight updates over the whole run
	// (default 100).
	MaxIterations int
	// InnerRank is the rank of GNC's weighted solves (0: Options.Rank0,
	// d by default). A higher rank costs more per solve and did no better
	// with these warm-started solves: it lost true loop closures
	// (docs/tuning.md).
	InnerRank int
	// InnerGradTol is the relative gradient norm at which a weighted solve
	// stops while some weight is strictly between 0 and 1 (default 1e-3): the
	// next update changes the problem anyway. Once every weight is 0 or 1
	// the solve goes to InnerGradTol^2 (at most 1e-6), so that the settled
	// weights are judged at an accurate point.
	InnerGradTol float64
}

// DefaultRobustOptions returns the robust options a zero field stands for
// (Quantile: DefaultRobustQuantile, unless Threshold is set; InnerRank:
// Options.Rank0).
func DefaultRobustOptions() RobustOptions {
	return RobustOptions{Loss: RobustGNCTLS, Quantile: DefaultRobustQuantile, MuStep: 1.4, MaxIterations: 100, InnerGradTol: 1e-3}
}

// withDefaults returns o with its zero fields set to their defaults.
func (o RobustOptions) withDefaults() RobustOptions {
	def := DefaultRobustOptions()
	if o.Loss == RobustNone {
		o.Loss = def.Loss
	}
	if o.Quantile == 0 && o.Threshold == 0 {
		o.Quantile = def.Quantile
	}
	if o.MuStep == 0 {
		o.MuStep = def.MuStep
	}
	if o.MaxIterations == 0 {
		o.MaxIterations = def.MaxIterations
	}
	if o.InnerGradTol == 0 {
		o.InnerGradTol = def.InnerGradTol
	}
	return o
}

func (o *RobustOptions) check() error {
	if _, err := ParseRobust(string(o.Loss)); err != nil {
		return err
	}
	if !(o.Quantile >= 0 && o.Quantile < 1) {
		return fmt.Errorf("robust quantile %g is not in (0, 1)", o.Quantile)
	}
	if !(o.Threshold >= 0) || math.IsInf(o.Threshold, 0) {
		return fmt.Errorf("robust threshold %g must be a finite number >= 0", o.Threshold)
	}
	if o.MuStep != 0 && !(o.MuStep > 1) || math.IsInf(o.MuStep, 0) {
		return fmt.Errorf("robust mu step %g must be a finite number > 1", o.MuStep)
	}
	if !(o.InnerGradTol >= 0) || math.IsInf(o.InnerGradTol, 0) {
		return fmt.Errorf("robust inner gradient tolerance %g must be a finite number >= 0", o.InnerGradTol)
	}
	if o.InnerRank < 0 {
		return fmt.Errorf("robust inner rank %d is negative", o.InnerRank)
	}
	if o.MaxIterations < 0 {
		return fmt.Errorf("robust max iterations %d is negative", o.MaxIterations)
	}
	return nil
}

// Robust stages: which part of SolveRobust rejected an edge, and what an
// iteration record is.
const (
	// StageConsistency: the consistency stage before any solve
	// (checkCycles).
	StageConsistency = "consistency"
	// StageGNC: a weight update of GNC, or the TLS check at a certified
	// optimum, which continues GNC.
	StageGNC = "gnc"
	// StageCertify: the certified solve of the settled weights.
	StageCertify = "certify"
)

// RobustIteration summarizes one weighted solve of the robust run.
type RobustIteration struct {
	// Stage is StageGNC for GNC's weighted solves (local, at
	// RobustResult.InnerRank) and StageCertify for a certified solve of
	// settled weights, which the TLS check follows.
	Stage string `json:"stage"`
	// Mu is GNC's control parameter for this solve's weights (0 for the
	// first, unweighted solve).
	Mu float64 `json:"mu"`
	// Inliers, Fractional and Rejected count the edges of weight 1, in
	// (0, 1) and 0.
	Inliers    int `json:"inliers"`
	Fractional int `json:"fractional"`
	Rejected   int `json:"rejected"`
	// Objective is the weighted problem's F at this solve's point (the
	// lifted point for StageGNC); TLS the truncated cost
	// sum_e min(r_e^2, c_e^2) over all input edges there.
	Objective float64 `json:"objective"`
	TLS       float64 `json:"tls_cost"`
	// Status is the trust region's stop for StageGNC ("gradient",
	// "iterations", ...) and the solve's status for StageCertify.
	Status string `json:"status"`
	// Rank is the solve's rank (the final one for StageCertify);
	// Steps its trust-region steps.
	Rank    int     `json:"rank"`
	Steps   int     `json:"steps"`
	Seconds float64 `json:"seconds"`
	// Weights are every input edge's weights in this solve (not in the
	// JSON report: plots draw them).
	Weights []float64 `json:"-"`
}

// ConsistencyStats summarizes the consistency stage.
type ConsistencyStats struct {
	// Candidates is the number of loop closures the stage considered;
	// Accepted those consistent with their cycle (used in later
	// cycles), Doubtful those beyond the gate but within ten times it
	// (left to GNC), Rejected those beyond (set aside), Untested those no
	// cycle short enough could judge (left to GNC).
	Candidates int `json:"candidates"`
	Accepted   int `json:"accepted"`
	Doubtful   int `json:"doubtful"`
	Rejected   int `json:"rejected"`
	Untested   int `json:"untested"`
	// Passes over the closures not yet tested.
	Passes int `json:"passes"`
	// Scale is the noise scale the shortest cycles show: the factor by
	// which their errors' variances are smaller than the weights claim
	// (1 when too few cycles were found to measure it).
	Scale   float64 `json:"scale"`
	Seconds float64 `json:"seconds"`
}

// RobustResult is the outlier rejection's account of a solve.
type RobustResult struct {
	Loss Robust
	// Options are the robust options the run used, defaults filled in.
	Options RobustOptions
	// Threshold is c^2 of the pose edges; Quantile the probability it
	// came from (0 when set directly), DOF the chi-squared degrees of
	// freedom used. ObservationThreshold and ObservationDOF are the same
	// for landmark observations and position priors, which measure a
	// position only (d degrees of freedom); a threshold set directly holds
	// for every edge.
	Threshold            float64
	Quantile             float64
	DOF                  int
	ObservationThreshold float64
	ObservationDOF       int
	// TrustOdometry is true unless RobustOptions.CheckOdometry was set.
	TrustOdometry bool
	// Input is the graph given (its largest component with
	// Options.LargestComponent); the slices below are indexed by its edges.
	Input *posegraph.Graph
	// Weights are the weights of the final solve: Result.Graph holds the
	// edges of positive weight, with kappa and tau scaled by them.
	Weights []float64
	// Residuals are the terms r_e^2 at the final estimate, and Thresholds
	// each edge's c^2 (Threshold or ObservationThreshold).
	Residuals  []float64
	Thresholds []float64
	// Trusted marks the odometry edges kept at weight 1 throughout.
	Trusted []bool
	// Stages names, for each edge of weight 0, the stage that rejected it
	// (StageConsistency or StageGNC; "" for the others).
	Stages []string
	// Kept maps each edge of Result.Graph to its index in Input.
	Kept []int
	// Rejected lists the edges of weight 0, in input order.
	Rejected []int
	// Bridged lists edges GNC gave weight 0 that were kept (at weight 1)
	// because without them the weighted graph fell apart: an edge that is
	// the only link between two parts has no redundancy to be judged by.
	Bridged []int
	// Consistency summarizes the consistency stage (zero when skipped:
	// NoConsistency, CheckOdometry, or no odometry).
	Consistency ConsistencyStats
	// InnerRank is the rank of GNC's weighted solves.
	InnerRank int
	// Checks counts the TLS checks at certified optima; the last passed
	// when Converged.
	Checks int
	// Iterations has one entry per weighted solve, GNC's and the certified
	// ones, in order.
	Iterations []RobustIteration
	// Stop says why the run ended: "converged" (the TLS check passed: at
	// the certified optimum every kept edge is within c^2 and every
	// rejected one above it), "no outliers" (the same, with nothing
	// rejected), "iterations", "checks" (the TLS check kept failing),
	// "time limit", "cancelled", or the certified solve's status when it
	// was not certified.
	Stop string
	// Converged is true for "converged" and "no outliers".
	Converged bool
	// Mu is the last mu used (0 if only the first solve ran).
	Mu float64
}

// maxChecks bounds the TLS checks of a run: each failed check continues
// GNC from the certified optimum, and a check that keeps failing means
// GNC cycles between weight sets.
const maxChecks = 5

// SolveRobust solves g with outliers rejected under the truncated
// least-squares (TLS) loss: each edge's term r_e^2 becomes
// min(r_e^2, c_e^2), so an edge whose term would exceed c^2 costs c^2
// whatever the estimate and stops pulling. The run has four stages
// (docs/robust.md):
//
//  1. Consistency (checkCycles): loop closures that disagree grossly with
//     cycles of trusted odometry and of closures already accepted are set
//     aside before any solve. This is what defeats perceptual aliasing,
//     groups of wrong closures that agree with each other, and it leaves
//     GNC few outliers. Closures set aside come back while any agrees with
//     the estimate of the others to within c^2.
//  2. Graduated non-convexity (Yang, Antonante, Tzoumas and Carlone,
//     "Graduated Non-Convexity for Robust Spatial Perception", RA-L 2020)
//     on the other edges, from a least-squares estimate: a weighted
//     solve, then the closed-form weights of tlsWeight at mu, mu raised by
//     MuStep, until the weights are 0 or 1 and reproduce themselves. The
//     first mu is c^2 / (2 max_e r_e^2 - c^2) (gncInitialMu), or muCheck
//     when no more terms exceed c^2 than chance predicts. The weighted
//     solves are local solves of the relaxation at a fixed rank,
//     warm-started (gncSolver), loose while weights are fractional.
//  3. The certified staircase (solve), once, on the settled inlier set,
//     warm-started from GNC's estimate rounded. When the consistency stage
//     judged the closures, the least-squares estimate of step 2 is itself
//     a certified solve (capped one rank up), and the run usually ends
//     with its check.
//  4. The TLS check at that certified optimum: every kept edge must be
//     within c^2 and every rejected edge (either stage's) above it. If
//     not, the weights become that test's and GNC continues from the
//     certified estimate (back to 2).
//
// Trusted odometry keeps weight 1 throughout. The returned Result is the
// final certified solve's: Graph is the inlier graph and its certificate
// is of that problem, and Status says "certified (robust: of the N inlier
// edges; K rejected)". Result.Robust lists every edge's weight, term and
// rejecting stage. Timings add up all the stages.
//
// Each certified solve is a call of Solve, with opts (LargestComponent
// aside: the component is taken once, here); Result.Robust.Options records
// ro as it ran.
func SolveRobust(ctx context.Context, g *posegraph.Graph, opts Options, ro RobustOptions) (*Result, error) {
	start := time.Now()
	ro = ro.withDefaults()
	if err := ro.check(); err != nil {
		return nil, err
	}
	g, err := solvable(g, opts)
	if err != nil {
		return nil, err
	}
	if g.HasLandmarks() && opts.Problem == posegraph.Rotations {
		return Solve(ctx, g, opts) // its error names the problem
	}
	d, m := g.D, g.M()
	full := opts.WithDefaults(d)
	full.LargestComponent = false
	if err := full.check(d); err != nil {
		return nil, err
	}
	rr := &RobustResult{Loss: ro.Loss, Options: ro, Input: g, DOF: d * (d - 1) / 2, TrustOdometry: !ro.CheckOdometry}
	if opts.Problem == posegraph.Poses {
		rr.DOF += d
	}
	rr.Threshold = ro.Threshold
	if rr.Threshold == 0 {
		rr.Quantile = ro.Quantile
		rr.Threshold = distuv.ChiSquared{K: float64(rr.DOF)}.Quantile(rr.Quantile)
	}
	rr.ObservationDOF, rr.ObservationThreshold = d, rr.Threshold
	if ro.Threshold == 0 {
		rr.ObservationThreshold = distuv.ChiSquared{K: float64(d)}.Quantile(rr.Quantile)
	}
	c2 := rr.thresholds(g)
	rr.Thresholds = c2
	rr.Trusted = make([]bool, m)
	if !ro.CheckOdometry {
		for k := range g.Edges {
			rr.Trusted[k] = isOdometry(g, &g.Edges[k])
		}
	}
	rr.Stages = make([]string, m)
	var deadline time.Time
	if opts.TimeLimit > 0 {
		deadline = start.Add(opts.TimeLimit)
	}
	log := full.Logger
	innerTol := ro.InnerGradTol
	settledTol := math.Min(innerTol*innerTol, 1e-6)
	var total Timings

	// 1. Consistency. out marks the edges it set aside, the inconsistent
	// closures: weight 0, not updated by GNC until a TLS check finds them
	// within c^2.
	t0 := time.Now()
	out := make([]bool, m)
	checked := false // the stage judged (nearly) every loop closure
	if !ro.NoConsistency && !ro.CheckOdometry {
		verdict, st := checkCycles(g, rr.Trusted, opts.Problem, rr.Threshold)
		for k, v := range verdict {
			out[k] = v == cycleInconsistent
		}
		st.Seconds = time.Since(t0).Seconds()
		rr.Consistency = st
		checked = st.Candidates > 0 && st.Untested*10 <= st.Candidates
		log.Info("robust consistency", "candidates", st.Candidates, "accepted", st.Accepted, "doubtful", st.Doubtful,
			"rejected", st.Rejected, "untested", st.Untested, "scale", st.Scale, "seconds", st.Seconds)
	}
	rank := ro.InnerRank
	if rank == 0 {
		rank = full.Rank0
	}
	if rank < d {
		return nil, fmt.Errorf("robust inner rank %d is below the dimension d = %d", rank, d)
	}
	rr.InnerRank = rank
	w := make([]float64, m)
	for k := range w {
		w[k] = 1
		if out[k] {
			w[k] = 0
			rr.Stages[k] = StageConsistency
		}
	}

	var res *Result
	var r2 []float64
	var gs *gncSolver
	var initial []posegraph.Pose
	next := make([]float64, m)
	weff := make([]float64, m)
	mu := 0.0
	updates := 0
	record := func(it RobustIteration) {
		for _, v := range w {
			switch {
			case v == 1:
				it.Inliers++
			case v == 0:
				it.Rejected++
			default:
				it.Fractional++
			}
		}
		it.Mu, it.TLS = mu, tlsCost(r2, c2)
		it.Weights = append([]float64(nil), w...)
		rr.Iterations = append(rr.Iterations, it)
		log.Info("robust", "stage", it.Stage, "mu", mu, "inliers", it.Inliers, "fractional", it.Fractional,
			"rejected", it.Rejected, "F", it.Objective, "tls", it.TLS, "status", it.Status, "seconds", it.Seconds)
	}
	// tlsTest sets next to TLS's inlier test at the terms r2 (r2 <= c^2:
	// weight 1) for every edge but the trusted ones and the bridges, and
	// reports whether that differs from w. adopt makes next the weights,
	// GNC's from then on (the consistency stage's verdicts included), and
	// keeps GNC near TLS's end: the test is GNC's update at mu -> inf, and
	// mu stays at least muCheck, whose fractional weights are those of
	// terms within 10% of c^2.
	tlsTest := func(bridged []int) bool {
		changed := false
		for k := range next {
			next[k] = w[k]
			if rr.Trusted[k] || slices.Contains(bridged, k) {
				continue
			}
			next[k] = 0
			if r2[k] <= c2[k] {
				next[k] = 1
			}
			changed = changed || next[k] != w[k]
		}
		return changed
	}
	adopt := func() {
		for k, v := range next {
			switch {
			case v != 0:
				rr.Stages[k] = ""
			case w[k] != 0:
				rr.Stages[k] = StageGNC
			}
			out[k] = false
		}
		w, next = next, w
		mu = math.Max(mu, muCheck)
	}
	// readmit gives weight 1 back to the edges set aside whose terms are
	// within c^2, and reports whether there were any.
	readmit := func() bool {
		any := false
		for k, o := range out {
			if o && r2[k] <= c2[k] {
				w[k], out[k], rr.Stages[k] = 1, false, ""
				any = true
			}
		}
		return any
	}
	// certify solves the weights w with the certified staircase, up to
	// maxRank, from init (nil: the caller's initialization), and returns
	// the edges kept only to hold the graph together.
	certify := func(maxRank int, init []posegraph.Pose) ([]int, error) {
		t0 := time.Now()
		wg, kept, bridged := weightedGraph(g, w)
		o := full
		o.MaxRank = maxRank
		if init != nil {
			o.Init, o.InitialPoses = InitGiven, init
		}
		if !deadline.IsZero() {
			o.TimeLimit = max(time.Until(deadline), time.Nanosecond)
		}
		r, err := Solve(ctx, wg, o)
		if err != nil {
			return nil, err
		}
		res = r
		addTimings(&total, &r.Timings)
		rr.Weights = append(rr.Weights[:0], w...)
		rr.Kept, rr.Bridged, rr.Mu = kept, bridged, mu
		r2 = g.EdgeCosts(r2, r.Poses, opts.Problem)
		record(RobustIteration{Stage: StageCertify, Objective: r.Objective, Status: string(r.Status), Rank: r.Rank,
			Seconds: time.Since(t0).Seconds()})
		return bridged, nil
	}
	interrupted := func(s Status) string {
		switch s {
		case TimeLimit:
			return "time limit"
		case Cancelled:
			return "cancelled"
		}
		return ""
	}
	// local runs one GNC solve of the weights w from the current point.
	local := func() (string, error) {
		t0 := time.Now()
		copy(weff, w)
		_, _, bridged := weightedGraph(g, w)
		for _, k := range bridged {
			weff[k] = 1
		}
		tol := innerTol
		if binary(w) {
			tol = settledTol
		}
		ir, err := gs.solve(ctx, weff, tol, innerSteps, deadline)
		total.Optimize += time.Since(t0).Seconds()
		if err != nil {
			return "cancelled", nil
		}
		r2 = gs.costs(r2)
		record(RobustIteration{Stage: StageGNC, Objective: ir.F, Status: ir.Stop, Rank: rank, Steps: ir.Iterations,
			Seconds: time.Since(t0).Seconds()})
		if ir.Stop == "time" {
			return "time limit", nil
		}
		return "", nil
	}

	// The least-squares estimate of the edges the consistency stage
	// accepted or could not test.
	// When it judged the closures, few outliers should be left, and the
	// certified staircase (capped at a rank above the first: with
	// outliers left it would climb for long) usually ends the run at
	// once: the TLS check passes. Otherwise GNC starts from a local solve.
	stop := ""
	if checked {
		var init []posegraph.Pose
		for {
			bridged, err := certify(min(full.MaxRank, full.Rank0+1), init)
			if err != nil {
				return nil, err
			}
			if initial == nil {
				initial = res.InitialPoses
			}
			if stop = interrupted(res.Status); stop != "" || !res.Certified {
				break
			}
			rr.Checks++
			if !tlsTest(bridged) {
				stop, rr.Converged = "converged", true
				break
			}
			// When the check only puts back closures the stage set
			// aside, the certified solve is made again from this one
			// (a few true closures of a clean graph look inconsistent
			// to the stage); anything else is GNC's.
			only := true
			for k, v := range next {
				only = only && (v == w[k] || out[k])
			}
			if !only || rr.Checks == maxChecks || !readmit() {
				break
			}
			init = res.Poses
		}
		if stop == "" {
			gs = newGNCSolver(g, opts.Problem, rank, opts.Threads)
			gs.start(res.Poses, full.Seed)
		}
	} else {
		t0 := time.Now()
		wg, _, _ := weightedGraph(g, w)
		gs = newGNCSolver(g, opts.Problem, rank, opts.Threads)
		init := full
		if init.Init == "" {
			init.Init = InitChordal
			if opts.InitialPoses != nil {
				init.Init = InitGiven
			}
		}
		var err error
		if initial, err = initialize(wg, init, rounding.NewPlan(wg, gs.order, nil)); err != nil {
			return nil, err
		}
		gs.start(initial, full.Seed)
		total.Init += time.Since(t0).Seconds()
		if stop, err = local(); err != nil {
			return nil, err
		}
	}
	// Growth: the closures the consistency stage set aside that agree with
	// the estimate of the others come back, and the estimate is made
	// again, until none does. The stage judged them against cycles, which
	// it could only do with the noise scale it measured; the estimate
	// judges them by c^2. Edges are only added here: an estimate made
	// without some true closures is no ground for rejecting others.
	for stop == "" && readmit() {
		var err error
		if stop, err = local(); err != nil {
			return nil, err
		}
	}

	// GNC's start. Where no term the consistency stage left exceeds c^2,
	// or no more than chance predicts, there is no sign of gross outliers
	// left: GNC starts at TLS's end, from the inlier test (which also puts
	// back the set-aside edges that agree with the estimate). Otherwise
	// at mu_0, where every weight is positive (Yang et al.).
	if stop == "" {
		ratio, above, free := 0.0, 0, 0
		for k, v := range r2 {
			if !rr.Trusted[k] && !out[k] {
				free++
				ratio = math.Max(ratio, v/c2[k])
				if v > c2[k] {
					above++
				}
			}
		}
		p := rr.Quantile
		if p == 0 {
			p = DefaultRobustQuantile
		}
		if ratio <= 1 || above <= chanceAbove(free, p) {
			_, _, bridged := weightedGraph(g, w)
			tlsTest(bridged)
			adopt()
		} else {
			mu = gncInitialMu(1, ratio)
			updates++
			for k := range w {
				if !rr.Trusted[k] && !out[k] {
					w[k] = tlsWeight(r2[k], c2[k], mu)
				}
			}
		}
	}
	for stop == "" {
		// 2. GNC until the weights settle.
		for stop == "" {
			var err error
			if stop, err = local(); err != nil {
				return nil, err
			}
			if stop != "" {
				break
			}
			mu *= ro.MuStep
			same := true
			for k := range next {
				next[k] = w[k]
				if !rr.Trusted[k] && !out[k] {
					next[k] = tlsWeight(r2[k], c2[k], mu)
				}
				same = same && next[k] == w[k]
			}
			if same && binary(w) {
				// Settled. Before the certified solve, the TLS check at
				// this local estimate (after any growth): it catches
				// edges GNC's last steps moved across c^2.
				if readmit() {
					continue
				}
				_, _, bridged := weightedGraph(g, w)
				if !tlsTest(bridged) {
					break
				}
				log.Info("robust local check", "passed", false)
				adopt()
				continue
			}
			if updates == ro.MaxIterations {
				stop = "iterations"
				break
			}
			updates++
			for k, v := range next {
				if v == 0 && w[k] != 0 {
					rr.Stages[k] = StageGNC
				}
			}
			w, next = next, w
		}

		// 3. The certified solve of the settled weights, from GNC's
		// estimate rounded.
		wg, _, _ := weightedGraph(g, w)
		p, err := gs.round(wg)
		if err != nil {
			return nil, err
		}
		bridged, err := certify(full.MaxRank, p)
		if err != nil {
			return nil, err
		}
		if stop != "" {
			break
		}
		if stop = interrupted(res.Status); stop != "" {
			break
		}
		if !res.Certified {
			stop = string(res.Status)
			break
		}

		// 4. The TLS check at the certified optimum.
		rr.Checks++
		failed := tlsTest(bridged)
		log.Info("robust check", "passed", !failed)
		if !failed {
			stop, rr.Converged = "converged", true
			break
		}
		if rr.Checks == maxChecks {
			stop = "checks"
			break
		}
		// Continue GNC from the certified estimate.
		adopt()
		gs.start(res.Poses, full.Seed)
	}
	if res == nil {
		// Stopped (time limit, cancelled) before any certified solve:
		// the answer is the estimate at hand, through the same pipeline
		// (which reports the same stop).
		wg, _, _ := weightedGraph(g, w)
		p, err := gs.round(wg)
		if err != nil {
			return nil, err
		}
		if _, err := certify(full.MaxRank, p); err != nil {
			return nil, err
		}
	}
	if rr.Converged && !anyZero(w) {
		stop = "no outliers"
	}
	rr.Stop = stop
	if res.Status == Certified && !rr.Converged {
		// The certificate is of the last weights' optimum, but they did
		// not settle: the run is not certified as a robust estimate.
		switch stop {
		case "time limit":
			res.Status = TimeLimit
		case "cancelled":
			res.Status = Cancelled
		default: // "iterations", "checks"
			res.Status = RobustUnsettled
		}
		res.Certified = false
	}
	rr.Residuals = r2
	rr.Rejected = rr.Rejected[:0]
	for k, v := range rr.Weights {
		if v == 0 {
			rr.Rejected = append(rr.Rejected, k)
		} else {
			rr.Stages[k] = ""
		}
	}
	res.Robust = rr
	// The initial estimate's objective on the final problem, so the two
	// objectives in the result are of the same F.
	res.InitialPoses = initial
	res.InitialObjective = res.Graph.Cost(initial, opts.Problem)
	total.Total = time.Since(start).Seconds()
	res.Timings = total
	// The options are the run's as the caller gave them (defaults filled
	// in), not those of its last certified solve, which starts from GNC's
	// estimate.
	res.Options = full
	res.Options.LargestComponent = opts.LargestComponent
	// Status stays the final solve's (demoted above when the weights did
	// not settle): it is of the final weighted graph, Result.Graph, which
	// Result.Robust describes (RobustResult.Describe puts the two in one
	// phrase).
	return res, nil
}

// chanceAbove is how many of n inlier terms may exceed the threshold of
// chi-squared probability p by chance: the binomial mean n (1 - p) plus
// four standard deviations, plus one. At an optimum the terms are smaller
// than at the truth, so fewer do.
func chanceAbove(n int, p float64) int {
	mean := float64(n) * (1 - p)
	return int(mean+4*math.Sqrt(mean)) + 1
}

// binary reports whether every weight is 0 or 1.
func binary(w []float64) bool {
	for _, v := range w {
		if v != 0 && v != 1 {
			return false
		}
	}
	return true
}

// muCheck is the least mu GNC continues at after a TLS check, or starts at
// when nothing suggests gross outliers: its fractional weights are those
// of terms within 10% of c^2.
const muCheck = 10

// innerSteps bounds the trust-region steps of one GNC solve: the weights
// change after it anyway, and a solve that needs more is far from the
// next problem's minimum too.
const innerSteps = 20

// anyZero reports whether some weight is 0.
func anyZero(w []float64) bool {
	for _, v := range w {
		if v == 0 {
			return true
		}
	}
	return false
}

// Describe qualifies a robust solve's status in words: whose certificate
// it is (the inlier graph's) and how many edges were rejected, or that
// GNC did not converge, e.g. "robust: of the 2512 inlier edges; 125
// rejected".
func (rr *RobustResult) Describe() string {
	if !rr.Converged {
		return fmt.Sprintf("robust: not converged, stopped by %s; of the weighted graph's %d edges, %d rejected",
			rr.Stop, len(rr.Kept), len(rr.Rejected))
	}
	return fmt.Sprintf("robust: of the %d inlier edges; %d rejected", len(rr.Kept), len(rr.Rejected))
}

// gncInitialMu is GNC-TLS's first mu, c2 / (2 r2max - c2), for the largest
// term r2max > c2 at the least-squares estimate. It puts r2max at half the
// band's upper end (mu+1)/mu c2 (tlsWeight), so the first weights are all
// positive (the largest term's is (sqrt 2 - 1) mu) and the first weighted
// problem stays close to least squares, the convex end of the family.
func gncInitialMu(c2, r2max float64) float64 {
	return c2 / (2*r2max - c2)
}

// tlsWeight is GNC-TLS's weight update: the minimizer over w in [0, 1] of
// the surrogate's outlier process at squared residual r2, threshold c2 and
// control mu > 0:
//
//	w = 1                              if r2 <= mu/(mu+1) c2
//	w = 0                              if r2 >= (mu+1)/mu c2
//	w = c sqrt(mu (mu+1)) / r - mu     in between,
//
// which is continuous: it is 1 and 0 at the two ends of the band. As mu
// grows the band closes around c2 and the weights become TLS's inlier test
// r2 <= c2.
func tlsWeight(r2, c2, mu float64) float64 {
	switch {
	case r2 <= mu/(mu+1)*c2:
		return 1
	case r2 >= (mu+1)/mu*c2:
		return 0
	}
	w := math.Sqrt(c2*mu*(mu+1)/r2) - mu
	return math.Max(0, math.Min(1, w))
}

// tlsCost is sum_e min(r2_e, c2_e), the TLS objective at the terms r2.
func tlsCost(r2, c2 []float64) float64 {
	s := 0.0
	for k, v := range r2 {
		s += math.Min(v, c2[k])
	}
	return s
}

// thresholds returns each edge's c^2: ObservationThreshold for the
// landmark observations and position priors of g (a position, d degrees
// of freedom), Threshold for the others.
func (rr *RobustResult) thresholds(g *posegraph.Graph) []float64 {
	c2 := make([]float64, g.M())
	for k := range g.Edges {
		c2[k] = rr.Threshold
		if !g.MeasuresRotation(&g.Edges[k]) {
			c2[k] = rr.ObservationThreshold
		}
	}
	return c2
}

// isOdometry reports whether e joins two poses adjacent in index order; a
// landmark observation never counts, even when the landmark's index
// follows the last pose's, nor does a prior, whose world vertex follows
// the last pose.
func isOdometry(g *posegraph.Graph, e *posegraph.Edge) bool {
	return (e.I-e.J == 1 || e.J-e.I == 1) && !g.IsLandmark(e.I) && !g.IsLandmark(e.J) && e.Prior == posegraph.NoPrior
}

// weightedGraph returns g with each edge's kappa and tau (and its recorded
// information matrix) scaled by its weight, edges of weight 0 left out, and
// the index in g of each edge kept. Where leaving them out would split the
// graph, it keeps edges of weight 0 at weight 1 (in input order, each one
// that joins two parts), and returns them as bridged: such an edge can
// always be satisfied exactly by moving one part rigidly, so its weight does
// not change the optimum, and the certified pipeline needs one component.
func weightedGraph(g *posegraph.Graph, w []float64) (*posegraph.Graph, []int, []int) {
	u := graphs.NewUnionFind(g.N())
	use := make([]bool, g.M())
	for k, e := range g.Edges {
		if w[k] > 0 {
			use[k] = true
			u.Union(e.I, e.J)
		}
	}
	var bridged []int
	for k, e := range g.Edges {
		if !use[k] && u.Union(e.I, e.J) {
			use[k] = true
			bridged = append(bridged, k)
		}
	}
	out := *g
	out.Edges = make([]posegraph.Edge, 0, g.M())
	var kept []int
	for k, e := range g.Edges {
		if !use[k] {
			continue
		}
		if s := w[k]; s > 0 && s != 1 {
			e.Kappa *= s
			e.Tau *= s
			if e.Info != nil {
				info := make([]float64, len(e.Info))
				for a, v := range e.Info {
					info[a] = s * v
				}
				e.Info = info
			}
		}
		out.Edges = append(out.Edges, e)
		kept = append(kept, k)
	}
	return &out, kept, bridged
}

// addTimings adds b's stage times to a's.
func addTimings(a, b *Timings) {
	a.Parse += b.Parse
	a.Init += b.Init
	a.Optimize += b.Optimize
	a.Certify += b.Certify
	a.Round += b.Round
	a.Total += b.Total
}

// givenPoses checks a warm start (Options.InitialPoses) against g and
// returns a copy with each rotation projected onto SO(d), so the lifted
// point is feasible even when the poses went through a file.
func givenPoses(g *posegraph.Graph, x []posegraph.Pose) ([]posegraph.Pose, error) {
	if len(x) != g.N() {
		return nil, fmt.Errorf("initial poses: %d given for a graph of %d poses", len(x), g.N())
	}
	d := g.D
	out := make([]posegraph.Pose, len(x))
	for i, p := range x {
		for _, v := range p.R[:d*d] {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("initial poses: pose %d (id %d) has a rotation that is not finite", i, g.IDs[i])
			}
		}
		for _, v := range p.T[:d] {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("initial poses: pose %d (id %d) has a translation that is not finite", i, g.IDs[i])
			}
		}
		out[i].R = rounding.NearestRotation(p.R[:d*d], d)
		out[i].T = p.T
	}
	return out, nil
}
