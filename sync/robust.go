package sync

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"time"

	"gonum.org/v1/gonum/stat/distuv"

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

// RobustOptions control outlier rejection (Options.Robust). The zero value
// is no rejection.
type RobustOptions struct {
	// Loss selects the robust loss: RobustNone or RobustGNCTLS.
	Loss Robust
	// Quantile is the probability p of the chi-squared quantile that sets
	// the threshold: c^2 = Quantile(p) with the edge's degrees of freedom
	// d(d-1)/2 + d (d(d-1)/2 for Rotations, whose terms have no
	// translation). 0: DefaultRobustQuantile.
	Quantile float64
	// Threshold, when positive, is c^2 itself, in units of F's edge terms,
	// instead of a quantile.
	Threshold float64
	// CheckOdometry subjects odometry edges to rejection like loop
	// closures. By default they are trusted (weight 1 always): an edge
	// between poses adjacent in index order, which for a file means
	// adjacent ids in ascending order (ids i and i+1 when there are no
	// gaps). Trusted odometry keeps the weighted graph connected and the
	// gauge fixed whatever GNC rejects.
	CheckOdometry bool
	// MuStep is the factor by which GNC raises mu each outer iteration
	// (0: 1.2; must exceed 1). The paper takes 1.4, with each weighted
	// problem solved globally; here the solves on the way stop early (see
	// SolveRobust), and the slower schedule gives GNC more steps to
	// recover from their local estimates: on intel with 125 wrong loop
	// closures (outlier seeds 1 to 4), 1.4 lost 4 inliers on seed 1 and
	// 1.2 none, in about the same time (8-11 s per solve, one run each).
	MuStep float64
	// MaxIterations bounds GNC's weight updates (0: 100).
	MaxIterations int
	// InnerMaxRank is the last staircase rank of the weighted solves on
	// the way to settled weights (0: two above the first rank,
	// Options.Rank0 or d), and InnerGradTol the relative gradient norm at
	// which they stop (0: 1e-6, or Options.GradTol if looser). GNC needs
	// good estimates on the way, not proofs. The settled weights are
	// solved once more with the caller's options (up to Options.MaxRank,
	// to Options.GradTol), and that solve is the result.
	InnerMaxRank int
	InnerGradTol float64
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
	if o.InnerMaxRank < 0 {
		return fmt.Errorf("robust inner max rank %d is negative", o.InnerMaxRank)
	}
	if o.MaxIterations < 0 {
		return fmt.Errorf("robust max iterations %d is negative", o.MaxIterations)
	}
	return nil
}

// RobustIteration summarizes one weighted solve of the GNC loop.
type RobustIteration struct {
	// Mu is GNC's control parameter for this solve's weights (0 for the
	// first, unweighted solve).
	Mu float64 `json:"mu"`
	// Inliers, Fractional and Rejected count the edges of weight 1, in
	// (0, 1) and 0.
	Inliers    int `json:"inliers"`
	Fractional int `json:"fractional"`
	Rejected   int `json:"rejected"`
	// Objective is the weighted problem's F at its estimate; TLS the
	// truncated cost sum_e min(r_e^2, c^2) over all input edges there.
	Objective float64 `json:"objective"`
	TLS       float64 `json:"tls_cost"`
	Status    string  `json:"status"`
	// MaxRank is the last staircase rank this solve was allowed.
	MaxRank int     `json:"max_rank"`
	Seconds float64 `json:"seconds"`
}

