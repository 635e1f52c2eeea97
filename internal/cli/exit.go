package cli

import (
	"fmt"
	"io"

	bsync "github.com/bcmsync/bcmsync/sync"
)

// Exit statuses of bcmsync, the same for every command. A script can rely
// on them: 0 is a certified estimate (or, for the commands that solve
// nothing, success); 1 and 2 are failures with no result; 3 to 9 are
// results that are not certified, one status for each way a solve can end
// short of a certificate, with every requested output written. The table
// is printed by `bcmsync help` (exitStatusHelp), in README.md and in
// docs/cli.md; keep the four together.
const (
	exitOK           = 0 // certified; success
	exitError        = 1 // an error: unreadable or invalid input, a failed write, an internal failure
	exitUsage        = 2 // a usage error: the command line, or the files rule, refused before anything ran
	exitBounded      = 3 // sync.Bounded, sync.BelowPrecision: certified only to the reported suboptimality bound
	exitNotTight     = 4 // sync.CertifiedRelaxation: relaxation certified, rounding not tight
	exitNotCertified = 5 // sync.NotCertified: no certificate at the last rank
	exitInconsistent = 6 // sync.Inconsistent: the measurements contradict their weights
	exitLimit        = 7 // a limit stopped the solve: sync.TimeLimit, sync.IterationLimit, sync.RobustUnsettled (GNC's or the TLS check's cap)
	exitCancelled    = 8 // cancelled: interrupted (Ctrl-C, SIGTERM)
	exitAborted      = 9 // sync.Aborted: the solver failed (a distributed run lost an agent); the estimate so far
)

// statusExitCode is the exit status of a solve that ended with status s:
// the one place that maps sync.Status to an exit status. A status this
// build does not know (a newer package sync) is exitError: not certified,
// and not mistaken for any of the outcomes above.
func statusExitCode(s bsync.Status) int {
	switch s {
	case bsync.Certified:
		return exitOK
	case bsync.Bounded, bsync.BelowPrecision:
		return exitBounded
	case bsync.CertifiedRelaxation:
		return exitNotTight
	case bsync.NotCertified:
		return exitNotCertified
	case bsync.Inconsistent:
		return exitInconsistent
	case bsync.TimeLimit:
		return exitLimit
	case bsync.IterationLimit, bsync.RobustUnsettled:
		return exitLimit
	case bsync.Cancelled:
		return exitCancelled
	case bsync.Aborted:
		return exitAborted
	}
	return exitError
}

// resultExitCode is statusExitCode for a solve that may have been robust:
// a certified final solve whose GNC weights did not settle (stopped by its
// iteration cap or the time limit) is not the robust estimate, and exits
// as the limit (or the cancellation) that stopped it.
func resultExitCode(s bsync.Status, robustConverged bool, robustStop string) int {
	code := statusExitCode(s)
	if code != exitOK || robustConverged {
		return code
	}
	if robustStop == string(bsync.Cancelled) {
		return exitCancelled
	}
	return exitLimit
}

// notCertifiedError makes the process exit with the status of an
// uncertified result (resultExitCode), after every output was written: a
// pipeline must not take an uncertified estimate for an optimum.
type notCertifiedError struct {
	status string
	code   int
}

func (e notCertifiedError) Error() string { return "no certificate: " + e.status }

// exitStatusHelp is the exit-status table of `bcmsync help`.
func exitStatusHelp(w io.Writer) {
	fmt.Fprintf(w, `exit status (every command):
  0  success; for solve, demo and distributed: the estimate is certified
  1  error: unreadable or invalid input (FILE:LINE: problem), a failed write, an internal failure
  2  usage error: bad command line, or an output that would overwrite an input or another output
  3  not certified: the proof holds, but only to a bound above the gap tolerance
  4  not certified: the relaxation is certified, but rounding is not tight
  5  not certified at the last rank (--max-rank)
  6  not certified: the measurements contradict their weights (try --robust gnc-tls)
  7  not certified: a limit stopped the solve (--time-limit, --max-iterations; with --robust, GNC's
     caps on weight updates and TLS checks: the weights did not settle)
  8  cancelled (interrupted)
  9  aborted by an error (distributed: an agent gone); the estimate so far is written
3 to 9 write every requested output first; view exits 0 whenever it wrote the page, and
bench whenever every graph gave a row.
`)
}
