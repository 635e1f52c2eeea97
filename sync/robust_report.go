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
	Converged     bool    `json:"converged"`
	Stop          string  `json:"stop"`
	Mu            float64 `json:"mu"`
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
	// estimate, to compare with the threshold.
	Weight   float64 `json:"weight"`
	Residual float64 `json:"residual"`
	Trusted  bool    `json:"trusted,omitempty"`
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
		Converged: rr.Converged, Stop: rr.Stop, Mu: rr.Mu, InputEdges: g.M(),
		Rejected: []RobustEdge{}, Iterations: rr.Iterations, Edges: make([]RobustEdge, g.M()),
	}
	for k, e := range g.Edges {
		re := RobustEdge{Edge: k, From: g.IDs[e.I], To: g.IDs[e.J], Line: e.Line, Weight: rr.Weights[k], Trusted: rr.Trusted[k]}
		if k < len(rr.Residuals) {
			re.Residual = rr.Residuals[k]
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