// RobustResult is the outlier rejection's account of a solve.
type RobustResult struct {
	Loss Robust
	// Threshold is c^2; Quantile the probability it came from (0 when set
	// directly), DOF the chi-squared degrees of freedom used.
	Threshold float64
	Quantile  float64
	DOF       int
	// TrustOdometry is true unless RobustOptions.CheckOdometry was set.
	TrustOdometry bool
	// Input is the graph given (its largest component with
	// Options.LargestComponent); the slices below are indexed by its edges.
	Input *posegraph.Graph
	// Weights are the weights of the final solve: Result.Graph holds the
	// edges of positive weight, with kappa and tau scaled by them.
	Weights []float64
	// Residuals are the terms r_e^2 at the final estimate.
	Residuals []float64
	// Trusted marks the odometry edges kept at weight 1 throughout.
	Trusted []bool
	// Kept maps each edge of Result.Graph to its index in Input.
	Kept []int
	// Rejected lists the edges of weight 0, in input order.
	Rejected []int
	// Bridged lists edges GNC gave weight 0 that were kept (at weight 1)
	// because without them the weighted graph fell apart: an edge that is
	// the only link between two parts has no redundancy to be judged by.
	Bridged []int
	// Iterations has one entry per weighted solve, the unweighted first
	// included.
	Iterations []RobustIteration
	// Stop says why the loop ended: "converged" (the weights are 0 or 1
	// and the final estimate reproduces them), "no outliers" (every term
	// was within c^2 after the first solve), "iterations", "time limit",
	// "cancelled", or the inner solve's status when it was not certified.
	Stop string
	// Converged is true for "converged" and "no outliers".
	Converged bool
	// Mu is the last mu used (0 if only the first solve ran).
	Mu float64
}

