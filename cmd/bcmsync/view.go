package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/bcmsync/bcmsync/g2o"
	"github.com/bcmsync/bcmsync/plots"
	"github.com/bcmsync/bcmsync/posegraph"
	bsync "github.com/bcmsync/bcmsync/sync"
)

func init() {
	register(command{
		name:  "view",
		usage: "view [flags] FILE.g2o | view [flags] INPUT.g2o OPTIMIZED.g2o",
		short: "solve a graph and write an interactive HTML viewer (trajectory, edge costs, convergence)",
		run:   runView,
	})
}

const viewDoc = `With one FILE, solves it as "bcmsync solve" does and writes FILE.html (the base
name, in the current directory; -o to choose): one self-contained page, no
network needed, showing the initial and the optimized estimate, odometry and
loop-closure edges (and landmarks with their observations) coloured by their
cost at the estimate, the certificate and the convergence history. With --no-solve, or with INPUT and OPTIMIZED,
nothing is solved: the page shows the files' VERTEX estimates, and --report
adds a solve's certificate and history. The exit status is 0 whenever the
page was written, certified or not (the page's header says which).`

// viewSolveFlags are the solve flags that make sense for view; the rest
// (outputs, --json) belong to solve.
var viewSolveFlags = []string{
	"init", "rule", "rank0", "max-rank", "threads", "seed", "grad-tol", "eig-tol", "gap-tol",
	"bcm-tol", "bcm-decrease", "bcm-sweeps", "time-limit", "rotations", "largest-component",
	"lenient", "raw-quaternions", "quiet", "verbose",
}

func runView(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("view", "view [flags] FILE.g2o | view [flags] INPUT.g2o OPTIMIZED.g2o", viewDoc, stderr)
	out := fs.String("o", "", "write the page to `OUT.html` (default: the first file's base name with .html, in the current directory)")
	report := fs.String("report", "", "with --no-solve or OPTIMIZED.g2o: show the certificate and history of `REPORT.json`, written by bcmsync solve --report")
	noSolve := fs.Bool("no-solve", false, "show FILE's VERTEX estimates as they are; do not solve")
	var f solveFlags
	all := flag.NewFlagSet("solve", flag.ContinueOnError)
	f.register(all)
	for _, name := range viewSolveFlags {
		fl := all.Lookup(name)
		fs.Var(fl.Value, fl.Name, fl.Usage)
	}
	files, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(files) < 1 || len(files) > 2 {
		fs.Usage()
		return usageError{errors.New("view takes FILE.g2o, or INPUT.g2o and OPTIMIZED.g2o")}
	}
	solve := len(files) == 1 && !*noSolve
	if solve && *report != "" {
		return usageError{errors.New("--report shows an earlier solve: use it with --no-solve or with OPTIMIZED.g2o")}
	}
	if len(files) == 2 && *noSolve {
		return usageError{errors.New("--no-solve is implied by OPTIMIZED.g2o: give one of them")}
	}
	if _, err := f.options(io.Discard); err != nil {
		return usageError{err}
	}
	path := *out
	if path == "" {
		if files[0] == stdio {
			return usageError{errors.New("FILE - (standard input) has no name to name the page after: give -o OUT.html (or -o - for standard output)")}
		}
		base := filepath.Base(files[0])
		path = strings.TrimSuffix(base, filepath.Ext(base)) + ".html"
	}
	var set fileSet
	for k, in := range files {
		set.input([]string{"FILE", "OPTIMIZED"}[k], in)
	}
	set.input("--report", *report)
	set.output("the page (-o)", path)
	if err := set.check(); err != nil {
		return err
	}
	info := stdout
	if path == stdio {
		info = stderr // stdout carries the page
	}

	var v plots.Viewer
	var rep *bsync.Report
	var notes []string
	if solve {
		v, rep, notes, err = solveForView(ctx, files[0], &f, stderr)
	} else {
		v, err = viewerFromFiles(files, *report, g2o.ReadOptions{Lenient: f.lenient, RawQuaternions: f.rawQuat}, f.rotations)
	}
	if err != nil {
		return err
	}
	if err := writeOutput(path, stdout, func(w io.Writer) error { return plots.WriteHTML(w, v) }); err != nil {
		return err
	}
	if !f.quiet {
		if rep != nil {
			printSummary(info, rep, notes)
		}
		if path != stdio {
			fmt.Fprintln(info, "wrote", path)
		}
	}
	return nil
}

