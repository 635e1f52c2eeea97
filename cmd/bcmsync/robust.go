package main

import (
	"fmt"
	"io"
	"strings"

	bsync "github.com/bcmsync/bcmsync/sync"
)

// robustListed is how many rejected edges the summary names; the JSON
// report lists them all.
const robustListed = 10

// printRobust writes the summary's outlier-rejection lines: the threshold
// and how GNC ended, then the first rejected edges by file line and ids.
func printRobust(w io.Writer, r *bsync.Report) {
	rr := r.Robust
	from := fmt.Sprintf("set by --robust-threshold, %d dof", rr.DOF)
	if rr.Quantile != 0 {
		from = fmt.Sprintf("chi-squared %g quantile, %d dof", rr.Quantile, rr.DOF)
	}
	odo := "odometry trusted"
	if !rr.TrustOdometry {
		odo = "odometry checked too"
	}
	end := "converged"
	if !rr.Converged {
		end = "NOT converged, stopped by " + rr.Stop
	} else if rr.Stop == "no outliers" {
		end = "no edge above the threshold"
	}
	fmt.Fprintf(w, "  %-19s%d of %d edges rejected, %d kept (c^2 %.4g: %s; %s)\n",
		"robust "+rr.Loss, len(rr.Rejected), rr.InputEdges, rr.InputEdges-len(rr.Rejected), rr.Threshold, from, odo)
	fmt.Fprintf(w, "                     %d weighted solves, final mu %.3g, %s\n", len(rr.Iterations), rr.Mu, end)
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

// robustEdges names up to robustListed edges as FILE:LINE (ids I-J), or
// "edge K (ids I-J)" for edges without a line.
func robustEdges(file string, es []bsync.RobustEdge) string {
	var parts []string
	for k, e := range es {
		if k == robustListed {
			parts = append(parts, fmt.Sprintf("... (%d more in the JSON report)", len(es)-k))
			break
		}
		if e.Line > 0 {
			parts = append(parts, fmt.Sprintf("%s:%d (ids %d-%d)", file, e.Line, e.From, e.To))
		} else {
			parts = append(parts, fmt.Sprintf("edge %d (ids %d-%d)", e.Edge, e.From, e.To))
		}
	}
	return strings.Join(parts, ", ")
}
