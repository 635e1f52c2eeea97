package cli

import (
	"bytes"
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
	covariances, covPairs   string
	robustFlags
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
	def := bsync.DefaultOptions()
	fs.StringVar(&f.init, "init", string(def.Init), "initialization: chordal, odometry, vertices or random")
	fs.StringVar(&f.rule, "rule", def.Rule.String(), "BCM block selection: cyclic, uniform, importance, greedy or parallel")
	fs.IntVar(&f.rank0, "rank0", 0, "first rank of the staircase, at least d (0: d)")
	fs.IntVar(&f.maxRank, "max-rank", def.MaxRank, "last rank of the staircase, at least d and --rank0")
	fs.IntVar(&f.threads, "threads", 0, "threads (0: all cores)")
	fs.Uint64Var(&f.seed, "seed", def.Seed, "random seed, any value but 0 (BCM samplers, random initialization, eigensolver)")
	fs.Float64Var(&f.gradTol, "grad-tol", 0, "relative gradient norm ||grad F||/||2XQ|| to reach at each rank (0: 1e-9)")
	fs.Float64Var(&f.eigTol, "eig-tol", 0, "smallest certificate shift, relative to each coordinate's diagonal entry of Q (0: 1e-13): the rounding floor below which a factorization proves nothing")
	fs.Float64Var(&f.gapTol, "gap-tol", 0, "relative suboptimality the certificate must prove (0: 1e-6): certified means bound <= max(gap-tol*max(unit, |F|), gap-abs), unit 1e7 times the certificate's rounding floor")
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
	f.registerRobust(fs)
	f.registerCovariances(fs)
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
	case f.seed == 0:
		// The library reads a zero seed as its default, 1: a run with
		// --seed 0 would silently repeat --seed 1's.
		return o, fmt.Errorf("--seed 0: seeds start at 1 (0 stands for the default, %d)", bsync.DefaultOptions().Seed)
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
	if _, err = f.robustOptions(); err != nil {
		return o, err
	}
	if err := f.covarianceFlagsOK(); err != nil {
		return o, err
	}
	if f.verbose {
		o.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return o, nil
}

// run runs bsync.Solve on g with opts, or bsync.SolveRobust with the
// robust flags' options when --robust names a loss.
func (f *solveFlags) run(ctx context.Context, g *posegraph.Graph, opts bsync.Options) (*bsync.Result, error) {
	ro, err := f.robustOptions()
	if err != nil {
		return nil, usageError{err}
	}
	if ro.Loss == bsync.RobustNone {
		return bsync.Solve(ctx, g, opts)
	}
	return bsync.SolveRobust(ctx, g, opts, ro)
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
		"Finds the globally optimal estimate of FILE's poses (g2o or TORO; - reads standard input)\n"+
			"and proves it. The exit status is 0 only for a certified estimate: 3 to 9 say how an\n"+
			"uncertified solve ended (bcmsync help lists them), after every output was written.\n"+
			"-o, --tum and --report take - for standard output (the summary then goes to stderr).", stderr)
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
	var set fileSet
	set.input("FILE", file)
	f.outputs(&set)
	if err := set.check(); err != nil {
		return err
	}
	reserveHeap(file, heapPerInputByte)
	g, parse, err := f.read(file, stderr)
	if err != nil {
		return err
	}
	return solveAndWrite(ctx, inputName(file), g, parse, &f, set.toStdout(), stdout, stderr)
}

// read reads the graph file ("-": standard input) with the reading flags
// (--lenient, --raw-quaternions), its warnings on stderr unless --quiet,
// and returns it with the seconds it took.
func (f *solveFlags) read(file string, stderr io.Writer) (*posegraph.Graph, float64, error) {
	t0 := time.Now()
	g, err := readGraph(file, g2o.ReadOptions{Lenient: f.lenient, RawQuaternions: f.rawQuat, Warn: func(msg string) {
		if !f.quiet {
			fmt.Fprintln(stderr, "warning:", msg)
		}
	}})
	if err != nil {
		return nil, 0, lenientHint(err)
	}
	return g, time.Since(t0).Seconds(), nil
}

