package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strings"

	bsync "github.com/bcmsync/bcmsync/sync"
)

// robustListed is how many rejected edges the summary names; the JSON
// report (--report) lists every edge.
const robustListed = 10

// printRobust writes the summary's outlier-rejection lines: the threshold,
// the consistency stage, how GNC and the TLS check ended, then the first
// rejected edges by file line and ids, with the stage that rejected each
// and its final term in units of c^2.
func printRobust(w io.Writer, r *bsync.Report) {
	rr := r.Robust
	from := fmt.Sprintf("set by --robust-threshold, %d dof", rr.DOF)
	if rr.Quantile != 0 {
		from = fmt.Sprintf("chi-squared %g quantile, %d dof", rr.Quantile, rr.DOF)
	}
	if rr.ObservationDOF > 0 {
		from += fmt.Sprintf("; observations %.4g, %d dof", rr.ObservationThreshold, rr.ObservationDOF)
	}
	odo := "odometry trusted"
	if !rr.TrustOdometry {
		odo = "odometry checked too"
	}
	end := "converged"
	switch {
	case !rr.Converged:
		end = "NOT converged, stopped by " + rr.Stop
	case rr.Stop == "no outliers":
		end = "converged, nothing above the threshold"
	}
	fmt.Fprintf(w, "  %-19s%d of %d edges rejected, %d kept (c^2 %.4g: %s; %s)\n",
		"robust "+rr.Loss, len(rr.Rejected), rr.InputEdges, rr.InputEdges-len(rr.Rejected), rr.Threshold, from, odo)
	if c := rr.Consistency; c != nil {
		fmt.Fprintf(w, "                     consistency: %d loop closures against their cycles: %d consistent, %d doubtful, %d set aside, %d untested (noise scale %.3g)\n",
			c.Candidates, c.Accepted, c.Doubtful, c.Rejected, c.Untested, c.Scale)
	}
	byStage := map[string]int{}
	for _, e := range rr.Rejected {
		byStage[e.Stage]++
	}
	gnc, certified := 0, 0
	for _, it := range rr.Iterations {
		if it.Stage == bsync.StageCertify {
			certified++
		} else {
			gnc++
		}
	}
	fmt.Fprintf(w, "                     rejected by the consistency stage %d, by GNC %d; %d GNC solves at rank %d, %d certified, %d TLS checks; %s\n",
		byStage[bsync.StageConsistency], byStage[bsync.StageGNC], gnc, rr.InnerRank, certified, rr.Checks, end)
	if rr.Fractional > 0 {
		fmt.Fprintf(w, "                     %d edges kept with a weight between 0 and 1\n", rr.Fractional)
	}
	if len(rr.Bridged) > 0 {
		fmt.Fprintf(w, "                     %d edges kept only to hold the graph together: %s\n", len(rr.Bridged), robustEdges(r.File, rr.Bridged))
	}
	if len(rr.Rejected) > 0 {
		fmt.Fprintf(w, "  rejected           %s\n", robustEdges(r.File, rr.Rejected))
	}
}

// robustEdges names up to robustListed edges as FILE:LINE (ids I-J; stage,
// term in units of c^2), or "edge K (...)" for edges without a line.
func robustEdges(file string, es []bsync.RobustEdge) string {
	var parts []string
	for k, e := range es {
		if k == robustListed {
			parts = append(parts, fmt.Sprintf("... and %d more (--report writes every edge)", len(es)-k))
			break
		}
		what := fmt.Sprintf("ids %d-%d", e.From, e.To)
		if e.Stage != "" {
			what += fmt.Sprintf("; %s, %.3g c^2", e.Stage, e.ResidualC2)
		}
		if e.Line > 0 {
			parts = append(parts, fmt.Sprintf("%s:%d (%s)", file, e.Line, what))
		} else {
			parts = append(parts, fmt.Sprintf("edge %d (%s)", e.Edge, what))
		}
	}
	return strings.Join(parts, ", ")
}

// robustFlags are the robust mode's flags of solve, the demo and bench.
type robustFlags struct {
	robust          string
	trustOdometry   bool
	consistency     bool
	robustQuantile  float64
	robustThreshold float64
}

func (f *robustFlags) registerRobust(fs *flag.FlagSet) {
	fs.StringVar(&f.robust, "robust", "none", "reject outliers with this robust loss: gnc-tls (truncated least squares: a consistency check of the loop closures, graduated non-convexity, a certified solve and a check; docs/robust.md) or none")
	fs.BoolVar(&f.trustOdometry, "trust-odometry", true, "with --robust, never reject an edge between poses adjacent in ascending id order")
	fs.BoolVar(&f.consistency, "robust-consistency", true, "with --robust, check the loop closures against cycles of odometry and accepted closures before GNC (needs trusted odometry)")
	fs.Float64Var(&f.robustQuantile, "robust-quantile", 0, "with --robust, the chi-squared probability `P` whose quantile (edge dimension degrees of freedom) is the threshold c^2 (0: 0.999)")
	fs.Float64Var(&f.robustThreshold, "robust-threshold", 0, "with --robust, the threshold c^2 on an edge's term of F itself, instead of --robust-quantile (0: from the quantile)")
}

// robustOptions checks the robust flags and turns them into the solver's
// options; every error names its flag.
func (f *robustFlags) robustOptions() (bsync.RobustOptions, error) {
	loss, err := bsync.ParseRobust(f.robust)
	if err != nil {
		return bsync.RobustOptions{}, fmt.Errorf("--robust: %v", err)
	}
	switch {
	case loss == bsync.RobustNone && (f.robustQuantile != 0 || f.robustThreshold != 0 || !f.trustOdometry || !f.consistency):
		return bsync.RobustOptions{}, errors.New("--robust-quantile, --robust-threshold, --trust-odometry and --robust-consistency need --robust gnc-tls")
	case !(f.robustQuantile >= 0 && f.robustQuantile < 1):
		return bsync.RobustOptions{}, fmt.Errorf("--robust-quantile must be a probability in (0, 1), not %g", f.robustQuantile)
	case !(f.robustThreshold >= 0) || math.IsInf(f.robustThreshold, 0):
		return bsync.RobustOptions{}, fmt.Errorf("--robust-threshold must be a finite number >= 0, not %g", f.robustThreshold)
	case f.robustQuantile != 0 && f.robustThreshold != 0:
		return bsync.RobustOptions{}, errors.New("set --robust-quantile or --robust-threshold, not both")
	}
	return bsync.RobustOptions{Loss: loss, Quantile: f.robustQuantile, Threshold: f.robustThreshold,
		CheckOdometry: !f.trustOdometry, NoConsistency: !f.consistency}, nil
}
