package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/bcmsync/bcmsync/datasets"
	bsync "github.com/bcmsync/bcmsync/sync"
)

// The bench command solves every graph of a directory, each in a child
// process: the child is this executable re-run as `solve --json --quiet
// [solve flags] -- FILE`, so a row's wall time and peak memory are those of
// a whole process (read the file, solve, certify, round), the quantities the
// peer solver's times in REFERENCE.tsv measure, and one graph's memory does
// not inflate the next one's.
//
// benchChildEnv is set in every child's environment. The real binary
// ignores it; a test binary, which is what os.Executable returns under `go
// test`, dispatches to run from TestMain when it sees it (bench_test.go), so
// the tests exercise the same child processes as the installed command.
const benchChildEnv = "BCMSYNC_BENCH_CHILD"

// relTolBench is the relative error to f_star below which a certified row
// counts as matching the reference, in the summary line.
const relTolBench = 1e-7

// benchNotTaken are the solve flags that bench does not take: they choose
// outputs and messages, which bench fixes itself (the child always prints
// its JSON report and nothing else). Every other solve flag is a bench
// flag too and is passed on, so the two commands cannot drift apart.
var benchNotTaken = notTaken{
	{[]string{"o", "quiet"}, "bench's own -o (its OUTDIR) and --quiet (its progress lines)"},
	{[]string{"tum", "report", "plots", "covariances", "covariance-pairs", "json", "verbose"},
		"each graph's solve writes its JSON report to bench and nothing else; bench.json keeps every report"},
}

func init() {
	register(command{
		name:  "bench",
		usage: "bench [flags] DIR",
		short: "solve every pose graph in a directory, one process each, and tabulate times, memory and optima",
		run:   runBench,
	})
}

