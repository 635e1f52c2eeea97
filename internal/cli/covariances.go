package cli

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/bcmsync/bcmsync/plots"
	"github.com/bcmsync/bcmsync/posegraph"
	bsync "github.com/bcmsync/bcmsync/sync"
	"github.com/bcmsync/bcmsync/sync/covariance"
)

// registerCovariances declares solve's --covariances and --covariance-pairs.
func (f *solveFlags) registerCovariances(fs *flag.FlagSet) {
	fs.StringVar(&f.covariances, "covariances", "", "write each pose's (and landmark's) marginal covariance at the optimum to `FILE`: "+
		"a line \"ID c11 c12 ...\" per pose, 3x3 (x y theta) or 6x6 (x y z rx ry rz) row-major, gauge the anchor pose; the # header says how (docs/covariances.md)")
	fs.StringVar(&f.covPairs, "covariance-pairs", "", "with --covariances, also write the joint covariance of each pair of vertex ids listed in `FILE`, one \"ID ID\" a line")
}

// covarianceFlagsOK checks the two flags against the others, as a usage
// error.
func (f *solveFlags) covarianceFlagsOK() error {
	switch {
	case f.covPairs != "" && f.covariances == "":
		return errors.New("--covariance-pairs needs --covariances FILE to write the joint covariances to")
	case f.covariances != "" && f.rotations:
		return errors.New("--covariances needs the pose problem: a rotation-only solve (--rotations) has no translation covariance")
	}
	return nil
}

// covariancePair is one line of a --covariance-pairs file: two vertex ids.
type covariancePair struct {
	line int
	a, b int
}

// prepareCovariances reads the --covariance-pairs file against the input
// graph g before the solve, so that a bad line is reported before a long
// solve. (The command's fileSet has already checked both paths against
// every other file: see solveFlags.outputs.)
func (f *solveFlags) prepareCovariances(g *posegraph.Graph) ([]covariancePair, error) {
	if f.covariances == "" || f.covPairs == "" {
		return nil, nil
	}
	return readCovariancePairs(f.covPairs, g)
}

// readCovariancePairs reads lines "ID ID" ('#' starts a comment; blank
// lines are fine) and checks each id against g's vertices. Errors name
// the file and the line.
func readCovariancePairs(path string, g *posegraph.Graph) ([]covariancePair, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	index := make(map[int]bool, g.N())
	for _, id := range g.IDs {
		index[id] = true
	}
	var pairs []covariancePair
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for line := 1; sc.Scan(); line++ {
		s := sc.Text()
		if k := strings.IndexByte(s, '#'); k >= 0 {
			s = s[:k]
		}
		fields := strings.Fields(s)
		if len(fields) == 0 {
			continue
		}
		if len(fields) != 2 {
			return nil, fmt.Errorf("%s:%d: %d fields; a pair is two vertex ids, \"ID ID\"", path, line, len(fields))
		}
		var ids [2]int
		for k, fl := range fields {
			v, err := strconv.Atoi(fl)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %q is not a vertex id (an integer)", path, line, fl)
			}
			if !index[v] {
				return nil, fmt.Errorf("%s:%d: no vertex has the id %d in %s", path, line, v, g.Source)
			}
			ids[k] = v
		}
		if ids[0] == ids[1] {
			return nil, fmt.Errorf("%s:%d: the id %d twice; a pair names two different vertices", path, line, ids[0])
		}
		pairs = append(pairs, covariancePair{line: line, a: ids[0], b: ids[1]})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return pairs, nil
}

// writeCovariances computes the covariances of the solve's estimate and
// writes them to f.covariances; it returns the summary's note.
func writeCovariances(f *solveFlags, file string, res *bsync.Result, pairs []covariancePair, stdout io.Writer) (string, error) {
	t0 := time.Now()
	g := res.Graph
	at := make(map[int]int, g.N())
	for i, id := range g.IDs {
		at[id] = i
	}
	var opts covariance.Options
	for _, p := range pairs {
		i, ok1 := at[p.a]
		j, ok2 := at[p.b]
		if !ok1 || !ok2 {
			id := p.a
			if ok1 {
				id = p.b
			}
			return "", fmt.Errorf("%s:%d: vertex %d is not in the solved graph (--largest-component left it out)", f.covPairs, p.line, id)
		}
		opts.Pairs = append(opts.Pairs, [2]int{i, j})
	}
	cov, err := covariance.Compute(g, res.Poses, opts)
	if err != nil {
		return "", fmt.Errorf("--covariances: %w", err)
	}
	if err := writeOutput(f.covariances, stdout, func(w io.Writer) error {
		return formatCovariances(w, file, res, cov, pairs)
	}); err != nil {
		return "", err
	}
	what := fmt.Sprintf("%d poses", g.NumPoses())
	if l := g.NumLandmarks(); l > 0 {
		what += fmt.Sprintf(", %d landmarks", l)
	}
	if len(pairs) > 0 {
		what += fmt.Sprintf(", %d pairs", len(pairs))
	}
	return fmt.Sprintf("covariances: %s (%s; gauge pose %d) in %.3fs", f.covariances, what, g.IDs[cov.Gauge], time.Since(t0).Seconds()), nil
}

