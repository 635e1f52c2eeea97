package cli

import (
	"errors"
	"fmt"

	"github.com/bcmsync/bcmsync/g2o"
	"github.com/bcmsync/bcmsync/posegraph"
)

// lenientUsage documents --lenient for solve, info and plot.
const lenientUsage = "skip records of unsupported types (priors, bearing-only landmarks, ...) with a warning; " +
	"malformed records and edges to undeclared vertices stay errors"

// lenientHint adds to a reading error the flag that gets past it: an
// unsupported record (a landmark, a prior) is skipped by --lenient. The
// library's message cannot name a flag; the command can.
func lenientHint(err error) error {
	if errors.Is(err, g2o.ErrUnsupported) {
		return fmt.Errorf("%w; --lenient skips records of unsupported types", err)
	}
	return err
}

// disconnectedHint rewrites the solver's disconnected-graph error to name
// --largest-component and what it would keep.
func disconnectedHint(err error) error {
	var de *posegraph.DisconnectedError
	if !errors.As(err, &de) || len(de.Sizes) == 0 {
		return err
	}
	src := de.Source
	if src == "" {
		src = "graph"
	}
	return fmt.Errorf("%s: pose graph is disconnected: %d components of sizes %v, and a certified solve needs one; "+
		"--largest-component solves the largest (%d poses)", src, len(de.Sizes), sizesText(de.Sizes), de.Sizes[0])
}

// sizesText lists component sizes, the first ten and a count of the rest,
// so a graph of a thousand pieces does not print a thousand numbers.
func sizesText(sizes []int) string {
	const show = 10
	if len(sizes) <= show {
		return fmt.Sprint(sizes)
	}
	return fmt.Sprintf("%v and %d more", sizes[:show], len(sizes)-show)
}

// droppedNote says what --largest-component left out: solved is the
// largest component of g.
func droppedNote(g, solved *posegraph.Graph) string {
	comps := len(g.Components()) - 1
	return fmt.Sprintf("largest component: kept %d of %d poses and %d of %d edges; dropped %d poses and %d edges in %d other component(s)",
		solved.N(), g.N(), solved.M(), g.M(), g.N()-solved.N(), g.M()-solved.M(), comps)
}
