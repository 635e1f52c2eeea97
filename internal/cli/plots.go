package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/bcmsync/bcmsync/g2o"
	"github.com/bcmsync/bcmsync/plots"
	"github.com/bcmsync/bcmsync/posegraph"
	bsync "github.com/bcmsync/bcmsync/sync"
)

// trajectoryPNG is the trajectory figure's name inside a --plots directory;
// convergence.png and stages.png stand beside it.
const trajectoryPNG = "trajectory.png"

// writePlots draws the solve's trajectory (initial guess and estimate),
// convergence curves and time per stage into dir, and returns the paths
// it wrote.
func writePlots(dir string, res *bsync.Result, rep *bsync.Report) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var wrote []string
	g := res.Graph
	trajs := []plots.Trajectory{{Label: "initial (" + rep.Init + ")", Poses: res.InitialPoses}}
	if res.Problem == posegraph.Poses {
		trajs = append(trajs, plots.Trajectory{Label: "optimized", Poses: res.Poses})
		path := filepath.Join(dir, trajectoryPNG)
		if err := plots.Trajectories(path, g, trajs, plots.TrajectoryOptions{LoopClosures: true}); err != nil {
			return nil, err
		}
		wrote = append(wrote, path)
	}
	more, err := writeReportPlots(dir, rep, "png")
	wrote = append(wrote, more...)
	if err != nil || res.Robust == nil {
		return wrote, err
	}
	path, err := writeRobustPlot(dir, res)
	if err != nil {
		return wrote, err
	}
	return append(wrote, path), nil
}

// robustPNG is the robust run's figure inside a --plots directory: the
// convergence figure is of the final certified solve alone.
const robustPNG = "robust.png"

// writeRobustPlot draws the whole robust run, the TLS cost and every
// loop closure's weight per weighted solve, and returns the path.
func writeRobustPlot(dir string, res *bsync.Result) (string, error) {
	rr := res.Robust
	steps := make([]plots.RobustStep, len(rr.Iterations))
	for k, it := range rr.Iterations {
		steps[k] = plots.RobustStep{Certified: it.Stage == bsync.StageCertify, TLS: it.TLS, Objective: it.Objective, Weights: it.Weights}
	}
	title := fmt.Sprintf("Robust run: %d of %d edges rejected, %d weighted solves", len(rr.Rejected), rr.Input.M(), len(steps))
	path := filepath.Join(dir, robustPNG)
	return path, plots.Robust(path, steps, plots.RobustOptions{Title: title, Skip: rr.Trusted})
}

// writeReportPlots draws what a report alone determines, convergence and
// stage times, and returns the paths it wrote.
func writeReportPlots(dir string, rep *bsync.Report, ext string) ([]string, error) {
	var wrote []string
	if levels := levelsFromReport(rep); len(levels) > 0 {
		title := fmt.Sprintf("%s: convergence (F* = %.10g, certified)", rep.File, rep.Objective)
		if !rep.Certified {
			title = fmt.Sprintf("%s: convergence (F = %.10g, not certified)", rep.File, rep.Objective)
		}
		path := filepath.Join(dir, "convergence."+ext)
		if err := plots.Convergence(path, levels, rep.RelaxationObjective, plots.ConvergenceOptions{Title: title}); err != nil {
			return wrote, err
		}
		wrote = append(wrote, path)
	}
	t := rep.Timings
	path := filepath.Join(dir, "stages."+ext)
	if err := plots.StageTimes(path,
		[]string{"parse", "init", "optimize", "certify", "round"},
		[]float64{t.Parse, t.Init, t.Optimize, t.Certify, t.Round}); err != nil {
		return wrote, err
	}
	return append(wrote, path), nil
}

