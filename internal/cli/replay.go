package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/bcmsync/bcmsync/plots"
	"github.com/bcmsync/bcmsync/posegraph"
	bsync "github.com/bcmsync/bcmsync/sync"
)

// replayNotTaken are the solve flags replay does not take, and why.
var replayNotTaken = notTaken{
	{[]string{"o", "tum"}, "replay writes no estimate: its last step is the optimum of the whole file, which solve -o or --tum writes"},
	{[]string{"covariances", "covariance-pairs"}, "covariances are of one estimate: solve --covariances gives the whole file's"},
}

// noEdgesYet is the status of a replay step before the first edge.
const noEdgesYet = "nothing to solve yet: no edges"

// replayPNG is the figure replay writes into --plots.
const replayPNG = "replay.png"

// replaySchema names the replay report's format (docs/cli.md).
const replaySchema = "bcmsync.replay/1"

func init() {
	register(command{
		name:  "replay",
		usage: "replay --steps K [flags] FILE",
		short: "replay a pose graph as an online run would receive it, certifying after each step",
		run:   runReplay,
	})
}

// replayReport is replay's JSON report (--report, --json).
type replayReport struct {
	Schema string `json:"schema"`
	File   string `json:"file"`
	D      int    `json:"d"`
	// Robust is the robust loss (--robust), "" for least squares.
	Robust string `json:"robust,omitempty"`
	// Steps asked for, and the steps run (fewer when the file has fewer
	// poses, or a step failed).
	StepsAsked   int          `json:"steps_asked"`
	Steps        []replayStep `json:"steps"`
	AllCertified bool         `json:"all_certified"`
	// ParseSeconds reads the file; Seconds is the sum of the steps'.
	ParseSeconds float64 `json:"parse_seconds"`
	Seconds      float64 `json:"seconds"`
	// The steps' wall times: median, 90th percentile, largest.
	StepP50 float64 `json:"step_p50_seconds"`
	StepP90 float64 `json:"step_p90_seconds"`
	StepMax float64 `json:"step_max_seconds"`
}

// replayStep is one step of the report.
type replayStep struct {
	Step int `json:"step"`
	// What the step solved (poses and landmarks linked to the first pose,
	// edges among them), what waits for a link, and what arrived.
	Poses     int `json:"poses"`
	Landmarks int `json:"landmarks"`
	Edges     int `json:"edges"`
	Waiting   int `json:"waiting"`
	NewPoses  int `json:"new_poses"`
	NewEdges  int `json:"new_edges"`
	// The step's solve: its status, F, bound and rank.
	Status             string  `json:"status"`
	Certified          bool    `json:"certified"`
	Objective          float64 `json:"objective"`
	InitialObjective   float64 `json:"initial_objective"`
	SuboptimalityBound float64 `json:"suboptimality_bound"`
	Rank               int     `json:"rank"`
	RTRIterations      int     `json:"rtr_iterations"`
	// Rejected counts the edges the robust loss rejected (--robust).
	Rejected int `json:"rejected,omitempty"`
	// Seconds is the step's wall time (adding the batch and solving); the
	// others are its solve's stages (Result.Timings).
	Seconds         float64 `json:"seconds"`
	InitSeconds     float64 `json:"init_seconds"`
	OptimizeSeconds float64 `json:"optimize_seconds"`
	CertifySeconds  float64 `json:"certify_seconds"`
	RoundSeconds    float64 `json:"round_seconds"`
}

func runReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("replay", "replay --steps K [flags] FILE",
		"Feeds FILE's poses in id order, in K steps of about equal size, each pose with the edges\n"+
			"whose ends have both arrived (a landmark arrives with its first observation), to the\n"+
			"incremental solver (sync.Incremental), which certifies after each step, warm-started from\n"+
			"the last step's certified estimate. Prints one line per step; --report writes them as JSON\n"+
			"(docs/cli.md), --plots the time and F per step. A vertex not yet linked to the first pose\n"+
			"waits for its link. With --robust, GNC runs at each step, warm-started. The exit status is\n"+
			"0 only when every step is certified, else that of the first step that was not\n"+
			"(bcmsync help). Solve's flags apply to each step (--init to the first only).\n\n"+
			replayNotTaken.help("replay"), stderr)
	var f solveFlags
	f.registerExcept(fs, replayNotTaken)
	steps := fs.Int("steps", 0, "number of steps `K` (>= 1; at most the number of poses)")
	files, err := parseSolveLike(fs, replayNotTaken, args)
	if err != nil {
		return err
	}
	if len(files) != 1 {
		fs.Usage()
		return usageError{errors.New("replay takes exactly one FILE")}
	}
	if *steps < 1 {
		return usageError{fmt.Errorf("--steps %d: replay needs a number of steps K >= 1", *steps)}
	}
	file := files[0]
	opts, err := f.options(stderr)
	if err != nil {
		return usageError{err}
	}
	ro, err := f.robustOptions()
	if err != nil {
		return usageError{err}
	}
	var set fileSet
	set.input("FILE", file)
	set.output("--report", f.report)
	if f.json {
		set.output("--json", stdio)
	}
	set.folder("--plots", f.plots, replayPNG)
	if err := set.check(); err != nil {
		return err
	}
	reserveHeap(file, replayPerInputByte)
	g, parse, err := f.read(file, stderr)
	if err != nil {
		return err
	}
	if err := f.checkRanks(g.D, file); err != nil {
		return usageError{err}
	}
	// The whole graph must be solvable as solve would take it; within the
	// replay, a vertex waits until a step links it to the first pose.
	if err := g.Validate(); err != nil {
		if !f.largest || !posegraph.IsDisconnected(err) {
			return solveError(err, g)
		}
		g = g.Subgraph(g.Components()[0])
	}
	batches, err := bsync.Replay(g, *steps)
	if err != nil {
		return solveError(err, g)
	}
	opts.LargestComponent = true
	inc, err := bsync.NewIncremental(g.D, opts)
	if err != nil {
		return usageError{err}
	}
	inc.Source, inc.RawRotations = g.Source, g.RawRotations
	rep := &replayReport{Schema: replaySchema, File: filepath.Base(inputName(file)), D: g.D, StepsAsked: *steps, ParseSeconds: parse, AllCertified: true}
	if ro.Loss != bsync.RobustNone {
		rep.Robust = string(ro.Loss)
	}
	// The step lines go where solve's summary goes: stdout, or stderr
	// when stdout carries the report.
	lines := stdout
	switch {
	case f.quiet:
		lines = io.Discard
	case f.json || set.toStdout():
		lines = stderr
	}
	firstFail := bsync.Status("")
	// The priors' world vertex, if any, and whether it has arrived (any
	// id, -1 too, can be a pose's).
	w := g.World()
	worldIn := false
	for k := range batches {
		b := &batches[k]
		worldIn = worldIn || w >= 0 && slices.Contains(b.Poses, g.IDs[w])
		t0 := time.Now()
		if err := b.Add(inc); err != nil {
			return solveError(err, g)
		}
		var res *bsync.Result
		if ro.Loss == bsync.RobustNone {
			res, err = inc.Solve(ctx)
		} else {
			res, err = inc.SolveRobust(ctx, ro)
		}
		if errors.Is(err, bsync.ErrNoEdges) {
			// Before the first edge there is nothing to solve: the step
			// says so and does not count as a failure.
			st := replayStep{Step: k + 1, Waiting: inc.NumVertices(), NewPoses: len(b.Poses), NewEdges: len(b.Edges),
				Status: noEdgesYet, Seconds: time.Since(t0).Seconds()}
			rep.Steps = append(rep.Steps, st)
			rep.Seconds += st.Seconds
			fmt.Fprintf(lines, "step %*d/%d  poses %6d  edges %7d  %s\n", len(fmt.Sprint(len(batches))), k+1, len(batches), 0, 0, noEdgesYet)
			continue
		}
		if err != nil {
			return solveError(err, g)
		}
		// The priors' world vertex is no pose of the file's, and
		// --rotations leaves it out with the position priors: it is
		// neither counted nor waiting.
		poses, waiting := res.Graph.NumPoses(), inc.NumVertices()-res.Graph.N()
		if res.Graph.HasPriors() {
			poses--
		} else if worldIn {
			waiting--
		}
		st := replayStep{
			Step: k + 1, Poses: poses, Landmarks: res.Graph.NumLandmarks(), Edges: res.Graph.M(),
			Waiting: waiting, NewPoses: len(b.Poses), NewEdges: len(b.Edges),
			Status: string(res.Status), Certified: res.Certified, Objective: res.Objective, InitialObjective: res.InitialObjective,
			SuboptimalityBound: res.SuboptimalityBound, Rank: res.Rank,
			Seconds:     time.Since(t0).Seconds(),
			InitSeconds: res.Timings.Init, OptimizeSeconds: res.Timings.Optimize, CertifySeconds: res.Timings.Certify, RoundSeconds: res.Timings.Round,
		}
		if res.Robust != nil {
			st.Rejected = len(res.Robust.Rejected)
			st.Edges = res.Robust.Input.M()
		}
		for _, lv := range res.Levels {
			st.RTRIterations += lv.RTRIterations
		}
		rep.Steps = append(rep.Steps, st)
		rep.Seconds += st.Seconds
		verdict := "certified"
		if !res.Certified {
			verdict = "NOT CERTIFIED: " + string(res.Status)
			rep.AllCertified = false
			if firstFail == "" {
				firstFail = res.Status
			}
		}
		fmt.Fprintf(lines, "step %*d/%d  poses %6d  edges %7d", len(fmt.Sprint(len(batches))), k+1, len(batches), st.Poses, st.Edges)
		if st.Landmarks > 0 {
			fmt.Fprintf(lines, "  landmarks %5d", st.Landmarks)
		}
		if st.Waiting > 0 {
			fmt.Fprintf(lines, "  waiting %d", st.Waiting)
		}
		if rep.Robust != "" {
			fmt.Fprintf(lines, "  rejected %d", st.Rejected)
		}
		fmt.Fprintf(lines, "  F %-16.10g %7.3f s  %s\n", st.Objective, st.Seconds, verdict)
		if res.Status == bsync.Cancelled {
			break
		}
	}
	secs := make([]float64, len(rep.Steps))
	for k, s := range rep.Steps {
		secs[k] = s.Seconds
	}
	slices.Sort(secs)
	n := len(secs)
	rep.StepP50, rep.StepP90, rep.StepMax = secs[n/2], secs[min(n-1, n*9/10)], secs[n-1]
	fmt.Fprintf(lines, "%d steps in %.3f s (reading %.3f s); per step: median %.3f s, 90%% %.3f s, max %.3f s\n",
		n, rep.Seconds, parse, rep.StepP50, rep.StepP90, rep.StepMax)

	writeJSON := func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	if f.report != "" {
		if err := writeOutput(f.report, stdout, writeJSON); err != nil {
			return err
		}
	}
	if f.json {
		if err := writeJSON(stdout); err != nil {
			return err
		}
	}
	if f.plots != "" {
		var ps []plots.ReplayStep
		for _, s := range rep.Steps {
			if s.Status != noEdgesYet {
				ps = append(ps, plots.ReplayStep{Seconds: s.Seconds, Objective: s.Objective, Certified: s.Certified})
			}
		}
		if err := os.MkdirAll(f.plots, 0o755); err != nil {
			return err
		}
		path := filepath.Join(f.plots, replayPNG)
		if err := plots.Replay(path, ps, "Replay of "+rep.File); err != nil {
			return err
		}
		fmt.Fprintln(lines, "plots:", path)
	}
	if firstFail != "" {
		return notCertifiedError{status: string(firstFail), code: statusExitCode(firstFail)}
	}
	return nil
}
