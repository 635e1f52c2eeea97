package sync

import (
	"github.com/bcmsync/bcmsync/posegraph"
)

// Status says how a solve ended.
type Status string

const (
	// Certified: S = Q - Lambda is positive semidefinite (to eta) at the
	// final point and the rounded estimate attains the dual bound: it is a
	// global optimum.
	Certified Status = "certified"
	// CertifiedRelaxation: the relaxation is solved and certified, but its
	// solution has rank > d, so the rounded estimate is only within
	// SuboptimalityBound of the optimum.
	CertifiedRelaxation Status = "relaxation certified, rounding not tight"
	// Bounded: S is proven positive semidefinite up to the certificate's
	// shift, but the resulting bound on F - F* is above the gap tolerance
	// (the point is not converged enough, or the shift's rounding floor is
	// large next to F). The estimate is within SuboptimalityBound of F*.
	Bounded Status = "certified only to the reported suboptimality bound"
	// NotCertified: the certificate still failed at the maximum rank.
	NotCertified Status = "not certified at max rank"
	// TimeLimit: stopped by the time limit before a certificate.
	TimeLimit Status = "stopped by time limit"
	// Cancelled: the context was cancelled.
	Cancelled Status = "cancelled"
)

// Record is one point of the convergence history.
type Record struct {
	Rank     int     `json:"rank"`
	Phase    string  `json:"phase"` // "bcm" (one sweep) or "rtr" (one trust-region step)
	Iter     int     `json:"iter"`  // within the level, counting BCM sweeps then RTR steps
	Seconds  float64 `json:"seconds"`
	F        float64 `json:"f"`
	GradNorm float64 `json:"grad_norm"`
	RelGrad  float64 `json:"rel_grad_norm"`
	// The trust-region step that led to this point (rtr records after a
	// level's first; a record without a step has them zero, and in JSON
	// a zero or false field is left out): Inner is its tCG iterations,
	// Factorizations the numeric Cholesky factorizations it attempted, of
	// the Hessian (failed rungs of the shift ladder included, and S's in
	// the split form above rank d) or of Q + sigma I, 0 when the factor in
	// use was kept from an earlier step. FactorSeconds is the time of the
	// preconditioner's update: the factorizations with the Hessian's
	// assembly and, after a rank change, its symbolic analysis. Precond
	// names the preconditioner tCG used: "hessian", "q" (Q + sigma I, when
	// the Hessian, or S, did not factor) or "none" (Q did not factor
	// either). When the step made the Hessian factor it used, Shift is that
	// factor's diagonal shift relative to the Hessian's largest diagonal
	// entry and Raised the pivots the modified factorization raised.
	// Accepted reports whether the step was taken. A factorization made
	// at the last point, when tCG found no step to take there, is in no
	// record.
	Inner          int     `json:"inner,omitempty"`
	Factorizations int     `json:"factorizations,omitempty"`
	FactorSeconds  float64 `json:"factor_seconds,omitempty"`
	Shift          float64 `json:"shift,omitempty"`
	Raised         int     `json:"raised,omitempty"`
	Precond        string  `json:"precond,omitempty"`
	Accepted       bool    `json:"accepted,omitempty"`
}

// Level summarizes one rung of the Riemannian staircase.
type Level struct {
	Rank          int     `json:"rank"`
	BCMSweeps     int     `json:"bcm_sweeps"`
	BCMStop       string  `json:"bcm_stop"`
	BCMSeconds    float64 `json:"bcm_seconds"`
	RTRIterations int     `json:"rtr_iterations"`
	RTRInner      int     `json:"rtr_inner_iterations"`
	RTRStop       string  `json:"rtr_stop"`
	RTRSeconds    float64 `json:"rtr_seconds"`
	F             float64 `json:"f"`
	GradNorm      float64 `json:"grad_norm"`
	RelGrad       float64 `json:"rel_grad_norm"`
	DualBound     float64 `json:"dual_bound"`
	MinEigenvalue float64 `json:"min_eigenvalue"`
	EigMethod     string  `json:"min_eigenvalue_method"`
	Certified     bool    `json:"certified"`
	// EscapeDecrease is F's decrease along the negative-curvature
	// direction into the next rank (0 when the level certified).
	EscapeDecrease float64 `json:"escape_decrease,omitempty"`
	CertifySeconds float64 `json:"certify_seconds"`
}

// Timings are wall-clock seconds per stage. Init includes building Q and
// its fill-reducing order, which the chordal initialization and every
// later factorization share.
type Timings struct {
	Parse    float64 `json:"parse"`
	Init     float64 `json:"init"`
	Optimize float64 `json:"optimize"`
	Certify  float64 `json:"certify"`
	Round    float64 `json:"round"`
	Total    float64 `json:"total"`
}

// Result is a solve's answer and everything needed to trust it.
type Result struct {
	// Poses is the estimate in the input's gauge (the anchor keeps its
	// input pose), indexed like the graph; for Rotations T is zero.
	Poses []posegraph.Pose
	// Graph is the graph that was solved: the input, or its largest
	// component with Options.LargestComponent.
	Graph   *posegraph.Graph
	Problem posegraph.Problem
	Status  Status
	// Certified is true when Status is Certified.
	Certified bool
	// Objective is F of the rounded estimate (DESIGN.md section 1), as
	// Graph.Cost evaluates it: with Graph.RawRotations (SE-Sync's reading of
	// 3-D files) that is SE-Sync's tr(XQX^T), F plus a constant.
	Objective float64
	// RelaxationObjective is F at the final rank-r point.
	RelaxationObjective float64
	// HasBound reports whether a certificate passed: only then are
	// DualBound and SuboptimalityBound set.
	HasBound bool
	// DualBound is tr(Lambda) - Eta d n, a rigorous lower bound on the
	// optimum: S + Eta D_Y was proven positive definite (D_Y the identity on
	// the rotation coordinates).
	DualBound float64
	// SuboptimalityBound is Objective - DualBound >= Objective - F*.
	SuboptimalityBound float64
	// GapAllowed is what Certified allows of SuboptimalityBound:
	// Options.GapTol |F| plus the certificate's rounding floor.
	GapAllowed float64
	// MinEigenvalue estimates lambda_min(S) at the certified point (an
	// upper estimate from inverse iteration), or at the last point tried.
	MinEigenvalue float64
	// Eta is the certificate's shift on the rotation coordinates.
	Eta  float64
	Rank int
	// Initial is the initialization's objective and poses (before any
	// optimization), for plots.
	InitialObjective float64
	InitialPoses     []posegraph.Pose
	Levels           []Level
	History          []Record
	Timings          Timings
	// Robust is the outlier rejection's account (nil without
	// Options.Robust): each edge's weight, the rejected edges, the outer
	// iterations. With it, Graph is the final weighted graph, the one the
	// certificate is of.
	Robust *RobustResult
}
