package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/bcmsync/bcmsync/g2o"
	"github.com/bcmsync/bcmsync/internal/trajeval"
	"github.com/bcmsync/bcmsync/plots"
	"github.com/bcmsync/bcmsync/posegraph"
)

const (
	evaluateUsage = "evaluate [flags] EST GT"
	evaluateDoc   = `Compares the estimated trajectory EST with the ground truth GT, in the
conventions of evo (evo_ape, evo_rpe). Each file is g2o (its VERTEX records,
stamped by vertex id; edges are not needed) or TUM ("timestamp tx ty tz qx
qy qz qw", for paths ending in .tum or .txt). Poses are matched by equal id /
time stamp; poses without a match are counted, reported and left out.

ATE: after aligning EST to GT (--align: se, the best rigid motion, Umeyama /
Horn, as evo_ape -a; sim adds a scale, as evo_ape -as; none, evo's default),
the distance between matched positions, and the angle between matched
rotations in degrees.
RPE: for pose pairs (i, j = i+delta), E = (GT_i^-1 GT_j)^-1 (EST_i^-1 EST_j), its
translation norm and rotation angle (degrees). Pairs are (0, delta), (delta,
2 delta), ... as evo's default, or every (i, i+delta) with --all-pairs.
Statistics: RMSE, mean, median, std (population), min, max.`
)

func init() {
	register(command{
		name:  "evaluate",
		usage: evaluateUsage,
		short: "absolute and relative trajectory errors (ATE, RPE) of an estimate against ground truth",
		run:   runEvaluate,
	})
}

// evalReport is what evaluate prints with --json; the names are part of the
// command's interface.
type evalReport struct {
	Estimate     string         `json:"estimate"`
	Reference    string         `json:"reference"`
	D            int            `json:"d"`
	Matched      int            `json:"matched"`
	EstUnmatched int            `json:"estimate_unmatched"`
	RefUnmatched int            `json:"reference_unmatched"`
	Align        string         `json:"align"`
	Transform    evalTransform  `json:"alignment"`
	ATE          trajeval.Stats `json:"ate"`
	ATERot       trajeval.Stats `json:"ate_rotation_deg"`
	Delta        int            `json:"delta"`
	AllPairs     bool           `json:"all_pairs"`
	RPE          trajeval.Stats `json:"rpe"`
	RPERot       trajeval.Stats `json:"rpe_rotation_deg"`
	Plot         string         `json:"plot,omitempty"`
}

// evalTransform is the alignment applied to the estimate: x -> scale R x + t.
type evalTransform struct {
	Rotation    []float64 `json:"rotation"` // d x d, row-major
	Translation []float64 `json:"translation"`
	Scale       float64   `json:"scale"`
	AngleDeg    float64   `json:"angle_deg"`
}

func runEvaluate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("evaluate", evaluateUsage, evaluateDoc, stderr)
	alignFlag := fs.String("align", "se", "alignment of EST to GT: none, se (rotation and translation) or sim (and scale)")
	delta := fs.Int("delta", 1, "index distance of the relative-error pairs, in matched poses")
	allPairs := fs.Bool("all-pairs", false, "relative errors over every pair (i, i+delta), not just (0, delta), (delta, 2 delta), ...")
	asJSON := fs.Bool("json", false, "print one JSON object instead of the table")
	plotPath := fs.String("plot", "", "draw the aligned estimate coloured by ATE, and ATE per pose, to `FILE` (.png, .svg or .pdf)")
	files, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(files) != 2 {
		fs.Usage()
		return usageError{fmt.Errorf("evaluate takes two files, EST and GT, not %d", len(files))}
	}
	align, err := trajeval.ParseAlignment(*alignFlag)
	if err != nil {
		return usageError{fmt.Errorf("--align: %w", err)}
	}
	if *delta < 1 {
		return usageError{fmt.Errorf("--delta must be >= 1, not %d", *delta)}
	}
	if *plotPath != "" {
		switch strings.ToLower(filepath.Ext(*plotPath)) {
		case ".png", ".svg", ".pdf":
		default:
			return usageError{fmt.Errorf("--plot %s: the format follows the extension, .png, .svg or .pdf", *plotPath)}
		}
	}
	if err := notStdio("--plot", *plotPath, "the figure's format follows its extension: give a file"); err != nil {
		return err
	}
	var set fileSet
	set.input("EST", files[0])
	set.input("GT", files[1])
	set.output("--plot", *plotPath)
	if err := set.check(); err != nil {
		return err
	}
	est, err := readTrajectory(files[0])
	if err != nil {
		return err
	}
	ref, err := readTrajectory(files[1])
	if err != nil {
		return err
	}
	files = []string{est.Source, ref.Source}
	// A 2-D trajectory is compared with a TUM file in 2-D, when that is
	// planar (as WriteTUM writes 2-D poses).
	if est.D != ref.D {
		if est.D == 3 {
			est, err = est.Flatten()
		} else {
			ref, err = ref.Flatten()
		}
		if err != nil {
			return fmt.Errorf("%w (the other file is 2-D)", err)
		}
	}
	d := est.D
	assoc, err := trajeval.Associate(est.Stamps, ref.Stamps)
	if err != nil {
		return err
	}
	if len(assoc.Est) == 0 {
		return fmt.Errorf("evaluate: %s and %s share no id / time stamp (%s; %s)", files[0], files[1], stampRange(est), stampRange(ref))
	}
	if assoc.EstOnly > 0 || assoc.RefOnly > 0 {
		fmt.Fprintf(stderr, "warning: %d pose(s) of %s have no match in %s and %d of %s none in %s; they are left out\n",
			assoc.EstOnly, files[0], files[1], assoc.RefOnly, files[1], files[0])
	}
	pe, pr := make([]trajeval.Pose, len(assoc.Est)), make([]trajeval.Pose, len(assoc.Est))
	for k := range pe {
		pe[k] = trajeval.Pose(est.Poses[assoc.Est[k]])
		pr[k] = trajeval.Pose(ref.Poses[assoc.Ref[k]])
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	res, err := trajeval.Evaluate(d, pe, pr, trajeval.Options{Align: align, Delta: *delta, AllPairs: *allPairs})
	if err != nil {
		return fmt.Errorf("evaluate: %s against %s: %w", files[0], files[1], err)
	}
	rep := evalReport{
		Estimate: files[0], Reference: files[1], D: d, Matched: len(assoc.Est),
		EstUnmatched: assoc.EstOnly, RefUnmatched: assoc.RefOnly, Align: align.String(),
		ATE: trajeval.Summarize(res.ATE), ATERot: trajeval.Summarize(res.ATERot),
		Delta: *delta, AllPairs: *allPairs,
		RPE: trajeval.Summarize(res.RPE), RPERot: trajeval.Summarize(res.RPERot),
		Transform: evalTransform{
			Rotation: res.Transform.R[:d*d], Translation: res.Transform.T[:d], Scale: res.Transform.Scale,
			AngleDeg: trajeval.RotationAngle(&res.Transform.R, d) * 180 / math.Pi,
		},
	}
	if *plotPath != "" {
		ae, ar := make([]posegraph.Pose, len(pe)), make([]posegraph.Pose, len(pr))
		for k := range ae {
			ae[k], ar[k] = posegraph.Pose(res.Aligned[k]), posegraph.Pose(pr[k])
		}
		title := fmt.Sprintf("%s against %s: ATE RMSE %.4g, max %.4g", filepath.Base(files[0]), filepath.Base(files[1]), rep.ATE.RMSE, rep.ATE.Max)
		if err := plots.TrajectoryError(*plotPath, d, ae, ar, res.ATE, plots.ErrorOptions{Title: title}); err != nil {
			return err
		}
		rep.Plot = *plotPath
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false) // "<stdin>", not "\u003cstdin\u003e"
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return writeEval(stdout, &rep)
}

