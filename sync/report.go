package sync

import (
	"encoding/json"
	"io"
	"math"
)

// ReportSchema names the format of the JSON Report, its "schema" key:
// "bcmsync.report/" and a version, raised whenever a key is removed or
// changes its meaning (adding a key does not raise it). Version 2 is the
// first that carries the key; a report without it is version 1, whose keys
// version 2 keeps. Version 3 records only the options that ran: the BCM
// and trust-region options (rule, bcm_tol, bcm_sweeps, bcm_decrease_tol,
// max_iterations) only when options.method is bcm+rtr, and a distributed
// run's rounds in levels[].rounds, where version 2 put them in
// bcm_sweeps; a solve's keys are otherwise version 2's. A reader that
// depends on a key's meaning should check the version it knows.
const ReportSchema = "bcmsync.report/3"

// Report is the machine-readable form of a Result, written by `bcmsync
// solve --report`. Its keys are stable (see ReportSchema and docs/cli.md).
type Report struct {
	// Schema is ReportSchema in a report NewReport made; ReadReport leaves
	// it as read ("" for a version 1 report).
	Schema  string `json:"schema"`
	File    string `json:"file"`
	Problem string `json:"problem"` // "SE(d)" or "SO(d)"
	D       int    `json:"d"`
	N       int    `json:"n"` // poses (landmarks not included)
	M       int    `json:"m"` // edges, landmark observations included
	// Landmarks and Observations count the landmark vertices and the
	// edges that observe them (omitted when zero).
	Landmarks    int `json:"landmarks,omitempty"`
	Observations int `json:"observations,omitempty"`
	// Priors counts the priors (posegraph's priors.go), omitted when
	// zero; with any, Frame is "world": the estimate is in the priors'
	// world frame (Result.Poses has the world vertex at the identity), and
	// N does not count the world vertex. Both are omitted without priors.
	Priors int    `json:"priors,omitempty"`
	Frame  string `json:"frame,omitempty"`
	// HeadingFree is true when the priors leave the estimate's rotation
	// about the world frame free (posegraph.Graph.PriorsFixHeading): its
	// heading is then one of a continuum of optima.
	HeadingFree bool `json:"heading_free,omitempty"`
	// RawQuaternions is true when 3-D edge rotations were read as SE-Sync
	// reads them (g2o.ReadOptions.RawQuaternions): Objective is then
	// SE-Sync's tr(XQX^T).
	RawQuaternions      bool    `json:"raw_quaternions"`
	Init                string  `json:"init"`
	InitialObjective    float64 `json:"initial_objective"`
	Objective           float64 `json:"objective"`
	RelaxationObjective float64 `json:"relaxation_objective"`
	// DualBound and the suboptimality bounds are null unless a lower bound
	// on F* was proven (Result.HasBound): tr(Lambda) bounds nothing when S
	// is not positive semidefinite. RelativeGap, SuboptimalityBound /
	// |Objective|, is also null when that ratio is not a finite number
	// (Objective 0, as on noise-free data, or so near 0 that the ratio
	// overflows): JSON has no Inf or NaN.
	DualBound          *float64 `json:"dual_bound"`
	SuboptimalityBound *float64 `json:"suboptimality_bound"`
	RelativeGap        *float64 `json:"relative_suboptimality_bound"`
	GapAllowed         float64  `json:"gap_allowed"`
	// GapAllowedBy names the term of max(gap_tol max(f_unit, |F|),
	// gap_abs) that set GapAllowed: "gap_tol*|F|", "gap_tol*unit"
	// (|F| < f_unit) or "gap_abs" (Result.GapAllowedBy).
	GapAllowedBy string `json:"gap_allowed_by"`
	// FUnit is Result.FUnit, the unit of F below which gap_tol is relative
	// to it rather than to |F|.
	FUnit float64 `json:"f_unit"`
	// ShiftFloor is the least the certificate's shift could cost the bound
	// at the rounding floor eig_tol (Result.ShiftFloor): a gap_allowed
	// below it cannot be proven in double precision.
	ShiftFloor float64 `json:"shift_floor"`
	Certified  bool    `json:"certified"`
	Status     string  `json:"status"`
	// Error is what aborted the solve (status "aborted by an error",
	// Result.Error); absent otherwise.
	Error         string  `json:"error,omitempty"`
	Rank          int     `json:"rank"`
	MinEigenvalue float64 `json:"min_eigenvalue"`
	Eta           float64 `json:"eta"`
	// EtaPoses is the number of poses the shift eta is on (Result.EtaPoses).
	EtaPoses int `json:"eta_poses,omitempty"`
	// Estimate says where the returned poses came from (Result.Estimate).
	Estimate string `json:"estimate"`
	// WeightSpread is the largest edge weight over the smallest
	// (Result.WeightSpread).
	WeightSpread float64 `json:"weight_spread"`
	// ExpectedObjective and its standard deviation: F at the truth for
	// measurements as precise as their weights claim (Result.ExpectedObjective).
	ExpectedObjective   float64 `json:"expected_objective"`
	ExpectedObjectiveSD float64 `json:"expected_objective_sd"`
	Timings             Timings `json:"timings"`
	PeakRSSBytes        int64   `json:"peak_rss_bytes,omitempty"`
	Levels              []Level `json:"levels"`
	// Stages lists the stages that ran, with their start times
	// (Result.Stages): none starts after time_limit_seconds.
	Stages  []Stage    `json:"stages"`
	History []Record   `json:"history"`
	Options ReportOpts `json:"options"`
	// Robust is the outlier rejection's account (robust mode only); N, M
	// and the objectives are then of the final weighted graph.
	Robust *RobustReport `json:"robust,omitempty"`
	// Distributed is a distributed solve's account (bcmsync distributed);
	// absent otherwise.
	Distributed *DistributedReport `json:"distributed,omitempty"`
}