// benchRow is one graph's row of the bench table and one object of
// bench.json. Reference fields are null when the graph has no row in the
// reference table (f_star, peer_wall_s), when f_star is 0 (relative_error),
// or when peer_wall_s is 0 (time_ratio).
type benchRow struct {
	File      string  `json:"file"`
	D         int     `json:"d"`
	N         int     `json:"n"`
	M         int     `json:"m"`
	Objective float64 `json:"objective"`
	Certified bool    `json:"certified"`
	Status    string  `json:"status"`
	Rank      int     `json:"rank"`
	// Stage times, seconds, as the child's report measured them.
	Parse    float64 `json:"parse_s"`
	Init     float64 `json:"init_s"`
	Optimize float64 `json:"optimize_s"`
	Certify  float64 `json:"certify_s"`
	Round    float64 `json:"round_s"`
	Total    float64 `json:"total_s"`
	// Wall is the child's whole-process wall time measured by the parent
	// (start to exit), the fastest of Runs runs; PeakRSS is that run's
	// maximum resident set size from its rusage (0 where the platform does
	// not report it). PeakMB is PeakRSS in units of 10^6 bytes.
	Wall    float64 `json:"wall_s"`
	PeakRSS int64   `json:"peak_rss_bytes"`
	PeakMB  float64 `json:"peak_mb"`
	Runs    int     `json:"runs"`
	// With --peer, Wall is the median of the Walls of the Runs runs
	// instead, and Peer the peer's runs on the same graph, in turn with
	// them (benchpeer.go).
	Walls []float64 `json:"walls_s,omitempty"`
	Peer  *peerRow  `json:"peer,omitempty"`

	FStar     *float64 `json:"f_star"`
	RelErr    *float64 `json:"relative_error"` // (F - f_star) / f_star
	PeerWall  *float64 `json:"peer_wall_s"`
	TimeRatio *float64 `json:"time_ratio"` // wall_s / peer_wall_s

	// Error is set when the child failed without a report (a parse error,
	// a crash); the solve fields are then zero.
	Error  string        `json:"error,omitempty"`
	Report *bsync.Report `json:"report"`
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench", "bench [flags] DIR",
		"Solves every pose-graph file in DIR (*.g2o and *.graph, in name order), each in its own\n"+
			"process (this executable's solve command), and prints a table of optima, certificates,\n"+
			"stage times, whole-process wall time and peak memory, written also as OUTDIR/bench.md\n"+
			"and OUTDIR/bench.json. With a reference table (by default DIR/REFERENCE.tsv, if present)\n"+
			"it adds f_star, the relative error (F - f_star)/f_star, the peer's wall time and the\n"+
			"ratio wall/peer_wall_s, and a summary line. The solve flags below go to every solve.\n"+
			"The exit status is 1 when a graph could not be solved at all; an uncertified result is\n"+
			"a row of the table, not a failure.\n\n"+benchNotTaken.help("bench"), stderr)
	var (
		refPath, outDir, match, peerBin string
		repeat                          int
		quiet                           bool
	)
	fs.StringVar(&refPath, "reference", "", "compare with the reference table `FILE` (columns file d n m f_star peer_wall_s notes; default DIR/REFERENCE.tsv if present)")
	fs.StringVar(&outDir, "o", "bench-out", "write bench.md and bench.json into `OUTDIR`")
	fs.StringVar(&match, "match", "", "solve only the files whose name matches `REGEXP`")
	fs.IntVar(&repeat, "repeat", 1, "solve each graph `N` times, N >= 1, and keep the fastest wall time (and that run's memory)")
	fs.BoolVar(&quiet, "quiet", false, "no progress lines on stderr")
	fs.StringVar(&peerBin, "peer", "", "also run the peer solver `BIN` (SE-Sync's example binary: BIN FILE.g2o) on a copy of each graph it can read, in turn with each solve, and report both medians and their ratio")
	own := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) { own[f.Name] = true })
	var sf solveFlags
	sf.registerExcept(fs, benchNotTaken)
	pos, err := parseSolveLike(fs, benchNotTaken, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		fs.Usage()
		return usageError{errors.New("bench takes exactly one DIR")}
	}
	if repeat < 1 {
		return usageError{fmt.Errorf("--repeat %d: want a number of runs >= 1", repeat)}
	}
	var re *regexp.Regexp
	if match != "" {
		if re, err = regexp.Compile(match); err != nil {
			return usageError{fmt.Errorf("--match: %v", err)}
		}
	}
	// Check the solve options here, once, rather than failing in every child.
	if _, err := sf.options(io.Discard); err != nil {
		return usageError{err}
	}
	var passed []string
	fs.Visit(func(f *flag.Flag) {
		if !own[f.Name] {
			passed = append(passed, "--"+f.Name+"="+f.Value.String())
		}
	})

	dir := pos[0]
	files, err := benchFiles(dir, re)
	if err != nil {
		return err
	}
	if err := notStdio("--reference", refPath, "give the reference table as a file"); err != nil {
		return err
	}
	var set fileSet
	for _, name := range files {
		set.input("DIR", filepath.Join(dir, name))
	}
	if refPath != "" {
		set.input("--reference", refPath)
	} else {
		set.input("the reference", filepath.Join(dir, "REFERENCE.tsv"))
	}
	set.folder("-o", outDir, "bench.md", "bench.json")
	if err := set.check(); err != nil {
		return err
	}
	refs, refFile, err := benchReference(dir, refPath)
	if err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("bench: cannot locate this executable to run the solves: %v", err)
	}

	var peerDir string
	if peerBin != "" {
		if peerBin, err = exec.LookPath(peerBin); err != nil {
			return usageError{fmt.Errorf("--peer: %v", err)}
		}
		if peerDir, err = os.MkdirTemp("", "bcmsync-peer-"); err != nil {
			return fmt.Errorf("bench: %v", err)
		}
		defer os.RemoveAll(peerDir)
	}

	rows := make([]benchRow, 0, len(files))
	failed := 0
	for k, name := range files {
		var row benchRow
		if peerBin == "" {
			row = benchGraph(ctx, exe, filepath.Join(dir, name), passed, repeat)
		} else {
			pf, err := peerCopy(peerDir, filepath.Join(dir, name))
			if err != nil {
				return fmt.Errorf("bench: a copy for the peer: %v", err)
			}
			row = benchSideBySide(ctx, exe, peerBin, pf, filepath.Join(dir, name), passed, repeat)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		row.File = name
		if ref, ok := refs[name]; ok {
			row.addReference(ref)
			if row.Error == "" && (ref.D != row.D || ref.N != row.N || ref.M != row.M) && !quiet {
				fmt.Fprintf(stderr, "warning: %s: solved d=%d n=%d m=%d, %s lists d=%d n=%d m=%d\n",
					name, row.D, row.N, row.M, refFile, ref.D, ref.N, ref.M)
			}
		}
		if row.Error != "" {
			failed++
		}
		rows = append(rows, row)
		if !quiet {
			fmt.Fprintf(stderr, "[%d/%d] %s\n", k+1, len(files), row.progressLine())
		}
	}

	var md bytes.Buffer
	writeBenchMarkdown(&md, dir, refFile, peerBin, passed, repeat, rows)
	if _, err := stdout.Write(md.Bytes()); err != nil {
		return err
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return err
	}
	if err := writeOutput(filepath.Join(outDir, "bench.md"), stdout, writeBytes(md.Bytes())); err != nil {
		return err
	}
	js, err := json.MarshalIndent(rows, "", "  ")
	if err != nil {
		return fmt.Errorf("bench: encoding bench.json: %v", err)
	}
	if err := writeOutput(filepath.Join(outDir, "bench.json"), stdout, writeBytes(append(js, '\n'))); err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("bench: %d of %d graphs could not be solved (see the error column of %s)",
			failed, len(rows), filepath.Join(outDir, "bench.json"))
	}
	return nil
}

