package sync_test

// This file is a research harness, not a regression test: it finds which
// reading of the 3-D g2o files reproduces the 3-D optima in REFERENCE.tsv.
// It re-solves each benchmark graph under a list of hypotheses (weight
// formulas, information-matrix layouts, measurement precisions) and reports,
// per hypothesis and graph, the relative deviation of the certified optimum
// from f_star. It is slow (every 3-D graph, many times), so it runs only
// with BCMSYNC_REFCHECK=1:
//
//	BCMSYNC_REFCHECK=1 go test ./sync -run RefCheck -v
//
// BCMSYNC_REFCHECK_GRAPHS (comma-separated file names) and
// BCMSYNC_REFCHECK_HYP (comma-separated hypothesis names) narrow the runs.
//
// The finding: the peer read each EDGE_SE3:QUAT as SE-Sync's read_g2o_file
// does, with R_e = Eigen's toRotationMatrix of the quaternion as printed, NOT
// normalized (|q|^2 - 1 is up to 3e-6 in these files), and minimized
// tr(X Q X^T) with Q assembled as docs/design.md section 3 assembles it. Under
// that reading every 3-D f_star lies above the certified optimum by at most
// 1.1e-6 relative (five of six by at most 6e-9, smallGrid3D by 9e-12) and
// never below the proven lower bound. Normalizing the quaternion, or keeping
// it raw but using the edge formula ||R_j - R_i R_e||_F^2 (whose extra
// kappa (||R_e||_F^2 - 3) cancels the effect to first order), gives the
// deviations docs/performance.md records (Results against the reference
// optima). The weights are docs/design.md's.
//
// That reading is now g2o.ReadOptions.RawQuaternions (posegraph's
// Graph.RawRotations), and TestReferenceOptima is its regression test. The
// harness keeps its own construction (sesyncReading, and splitGraph, which
// solves the reading with exact rotations only) as an independent check:
// TestRefCheckSESyncReading compares it with the option, edge by edge and
// optimum by optimum.

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"

	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/g2o"
	"github.com/bcmsync/bcmsync/posegraph"
	bsync "github.com/bcmsync/bcmsync/sync"
)

func refCheckOrSkip(t *testing.T) {
	t.Helper()
	if os.Getenv("BCMSYNC_REFCHECK") != "1" {
		t.Skip("research harness: set BCMSYNC_REFCHECK=1 to run")
	}
}