// levelsFromReport groups the history by staircase level and marks each
// level with its certificate outcome.
func levelsFromReport(rep *bsync.Report) []plots.Level {
	var out []plots.Level
	for _, lv := range rep.Levels {
		pl := plots.Level{Rank: lv.Rank}
		for _, h := range rep.History {
			if h.Rank != lv.Rank {
				continue
			}
			pl.Iter = append(pl.Iter, float64(h.Iter))
			pl.Time = append(pl.Time, h.Seconds)
			pl.F = append(pl.F, h.F)
			pl.GradNorm = append(pl.GradNorm, h.GradNorm)
		}
		if len(pl.F) == 0 {
			continue
		}
		c := lv.Certified
		pl.Certified = &c
		out = append(out, pl)
	}
	return out
}

func init() {
	register(command{
		name:  "plot",
		usage: "plot [flags] INPUT.g2o [OPTIMIZED.g2o]",
		short: "draw trajectories (and, with --report, convergence and stage times) as PNG/SVG/PDF, or HTML with --html",
		run:   runPlot,
	})
}

func runPlot(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("plot", "plot [flags] INPUT.g2o [OPTIMIZED.g2o]",
		"Draws INPUT's VERTEX estimates (and OPTIMIZED's, overlaid) as trajectory.EXT, and\nwith --report the convergence curves and stage times of that solve.", stderr)
	dir := fs.String("o", "plots", "output `DIR`")
	report := fs.String("report", "", "also draw convergence and stage times from the JSON report `FILE` written by bcmsync solve --report")
	format := fs.String("format", "png", "image format: png, svg or pdf")
	loops := fs.Bool("loop-closures", true, "draw loop-closure edges")
	lenient := fs.Bool("lenient", false, lenientUsage)
	page := fs.Bool("html", false, "also write DIR/view.html, the interactive viewer (as bcmsync view draws it) of these files")
	files, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(files) < 1 || len(files) > 2 {
		fs.Usage()
		return usageError{errors.New("plot takes INPUT.g2o and optionally OPTIMIZED.g2o")}
	}
	switch *format {
	case "png", "svg", "pdf":
	default:
		return usageError{fmt.Errorf("--format: unknown format %q (want png, svg or pdf)", *format)}
	}
	var set fileSet
	set.input("INPUT", files[0])
	if len(files) == 2 {
		set.input("OPTIMIZED", files[1])
	}
	set.input("--report", *report)
	names := []string{"trajectory." + *format}
	if *page {
		names = append(names, "view.html")
	}
	if *report != "" {
		names = append(names, "convergence."+*format, "stages."+*format)
	}
	set.folder("-o", *dir, names...)
	if err := set.check(); err != nil {
		return err
	}
	if *page && slices.Contains(files, stdio) {
		// The page reads the files again.
		return usageError{errors.New("--html reads the files twice, so they cannot come from standard input (-)")}
	}
	ro := g2o.ReadOptions{Lenient: *lenient, Warn: func(msg string) {
		fmt.Fprintln(stderr, "warning:", msg)
	}}
	g, ests, err := readEstimates(files, ro)
	if err != nil {
		return err
	}
	// The folder is made once the input has been read: a file that cannot
	// be read leaves nothing behind.
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	var trajs []plots.Trajectory
	for k, poses := range ests {
		label := "input"
		if k == 1 {
			label = "optimized"
		}
		trajs = append(trajs, plots.Trajectory{Label: label, Poses: poses})
	}
	if *page {
		v, err := viewerFromFiles(files, *report, g2o.ReadOptions{Lenient: *lenient}, false)
		if err != nil {
			return err
		}
		path := filepath.Join(*dir, "view.html")
		if err := writeOutput(path, stdout, func(w io.Writer) error { return plots.WriteHTML(w, v) }); err != nil {
			return err
		}
		fmt.Fprintln(stdout, "wrote", path)
	}
	out := filepath.Join(*dir, "trajectory."+*format)
	if err := plots.Trajectories(out, g, trajs, plots.TrajectoryOptions{LoopClosures: *loops}); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "wrote", out)
	if *report != "" {
		rep, err := readReport(*report)
		if err != nil {
			return err
		}
		wrote, err := writeReportPlots(*dir, rep, *format)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, "wrote", strings.Join(wrote, " and "))
	}
	return nil
}