// benchFiles lists the pose-graph files of dir (*.g2o and *.graph, regular
// files, in name order) whose names match re (nil: all).
func benchFiles(dir string, re *regexp.Regexp) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("bench: %v", err)
	}
	var files []string
	for _, e := range ents {
		name := e.Name()
		ext := strings.ToLower(filepath.Ext(name))
		if e.IsDir() || (ext != ".g2o" && ext != ".graph") || (re != nil && !re.MatchString(name)) {
			continue
		}
		files = append(files, name)
	}
	if len(files) == 0 {
		what := "no pose-graph files (*.g2o, *.graph)"
		if re != nil {
			what += " matching " + re.String()
		}
		return nil, fmt.Errorf("bench: %s: %s", dir, what)
	}
	slices.Sort(files)
	return files, nil
}

// benchReference reads the reference table: path, or DIR/REFERENCE.tsv when
// path is empty and that file exists. It returns the rows by file name and
// the table's path ("" when there is none).
func benchReference(dir, path string) (map[string]datasets.Reference, string, error) {
	if path == "" {
		def := filepath.Join(dir, "REFERENCE.tsv")
		if _, err := os.Stat(def); err != nil {
			return nil, "", nil
		}
		path = def
	}
	list, err := datasets.ReadReference(path)
	if err != nil {
		return nil, "", err
	}
	refs := make(map[string]datasets.Reference, len(list))
	for _, r := range list {
		refs[r.File] = r
	}
	return refs, path, nil
}

// benchGraph solves file repeat times in child processes and returns the
// row of the fastest run. A failed run makes the row an error row.
func benchGraph(ctx context.Context, exe, file string, passed []string, repeat int) benchRow {
	var best benchRow
	for k := 0; k < repeat; k++ {
		row := benchOnce(ctx, exe, file, passed)
		if row.Error != "" || ctx.Err() != nil {
			row.Runs = k + 1
			return row
		}
		if k == 0 || row.Wall < best.Wall {
			best = row
		}
	}
	best.Runs = repeat
	return best
}

// benchOnce runs one child `solve --json --quiet` on file.
func benchOnce(ctx context.Context, exe, file string, passed []string) benchRow {
	args := append([]string{"solve", "--json", "--quiet"}, passed...)
	args = append(args, "--", file)
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Env = append(os.Environ(), benchChildEnv+"=1")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	t0 := time.Now()
	runErr := cmd.Run()
	wall := time.Since(t0).Seconds()

	var row benchRow
	row.Wall = wall
	if cmd.ProcessState != nil {
		row.PeakRSS = maxRSS(cmd.ProcessState)
		row.PeakMB = float64(row.PeakRSS) / 1e6
	}
	// solve exits 3 to 9 after printing its report when the result is not
	// certified: a report on stdout is a result whatever the status.
	rep, err := bsync.ReadReport(&out)
	if err != nil {
		msg := strings.TrimSpace(errb.String())
		switch {
		case msg != "":
		case runErr != nil:
			msg = runErr.Error()
		default:
			msg = "solve printed no report: " + err.Error()
		}
		row.Error = msg
		return row
	}
	row.Report = rep
	row.D, row.N, row.M = rep.D, rep.N, rep.M
	row.Objective, row.Certified, row.Status, row.Rank = rep.Objective, rep.Certified, rep.Status, rep.Rank
	t := rep.Timings
	row.Parse, row.Init, row.Optimize, row.Certify, row.Round, row.Total = t.Parse, t.Init, t.Optimize, t.Certify, t.Round, t.Total
	return row
}