// SolveRobust solves g with outliers rejected by graduated non-convexity
// with the truncated least-squares (TLS) loss (Yang, Antonante, Tzoumas and
// Carlone, "Graduated Non-Convexity for Robust Spatial Perception", RA-L
// 2020). TLS replaces each edge's term r_e^2 by min(r_e^2, c^2): an edge
// whose term would exceed c^2 costs c^2 whatever the estimate, so it stops
// pulling. GNC reaches TLS from least squares through a family of
// surrogates controlled by mu (convex as mu -> 0, TLS as mu -> infinity);
// minimizing the surrogate is, by Black-Rangarajan duality, alternating a
// weighted least-squares solve with the closed-form weight update of
// tlsWeight. Here each weighted problem is solved by the certified pipeline
// (Solve), warm-started from the last estimate:
//
//  1. Solve with all weights 1; if every term is within c^2, stop.
//  2. mu = c^2 / (2 max_e r_e^2 - c^2) (gncInitialMu).
//  3. Weights from the terms (trusted odometry: 1); solve the weighted
//     graph, without its edges of weight 0; raise mu by MuStep.
//  4. Stop when the weights are all 0 or 1 and the new estimate gives the
//     same weights again; else go to 3.
//
// The solves on the way are cheaper than the caller asked for
// (RobustOptions.InnerMaxRank, InnerGradTol); the settled weights are
// solved once more with the caller's options, and checked again.
//
// The returned Result is the final weighted solve's: Graph is the weighted
// graph, and its certificate is of that problem. When the loop converged
// the weights are 0 and 1, so that problem is plain least squares on the
// inlier edges, and Status says "certified (robust: of the N inlier edges;
// K rejected)". Result.Robust lists every edge's weight and term and the
// rejected edges. Timings add up all the solves.
func SolveRobust(ctx context.Context, g *posegraph.Graph, opts Options) (*Result, error) {
	start := time.Now()
	ro := opts.Robust
	if err := ro.check(); err != nil {
		return nil, err
	}
	g, err := solvable(g, opts)
	if err != nil {
		return nil, err
	}
	d, m := g.D, g.M()
	if ro.MuStep == 0 {
		ro.MuStep = 1.2
	}
	if ro.MaxIterations == 0 {
		ro.MaxIterations = 100
	}
	rr := &RobustResult{Loss: ro.Loss, Input: g, DOF: d * (d - 1) / 2, TrustOdometry: !ro.CheckOdometry}
	if opts.Problem == posegraph.Poses {
		rr.DOF += d
	}
	rr.Threshold = ro.Threshold
	if rr.Threshold == 0 {
		rr.Quantile = ro.Quantile
		if rr.Quantile == 0 {
			rr.Quantile = DefaultRobustQuantile
		}
		rr.Threshold = distuv.ChiSquared{K: float64(rr.DOF)}.Quantile(rr.Quantile)
	}
	c2 := rr.Threshold
	rr.Trusted = make([]bool, m)
	if !ro.CheckOdometry {
		for k, e := range g.Edges {
			rr.Trusted[k] = e.I-e.J == 1 || e.J-e.I == 1
		}
	}
	var deadline time.Time
	if opts.TimeLimit > 0 {
		deadline = start.Add(opts.TimeLimit)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	inner := opts
	inner.Robust = RobustOptions{}
	inner.LargestComponent = false

	// The weighted solves on the way stop at the first rank of the
	// staircase (InnerMaxRank): GNC needs a good estimate for its next
	// weights, not a proof, and a problem still full of half-weighted
	// outliers can send the staircase through every rank (intel with 5%
	// outliers: 41 s for the plain solve to fail at rank 10, and 390 s
	// for the whole GNC run). Rank d alone is too little: its local minima
	// misled GNC there into rejecting 11 inliers; two ranks more found the
	// right 125 in 30 s (one run each, under load). For the same reason
	// they stop at a looser gradient (InnerGradTol): on parking-garage
	// with 5% outliers that halved their time (from 50-80 s to 20-30 s
	// each, one run under load); on intel it made no difference to the
	// edges rejected. Once the weights have settled, they are solved again
	// with the caller's options, warm-started, which costs little on a
	// graph without outliers.
	full := inner
	fast := inner
	fast.MaxRank = ro.InnerMaxRank
	if fast.MaxRank == 0 {
		fast.MaxRank = max(opts.Rank0, d) + 2
	}
	if opts.MaxRank != 0 {
		fast.MaxRank = min(fast.MaxRank, opts.MaxRank)
	}
	fast.GradTol = ro.InnerGradTol
	if fast.GradTol == 0 {
		fast.GradTol = max(1e-6, opts.GradTol)
	}
	climbed := false // the caller's options from now on
	w := make([]float64, m)
	for k := range w {
		w[k] = 1
	}
	next := make([]float64, m)
	var total Timings
	var first, res *Result
	var r2 []float64
	mu := 0.0
	for it, solves := 0, 0; ; solves++ {
		t0 := time.Now()
		wg, kept, bridged := weightedGraph(g, w)
		o := fast
		if climbed {
			o = full
		}
		if solves > 0 {
			o.Init, o.InitialPoses = InitGiven, res.Poses
		}
		if !deadline.IsZero() {
			o.TimeLimit = time.Until(deadline)
			if o.TimeLimit <= 0 {
				if res != nil {
					rr.Stop = "time limit"
					break
				}
				// Even the first solve: it returns the estimate held
				// (the file's own poses) with status TimeLimit.
				o.TimeLimit = time.Nanosecond
			}
		}
		r, err := Solve(ctx, wg, o)
		if err != nil {
			return nil, err
		}
		res = r
		if first == nil {
			first = r
		}
		rr.Weights = append(rr.Weights[:0], w...)
		rr.Kept, rr.Bridged, rr.Mu = kept, bridged, mu
		addTimings(&total, &r.Timings)
		r2 = g.EdgeCosts(r2, r.Poses, opts.Problem)
		iter := RobustIteration{Mu: mu, Objective: r.Objective, TLS: tlsCost(r2, c2), Status: string(r.Status),
			MaxRank: o.MaxRank, Seconds: time.Since(t0).Seconds()}
		for _, v := range w {
			switch {
			case v == 1:
				iter.Inliers++
			case v == 0:
				iter.Rejected++
			default:
				iter.Fractional++
			}
		}
		rr.Iterations = append(rr.Iterations, iter)
		log.Info("robust", "iteration", it, "mu", mu, "inliers", iter.Inliers, "fractional", iter.Fractional,
			"rejected", iter.Rejected, "F", r.Objective, "tls", iter.TLS, "status", string(r.Status), "seconds", iter.Seconds)

		if r.Status == TimeLimit || r.Status == Cancelled {
			rr.Stop = string(r.Status)
			if r.Status == TimeLimit {
				rr.Stop = "time limit"
			}
			break
		}
		// done is the end of the loop once the weights have settled and
		// were solved with the caller's options; the first time they
		// settle, they are solved once more that way (whole staircase,
		// Options.GradTol) and checked again.
		done := func(stop string) bool {
			if climbed {
				rr.Stop, rr.Converged = stop, true
				return true
			}
			climbed = true
			return false
		}
		if it == 0 {
			r2max := 0.0
			for k, v := range r2 {
				if !rr.Trusted[k] && v > r2max {
					r2max = v
				}
			}
			if r2max <= c2 {
				if done("no outliers") {
					break
				}
				continue
			}
			mu = gncInitialMu(c2, r2max)
		} else {
			mu *= ro.MuStep
		}
		binary := true
		same := true
		for k := range next {
			next[k] = 1
			if !rr.Trusted[k] {
				next[k] = tlsWeight(r2[k], c2, mu)
			}
			if w[k] != 0 && w[k] != 1 {
				binary = false
			}
			if next[k] != w[k] {
				same = false
			}
		}
		if it > 0 && binary && same {
			if done("converged") {
				break
			}
			mu /= ro.MuStep // the same weights again, at the whole staircase
			continue
		}
		if it == ro.MaxIterations {
			rr.Stop = "iterations"
			break
		}
		w, next = next, w
		it++
	}
	if res == nil {
		return nil, fmt.Errorf("robust: the time limit passed before the first solve")
	}
	rr.Residuals = r2
	for k, v := range rr.Weights {
		if v == 0 {
			rr.Rejected = append(rr.Rejected, k)
		}
	}
	res.Robust = rr
	// The initial estimate's objective on the final problem, so the two
	// objectives in the result are of the same F.
	res.InitialPoses = first.InitialPoses
	res.InitialObjective = res.Graph.Cost(first.InitialPoses, opts.Problem)
	total.Total = time.Since(start).Seconds()
	res.Timings = total
	// Status stays the final solve's: it is of the final weighted graph,
	// Result.Graph, which Result.Robust describes (RobustResult.Describe
	// puts the two in one phrase).
	return res, nil
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

// tlsCost is sum_e min(r2_e, c2), the TLS objective at the terms r2.
func tlsCost(r2 []float64, c2 float64) float64 {
	s := 0.0
	for _, v := range r2 {
		s += math.Min(v, c2)
	}
	return s
}

// weightedGraph returns g with each edge's kappa and tau (and its recorded
// information matrix) scaled by its weight, edges of weight 0 left out, and
// the index in g of each edge kept. Where leaving them out would split the
// graph, it keeps edges of weight 0 at weight 1 (in input order, each one
// that joins two parts), and returns them as bridged: such an edge can
// always be satisfied exactly by moving one part rigidly, so its weight does
// not change the optimum, and the certified pipeline needs one component.
func weightedGraph(g *posegraph.Graph, w []float64) (*posegraph.Graph, []int, []int) {
	n := g.N()
	parent := make([]int, n)
	for i := range parent {
		parent[i] = i
	}
	find := func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	union := func(i, j int) bool {
		a, b := find(i), find(j)
		if a == b {
			return false
		}
		parent[a] = b
		return true
	}
	use := make([]bool, g.M())
	for k, e := range g.Edges {
		if w[k] > 0 && e.Kappa*w[k] > 0 && e.Tau*w[k] > 0 {
			use[k] = true
			union(e.I, e.J)
		}
	}
	var bridged []int
	for k, e := range g.Edges {
		if !use[k] && union(e.I, e.J) {
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
