package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/bcmsync/bcmsync/bcm"
	"github.com/bcmsync/bcmsync/g2o"
	"github.com/bcmsync/bcmsync/posegraph"
	bsync "github.com/bcmsync/bcmsync/sync"
)

// solveFlags are the options of `bcmsync solve`, shared with the demo and
// the bench command.
type solveFlags struct {
	out, tum, report, plots string
	init, rule              string
	rank0, maxRank          int
	threads                 int
	seed                    uint64
	gradTol, eigTol, bcmTol float64
	gapTol, bcmDecrease     float64
	gapAbs                  float64
	bcmSweeps               int
	maxIterations           int
	timeLimit               time.Duration
	rotations, largest      bool
	lenient, rawQuat        bool
	quiet, verbose, json    bool
	robust                  string
	trustOdometry           bool
	robustQuantile          float64
	robustThreshold         float64
}

// rawQuatUsage documents --raw-quaternions for solve, bench and info.
const rawQuatUsage = "SE-Sync's reading: build each EDGE_SE3:QUAT rotation from its quaternion as printed, " +
	"not normalized (Eigen's toRotationMatrix), and report F = tr(X Q X^T) as SE-Sync does; " +
	"reproduces SE-Sync's 3-D optima (REFERENCE.tsv). No effect on 2-D graphs"

func (f *solveFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.out, "o", "", "write the optimized graph as g2o to `FILE` (with --robust: only the edges kept, the inlier graph that was certified)")
	fs.StringVar(&f.tum, "tum", "", "write the optimized trajectory in TUM format to `FILE`")
	fs.StringVar(&f.report, "report", "", "write the JSON report to `FILE`")
	fs.StringVar(&f.plots, "plots", "", "write trajectory, convergence and timing plots (PNG) into `DIR`")
	fs.StringVar(&f.init, "init", "chordal", "initialization: chordal, odometry, vertices or random")
	fs.StringVar(&f.rule, "rule", "cyclic", "BCM block selection: cyclic, uniform, importance, greedy or parallel")
	fs.IntVar(&f.rank0, "rank0", 0, "first rank of the staircase, at least d (0: d)")
	fs.IntVar(&f.maxRank, "max-rank", 10, "last rank of the staircase, at least d and --rank0")
	fs.IntVar(&f.threads, "threads", 0, "threads (0: all cores)")
	fs.Uint64Var(&f.seed, "seed", 1, "random seed, any value (BCM samplers, random initialization, eigensolver)")
	fs.Float64Var(&f.gradTol, "grad-tol", 0, "relative gradient norm ||grad F||/||2XQ|| to reach at each rank (0: 1e-9)")
	fs.Float64Var(&f.eigTol, "eig-tol", 0, "smallest certificate shift, relative to each coordinate's diagonal entry of Q (0: 1e-13): the rounding floor below which a factorization proves nothing")
	fs.Float64Var(&f.gapTol, "gap-tol", 0, "relative suboptimality the certificate must prove (0: 1e-6): certified means bound <= max(gap-tol*max(1, |F|), gap-abs)")
	fs.Float64Var(&f.gapAbs, "gap-abs", 0, "absolute suboptimality, in units of F, that also certifies (default 0)")
	fs.Float64Var(&f.bcmTol, "bcm-tol", 0, "relative gradient norm at which BCM hands over to the trust region (0: 1e-3)")
	fs.Float64Var(&f.bcmDecrease, "bcm-decrease", 0, "hand over to the trust region when a BCM sweep lowers F by less than this fraction (0: 1e-5)")
	fs.IntVar(&f.bcmSweeps, "bcm-sweeps", 0, "maximum BCM sweeps per rank (0: 5; negative: skip BCM)")
	fs.DurationVar(&f.timeLimit, "time-limit", 0, "stop after this long (e.g. 30s; 0: no limit): no stage starts later, and the estimate held then is returned")
	fs.IntVar(&f.maxIterations, "max-iterations", 0, "trust-region steps allowed in each of its runs (each rank, each refinement; 0: 500)")
	fs.BoolVar(&f.rotations, "rotations", false, "solve rotation synchronization SO(d) only; -o and --tum keep the input's translations")
	fs.BoolVar(&f.largest, "largest-component", false, "solve the largest connected component of a disconnected graph")
	fs.BoolVar(&f.lenient, "lenient", false, lenientUsage)
	fs.BoolVar(&f.rawQuat, "raw-quaternions", false, rawQuatUsage)
	fs.BoolVar(&f.quiet, "quiet", false, "print nothing but errors")
	fs.BoolVar(&f.verbose, "verbose", false, "log every stage and staircase level")
	fs.BoolVar(&f.json, "json", false, "print the JSON report on stdout instead of the summary")
	fs.StringVar(&f.robust, "robust", "none", "reject outliers with this robust loss: gnc-tls (graduated non-convexity, truncated least squares) or none")
	fs.BoolVar(&f.trustOdometry, "trust-odometry", true, "with --robust, never reject an edge between poses adjacent in ascending id order")
	fs.Float64Var(&f.robustQuantile, "robust-quantile", 0, "with --robust, the chi-squared probability `P` whose quantile (edge dimension degrees of freedom) is the threshold c^2 (0: 0.999)")
	fs.Float64Var(&f.robustThreshold, "robust-threshold", 0, "with --robust, the threshold c^2 on an edge's term of F itself, instead of --robust-quantile (0: from the quantile)")
}