// maxRSS is a finished child's peak resident set size in bytes, from its
// rusage, or 0 where the platform has none. syscall.Rusage has a Maxrss
// field only on Unix, so it is looked up by name: the command then builds
// everywhere and reports memory where it can. Maxrss is in KiB except on
// Darwin, where it is in bytes.
func maxRSS(ps *os.ProcessState) int64 {
	v := reflect.ValueOf(ps.SysUsage())
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return 0
	}
	f := v.Elem().FieldByName("Maxrss")
	if !f.IsValid() || !f.CanInt() {
		return 0
	}
	if runtime.GOOS == "darwin" || runtime.GOOS == "ios" {
		return f.Int()
	}
	return f.Int() * 1024
}

// addReference fills the reference columns from ref.
func (r *benchRow) addReference(ref datasets.Reference) {
	fstar, peer := ref.FStar, ref.PeerWallSeconds
	r.FStar, r.PeerWall = &fstar, &peer
	if r.Error != "" {
		return
	}
	if fstar != 0 {
		rel := (r.Objective - fstar) / fstar
		r.RelErr = &rel
	}
	if peer > 0 {
		ratio := r.Wall / peer
		r.TimeRatio = &ratio
	}
}

func (r *benchRow) progressLine() string {
	if r.Error != "" {
		return fmt.Sprintf("%s: error: %s", r.File, firstLine(r.Error))
	}
	mark := "certified"
	if !r.Certified {
		mark = "NOT certified (" + r.Status + ")"
	}
	s := fmt.Sprintf("%s: n=%d m=%d F=%.12g %s at rank %d, wall %.3fs, peak %.1f MB",
		r.File, r.N, r.M, r.Objective, mark, r.Rank, r.Wall, r.PeakMB)
	if r.RelErr != nil {
		s += fmt.Sprintf(", rel. error %.2e", *r.RelErr)
	}
	if r.TimeRatio != nil {
		s += fmt.Sprintf(", %.2fx the peer's %.3gs", *r.TimeRatio, *r.PeerWall)
	}
	return s
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// writeBenchMarkdown writes the table: a line on how it was made, the rows,
// the summary line when there is a reference, and the errors.
func writeBenchMarkdown(w *bytes.Buffer, dir, refFile, peerBin string, passed []string, repeat int, rows []benchRow) {
	fmt.Fprintf(w, "# bcmsync bench %s\n\n", dir)
	opts := "defaults"
	if len(passed) > 0 {
		opts = strings.Join(passed, " ")
	}
	how := fmt.Sprintf("Best of %d run(s) per graph", repeat)
	if peerBin != "" {
		how = fmt.Sprintf("Median of %d run(s) per graph, in turn with the peer's", repeat)
	}
	fmt.Fprintf(w, "Solve options: %s. %s, each a separate process; %d CPUs, %s/%s, %s.\n",
		opts, how, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(w, "Times in seconds: the stages as the solver measured them, wall = whole process; peak = max RSS in MB (10^6 bytes).\n")
	if refFile != "" {
		fmt.Fprintf(w, "Reference: %s; rel. error = (F - f_star)/f_star, ratio = wall/peer_wall_s.\n", refFile)
	}
	w.WriteString("\n")

	cols := []string{"file", "d", "n", "m", "F", "certified", "rank", "parse", "init", "optimize", "certify", "round", "total", "wall", "peak MB"}
	if refFile != "" {
		cols = append(cols, "f_star", "rel. error", "peer_wall_s", "ratio")
	}
	if peerBin != "" {
		cols = append(cols, "peer wall", "peer peak MB", "peer F", "wall/peer")
	}
	w.WriteString("| " + strings.Join(cols, " | ") + " |\n|")
	for k := range cols {
		if k == 0 || k == 5 {
			w.WriteString(" --- |")
		} else {
			w.WriteString(" ---: |")
		}
	}
	w.WriteString("\n")
	opt := func(p *float64, format string) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprintf(format, *p)
	}
	for _, r := range rows {
		var c []string
		if r.Error != "" {
			c = []string{r.File, "-", "-", "-", "-", "error", "-", "-", "-", "-", "-", "-", "-", fmt.Sprintf("%.3f", r.Wall), fmt.Sprintf("%.1f", r.PeakMB)}
		} else {
			cert := "yes"
			if !r.Certified {
				cert = "no: " + r.Status
			}
			c = []string{r.File, fmt.Sprint(r.D), fmt.Sprint(r.N), fmt.Sprint(r.M), fmt.Sprintf("%.12g", r.Objective), cert, fmt.Sprint(r.Rank),
				fmt.Sprintf("%.3f", r.Parse), fmt.Sprintf("%.3f", r.Init), fmt.Sprintf("%.3f", r.Optimize), fmt.Sprintf("%.3f", r.Certify),
				fmt.Sprintf("%.3f", r.Round), fmt.Sprintf("%.3f", r.Total), fmt.Sprintf("%.3f", r.Wall), fmt.Sprintf("%.1f", r.PeakMB)}
		}
		if refFile != "" {
			c = append(c, opt(r.FStar, "%.12g"), opt(r.RelErr, "%.2e"), opt(r.PeerWall, "%g"), opt(r.TimeRatio, "%.3g"))
		}
		if peerBin != "" {
			c = append(c, r.Peer.cells()...)
		}
		w.WriteString("| " + strings.Join(c, " | ") + " |\n")
	}
	if refFile != "" {
		w.WriteString("\n" + benchSummary(rows) + "\n")
	}
	if peerBin != "" {
		w.WriteString("\n" + peerSummary(peerBin, repeat, rows) + "\n")
	}
	first := true
	for _, r := range rows {
		if r.Error == "" {
			continue
		}
		if first {
			w.WriteString("\nErrors:\n\n")
			first = false
		}
		fmt.Fprintf(w, "- %s: %s\n", r.File, strings.ReplaceAll(strings.TrimSpace(r.Error), "\n", " / "))
	}
}

// benchSummary is the line under a table with a reference: the geometric
// mean of the time ratios and how many of the graphs with a reference
// optimum were certified within relTolBench of it.
func benchSummary(rows []benchRow) string {
	logSum, nRatio := 0.0, 0
	good, nRef := 0, 0
	for _, r := range rows {
		if r.TimeRatio != nil && *r.TimeRatio > 0 {
			logSum += math.Log(*r.TimeRatio)
			nRatio++
		}
		if r.FStar != nil {
			nRef++
			if r.Certified && r.RelErr != nil && math.Abs(*r.RelErr) <= relTolBench {
				good++
			}
		}
	}
	gm := "-"
	if nRatio > 0 {
		gm = fmt.Sprintf("%.3f", math.Exp(logSum/float64(nRatio)))
	}
	line := fmt.Sprintf("Geometric mean of wall/peer_wall_s over %d graphs: %s. Certified and within %g of f_star: %d of %d.",
		nRatio, gm, relTolBench, good, nRef)
	return line + rawReadingHint(rows)
}

// rawReadingHint explains, after the summary, misses that come from how 3-D
// files were read rather than from the solver: REFERENCE.tsv's 3-D optima
// are SE-Sync's, which builds rotations from the quaternions as printed,
// and they differ from F of the normalized reading by 1e-7 to 1e-5
// (docs/performance.md, "Results against the reference optima"). It is
// empty when no 3-D graph read the default way missed f_star.
func rawReadingHint(rows []benchRow) string {
	missed := 0
	for _, r := range rows {
		if r.D != 3 || r.FStar == nil || r.RelErr == nil || !r.Certified || math.Abs(*r.RelErr) <= relTolBench {
			continue
		}
		if r.Report != nil && r.Report.RawQuaternions {
			continue
		}
		missed++
	}
	if missed == 0 {
		return ""
	}
	return fmt.Sprintf(" %d certified 3-D graph(s) miss f_star in the default reading, which normalizes quaternions;"+
		" the reference optimum was computed from the quaternions as printed: --raw-quaternions reads them that way.", missed)
}
