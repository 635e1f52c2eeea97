package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"path/filepath"
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
stamped by vertex id; edges are not needed), TUM ("timestamp tx ty tz qx qy
qz qw") or a KITTI pose file (the 3x4 matrix [R | t] row by row, 12 numbers a
line, no time stamps); the format is read from the content, whatever the
file's name: a g2o line starts with a record name, a TUM line has 8 numbers,
a KITTI line 12.

Poses are matched as evo does: each pose of EST with the pose of GT nearest
in time (or vertex id), when they are at most --t-max-diff apart (default
0.01, evo's; each pose is matched at most once, the nearer pair winning). A
KITTI file has no stamps, so its poses are matched by line: pose k of one
file with pose k of the other, which must have as many. Poses without a match
are counted, reported and left out.

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
	Estimate  string `json:"estimate"`
	Reference string `json:"reference"`
	// Formats are the files' formats (g2o, tum, kitti); Association how
	// poses were matched: "nearest stamp" within TMaxDiff, or "by line"
	// (KITTI).
	EstFormat    string         `json:"estimate_format"`
	RefFormat    string         `json:"reference_format"`
	Association  string         `json:"association"`
	TMaxDiff     float64        `json:"t_max_diff"`
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
	tMaxDiff := fs.Float64("t-max-diff", 0.01, "match poses whose time stamps (or vertex ids) are at most `SECONDS` apart, each with the nearest (evo's --t_max_diff); 0: equal stamps only")
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
	if !(*tMaxDiff >= 0) || math.IsInf(*tMaxDiff, 0) {
		return usageError{fmt.Errorf("--t-max-diff must be a finite number of seconds >= 0, not %g", *tMaxDiff)}
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
	how := "nearest stamp"
	var assoc trajeval.Association
	if est.Format == g2o.FormatKITTI || ref.Format == g2o.FormatKITTI {
		how = "by line"
		if len(est.Poses) != len(ref.Poses) {
			return fmt.Errorf("evaluate: %s has %d poses and %s %d: a KITTI pose file has no time stamps, so poses are matched by line, and both files need as many",
				files[0], len(est.Poses), files[1], len(ref.Poses))
		}
		assoc, err = trajeval.AssociateByOrder(len(est.Poses), len(ref.Poses))
	} else {
		assoc, err = trajeval.AssociateNearest(est.Stamps, ref.Stamps, *tMaxDiff)
	}
	if err != nil {
		return err
	}
	if len(assoc.Est) == 0 {
		return fmt.Errorf("evaluate: %s and %s share no id / time stamp within --t-max-diff %g (%s; %s)", files[0], files[1], *tMaxDiff, stampRange(est), stampRange(ref))
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
		EstFormat: string(est.Format), RefFormat: string(ref.Format), Association: how, TMaxDiff: *tMaxDiff,
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
	return g2o.ReadTrajectory(bytes.NewReader(b), stdinName)
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
	if r.Association == "by line" {
		fmt.Fprintf(&b, "  formats %s and %s; matched by line (a KITTI pose file has no time stamps)\n", r.EstFormat, r.RefFormat)
	} else {
		fmt.Fprintf(&b, "  formats %s and %s; matched by nearest stamp within %g\n", r.EstFormat, r.RefFormat, r.TMaxDiff)
	}
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