// envList returns the comma-separated values of an environment variable, or
// nil when it is unset (meaning: no filter).
func envList(name string) []string {
	v := os.Getenv(name)
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// refHypothesis is one reading of an EDGE_SE3:QUAT record: edge recomputes
// R, T, Kappa and Tau from the record as read (Meas, Info). 2-D edges are
// left alone: every 2-D optimum already agrees to 1e-8.
type refHypothesis struct {
	name, doc string
	edge      func(e *posegraph.Edge) error
}

// info6 unpacks the 21-value upper triangle (g2o order, row by row) into a
// symmetric 6 x 6 matrix.
func info6(info []float64) *mat.SymDense {
	s := mat.NewSymDense(6, nil)
	k := 0
	for r := 0; r < 6; r++ {
		for c := r; c < 6; c++ {
			s.SetSym(r, c, info[k])
			k++
		}
	}
	return s
}

// info6ColMajor reads the 21 values as the upper triangle stored column by
// column (equivalently the lower triangle row by row).
func info6ColMajor(info []float64) *mat.SymDense {
	s := mat.NewSymDense(6, nil)
	k := 0
	for c := 0; c < 6; c++ {
		for r := 0; r <= c; r++ {
			s.SetSym(r, c, info[k])
			k++
		}
	}
	return s
}

// block3 returns the 3 x 3 diagonal block of s starting at off.
func block3(s *mat.SymDense, off int) *mat.SymDense {
	b := mat.NewSymDense(3, nil)
	for r := 0; r < 3; r++ {
		for c := r; c < 3; c++ {
			b.SetSym(r, c, s.At(off+r, off+c))
		}
	}
	return b
}

// traceInv returns tr(inv(a)) for a symmetric positive definite a.
func traceInv(a *mat.SymDense) (float64, error) {
	var ch mat.Cholesky
	if !ch.Factorize(a) {
		return 0, fmt.Errorf("not positive definite")
	}
	var inv mat.SymDense
	if err := ch.InverseTo(&inv); err != nil {
		return 0, err
	}
	return mat.Trace(&inv), nil
}

// eigs returns the eigenvalues of a symmetric matrix, ascending.
func eigs(a *mat.SymDense) []float64 {
	var es mat.EigenSym
	if !es.Factorize(a, false) {
		panic("eigen decomposition failed")
	}
	return es.Values(nil)
}

// designWeights is docs/design.md's rule on a given 6 x 6 information matrix.
func designWeights(w *mat.SymDense) (kappa, tau float64, err error) {
	trt, err := traceInv(block3(w, 0))
	if err != nil {
		return 0, 0, err
	}
	trr, err := traceInv(block3(w, 3))
	if err != nil {
		return 0, 0, err
	}
	return 3 / (2 * trr), 3 / trt, nil
}

// eigenQuatRotation is Eigen's Quaternion::toRotationMatrix applied to the
// quaternion as written, without normalizing it.
func eigenQuatRotation(x, y, z, w float64) [9]float64 {
	tx, ty, tz := 2*x, 2*y, 2*z
	twx, twy, twz := tx*w, ty*w, tz*w
	txx, txy, txz := tx*x, ty*x, tz*x
	tyy, tyz, tzz := ty*y, tz*y, tz*z
	return [9]float64{
		1 - (tyy + tzz), txy - twz, txz + twy,
		txy + twz, 1 - (txx + tzz), tyz - twx,
		txz - twy, tyz + twx, 1 - (txx + tyy),
	}
}

// quatRotation32 computes the normalized-quaternion rotation entirely in
// float32, as a reader with Scalar = float would.
func quatRotation32(x, y, z, w float32) [9]float64 {
	n := float32(math.Sqrt(float64(x*x + y*y + z*z + w*w)))
	x, y, z, w = x/n, y/n, z/n, w/n
	r := [9]float32{
		1 - 2*(y*y+z*z), 2 * (x*y - z*w), 2 * (x*z + y*w),
		2 * (x*y + z*w), 1 - 2*(x*x+z*z), 2 * (y*z - x*w),
		2 * (x*z - y*w), 2 * (y*z + x*w), 1 - 2*(x*x+y*y),
	}
	var out [9]float64
	for k, v := range r {
		out[k] = float64(v)
	}
	return out
}

func baselineRotation(e *posegraph.Edge) error {
	q := e.Meas[3:7]
	r, ok := g2o.RotationFromQuat(q[0], q[1], q[2], q[3])
	if !ok {
		return fmt.Errorf("zero quaternion")
	}
	e.R = r
	e.T = [3]float64{e.Meas[0], e.Meas[1], e.Meas[2]}
	return nil
}

// withWeights builds a hypothesis that keeps the measurement and changes
// only how kappa and tau come from the information matrix.
func withWeights(name, doc string, w func(info []float64) (kappa, tau float64, err error)) refHypothesis {
	return refHypothesis{name: name, doc: doc, edge: func(e *posegraph.Edge) error {
		if err := baselineRotation(e); err != nil {
			return err
		}
		k, tau, err := w(e.Info)
		if err != nil {
			return err
		}
		if !(k > 0 && tau > 0) || math.IsInf(k, 0) || math.IsInf(tau, 0) {
			return fmt.Errorf("line %d: kappa %g tau %g", e.Line, k, tau)
		}
		e.Kappa, e.Tau = k, tau
		return nil
	}}
}

// withMeasurement builds a hypothesis that keeps docs/design.md's weights and
// changes how R and t come from the record.
func withMeasurement(name, doc string, m func(e *posegraph.Edge)) refHypothesis {
	return refHypothesis{name: name, doc: doc, edge: func(e *posegraph.Edge) error {
		k, tau, err := designWeights(info6(e.Info))
		if err != nil {
			return err
		}
		e.Kappa, e.Tau = k, tau
		m(e)
		return nil
	}}
}

// sesyncReading is SE-Sync's read_g2o_file: docs/design.md's weights, but R_e
// is Eigen's toRotationMatrix of the quaternion as written, not normalized.
// Its optimum is the minimum of tr(X Q X^T) with Q assembled as docs/design.md
// section 3 (and SE-Sync) do, kappa I on the diagonal blocks: not the edge
// formula ||R_j - R_i R_e||_F^2, which adds sum kappa (||R_e||_F^2 - d).
var sesyncReading = withMeasurement("sesync",
	"SE-Sync's reader: R_e = Eigen toRotationMatrix of the quaternion as written (not normalized), F = tr(X Q X^T)",
	func(e *posegraph.Edge) {
		q := e.Meas[3:7]
		e.R = eigenQuatRotation(q[0], q[1], q[2], q[3])
		e.T = [3]float64{e.Meas[0], e.Meas[1], e.Meas[2]}
	})

func refHypotheses() []refHypothesis {
	r32 := func(v float64) float64 { return float64(float32(v)) }
	return []refHypothesis{
		withWeights("design", "docs/design.md: kappa = 3/(2 tr inv W_R), tau = 3/tr inv W_t, unit quaternion (control)",
			func(info []float64) (float64, float64, error) { return designWeights(info6(info)) }),
		withWeights("marginal", "kappa, tau from the blocks of inv(W) (marginal covariances; W inverted as a general matrix)",
			func(info []float64) (float64, float64, error) {
				var cov mat.Dense
				if err := cov.Inverse(info6(info)); err != nil {
					return 0, 0, err
				}
				trt := cov.At(0, 0) + cov.At(1, 1) + cov.At(2, 2)
				trr := cov.At(3, 3) + cov.At(4, 4) + cov.At(5, 5)
				return 3 / (2 * trr), 3 / trt, nil
			}),
		withWeights("arith", "kappa = tr(W_R)/6, tau = tr(W_t)/3",
			func(info []float64) (float64, float64, error) {
				w := info6(info)
				return mat.Trace(block3(w, 3)) / 6, mat.Trace(block3(w, 0)) / 3, nil
			}),
		withWeights("mineig", "kappa = lambda_min(W_R)/2, tau = lambda_min(W_t)",
			func(info []float64) (float64, float64, error) {
				w := info6(info)
				return eigs(block3(w, 3))[0] / 2, eigs(block3(w, 0))[0], nil
			}),
		withWeights("geomean", "kappa = det(W_R)^(1/3)/2, tau = det(W_t)^(1/3)",
			func(info []float64) (float64, float64, error) {
				w := info6(info)
				return math.Cbrt(mat.Det(block3(w, 3))) / 2, math.Cbrt(mat.Det(block3(w, 0))), nil
			}),
		withWeights("diagonly", "docs/design.md's rule on the diagonals only (off-diagonals of each block dropped)",
			func(info []float64) (float64, float64, error) {
				w := info6(info)
				d := mat.NewSymDense(6, nil)
				for k := 0; k < 6; k++ {
					d.SetSym(k, k, w.At(k, k))
				}
				return designWeights(d)
			}),
		withWeights("colmajor", "21 values read as the upper triangle column by column",
			func(info []float64) (float64, float64, error) { return designWeights(info6ColMajor(info)) }),
		withWeights("swapped", "rotation block first: tau from the bottom-right block, kappa from the top-left",
			func(info []float64) (float64, float64, error) {
				k, tau, err := designWeights(info6(info))
				// designWeights gives kappa = 3/(2 tr inv B), tau = 3/tr inv T;
				// swapped: kappa = 3/(2 tr inv T) = tau/2, tau = 3/tr inv B = 2 kappa.
				return tau / 2, 2 * k, err
			}),
		withWeights("kappa-I66", "2-D style rotation weight: kappa = W(6,6)",
			func(info []float64) (float64, float64, error) {
				_, tau, err := designWeights(info6(info))
				return info6(info).At(5, 5), tau, err
			}),
		withWeights("kappa-x2", "kappa = 3/tr(inv W_R), no 1/2",
			func(info []float64) (float64, float64, error) {
				k, tau, err := designWeights(info6(info))
				return 2 * k, tau, err
			}),
		withWeights("kappa-half", "kappa = 3/(4 tr(inv W_R)), a 1/2 on the rotation term",
			func(info []float64) (float64, float64, error) {
				k, tau, err := designWeights(info6(info))
				return k / 2, tau, err
			}),
		withWeights("tau-half", "tau = 3/(2 tr(inv W_t)), a 1/2 on the translation term",
			func(info []float64) (float64, float64, error) {
				k, tau, err := designWeights(info6(info))
				return k, tau / 2, err
			}),
		sesyncReading,
		withMeasurement("f32-read", "measurement values rounded to float32 on read, then double arithmetic",
			func(e *posegraph.Edge) {
				q := e.Meas[3:7]
				e.R, _ = g2o.RotationFromQuat(r32(q[0]), r32(q[1]), r32(q[2]), r32(q[3]))
				e.T = [3]float64{r32(e.Meas[0]), r32(e.Meas[1]), r32(e.Meas[2])}
			}),
		withMeasurement("f32-rot", "rotation computed in float32 from the normalized quaternion",
			func(e *posegraph.Edge) {
				q := e.Meas[3:7]
				e.R = quatRotation32(float32(q[0]), float32(q[1]), float32(q[2]), float32(q[3]))
				e.T = [3]float64{e.Meas[0], e.Meas[1], e.Meas[2]}
			}),
		withMeasurement("quat-wxyz", "quaternion read as qw qx qy qz (w first)",
			func(e *posegraph.Edge) {
				q := e.Meas[3:7]
				e.R, _ = g2o.RotationFromQuat(q[1], q[2], q[3], q[0])
				e.T = [3]float64{e.Meas[0], e.Meas[1], e.Meas[2]}
			}),
		withMeasurement("transpose-R", "rotation transposed (R_e taken as R_j^T R_i)",
			func(e *posegraph.Edge) {
				q := e.Meas[3:7]
				r, _ := g2o.RotationFromQuat(q[0], q[1], q[2], q[3])
				for a := 0; a < 3; a++ {
					for b := 0; b < 3; b++ {
						e.R[a*3+b] = r[b*3+a]
					}
				}
				e.T = [3]float64{e.Meas[0], e.Meas[1], e.Meas[2]}
			}),
	}
}

// refOutcome is one hypothesis on one graph.
type refOutcome struct {
	// eval is F under the hypothesis at docs/design.md's certified optimum: an
	// upper bound on the hypothesis' optimum and, for perturbations of the
	// data this small, its first-order value (envelope theorem).
	eval float64
	// f, dual: the certified solve under the hypothesis, when its graph is
	// valid (solved); rel compares f (else eval) with f_star.
	f, dual, rel float64
	solved       bool
	certified    bool
	inBracket    bool // f_star within [dual, f] up to 1e-10 relative
	unreadable   bool // the hypothesis cannot read the file
	skipped      bool // not run: excluded on a smaller graph
	// edgeShift is sum kappa (||R_e||_F^2 - d): F by the edge formula
	// minus F by the data matrix, at any poses.
	edgeShift float64
}

// seCost is F of docs/design.md section 1 evaluated edge by edge. With lap set it
// is instead tr(X Q X^T) for a Q assembled as SE-Sync does, with kappa I on
// the diagonal blocks whatever R_e is: the two differ by
// sum kappa (||R_e||_F^2 - d) when a measured R_e is not orthogonal. This is
// Graph.Cost with RawRotations set accordingly (tested against a dense
// gonum Q in posegraph).
func seCost(g *posegraph.Graph, x []posegraph.Pose, lap bool) float64 {
	h := *g
	h.RawRotations = lap
	return h.Cost(x, posegraph.Poses)
}

func solveRef(t *testing.T, g *posegraph.Graph) *bsync.Result {
	t.Helper()
	res, err := bsync.Solve(context.Background(), g, bsync.Options{GapTol: 1e-9, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// refGraphs returns the suite directory and its 3-D references, filtered by
// BCMSYNC_REFCHECK_GRAPHS.
func refGraphs(t *testing.T) (string, []datasets.Reference) {
	dir, refs := suite(t)
	want := envList("BCMSYNC_REFCHECK_GRAPHS")
	var out []datasets.Reference
	for _, r := range refs {
		if r.D == 3 && (want == nil || slices.Contains(want, r.File)) {
			out = append(out, r)
		}
	}
	return dir, out
}

// applyHypothesis reads the file and re-derives every edge under h.
func applyHypothesis(path string, h refHypothesis) (*posegraph.Graph, error) {
	g, err := g2o.ReadFile(path, g2o.ReadOptions{})
	if err != nil {
		return nil, err
	}
	for k := range g.Edges {
		if err := h.edge(&g.Edges[k]); err != nil {
			return nil, fmt.Errorf("line %d: %v", g.Edges[k].Line, err)
		}
	}
	return g, nil
}

// TestRefCheckHypotheses solves every 3-D graph under every hypothesis and
// logs the table of relative deviations (F - f_star) / f_star.
func TestRefCheckHypotheses(t *testing.T) {
	refCheckOrSkip(t)
	dir, refs := refGraphs(t)
	hyps := refHypotheses()
	if want := envList("BCMSYNC_REFCHECK_HYP"); want != nil {
		hyps = slices.DeleteFunc(hyps, func(h refHypothesis) bool { return !slices.Contains(want, h.name) })
	}
	table := make([][]refOutcome, len(hyps))
	for hi := range hyps {
		table[hi] = make([]refOutcome, len(refs))
	}
	excluded := make([]bool, len(hyps))
	for ri, ref := range refs {
		path := filepath.Join(dir, ref.File)
		base, err := g2o.ReadFile(path, g2o.ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		opt := solveRef(t, base)
		if !opt.Certified {
			t.Fatalf("%s: docs/design.md reading not certified", ref.File)
		}
		for hi, h := range hyps {
			o := &table[hi][ri]
			if excluded[hi] {
				// Already off by more than 1e-3 on a smaller graph: a
				// gross misreading, and a slow solve on a large one.
				o.skipped, o.rel = true, math.NaN()
				continue
			}
			g, err := applyHypothesis(path, h)
			if err != nil {
				// The reading itself is impossible: a peer using it could
				// not have produced any value.
				o.unreadable, o.rel = true, math.NaN()
				t.Logf("%-15s %-20s unreadable: %v", h.name, ref.File, err)
				continue
			}
			o.eval = seCost(g, opt.Poses, true)
			o.rel = (o.eval - ref.FStar) / ref.FStar
			// The edge formula and the data-matrix form differ by a
			// constant when R_e is not orthogonal.
			o.edgeShift = seCost(g, opt.Poses, false) - o.eval
			sg, c, err := splitGraph(g)
			if err != nil {
				t.Logf("%-15s %-20s cannot split: %v", h.name, ref.File, err)
			} else if sg.Validate() == nil {
				res := solveRef(t, sg)
				o.solved, o.certified = true, res.Certified
				o.f, o.dual = res.Objective-c, res.DualBound-c
				o.rel = (o.f - ref.FStar) / ref.FStar
				slack := 1e-10 * math.Abs(ref.FStar)
				o.inBracket = res.HasBound && ref.FStar >= o.dual-slack && ref.FStar <= o.f+slack
				if !res.Certified {
					t.Logf("%s %s: not certified: %s", h.name, ref.File, res.Status)
				}
			}
			if math.Abs(o.rel) > 1e-3 {
				excluded[hi] = true
			}
			t.Logf("%-15s %-20s eval=%.12g F=%.12g dual=%.12g f*=%.12g rel=%+.2e solved=%v bracket=%v edge-formula shift %.3g (rel %+.2e)",
				h.name, ref.File, o.eval, o.f, o.dual, ref.FStar, o.rel, o.solved, o.inBracket, o.edgeShift, (o.f+o.edgeShift-ref.FStar)/ref.FStar)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n%-15s", "hypothesis")
	for _, ref := range refs {
		fmt.Fprintf(&b, " %16s", strings.TrimSuffix(ref.File, ".g2o"))
	}
	b.WriteString("\n")
	for hi, h := range hyps {
		fmt.Fprintf(&b, "%-15s", h.name)
		for ri := range refs {
			o := table[hi][ri]
			mark := " "
			switch {
			case o.unreadable:
				mark = "x"
			case o.skipped:
				mark = "-"
			case !o.solved:
				mark = "e"
			case o.inBracket:
				mark = "*"
			}
			fmt.Fprintf(&b, " %15.2e%s", o.rel, mark)
		}
		fmt.Fprintf(&b, "   %s\n", h.doc)
		shifted := false
		for ri := range refs {
			o := table[hi][ri]
			shifted = shifted || o.solved && math.Abs(o.edgeShift) > 1e-12*math.Abs(o.f)
		}
		if shifted {
			// The same measurements with the edge formula as objective:
			// its optimum is the data-matrix optimum plus edgeShift.
			fmt.Fprintf(&b, "%-15s", h.name+"/edge")
			for ri, ref := range refs {
				o := table[hi][ri]
				fmt.Fprintf(&b, " %15.2e ", (o.f+o.edgeShift-ref.FStar)/ref.FStar)
			}
			b.WriteString("   the same, F by the edge formula sum kappa ||R_j - R_i R_e||_F^2 + ...\n")
		}
	}
	b.WriteString("rel = (F - f_star)/f_star; * f_star inside the certified bracket [dual, F]; " +
		"e not solved, F at docs/design.md's optimum; x unreadable; - skipped, off by > 1e-3 on a smaller graph\n")
	t.Log(b.String())

	// The conclusion, checked: of the readings tried, only SE-Sync's keeps
	// every f_star at or above a proven lower bound and within 2e-6 of the
	// optimum; every other one misses some graph by more than 1e-7.
	for hi, h := range hyps {
		fits, worst := true, 0.0
		for ri, ref := range refs {
			o := table[hi][ri]
			if !o.solved {
				fits, worst = false, math.Inf(1)
				continue
			}
			worst = math.Max(worst, math.Abs(o.rel))
			if !o.certified || ref.FStar < o.dual-1e-10*math.Abs(ref.FStar) {
				fits = false
			}
		}
		fits = fits && worst <= 2e-6
		switch {
		case h.name == sesyncReading.name && !fits:
			t.Errorf("SE-Sync's reading does not fit every f_star (worst %.2e)", worst)
		case h.name != sesyncReading.name && len(refs) == 6 && worst <= 1e-7:
			t.Errorf("reading %q also reproduces every f_star to 1e-7", h.name)
		}
	}
}

// splitRotation writes a 3 x 3 matrix m that is close to, but not exactly,
// a rotation (row-major) as a positive combination sum_k w[k] rots[k] of
// exact rotations. bcmsync validates measurements as rotations, but the
// data matrix Q only sees kappa R_e in its off-diagonal blocks and kappa I
// in its diagonal ones; replacing one edge by parallel edges (kappa w_k,
// rots[k]) reproduces the off-diagonal block exactly and adds
// kappa (sum w - 1) I to the diagonal blocks, which changes F on SO(d)^n
// and on every Stiefel relaxation by the constant 2 d kappa (sum w - 1).
//
// The construction: m = U K with U the nearest rotation and K near I. The
// skew part of K comes from one rotation about its axis with weight 1/2;
// the symmetric rest P (near I/2), whose eigenvalues spread by O(|K - I|),
// comes from pairs exp(+-theta v^) along P's eigenvectors v (each pair sums
// to 2 (cos theta I + (1 - cos theta) v v^T)) and a multiple of I.
func splitRotation(m [9]float64) (rots [][9]float64, w []float64, err error) {
	md := mat.NewDense(3, 3, m[:])
	var svd mat.SVD
	if !svd.Factorize(md, mat.SVDFull) {
		return nil, nil, fmt.Errorf("SVD failed")
	}
	var u, v, uMat mat.Dense
	svd.UTo(&u)
	svd.VTo(&v)
	uMat.Mul(&u, v.T())
	if mat.Det(&uMat) < 0 {
		return nil, nil, fmt.Errorf("matrix is not near a rotation (det < 0)")
	}
	var k mat.Dense
	k.Mul(uMat.T(), md)
	// Skew part A = (K - K^T)/2 = w0 sin(phi) [a]_x for the unit axis a.
	ax := [3]float64{
		(k.At(2, 1) - k.At(1, 2)) / 2,
		(k.At(0, 2) - k.At(2, 0)) / 2,
		(k.At(1, 0) - k.At(0, 1)) / 2,
	}
	const w0 = 0.5
	na := math.Sqrt(ax[0]*ax[0] + ax[1]*ax[1] + ax[2]*ax[2])
	var b0 [9]float64
	if na > 0 {
		phi := math.Asin(na / w0)
		b0 = axisRotation([3]float64{ax[0] / na, ax[1] / na, ax[2] / na}, phi)
	} else {
		b0 = [9]float64{1, 0, 0, 0, 1, 0, 0, 0, 1}
	}
	rots = append(rots, b0)
	w = append(w, w0)
	// P = sym(K) - w0 sym(B0).
	p := mat.NewSymDense(3, nil)
	for r := 0; r < 3; r++ {
		for c := r; c < 3; c++ {
			p.SetSym(r, c, (k.At(r, c)+k.At(c, r))/2-w0*(b0[r*3+c]+b0[c*3+r])/2)
		}
	}
	var es mat.EigenSym
	if !es.Factorize(p, true) {
		return nil, nil, fmt.Errorf("eigen decomposition failed")
	}
	lam := es.Values(nil)
	var vec mat.Dense
	es.VectorsTo(&vec)
	const theta = 0.05
	rest := lam[0]
	for j := 1; j < 3; j++ {
		beta := lam[j] - lam[0]
		if beta == 0 {
			continue
		}
		wk := beta / (2 * (1 - math.Cos(theta)))
		dir := [3]float64{vec.At(0, j), vec.At(1, j), vec.At(2, j)}
		rots = append(rots, axisRotation(dir, theta), axisRotation(dir, -theta))
		w = append(w, wk, wk)
		rest -= 2 * wk * math.Cos(theta)
	}
	if !(rest > 0) {
		return nil, nil, fmt.Errorf("matrix too far from a rotation to split (identity weight %g)", rest)
	}
	rots = append(rots, [9]float64{1, 0, 0, 0, 1, 0, 0, 0, 1})
	w = append(w, rest)
	for j := range rots {
		var b, ub mat.Dense
		b.CloneFrom(mat.NewDense(3, 3, rots[j][:]))
		ub.Mul(&uMat, &b)
		for r := 0; r < 3; r++ {
			for c := 0; c < 3; c++ {
				rots[j][r*3+c] = ub.At(r, c)
			}
		}
	}
	return rots, w, nil
}

// axisRotation is Rodrigues' rotation by angle th about the unit axis a.
func axisRotation(a [3]float64, th float64) [9]float64 {
	s, c := math.Sincos(th)
	t := 1 - c
	x, y, z := a[0], a[1], a[2]
	return [9]float64{
		c + t*x*x, t*x*y - s*z, t*x*z + s*y,
		t*x*y + s*z, c + t*y*y, t*y*z - s*x,
		t*x*z - s*y, t*y*z + s*x, c + t*z*z,
	}
}

// splitGraph replaces every edge whose R is not a rotation to 1e-15 by the
// parallel edges of splitRotation (translation weight shared in proportion,
// same translation), and returns the constant c with
// F_Q(original)(X) = F(split graph)(X) - c for every X on SO(d)^n, F_Q the
// data-matrix form (seCost with lap set).
func splitGraph(g *posegraph.Graph) (*posegraph.Graph, float64, error) {
	out := *g
	out.Edges = nil
	c := 0.0
	for _, e := range g.Edges {
		var dev float64
		for a := 0; a < 3; a++ {
			for b := 0; b < 3; b++ {
				s := 0.0
				for k := 0; k < 3; k++ {
					s += e.R[k*3+a] * e.R[k*3+b]
				}
				if a == b {
					s--
				}
				dev = math.Max(dev, math.Abs(s))
			}
		}
		if dev < 1e-15 {
			out.Edges = append(out.Edges, e)
			continue
		}
		rots, w, err := splitRotation(e.R)
		if err != nil {
			return nil, 0, fmt.Errorf("line %d: %v", e.Line, err)
		}
		sum := 0.0
		for _, wk := range w {
			sum += wk
		}
		for k := range rots {
			f := e
			f.R = rots[k]
			f.Kappa = e.Kappa * w[k]
			f.Tau = e.Tau * w[k] / sum
			out.Edges = append(out.Edges, f)
		}
		c += 2 * 3 * e.Kappa * (sum - 1)
	}
	return &out, c, nil
}

// TestRefCheckSplitRotation checks splitRotation against the dense sum it
// promises, on matrices like Eigen's rotation of a slightly non-unit
// quaternion.
func TestRefCheckSplitRotation(t *testing.T) {
	refCheckOrSkip(t)
	quats := [][4]float64{
		{0.3171845, -0.2366641, 0.1427899, 0.9071908},
		{0.1094217, -0.5001618, -0.8550748, 0.0819273},
		{-0.0107791, 0.00867285, -0.00190021, 0.999902},
		{0, 0, 0, 1.000001},
		{0.7071, 0, 0.7071, 0},
	}
	for _, q := range quats {
		m := eigenQuatRotation(q[0], q[1], q[2], q[3])
		rots, w, err := splitRotation(m)
		if err != nil {
			t.Fatal(err)
		}
		var sum mat.Dense
		sum.CloneFrom(mat.NewDense(3, 3, nil))
		for k, r := range rots {
			if !(w[k] > 0) {
				t.Errorf("q %v: weight %d is %g", q, k, w[k])
			}
			rm := mat.NewDense(3, 3, r[:])
			var rtr mat.Dense
			rtr.Mul(rm.T(), rm)
			for a := 0; a < 3; a++ {
				rtr.Set(a, a, rtr.At(a, a)-1)
			}
			if n := mat.Norm(&rtr, math.Inf(1)); n > 1e-14 || math.Abs(mat.Det(rm)-1) > 1e-14 {
				t.Errorf("q %v: part %d is not a rotation (|R^T R - I| %g, det %g)", q, k, n, mat.Det(rm))
			}
			var s mat.Dense
			s.Scale(w[k], rm)
			sum.Add(&sum, &s)
		}
		var diff mat.Dense
		diff.Sub(&sum, mat.NewDense(3, 3, m[:]))
		if n := mat.Norm(&diff, math.Inf(1)); n > 1e-14 {
			t.Errorf("q %v: sum of parts differs from m by %g", q, n)
		}
	}
}

// roundSig rounds v to k significant decimal digits, as a file written with
// printf's %.{k}g would hold it.
func roundSig(v float64, k int) float64 {
	r, err := strconv.ParseFloat(strconv.FormatFloat(v, 'g', k, 64), 64)
	if err != nil {
		panic(err)
	}
	return r
}

// rawQuatShift is the first-order difference, read off the file alone,
// between the optimum under SE-Sync's reading and under docs/design.md's:
// Eigen's formula on q = s u gives R_raw = I + s^2 (R(u) - I) exactly, so
// at poses with zero rotation residual (R_j = R_i R_e) the data-matrix term
// kappa (2d - 2 tr(R_j^T R_i R_raw)) exceeds the edge term by
// -2 kappa (s^2 - 1) (3 - tr R_e). The sign follows the rounding of each
// printed quaternion's norm, weighted by kappa and the rotation angle; the
// edge formula with R_raw adds kappa (||R_raw||_F^2 - 3), which cancels it
// to first order: so normalizing or not looks immaterial unless F is taken
// as tr(X Q X^T).
func rawQuatShift(g *posegraph.Graph) float64 {
	terms := make([]float64, 0, len(g.Edges))
	for _, e := range g.Edges {
		x, y, z, w := e.Meas[3], e.Meas[4], e.Meas[5], e.Meas[6]
		n2 := x*x + y*y + z*z + w*w
		tr := 3 - 4*(x*x+y*y+z*z)/n2
		terms = append(terms, -2*e.Kappa*(n2-1)*(3-tr))
	}
	return floats.Sum(terms)
}

// TestRefCheckSESyncReading certifies every 3-D graph under SE-Sync's
// reading (sesyncReading) and checks that each f_star lies in
// [proven lower bound, certified optimum + 2e-6 |f_star|]: never below what
// is provably attainable, and above it by no more than SE-Sync's default
// stopping rules leave (relative decrease 1e-7, gradient norm 1e-2). It logs
// two ways a value can exceed the optimum, to size that margin: F where the
// solve's own history first reaches SE-Sync's gradient tolerance 1e-2, and
// F at the optimum written with 6 significant digits (hypothesis: the peer
// evaluated F at poses it had printed).
func TestRefCheckSESyncReading(t *testing.T) {
	refCheckOrSkip(t)
	dir, refs := refGraphs(t)
	for _, ref := range refs {
		path := filepath.Join(dir, ref.File)
		g, err := applyHypothesis(path, sesyncReading)
		if err != nil {
			t.Fatal(err)
		}
		sg, c, err := splitGraph(g)
		if err != nil {
			t.Fatal(err)
		}
		var hist []bsync.Record
		res, err := bsync.Solve(context.Background(), sg, bsync.Options{GapTol: 1e-9, Seed: 1,
			Progress: func(r bsync.Record) { hist = append(hist, r) }})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Certified {
			t.Errorf("%s: not certified: %s", ref.File, res.Status)
			continue
		}
		f, dual := res.Objective-c, res.DualBound-c
		if got := seCost(g, res.Poses, true); math.Abs(got-f) > 1e-9*math.Abs(f) {
			t.Errorf("%s: split graph F %.15g - %.3g differs from tr(X Q X^T) %.15g", ref.File, res.Objective, c, got)
		}
		// The reader's option: the same rotations, and a direct solve of
		// the raw graph (Q as SE-Sync builds it) reaches the same optimum.
		rg, err := g2o.ReadFile(path, g2o.ReadOptions{RawQuaternions: true})
		if err != nil {
			t.Fatal(err)
		}
		for k := range rg.Edges {
			if rg.Edges[k].R != g.Edges[k].R {
				t.Fatalf("%s:%d: RawQuaternions gives %v, the harness %v", ref.File, g.Edges[k].Line, rg.Edges[k].R, g.Edges[k].R)
			}
		}
		direct := solveRef(t, rg)
		if !direct.Certified || math.Abs(direct.Objective-f) > 1e-9*math.Abs(f) {
			t.Errorf("%s: direct solve of the raw reading: F %.15g (%s), split solve %.15g", ref.File, direct.Objective, direct.Status, f)
		}
		t.Logf("%-20s direct solve of the raw reading %.12g, split solve %.12g: %+.1e relative", ref.File, direct.Objective, f, (direct.Objective-f)/f)
		rel := (f - ref.FStar) / ref.FStar
		if ref.FStar < dual-1e-10*math.Abs(ref.FStar) {
			t.Errorf("%s: f_star %.12g below the proven lower bound %.12g", ref.File, ref.FStar, dual)
		}
		if rel < -2e-6 {
			t.Errorf("%s: f_star %.12g exceeds the certified optimum %.12g by %.2e relative", ref.File, ref.FStar, f, -rel)
		}
		// docs/design.md's optimum, and how far the first-order formula
		// predicts SE-Sync's reading to move it.
		base, err := g2o.ReadFile(path, g2o.ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		design := solveRef(t, base).Objective
		pred, obs := rawQuatShift(g)/ref.FStar, (ref.FStar-design)/ref.FStar
		if math.Abs(pred-obs) > 0.2*math.Abs(obs) {
			t.Errorf("%s: predicted shift %.3e, observed f* - F_design %.3e relative", ref.File, pred, obs)
		}
		t.Logf("%-20s docs/design.md optimum %.12g: (f* - F)/f* %+.3e, first-order raw-quaternion shift %+.3e", ref.File, design, obs, pred)
		// The first history record at SE-Sync's default absolute gradient
		// tolerance, compared with the optimum (the split graph's F, so
		// subtract the constant).
		loose := math.NaN()
		for _, r := range hist {
			if r.GradNorm < 1e-2 {
				loose = (r.F - c - f) / ref.FStar
				break
			}
		}
		// The optimum as a file with 6 significant digits would hold it.
		rounded := make([]posegraph.Pose, len(res.Poses))
		for i, p := range res.Poses {
			qx, qy, qz, qw := g2o.QuatFromRotation(p.R)
			rounded[i].R, _ = g2o.RotationFromQuat(roundSig(qx, 6), roundSig(qy, 6), roundSig(qz, 6), roundSig(qw, 6))
			for a := 0; a < 3; a++ {
				rounded[i].T[a] = roundSig(p.T[a], 6)
			}
		}
		round6 := (seCost(g, rounded, true) - f) / ref.FStar
		t.Logf("%-20s optimum %.12g in [%.12g, %.12g], f_star %.12g: (optimum - f*)/f* %+.2e; "+
			"at |grad| < 1e-2 F is above the optimum by %.1e, at 6-digit poses by %.1e (relative to f*)",
			ref.File, f, dual, f, ref.FStar, rel, loose, round6)
	}
}

// TestRefCheckReducedEval sizes the rounding error of evaluating F the way
// SE-Sync does with translations eliminated: for rotations R,
// F(R) = F_rot(R) + c0 - sum_k b_k^T L^-1 b_k, with L the translation-weight
// Laplacian reduced by one pose, c0 = sum tau_e ||t_e||^2 and b the
// tau-weighted measured translations rotated into the world frame. c0 and
// the subtracted term are both far larger than F when residuals are small
// (parking-garage), so their difference loses digits in proportion to
// c0 / F and cond(L). Dense Cholesky, so only graphs with at most 2500 poses.
func TestRefCheckReducedEval(t *testing.T) {
	refCheckOrSkip(t)
	dir, refs := refGraphs(t)
	for _, ref := range refs {
		if ref.N > 2500 {
			continue
		}
		g, err := applyHypothesis(filepath.Join(dir, ref.File), sesyncReading)
		if err != nil {
			t.Fatal(err)
		}
		sg, _, err := splitGraph(g)
		if err != nil {
			t.Fatal(err)
		}
		res := solveRef(t, sg)
		x := res.Poses
		n := g.N()
		lap := mat.NewSymDense(n-1, nil)
		b := mat.NewDense(n-1, 3, nil)
		frot, c0 := 0.0, 0.0
		for _, e := range g.Edges {
			ri, rj := &x[e.I].R, &x[e.J].R
			s := 6.0
			for a := 0; a < 3; a++ {
				for c := 0; c < 3; c++ {
					for k := 0; k < 3; k++ {
						s -= 2 * rj[a*3+c] * ri[a*3+k] * e.R[k*3+c]
					}
				}
			}
			frot += e.Kappa * s
			var v [3]float64
			for a := 0; a < 3; a++ {
				for k := 0; k < 3; k++ {
					v[a] += ri[a*3+k] * e.T[k]
				}
				c0 += e.Tau * v[a] * v[a]
			}
			// Pose 0 is the reduced one: its row and column are dropped.
			i, j := e.I-1, e.J-1
			if i >= 0 {
				lap.SetSym(i, i, lap.At(i, i)+e.Tau)
				for a := 0; a < 3; a++ {
					b.Set(i, a, b.At(i, a)-e.Tau*v[a])
				}
			}
			if j >= 0 {
				lap.SetSym(j, j, lap.At(j, j)+e.Tau)
				for a := 0; a < 3; a++ {
					b.Set(j, a, b.At(j, a)+e.Tau*v[a])
				}
			}
			if i >= 0 && j >= 0 {
				lap.SetSym(i, j, lap.At(i, j)-e.Tau)
			}
		}
		var ch mat.Cholesky
		if !ch.Factorize(lap) {
			t.Fatalf("%s: translation Laplacian not positive definite", ref.File)
		}
		var y mat.Dense
		if err := ch.SolveTo(&y, b); err != nil {
			t.Fatal(err)
		}
		sub := 0.0
		for k := 0; k < n-1; k++ {
			for a := 0; a < 3; a++ {
				sub += b.At(k, a) * y.At(k, a)
			}
		}
		fred := frot + c0 - sub
		fedge := seCost(g, x, true)
		ev := eigs(lap)
		cond := ev[len(ev)-1] / ev[0]
		t.Logf("%-20s F edge by edge %.12g, reduced %.12g: difference %.1e relative; c0/F %.1e, cond(L) %.1e",
			ref.File, fedge, fred, (fred-fedge)/fedge, c0/fedge, cond)
		// The oracle for the elimination itself: the two agree to rounding
		// in the large terms.
		if math.Abs(fred-fedge) > 1e-9*(c0+math.Abs(fedge)) {
			t.Errorf("%s: reduced F %.15g and edge F %.15g differ by more than rounding in c0 = %g", ref.File, fred, fedge, c0)
		}
	}
}