// outputs adds the files solve (or the demo) writes to set: -o, --tum,
// --report, --json (standard output) and the figures in --plots.
func (f *solveFlags) outputs(set *fileSet) {
	set.output("-o", f.out)
	set.output("--tum", f.tum)
	set.output("--report", f.report)
	set.output("--covariances", f.covariances)
	set.input("--covariance-pairs", f.covPairs)
	if f.json {
		set.output("--json", stdio)
	}
	names := []string{"convergence.png", "stages.png"}
	if !f.rotations {
		names = append(names, trajectoryPNG)
	}
	if loss, err := bsync.ParseRobust(f.robust); err == nil && loss != bsync.RobustNone {
		names = append(names, robustPNG)
	}
	set.folder("--plots", f.plots, names...)
}

// solveAndWrite runs the certified solve on g (read from file) and writes
// every requested output; it is `bcmsync solve` after parsing, and the
// demo. With an output on standard output (toStdout), the summary goes to
// stderr.
func solveAndWrite(ctx context.Context, file string, g *posegraph.Graph, parse float64, f *solveFlags, toStdout bool, stdout, stderr io.Writer) error {
	s, err := f.solve(ctx, file, g, parse, stderr)
	if err != nil {
		return err
	}
	return f.writeResult(s, toStdout, stdout, stderr)
}

// solved is a finished solve, as writeResult writes it: the certified
// solve's (solve, demo, view) or the distributed one's.
type solved struct {
	file  string           // the input's name, for messages and the report
	input *posegraph.Graph // the graph as read, before --largest-component
	res   *bsync.Result
	rep   *bsync.Report
	pairs []covariancePair // --covariance-pairs, read before the solve
	notes []string         // the command's own lines for the summary, after the others
}

// solve runs the certified solve of g (read from file in parse seconds)
// with the flags f.
func (f *solveFlags) solve(ctx context.Context, file string, g *posegraph.Graph, parse float64, stderr io.Writer) (*solved, error) {
	opts, err := f.options(stderr)
	if err != nil {
		return nil, usageError{err}
	}
	if err := f.checkRanks(g.D, file); err != nil {
		return nil, usageError{err}
	}
	pairs, err := f.prepareCovariances(g)
	if err != nil {
		return nil, err
	}
	prog := newProgress(stderr, f.quiet)
	opts.Progress = prog.update
	res, err := f.run(ctx, g, opts)
	prog.done()
	if err != nil {
		return nil, solveError(err, g)
	}
	res.Timings.Parse = parse
	res.Timings.Total += parse
	rep := bsync.NewReport(filepath.Base(file), res)
	rep.PeakRSSBytes = peakRSS()
	return &solved{file: file, input: g, res: res, rep: rep, pairs: pairs}, nil
}