// solveForView reads and solves file with the solve flags f and returns
// the viewer of the result: the initial guess and the estimate, with the
// report's certificate and history.
func solveForView(ctx context.Context, file string, f *solveFlags, stderr io.Writer) (plots.Viewer, *bsync.Report, []string, error) {
	opts, err := f.options(stderr)
	if err != nil {
		return plots.Viewer{}, nil, nil, usageError{err}
	}
	t0 := time.Now()
	g, err := readGraph(file, g2o.ReadOptions{Lenient: f.lenient, RawQuaternions: f.rawQuat, Warn: func(msg string) {
		if !f.quiet {
			fmt.Fprintln(stderr, "warning:", msg)
		}
	}})
	if err != nil {
		return plots.Viewer{}, nil, nil, lenientHint(err)
	}
	parse := time.Since(t0).Seconds()
	prog := newProgress(stderr, f.quiet)
	opts.Progress = prog.update
	res, err := f.solve(ctx, g, opts)
	prog.done()
	if err != nil {
		return plots.Viewer{}, nil, nil, solveError(err, g)
	}
	res.Timings.Parse = parse
	res.Timings.Total += parse
	rep := bsync.NewReport(filepath.Base(g.Source), res)
	v := plots.Viewer{
		Title:   filepath.Base(g.Source),
		Graph:   res.Graph,
		Problem: res.Problem,
		Estimates: []plots.Trajectory{
			{Label: "initial (" + rep.Init + ")", Poses: res.InitialPoses},
			{Label: "optimized", Poses: res.Poses},
		},
		Run: runFromReport(rep),
	}
	var notes []string
	if res.Graph.N() < g.N() {
		notes = append(notes, droppedNote(g, res.Graph))
	}
	v.Ellipses, notes = viewEllipses(res, notes)
	return v, rep, notes, nil
}

// viewerFromFiles builds the viewer of files' VERTEX estimates: one file
// is shown as it is, two as the input and the optimized estimate of the
// first file's graph. reportPath, if set, adds a solve's report.
func viewerFromFiles(files []string, reportPath string, ro g2o.ReadOptions, rotations bool) (plots.Viewer, error) {
	var v plots.Viewer
	g, ests, err := readEstimates(files, ro)
	if err != nil {
		return v, err
	}
	for k, poses := range ests {
		label := "input"
		if k == 1 {
			label = "optimized (" + filepath.Base(files[k]) + ")"
		}
		v.Estimates = append(v.Estimates, plots.Trajectory{Label: label, Poses: poses})
	}
	v.Title, v.Graph = filepath.Base(g.Source), g
	if rotations {
		v.Problem = posegraph.Rotations
	}
	if v.Problem == posegraph.Rotations && g.HasLandmarks() {
		return v, landmarkRotationsError(g.Source, g)
	}
	if reportPath != "" {
		rep, err := readReport(reportPath)
		if err != nil {
			return v, err
		}
		// The report counts poses and landmarks apart.
		if rep.N != g.NumPoses() || rep.Landmarks != g.NumLandmarks() || rep.D != g.D {
			return v, fmt.Errorf("%s: the report is of %s in %d-D, but %s has %s in %d-D",
				inputName(reportPath), vertexCount(rep.N, rep.Landmarks), rep.D, g.Source, vertexCount(g.NumPoses(), g.NumLandmarks()), g.D)
		}
		if strings.HasPrefix(rep.Problem, "SO") {
			v.Problem = posegraph.Rotations
			if g.HasLandmarks() {
				return v, landmarkRotationsError(g.Source, g)
			}
		}
		v.Run = runFromReport(rep)
	}
	return v, nil
}

// vertexCount says "n poses", or "n poses and l landmarks".
func vertexCount(n, l int) string {
	if l == 0 {
		return fmt.Sprintf("%d poses", n)
	}
	return fmt.Sprintf("%d poses and %d landmarks", n, l)
}

// landmarkRotationsError refuses a rotation-only page of a graph with
// landmarks, in the words sync.Solve uses to refuse the solve.
func landmarkRotationsError(file string, g *posegraph.Graph) error {
	return fmt.Errorf("%s: rotation synchronization has no use for its %d landmarks, which carry no rotation; "+
		"view the pose problem (without --rotations)", file, g.NumLandmarks())
}

// runFromReport is the part of rep the viewer shows.
func runFromReport(rep *bsync.Report) *plots.Run {
	r := &plots.Run{
		Status: rep.Status, Certified: rep.Certified,
		Objective: rep.Objective, RelaxationObjective: rep.RelaxationObjective,
		DualBound: rep.DualBound, SuboptimalityBound: rep.SuboptimalityBound,
		MinEigenvalue: rep.MinEigenvalue, Rank: rep.Rank, Init: rep.Init, Seconds: rep.Timings.Total,
	}
	for _, h := range rep.History {
		r.History = append(r.History, plots.Step{Rank: h.Rank, Phase: h.Phase, Iter: h.Iter, Seconds: h.Seconds, F: h.F, RelGrad: h.RelGrad})
	}
	for _, l := range rep.Levels {
		r.Levels = append(r.Levels, plots.LevelCheck{Rank: l.Rank, Certified: l.Certified})
	}
	return r
}
