package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

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
cost at the estimate, the certificate and the convergence history. Solve's
flags apply, its output flags too (--tum, --plots, --covariances, --json).
With --no-solve, or with INPUT and OPTIMIZED, nothing is solved: the page
shows the files' VERTEX estimates, and --report adds a solve's certificate
and history (with a robust solve's report, F leaves out the edges it
rejected, as the solve's F does). The exit status is 0 whenever the page was
written, certified or not (the page's header says which).`

// viewNotTaken are the solve flags view does not take: their names are
// view's own flags.
var viewNotTaken = notTaken{
	{[]string{"o"}, "view's -o names the page; the optimized estimate is in it, and --tum writes it as a trajectory"},
	{[]string{"report"}, "view's --report names an earlier solve's report to show; --json prints the report of view's own solve"},
}

// viewUnsolved are the solve flags that still mean something when view
// solves nothing: how the files are read and what the page shows.
var viewUnsolved = []string{"lenient", "raw-quaternions", "rotations", "quiet"}

func runView(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("view", "view [flags] FILE.g2o | view [flags] INPUT.g2o OPTIMIZED.g2o",
		viewDoc+"\n\n"+viewNotTaken.help("view"), stderr)
	out := fs.String("o", "", "write the page to `OUT.html` (default: the first file's base name with .html, in the current directory; - for standard output)")
	report := fs.String("report", "", "with --no-solve or OPTIMIZED.g2o: show the certificate and history of `REPORT.json`, written by bcmsync solve --report")
	noSolve := fs.Bool("no-solve", false, "show FILE's VERTEX estimates as they are; do not solve")
	var f solveFlags
	f.registerExcept(fs, viewNotTaken)
	files, err := parseSolveLike(fs, viewNotTaken, args)
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
	if !solve {
		var set []string
		fs.Visit(func(fl *flag.Flag) {
			if fl.Name != "o" && fl.Name != "report" && fl.Name != "no-solve" && !slices.Contains(viewUnsolved, fl.Name) {
				set = append(set, dashed(fl.Name))
			}
		})
		if len(set) > 0 {
			return usageError{fmt.Errorf("%s: a flag of the solve, but with --no-solve or OPTIMIZED.g2o view solves nothing", strings.Join(set, ", "))}
		}
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
	f.outputs(&set)
	set.output("the page (-o)", path)
	if err := set.check(); err != nil {
		return err
	}
	if path != stdio && !strings.EqualFold(filepath.Ext(path), ".html") {
		return usageError{fmt.Errorf("-o %s: the page is HTML: give a file name ending in .html (or - for standard output)", path)}
	}
	info := stdout
	if set.toStdout() {
		info = stderr // stdout carries the page or the report
	}
	writePage := func(v plots.Viewer) error {
		if err := writeOutput(path, stdout, func(w io.Writer) error { return plots.WriteHTML(w, v) }); err != nil {
			return err
		}
		if !f.quiet && path != stdio {
			fmt.Fprintln(info, "wrote", path)
		}
		return nil
	}
	if !solve {
		v, err := viewerFromFiles(files, *report, g2o.ReadOptions{Lenient: f.lenient, RawQuaternions: f.rawQuat}, f.rotations)
		if err != nil {
			return err
		}
		return writePage(v)
	}
	reserveHeap(files[0], heapPerInputByte)
	g, parse, err := f.read(files[0], stderr)
	if err != nil {
		return err
	}
	s, err := f.solve(ctx, inputName(files[0]), g, parse, stderr)
	if err != nil {
		return err
	}
	v := viewerOf(s)
	// Solve's outputs and summary first; an uncertified result still gets
	// its page (the header says so), and view exits 0 for it.
	var nc notCertifiedError
	if err := f.writeResult(s, set.toStdout(), stdout, stderr); err != nil && !errors.As(err, &nc) {
		return err
	}
	return writePage(v)
}

// viewerOf is the viewer of a solve: the initial guess and the estimate,
// with the report's certificate and history and, for a pose solve, the
// covariance ellipses (or a note in s.notes saying why there are none).
func viewerOf(s *solved) plots.Viewer {
	res, rep := s.res, s.rep
	fv := withoutWorld(res.Graph)
	v := plots.Viewer{
		Title:   filepath.Base(res.Graph.Source),
		Graph:   fv.g,
		Problem: res.Problem,
		Estimates: []plots.Trajectory{
			{Label: "initial (" + rep.Init + ")", Poses: fv.poses(res.InitialPoses)},
			{Label: "optimized", Poses: fv.poses(res.Poses)},
		},
		Run: runFromReport(rep),
	}
	v.Ellipses, s.notes = viewEllipses(res, s.notes)
	if v.Ellipses != nil && fv.world >= 0 {
		xy := v.Ellipses.XY
		v.Ellipses.XY = append(append([][3]float64(nil), xy[:fv.world]...), xy[fv.world+1:]...)
	}
	return v
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
		if rep.N != numPoses(g) || rep.Landmarks != g.NumLandmarks() || rep.D != g.D {
			return v, fmt.Errorf("%s: the report is of %s in %d-D, but %s has %s in %d-D",
				inputName(reportPath), vertexCount(rep.N, rep.Landmarks), rep.D, g.Source, vertexCount(numPoses(g), g.NumLandmarks()), g.D)
		}
		if strings.HasPrefix(rep.Problem, "SO") {
			v.Problem = posegraph.Rotations
			if g.HasLandmarks() {
				return v, landmarkRotationsError(g.Source, g)
			}
		}
		v.Run = runFromReport(rep)
		if v.Rejected, err = rejectedEdges(g, rep, reportPath); err != nil {
			return v, err
		}
	}
	if fv := withoutWorld(g); fv.world >= 0 {
		v.Graph, v.Rejected = fv.g, fv.edges(v.Rejected)
		for k := range v.Estimates {
			v.Estimates[k].Poses = fv.poses(v.Estimates[k].Poses)
		}
	}
	return v, nil
}

// rejectedEdges returns the edges of g that the robust solve of rep
// rejected, so that the page's F leaves them out as the solve's did (nil
// for a plain solve, and for g the graph of the edges it kept, as solve
// -o writes it). The report names each rejected edge by its position among
// the input's edges, its ids and its line; a g whose edges there do not
// match is not the report's graph.
func rejectedEdges(g *posegraph.Graph, rep *bsync.Report, reportPath string) ([]int, error) {
	rr := rep.Robust
	if rr == nil || len(rr.Rejected) == 0 || g.M() == rep.M {
		return nil, nil
	}
	if g.M() != rr.InputEdges {
		return nil, fmt.Errorf("%s: the report's robust solve had %d edges and kept %d, but %s has %d",
			inputName(reportPath), rr.InputEdges, rep.M, g.Source, g.M())
	}
	out := make([]int, len(rr.Rejected))
	for k, r := range rr.Rejected {
		ok := r.Edge >= 0 && r.Edge < g.M()
		if ok {
			e := &g.Edges[r.Edge]
			ok = g.IDs[e.I] == r.From && g.IDs[e.J] == r.To && (r.Line == 0 || e.Line == 0 || r.Line == e.Line)
		}
		if !ok {
			return nil, fmt.Errorf("%s: the report's rejected edge %d (ids %d-%d, line %d) is not an edge of %s: the report is of another graph",
				inputName(reportPath), r.Edge, r.From, r.To, r.Line, g.Source)
		}
		out[k] = r.Edge
	}
	return out, nil
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