// writeResult writes every output the flags f ask for of the solve s (-o,
// --tum, --covariances, --report, --plots), then the summary or, with
// --json, the report; with an output on standard output (toStdout) the
// summary goes to stderr. It is the one output path of the solve-like
// commands. It returns a notCertifiedError for a result that is not
// certified, after everything was written.
func (f *solveFlags) writeResult(s *solved, toStdout bool, stdout, stderr io.Writer) error {
	res, rep, file := s.res, s.rep, s.file
	var notes []string
	inputN := s.input.N()
	if s.input.HasPriors() && !res.Graph.HasPriors() {
		inputN-- // rotation synchronization dropped the world vertex with the position priors
	}
	if res.Graph.N() < inputN {
		notes = append(notes, droppedNote(s.input, res.Graph))
	}
	poses, header := res.Poses, ""
	if n := len(res.Graph.Priors()); n > 0 {
		header = fmt.Sprintf("# bcmsync solve: estimate in the world frame of the %d priors\n", n)
	}
	if dropped := len(s.input.Priors()) - len(res.Graph.Priors()); dropped > 0 && res.Problem == posegraph.Rotations {
		notes = append(notes, fmt.Sprintf("%d position priors left out: rotation synchronization uses the rotations of pose priors only", dropped))
	}
	if res.Problem == posegraph.Rotations && (f.out != "" || f.tum != "") {
		var src string
		var err error
		if poses, src, err = inputTranslations(res); err != nil {
			return solveError(err, res.Graph)
		}
		header += "# bcmsync solve --rotations: rotations optimized over SO(d); translations not optimized, taken from " + src + "\n"
		notes = append(notes, "translations in "+strings.Join(nonEmpty(outputName(f.out), outputName(f.tum)), " and ")+
			" are not optimized (--rotations): taken from "+src)
	}
	if f.out != "" {
		if err := writeOutput(f.out, stdout, func(w io.Writer) error {
			if _, err := io.WriteString(w, header); err != nil {
				return err
			}
			return g2o.Write(w, res.Graph, poses)
		}); err != nil {
			return err
		}
	}
	if f.tum != "" {
		if err := writeOutput(f.tum, stdout, func(w io.Writer) error {
			if _, err := io.WriteString(w, header); err != nil {
				return err
			}
			return g2o.WriteTUM(w, res.Graph, poses)
		}); err != nil {
			return err
		}
	}
	if f.covariances != "" {
		note, err := writeCovariances(f, file, res, s.pairs, stdout)
		if err != nil {
			return err
		}
		notes = append(notes, note)
	}
	if f.report != "" {
		if err := writeOutput(f.report, stdout, rep.WriteJSON); err != nil {
			return err
		}
	}
	if f.plots != "" {
		wrote, err := writePlots(f.plots, res, rep)
		if err != nil {
			return err
		}
		notes = append(notes, "plots: "+strings.Join(wrote, ", "))
	}
	notes = append(notes, s.notes...)
	switch {
	case f.json:
		if err := rep.WriteJSON(stdout); err != nil {
			return err
		}
		if !f.quiet {
			// Stdout is the report alone; the notes go beside it.
			for _, n := range notes {
				fmt.Fprintln(stderr, "note:", n)
			}
		}
	case !f.quiet && toStdout:
		printSummary(stderr, rep, notes) // stdout carries an output file
	case !f.quiet:
		printSummary(stdout, rep, notes)
	}
	converged, stop := true, ""
	if res.Robust != nil {
		converged, stop = res.Robust.Converged, res.Robust.Stop
	}
	if code := resultExitCode(res.Status, converged, stop); code != exitOK {
		return notCertifiedError{status: string(res.Status), code: code}
	}
	return nil
}

// solveError makes sure an error of the solver names the file it came
// from. The graph's checks (posegraph.Graph.Validate, which runs first)
// name FILE:LINE themselves, and so do the solver's messages about the
// graph; a failure inside a numerical kernel (package internal/sparse)
// on a graph that passed those checks is the solver's fault, and says so.
func solveError(err error, g *posegraph.Graph) error {
	err = disconnectedHint(err)
	src := g.Source
	if src == "" {
		src = "graph"
	}
	msg := err.Error()
	if strings.HasPrefix(msg, src+":") {
		return err
	}
	if strings.Contains(msg, "sparse: ") {
		return fmt.Errorf("%s: %w (a numerical failure on a graph that passed bcmsync's checks of its "+
			"structure and scale: please report it, with the file)", src, err)
	}
	return fmt.Errorf("%s: %w", src, err)
}

// vmHWM returns the value of the line "VmHWM:" of a /proc status file in
// bytes, or 0 if there is none.
func vmHWM(status []byte) int64 {
	const key = "VmHWM:"
	i := bytes.Index(status, []byte("\n"+key))
	if i < 0 {
		if !bytes.HasPrefix(status, []byte(key)) {
			return 0
		}
		i = -1
	}
	rest := bytes.TrimLeft(status[i+1+len(key):], " \t")
	var kb int64
	for _, c := range rest {
		if c < '0' || c > '9' {
			break
		}
		kb = kb*10 + int64(c-'0')
	}
	return kb * 1024
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
	if f, ok := streamFile(w); ok && !quiet {
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
