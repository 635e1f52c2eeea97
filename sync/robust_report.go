package sync

// RobustReport is the robust mode's part of a Report: the threshold, how GNC
// ended, every input edge's final weight and the rejected edges by file id
// and line.
type RobustReport struct {
	Loss string `json:"loss"`
	// Describe says whose certificate the report's is and how many edges
	// were rejected (RobustResult.Describe).
	Describe string `json:"describe"`
	// Threshold is c^2, in units of F's edge terms; Quantile the
	// chi-squared probability it came from (absent when set directly) with
	// DOF degrees of freedom.
	Threshold     float64 `json:"threshold"`
	Quantile      float64 `json:"quantile,omitempty"`
	DOF           int     `json:"dof"`
	TrustOdometry bool    `json:"trust_odometry"`
	// ObservationThreshold and ObservationDOF are those of landmark
	// observations (absent without landmarks).
	ObservationThreshold float64 `json:"observation_threshold,omitempty"`
	ObservationDOF       int     `json:"observation_dof,omitempty"`
	Converged            bool    `json:"converged"`
	Stop                 string  `json:"stop"`
	Mu                   float64 `json:"mu"`
	// InnerRank is the rank of GNC's weighted solves; Checks the TLS
	// checks made at certified optima.
	InnerRank int `json:"inner_rank"`
	Checks    int `json:"checks"`
	// MuStep, MaxIterations and InnerGradTol are GNC's options as they ran
	// (RobustOptions); ConsistencyStage says whether the consistency stage
	// was asked for (it runs only with trusted odometry).
	MuStep           float64 `json:"mu_step"`
	MaxIterations    int     `json:"max_iterations"`
	InnerGradTol     float64 `json:"inner_grad_tol"`
	ConsistencyStage bool    `json:"consistency_stage"`
	// Consistency summarizes the consistency stage (absent when it did not
	// run).
	Consistency *ConsistencyStats `json:"consistency,omitempty"`
	// InputEdges counts the edges given; Inliers those of weight 1,
	// Fractional those in (0, 1) (none once converged).
	InputEdges int `json:"input_edges"`
	Inliers    int `json:"inliers"`
	Fractional int `json:"fractional"`
	// Rejected are the edges of weight 0; Bridged those GNC gave weight 0
	// but that were kept to hold the graph together.
	Rejected   []RobustEdge      `json:"rejected"`
	Bridged    []RobustEdge      `json:"bridged,omitempty"`
	Iterations []RobustIteration `json:"iterations"`
	// Edges lists every input edge in input order.
	Edges []RobustEdge `json:"edges"`
}

// RobustEdge is one input edge's outcome.
type RobustEdge struct {
	// Edge is the edge's position among the input's edges (from 0).
	Edge int `json:"edge"`
	// From and To are the poses' file ids, Line the edge's line in its
	// file (absent for edges made in memory).
	From int `json:"from"`
	To   int `json:"to"`
	Line int `json:"line,omitempty"`
	// Weight is the final weight; Residual the term r_e^2 at the final
	// estimate, and ResidualC2 the same in units of the edge's threshold
	// c^2 (above 1: outside TLS's inlier set).
	Weight     float64 `json:"weight"`
	Residual   float64 `json:"residual"`
	ResidualC2 float64 `json:"residual_c2"`
	Trusted    bool    `json:"trusted,omitempty"`
	// Stage names the stage that rejected an edge of weight 0:
	// "consistency" (set aside before any solve and never taken back) or
	// "gnc" (a GNC weight update or a TLS check).
	Stage string `json:"stage,omitempty"`
}

// newRobustReport builds the report's robust section (nil for a plain
// solve).
func newRobustReport(rr *RobustResult) *RobustReport {
	if rr == nil {
		return nil
	}
	g := rr.Input
	rep := &RobustReport{
		Loss: string(rr.Loss), Describe: rr.Describe(), Threshold: rr.Threshold, Quantile: rr.Quantile, DOF: rr.DOF, TrustOdometry: rr.TrustOdometry,
		Converged: rr.Converged, Stop: rr.Stop, Mu: rr.Mu, InputEdges: g.M(), InnerRank: rr.InnerRank, Checks: rr.Checks,
		MuStep: rr.Options.MuStep, MaxIterations: rr.Options.MaxIterations, InnerGradTol: rr.Options.InnerGradTol,
		ConsistencyStage: !rr.Options.NoConsistency,
		Rejected:         []RobustEdge{}, Iterations: rr.Iterations, Edges: make([]RobustEdge, g.M()),
	}
	if g.HasLandmarks() {
		rep.ObservationThreshold, rep.ObservationDOF = rr.ObservationThreshold, rr.ObservationDOF
	}
	if rr.Consistency.Candidates > 0 {
		c := rr.Consistency
		rep.Consistency = &c
	}
	for k, e := range g.Edges {
		re := RobustEdge{Edge: k, From: g.IDs[e.I], To: g.IDs[e.J], Line: e.Line, Weight: rr.Weights[k], Trusted: rr.Trusted[k]}
		if k < len(rr.Residuals) {
			re.Residual = rr.Residuals[k]
			if k < len(rr.Thresholds) && rr.Thresholds[k] > 0 {
				re.ResidualC2 = re.Residual / rr.Thresholds[k]
			}
		}
		if k < len(rr.Stages) && rr.Weights[k] == 0 {
			re.Stage = rr.Stages[k]
		}
		rep.Edges[k] = re
		switch w := rr.Weights[k]; {
		case w == 1:
			rep.Inliers++
		case w > 0:
			rep.Fractional++
		}
	}
	for _, k := range rr.Rejected {
		rep.Rejected = append(rep.Rejected, rep.Edges[k])
	}
	for _, k := range rr.Bridged {
		rep.Bridged = append(rep.Bridged, rep.Edges[k])
	}
	return rep
}