// options checks the flags and turns them into the solver's options. Every
// error names its flag and is meant as a usage error: a value the solver
// would reject, or would silently replace by its default (--max-rank 0),
// is caught here, before any file is read. Ranks against the graph's
// dimension are checked by checkRanks once d is known.
func (f *solveFlags) options(stderr io.Writer) (bsync.Options, error) {
	var o bsync.Options
	for _, v := range []struct {
		name string
		val  float64
	}{{"grad-tol", f.gradTol}, {"eig-tol", f.eigTol}, {"gap-tol", f.gapTol}, {"gap-abs", f.gapAbs}, {"bcm-tol", f.bcmTol}, {"bcm-decrease", f.bcmDecrease}} {
		if !(v.val >= 0) || math.IsInf(v.val, 0) {
			return o, fmt.Errorf("--%s must be a finite number >= 0, not %g", v.name, v.val)
		}
	}
	switch {
	case f.rank0 != 0 && f.rank0 < 2:
		return o, fmt.Errorf("--rank0 %d: want a rank of at least d = 2 or 3 (0: d)", f.rank0)
	case f.maxRank < 2:
		return o, fmt.Errorf("--max-rank %d: want a rank of at least d = 2 or 3", f.maxRank)
	case f.rank0 != 0 && f.maxRank < f.rank0:
		return o, fmt.Errorf("--max-rank %d is below --rank0 %d", f.maxRank, f.rank0)
	case f.threads < 0:
		return o, fmt.Errorf("--threads %d: want a number of threads >= 1 (0: all cores)", f.threads)
	case f.timeLimit < 0:
		return o, fmt.Errorf("--time-limit %v: want a duration >= 0 (0: no limit)", f.timeLimit)
	case f.maxIterations < 0:
		return o, fmt.Errorf("--max-iterations %d: want a number of steps >= 1 (0: 500)", f.maxIterations)
	}
	init, err := bsync.ParseInit(f.init)
	if err != nil {
		return o, fmt.Errorf("--init: %v", err)
	}
	rule, err := bcm.ParseRule(f.rule)
	if err != nil {
		return o, fmt.Errorf("--rule: %v", err)
	}
	o = bsync.Options{
		Init: init, Rank0: f.rank0, MaxRank: f.maxRank, Rule: rule, Threads: f.threads, Seed: f.seed,
		GradTol: f.gradTol, EigTol: f.eigTol, GapTol: f.gapTol, GapAbs: f.gapAbs, BCMTol: f.bcmTol, BCMMaxSweeps: f.bcmSweeps, BCMDecreaseTol: f.bcmDecrease,
		TimeLimit: f.timeLimit, MaxIterations: f.maxIterations, LargestComponent: f.largest,
	}
	if f.rotations {
		o.Problem = posegraph.Rotations
	}
	loss, err := bsync.ParseRobust(f.robust)
	if err != nil {
		return o, fmt.Errorf("--robust: %v", err)
	}
	switch {
	case loss == bsync.RobustNone && (f.robustQuantile != 0 || f.robustThreshold != 0 || !f.trustOdometry):
		return o, errors.New("--robust-quantile, --robust-threshold and --trust-odometry need --robust gnc-tls")
	case !(f.robustQuantile >= 0 && f.robustQuantile < 1):
		return o, fmt.Errorf("--robust-quantile must be a probability in (0, 1), not %g", f.robustQuantile)
	case !(f.robustThreshold >= 0) || math.IsInf(f.robustThreshold, 0):
		return o, fmt.Errorf("--robust-threshold must be a finite number >= 0, not %g", f.robustThreshold)
	case f.robustQuantile != 0 && f.robustThreshold != 0:
		return o, errors.New("set --robust-quantile or --robust-threshold, not both")
	}
	o.Robust = bsync.RobustOptions{Loss: loss, Quantile: f.robustQuantile, Threshold: f.robustThreshold, CheckOdometry: !f.trustOdometry}
	if f.verbose {
		o.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return o, nil
}

// checkRanks checks the rank flags against the graph's dimension d, which
// options cannot know.
func (f *solveFlags) checkRanks(d int, file string) error {
	if f.rank0 != 0 && f.rank0 < d {
		return fmt.Errorf("--rank0 %d is below the dimension d = %d of %s", f.rank0, d, file)
	}
	if f.maxRank < d {
		return fmt.Errorf("--max-rank %d is below the dimension d = %d of %s", f.maxRank, d, file)
	}
	return nil
}

func init() {
	register(command{
		name:  "solve",
		usage: "solve [flags] FILE",
		short: "find and certify the globally optimal estimate of a g2o/TORO pose graph",
		run:   runSolve,
	})
}

func runSolve(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("solve", "solve [flags] FILE",
		"Finds the globally optimal estimate of FILE's poses (g2o or TORO) and proves it:\nthe exit status is 1 when no certificate was obtained.", stderr)
	var f solveFlags
	f.register(fs)
	files, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(files) != 1 {
		fs.Usage()
		return usageError{errors.New("solve takes exactly one FILE")}
	}
	file := files[0]
	if _, err := f.options(io.Discard); err != nil {
		return usageError{err}
	}
	t0 := time.Now()
	g, err := g2o.ReadFile(file, g2o.ReadOptions{Lenient: f.lenient, RawQuaternions: f.rawQuat, Warn: func(msg string) {
		if !f.quiet {
			fmt.Fprintln(stderr, "warning:", msg)
		}
	}})
	if err != nil {
		return lenientHint(err)
	}
	parse := time.Since(t0).Seconds()
	_, err = solveAndWrite(ctx, file, g, parse, &f, stdout, stderr)
	return err
}

// solveAndWrite runs the certified solve on g and writes every requested
// output; it is `bcmsync solve` after parsing, and the demo.
func solveAndWrite(ctx context.Context, file string, g *posegraph.Graph, parse float64, f *solveFlags, stdout, stderr io.Writer) (*bsync.Report, error) {
	opts, err := f.options(stderr)
	if err != nil {
		return nil, usageError{err}
	}
	if err := f.checkRanks(g.D, file); err != nil {
		return nil, usageError{err}
	}
	prog := newProgress(stderr, f.quiet)
	opts.Progress = prog.update
	res, err := bsync.Solve(ctx, g, opts)
	prog.done()
	if err != nil {
		return nil, disconnectedHint(err)
	}
	res.Timings.Parse = parse
	res.Timings.Total += parse
	rep := bsync.NewReport(filepath.Base(file), res, opts)
	rep.PeakRSSBytes = peakRSS()

	var notes []string
	if res.Graph.N() < g.N() {
		notes = append(notes, droppedNote(g, res.Graph))
	}
	poses, header := res.Poses, ""
	if res.Problem == posegraph.Rotations && (f.out != "" || f.tum != "") {
		var src string
		if poses, src, err = inputTranslations(res); err != nil {
			return rep, err
		}
		header = "# bcmsync solve --rotations: rotations optimized over SO(d); translations not optimized, taken from " + src + "\n"
		notes = append(notes, "translations in "+strings.Join(nonEmpty(f.out, f.tum), " and ")+
			" are not optimized (--rotations): taken from "+src)
	}
	if f.out != "" {
		if err := writeFile(f.out, func(w io.Writer) error {
			if _, err := io.WriteString(w, header); err != nil {
				return err
			}
			return g2o.Write(w, res.Graph, poses)
		}); err != nil {
			return rep, err
		}
	}
	if f.tum != "" {
		if err := writeFile(f.tum, func(w io.Writer) error {
			if _, err := io.WriteString(w, header); err != nil {
				return err
			}
			return g2o.WriteTUM(w, res.Graph, poses)
		}); err != nil {
			return rep, err
		}
	}
	if f.report != "" {
		if err := writeFile(f.report, rep.WriteJSON); err != nil {
			return rep, err
		}
	}
	if f.plots != "" {
		wrote, err := writePlots(f.plots, res, rep)
		if err != nil {
			return rep, err
		}
		notes = append(notes, "plots: "+strings.Join(wrote, ", "))
	}
	switch {
	case f.json:
		if err := rep.WriteJSON(stdout); err != nil {
			return rep, err
		}
		if !f.quiet {
			// Stdout is the report alone; the notes go beside it.
			for _, n := range notes {
				fmt.Fprintln(stderr, "note:", n)
			}
		}
	case !f.quiet:
		printSummary(stdout, rep, notes)
	}
	if !res.Certified || res.Robust != nil && !res.Robust.Converged {
		return rep, notCertifiedError{status: string(res.Status)}
	}
	return rep, nil
}

// notCertifiedError makes the process exit non-zero when no certificate was
// obtained: a pipeline must not take an uncertified estimate for an optimum.
type notCertifiedError struct{ status string }

func (e notCertifiedError) Error() string { return "no certificate: " + e.status }

func writeFile(path string, write func(io.Writer) error) error {
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}

// peakRSS is the process's peak resident set size (VmHWM) in bytes, or 0
// where /proc is not available.
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(line, "VmHWM:")), "%d", &kb)
			return kb * 1024
		}
	}
	return 0
}

// progress draws one status line on a terminal and nothing otherwise.
type progress struct {
	w      io.Writer
	active bool
	last   time.Time
	drawn  bool
}

func newProgress(w io.Writer, quiet bool) *progress {
	p := &progress{w: w}
	if f, ok := w.(*os.File); ok && !quiet {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.active = true
		}
	}
	return p
}

func (p *progress) update(r bsync.Record) {
	if !p.active || time.Since(p.last) < 100*time.Millisecond {
		return
	}
	p.last = time.Now()
	p.drawn = true
	fmt.Fprintf(p.w, "\r\033[Krank %d  %-3s  iter %4d  F %-14.10g  |grad| %-9.3g  rel %-9.3g  %6.2fs",
		r.Rank, r.Phase, r.Iter, r.F, r.GradNorm, r.RelGrad, r.Seconds)
}

func (p *progress) done() {
	if p.drawn {
		fmt.Fprint(p.w, "\r\033[K")
	}
}