// DistributedReport is the account of a distributed solve
// (sync/distributed's Stats.Report). Messages and bytes count records as
// sent once (a server fans a publication out to each subscriber), resent
// requests included, without the authentication trailer.
type DistributedReport struct {
	Agents        int `json:"agents"`
	ColourClasses int `json:"colour_classes"`
	// Rounds is the rounds over all levels (a resumed run's include the
	// checkpoint's, ResumedRounds).
	Rounds int `json:"rounds"`
	// Messages and Bytes are the run's traffic: the coordinator's
	// requests and the agents' replies (CoordinatorMessages and
	// CoordinatorBytes) plus the agents' pose publications (Publications
	// and PublicationBytes).
	Messages            int64 `json:"messages"`
	Bytes               int64 `json:"bytes"`
	CoordinatorMessages int64 `json:"coordinator_messages"`
	CoordinatorBytes    int64 `json:"coordinator_bytes"`
	Publications        int64 `json:"publications"`
	PublicationBytes    int64 `json:"publication_bytes"`
	// TransferBytes is the part of CoordinatorBytes that moved whole
	// blocks: Gathers of the point to the coordinator and Sets of a new
	// point (after an escape, a rounding, exact translations), O(n) each.
	TransferBytes int64 `json:"transfer_bytes"`
	Gathers       int   `json:"gathers"`
	Sets          int   `json:"sets"`
	// BoundaryPoses counts the poses with an edge to another part,
	// BoundaryEdges the edges between parts. BytesPerRound is the traffic
	// of the rounds (Bytes less TransferBytes) per round, and
	// BytesPerRoundPerBoundaryPose that over BoundaryPoses: a round's
	// traffic is O(boundary), about two publications and a few requests
	// per agent.
	BoundaryPoses                int     `json:"boundary_poses"`
	BoundaryEdges                int     `json:"boundary_edges"`
	BytesPerRound                float64 `json:"bytes_per_round"`
	BytesPerRoundPerBoundaryPose float64 `json:"bytes_per_round_per_boundary_pose"`
	// Resends counts the publications asked again because a message was
	// lost or late, Stale the updates skipped for want of them, Restarts
	// the agents that rejoined after losing their state.
	Resends  int `json:"resends"`
	Stale    int `json:"stale"`
	Restarts int `json:"restarts"`
	// AgentPeakRSS is each agent's peak resident set in bytes as it
	// measured it, up to its last reply (0: not measured, as for agents
	// inside the coordinator's process), CoordinatorPeakRSS the coordinator's
	// (with an embedded NATS server, the server's too).
	AgentPeakRSS       []int64 `json:"agent_peak_rss_bytes"`
	CoordinatorPeakRSS int64   `json:"coordinator_peak_rss_bytes"`
	// Checkpoints counts the checkpoints written (--checkpoint);
	// ResumedRounds and ResumedRank are the rounds and the rank of the
	// checkpoint a resumed run (--resume) started from (0: none).
	Checkpoints   int `json:"checkpoints"`
	ResumedRounds int `json:"resumed_rounds,omitempty"`
	ResumedRank   int `json:"resumed_rank,omitempty"`
	// Authenticated is true when every message carried a MAC under the
	// run's key; Rejected then counts the messages that failed
	// authentication, which were dropped, never applied.
	Authenticated bool           `json:"authenticated"`
	Rejected      AuthRejections `json:"rejected"`
	// Certificate says where the certificate's test was made: "parts"
	// (each agent factored its rows of the shifted S and sent the Schur
	// complement on its boundary poses, the coordinator factored the
	// boundary system of CertificateBoundaryPoses poses) or "central"
	// (the coordinator factored S from the gathered point).
	// CertificateFactorizations counts the tests by parts,
	// CertificateBytes their traffic (part of CoordinatorBytes), and
	// CertificateFallbacks the tests by parts that an agent's failure
	// sent to the gathered point.
	Certificate               string `json:"certificate,omitempty"`
	CertificateBoundaryPoses  int    `json:"certificate_boundary_poses,omitempty"`
	CertificateFactorizations int    `json:"certificate_factorizations,omitempty"`
	CertificateBytes          int64  `json:"certificate_bytes,omitempty"`
	CertificateFallbacks      int    `json:"certificate_fallbacks,omitempty"`
	// Roundings counts the roundings made by parts (each agent its own
	// blocks and its interior translation factor, the coordinator U_d,
	// the reflection and the boundary system), RoundingBytes their
	// traffic (part of CoordinatorBytes, the rounded poses included).
	Roundings     int   `json:"roundings_by_parts,omitempty"`
	RoundingBytes int64 `json:"rounding_bytes,omitempty"`
	// EscapesByParts counts the saddle escapes made by the agents (the
	// eigenvector by inverse iteration through their factors, the lift
	// of their own blocks), EscapeFactorizations the factorizations of
	// S + tau I by parts that found the shift, EscapeBytes the traffic of
	// both (part of CoordinatorBytes).
	EscapesByParts       int   `json:"escapes_by_parts,omitempty"`
	EscapeFactorizations int   `json:"escape_factorizations,omitempty"`
	EscapeBytes          int64 `json:"escape_bytes,omitempty"`
}