// readTrajectory reads the trajectory at path as g2o.ReadTrajectoryFile
// does. Standard input ("-") has no extension to tell TUM from g2o: it is
// TUM when its first record starts with a number (a time stamp), as no g2o
// record does.
func readTrajectory(path string) (*g2o.Trajectory, error) {
	if path != stdio {
		return g2o.ReadTrajectoryFile(path)
	}
	b, err := io.ReadAll(stdin)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", stdinName, err)
	}
	return g2o.ReadTrajectory(bytes.NewReader(b), stdinName, looksTUM(b))
}

// looksTUM reports whether the first record of b (comments and blank lines
// skipped) starts with a number.
func looksTUM(b []byte) bool {
	for _, line := range bytes.Split(b, []byte{'\n'}) {
		if k := bytes.IndexByte(line, '#'); k >= 0 {
			line = line[:k]
		}
		if f := bytes.Fields(bytes.TrimPrefix(line, []byte("\xef\xbb\xbf"))); len(f) > 0 {
			_, err := strconv.ParseFloat(string(f[0]), 64)
			return err == nil
		}
	}
	return false
}

// stampRange describes a trajectory's stamps for the no-match error.
func stampRange(t *g2o.Trajectory) string {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range t.Stamps {
		lo, hi = math.Min(lo, s), math.Max(hi, s)
	}
	return fmt.Sprintf("%s has %d poses stamped %g to %g", t.Source, len(t.Stamps), lo, hi)
}

func writeEval(w io.Writer, r *evalReport) error {
	var b strings.Builder
	fmt.Fprintf(&b, "evaluate: %s against %s\n", r.Estimate, r.Reference)
	fmt.Fprintf(&b, "  d=%d, %d matched poses (%d of the estimate and %d of the reference unmatched)\n",
		r.D, r.Matched, r.EstUnmatched, r.RefUnmatched)
	t := r.Transform
	switch r.Align {
	case "none":
		fmt.Fprintf(&b, "  alignment: none\n")
	default:
		fmt.Fprintf(&b, "  alignment: %s, rotation %.4g deg, translation %s", r.Align, t.AngleDeg, fmtVec(t.Translation))
		if r.Align == "sim" {
			fmt.Fprintf(&b, ", scale %.6g", t.Scale)
		}
		b.WriteString("\n")
	}
	pairs := "consecutive pairs"
	if r.AllPairs {
		pairs = "all pairs"
	}
	fmt.Fprintf(&b, "\n  %-26s %6s %11s %11s %11s %11s %11s %11s\n", "", "count", "rmse", "mean", "median", "std", "min", "max")
	row := func(name string, s trajeval.Stats) {
		fmt.Fprintf(&b, "  %-26s %6d %11.5g %11.5g %11.5g %11.5g %11.5g %11.5g\n", name, s.Count, s.RMSE, s.Mean, s.Median, s.Std, s.Min, s.Max)
	}
	row("ATE translation", r.ATE)
	row("ATE rotation (deg)", r.ATERot)
	row(fmt.Sprintf("RPE translation (delta %d)", r.Delta), r.RPE)
	row("RPE rotation (deg)", r.RPERot)
	fmt.Fprintf(&b, "  (RPE over %d %s)\n", r.RPE.Count, pairs)
	if r.Plot != "" {
		fmt.Fprintf(&b, "  plot: %s\n", r.Plot)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func fmtVec(v []float64) string {
	s := make([]string, len(v))
	for k, x := range v {
		s[k] = fmt.Sprintf("%.4g", x)
	}
	return "(" + strings.Join(s, ", ") + ")"
}