// formatCovariances writes the covariance file: the # header, then a line
// per vertex, then a line per pair (docs/covariances.md).
func formatCovariances(w io.Writer, file string, res *bsync.Result, cov *covariance.Covariances, pairs []covariancePair) error {
	g := res.Graph
	d := g.D
	bw := bufio.NewWriterSize(w, 1<<16)
	fmt.Fprintf(bw, "# bcmsync covariances of %s: SE(%d), %d poses", filepath.Base(file), d, g.NumPoses())
	if l := g.NumLandmarks(); l > 0 {
		fmt.Fprintf(bw, " + %d landmarks", l)
	}
	fmt.Fprintf(bw, ", %d edges\n", g.M())
	if res.Certified {
		fmt.Fprintf(bw, "# estimate: certified globally optimal (F = %.12g)\n", res.Objective)
	} else {
		fmt.Fprintf(bw, "# estimate: NOT certified (%s; F = %.12g): these are the covariances at that estimate, which may not be the optimum\n", res.Status, res.Objective)
	}
	if res.Robust != nil {
		fmt.Fprintf(bw, "# graph: the %d edges --robust kept (%d rejected); the covariances are of that problem\n", g.M(), len(res.Robust.Rejected))
	}
	gauge := cov.Gauge
	fmt.Fprintf(bw, "# gauge: pose %d held fixed (the anchor: the first FIX'ed pose, else the first pose), so its covariance is zero "+
		"and every other is relative to it, in the frame of the estimate, where pose %d keeps its input pose (the identity where the file gives none)\n", g.IDs[gauge], g.IDs[gauge])
	if d == 2 {
		fmt.Fprintf(bw, "# coordinates: a pose (x y theta), a landmark (x y); translation perturbed in the world frame, "+
			"rotation on the right (body frame): R -> R Exp(theta)\n")
	} else {
		fmt.Fprintf(bw, "# coordinates: a pose (x y z rx ry rz), a landmark (x y z); translation perturbed in the world frame, "+
			"rotation on the right (body frame): R -> R Exp([r]_x), r an axis-angle vector\n")
	}
	reading := "an EDGE_SE2's I33 is read as kappa, so its angle variance is 1/(2 I33), half the 1/I33 g2o reads"
	if d == 3 {
		reading = "an EDGE_SE3:QUAT's rotation block w I is read as kappa = w/2, so each axis's variance is 1/w, a quarter of the 4/w g2o reads"
	}
	fmt.Fprintf(bw, "# noise model: the isotropic one of the objective, F = sum_e kappa_e ||R_j - R_i R_e||_F^2 + tau_e ||t_j - t_i - R_i t_e||^2 "+
		"with each edge's kappa and tau, taken as twice the negative log-likelihood: translation noise N(0, I/tau_e), "+
		"rotation noise of standard deviation 1/sqrt(2 kappa_e) rad per axis (%s)\n", reading)
	fmt.Fprintf(bw, "# method: the inverse of the Gauss-Newton information J^T J of F/2 at the estimate (J: the Jacobian of the whitened residuals), "+
		"its blocks by selected inversion (Takahashi's recurrences) on a sparse Cholesky factor of %d nonzeros\n", cov.FactorNNZ)
	k := covariance.PoseDim(d)
	fmt.Fprintf(bw, "# lines: \"ID c11 c12 ... c%d%d\" a pose's %dx%d covariance, row-major; \"landmark ID c11 ... c%d%d\" a landmark's %dx%d; "+
		"\"pair ID_I ID_J c11 ...\" the joint covariance [[C_II, C_IJ], [C_JI, C_JJ]] of a --covariance-pairs line, row-major\n",
		k, k, k, k, d, d, d, d)
	var num []byte
	row := func(m []float64) {
		for _, v := range m {
			num = strconv.AppendFloat(num[:0], v, 'g', -1, 64)
			bw.WriteByte(' ')
			bw.Write(num)
		}
		bw.WriteByte('\n')
	}
	for i := 0; i < g.N(); i++ {
		if g.IsLandmark(i) {
			bw.WriteString("landmark ")
		}
		bw.WriteString(strconv.Itoa(g.IDs[i]))
		row(cov.Marginal(i))
	}
	for q, jt := range cov.Joints {
		fmt.Fprintf(bw, "pair %d %d", pairs[q].a, pairs[q].b)
		row(jt.Cov)
	}
	return bw.Flush()
}

// viewEllipses computes the covariances of a pose solve's estimate for
// the viewer's ellipses: each vertex's x-y marginal. When they cannot be
// computed (a rotation-only solve, a singular information matrix) the
// page has none, and a note says why.
func viewEllipses(res *bsync.Result, notes []string) (*plots.Ellipses, []string) {
	if res.Problem != posegraph.Poses {
		return nil, notes
	}
	cov, err := covariance.Compute(res.Graph, res.Poses, covariance.Options{})
	if err != nil {
		return nil, append(notes, fmt.Sprintf("no covariance ellipses: %v", err))
	}
	g := res.Graph
	e := &plots.Ellipses{XY: make([][3]float64, g.N())}
	for i := range e.XY {
		m, k := cov.Marginal(i), cov.Size(i)
		e.XY[i] = [3]float64{m[0], m[1], m[k+1]}
	}
	status := "the certified optimum"
	if !res.Certified {
		status = "the estimate (not certified)"
	}
	e.Note = fmt.Sprintf("Covariance ellipses: marginal position covariances at %s, pose %d held fixed (the gauge), "+
		"from the Gauss-Newton information of the objective's noise model (docs/covariances.md); each holds 95%% of the probability.",
		status, g.IDs[cov.Gauge])
	return e, notes
}