// AuthRejections counts rejected messages by cause: forged (no valid MAC,
// or from a sender that may not send it), replayed (a sequence number
// already seen or too old), foreign (of another run).
type AuthRejections struct {
	Forged   int64 `json:"forged"`
	Replayed int64 `json:"replayed"`
	Foreign  int64 `json:"foreign"`
}

// ReportOpts records the options the solve ran with (Result.Options),
// defaults filled in. Method names the level optimizer (Result.Method):
// the BCM and trust-region options (rule, bcm_tol, bcm_sweeps,
// bcm_decrease_tol, max_iterations) are recorded only for MethodBCMRTR,
// the one that runs them, and MethodOptions holds another method's own
// (Result.MethodOptions).
type ReportOpts struct {
	Method  string  `json:"method"`
	Rule    string  `json:"rule,omitempty"`
	Threads int     `json:"threads"`
	Seed    uint64  `json:"seed"`
	Rank0   int     `json:"rank0"`
	MaxRank int     `json:"max_rank"`
	GradTol float64 `json:"grad_tol"`
	EigTol  float64 `json:"eig_tol"`
	GapTol  float64 `json:"gap_tol"`
	GapAbs  float64 `json:"gap_abs"`
	BCMTol  float64 `json:"bcm_tol,omitempty"`
	BCMMax  int     `json:"bcm_sweeps,omitempty"`
	// BCMDecreaseTol is Options.BCMDecreaseTol.
	BCMDecreaseTol float64 `json:"bcm_decrease_tol,omitempty"`
	Limit          float64 `json:"time_limit_seconds"`
	// MaxIterations is the trust region's step limit per run
	// (Options.MaxIterations).
	MaxIterations int `json:"max_iterations,omitempty"`
	// LargestComponent is Options.LargestComponent.
	LargestComponent bool `json:"largest_component,omitempty"`
	MethodOptions    any  `json:"method_options,omitempty"`
}

// reportOpts returns res's options for the report.
func reportOpts(res *Result) ReportOpts {
	o := res.Options
	ro := ReportOpts{Method: res.Method, Threads: o.Threads, Seed: o.Seed, Rank0: o.Rank0, MaxRank: o.MaxRank,
		GradTol: o.GradTol, EigTol: o.EigTol, GapTol: o.GapTol, GapAbs: o.GapAbs, Limit: o.TimeLimit.Seconds(),
		LargestComponent: o.LargestComponent, MethodOptions: res.MethodOptions}
	if res.Method == MethodBCMRTR {
		ro.Rule, ro.BCMTol, ro.BCMMax, ro.BCMDecreaseTol = o.Rule.String(), o.BCMTol, o.BCMMaxSweeps, o.BCMDecreaseTol
		ro.MaxIterations = o.MaxIterations
	}
	return ro
}

// NewReport builds the report of res, solved from file, with the options
// it ran with (Result.Options).
func NewReport(file string, res *Result) *Report {
	g := res.Graph
	opts := res.Options
	var dual, gap, rel *float64
	if res.HasBound {
		dual, gap = &res.DualBound, &res.SuboptimalityBound
		if v := res.SuboptimalityBound / math.Abs(res.Objective); !math.IsInf(v, 0) && !math.IsNaN(v) {
			rel = &v
		}
	}
	hist := res.History
	if hist == nil {
		hist = []Record{}
	}
	stages := res.Stages
	if stages == nil {
		stages = []Stage{}
	}
	np, nw, frame := len(g.Priors()), 0, ""
	if np > 0 {
		nw, frame = 1, FrameWorld
	}
	return &Report{
		Schema: ReportSchema,
		File:   file, Problem: res.Problem.String(), D: g.D, N: g.NumPoses() - nw, M: g.M(), RawQuaternions: g.RawRotations,
		Landmarks: g.NumLandmarks(), Observations: observations(g), Priors: np, Frame: frame, HeadingFree: !g.PriorsFixHeading(),
		Init: string(opts.Init), InitialObjective: res.InitialObjective,
		Objective: res.Objective, RelaxationObjective: res.RelaxationObjective,
		DualBound: dual, SuboptimalityBound: gap, RelativeGap: rel, GapAllowed: res.GapAllowed, GapAllowedBy: res.GapAllowedBy, FUnit: res.FUnit,
		ShiftFloor: res.ShiftFloor,
		Certified:  res.Certified, Status: string(res.Status), Error: res.Error, Rank: res.Rank,
		MinEigenvalue: res.MinEigenvalue, Eta: res.Eta, EtaPoses: res.EtaPoses, Estimate: string(res.Estimate),
		WeightSpread: res.WeightSpread, ExpectedObjective: res.ExpectedObjective, ExpectedObjectiveSD: res.ExpectedObjectiveSD, Timings: res.Timings,
		Levels: res.Levels, Stages: stages, History: hist,
		Options: reportOpts(res),
		Robust:  newRobustReport(res.Robust),
	}
}

// FrameWorld is Report.Frame of a solve with priors: the estimate is in
// the priors' world frame.
const FrameWorld = "world"

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	if b, ok := appendReportJSON(nil, r); ok {
		_, err := w.Write(b)
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // a file named "<stdin>" stays readable
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// ReadReport parses a report written by WriteJSON.
func ReadReport(rd io.Reader) (*Report, error) {
	var r Report
	dec := json.NewDecoder(rd)
	if err := dec.Decode(&r); err != nil {
		return nil, err
	}
	return &r, nil
}
