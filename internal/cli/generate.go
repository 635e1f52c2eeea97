package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/g2o"
	"github.com/bcmsync/bcmsync/posegraph"
)

const (
	generateUsage = "generate FAMILY [flags] -o FILE.g2o"
	generateDoc   = `Writes a synthetic pose graph of FAMILY with its ground truth:

  sphere     rings of a sphere (3-D, like sphere2500)          --rings --per-ring
  torus      rings of a torus (3-D)                            --rings --per-ring
  grid       a snake path through a 3-D lattice (smallGrid3D)  --nx --ny --nz
  manhattan  a 2-D random walk on a grid (Olson's manhattan)   -n --side
  geometric  random poses joined when near (2-D or 3-D)        -n --radius --dim
  corridor   a long 2-D corridor out and back, few closures    -n --segment --gap

FILE.g2o holds the measurements and, as VERTEX lines, the dead-reckoning
estimate. The truth goes to FILE.gt.g2o (the same graph with the true poses
as its VERTEX lines) or to --truth PATH (TUM when PATH ends in .tum or .txt).

Noise: rotation Langevin(I, kappa) on SO(d), about N(0, 1/(2 kappa)) radians
per axis, and translation N(0, 1/tau) per axis; give --kappa and --tau, or
the standard deviations --rot-sigma (radians) and --trans-sigma.

The information convention is SE-Sync's, which bcmsync reads: kappa is an
EDGE_SE2's I33, so --rot-sigma S writes I33 = 1/(2 S^2) (and the rotation
block I/S^2 of an EDGE_SE3:QUAT, read as kappa = 1/(2 S^2)); --trans-sigma S
writes 1/S^2 on the translation diagonal, as g2o would. g2o and GTSAM read
I33 as 1/sigma^2, so they take these 2-D rotations as sqrt(2) noisier (3-D:
2 times, g2o's rotation error being the quaternion's vector part, about
theta/2); conversely bcmsync reads a g2o file's I33 = 1/sigma^2 as an angle
of standard deviation sigma/sqrt(2). To give bcmsync a g2o sigma, halve I33
(quarter the 3-D rotation block).

With --outliers, wrong loop closures are appended and listed in
FILE.outliers.txt, one "LINE ID_I ID_J" per outlier edge (LINE is the EDGE
record's line in FILE.g2o).

With --landmarks N, N point landmarks are scattered around the trajectory,
each within --landmark-range of a random pose and observed by every pose
within that range (at most the --landmark-observers nearest), with noise
N(0, I/tau) (VERTEX_XY/EDGE_SE2_XY or VERTEX_TRACKXYZ/EDGE_SE3_TRACKXYZ).
They get the ids after the largest pose id; the g2o truth holds their true
positions, so it cannot be TUM (which holds poses only).`
)

func init() {
	register(command{
		name:  "generate",
		usage: generateUsage,
		short: "write a synthetic pose graph (sphere, torus, grid, manhattan, geometric, corridor) with its ground truth",
		run:   runGenerate,
	})
}

// generateFlags are the options of `bcmsync generate`.
type generateFlags struct {
	out, truth, outFile  string
	seed, outSeed        uint64
	kappa, tau           float64
	rotSigma, transSigma float64
	noiseFree            bool
	loopProb             float64
	outliers             float64
	outCount             int
	outMaxT              float64
	rings, perRing       int
	nx, ny, nz           int
	n, side, dim         int
	radius               float64
	segment, gap         int
	landmarks, observers int
	lmRange              float64
	quiet                bool
}

// familySizes lists the size flags each family takes.
var familySizes = map[string][]string{
	"sphere":    {"rings", "per-ring"},
	"torus":     {"rings", "per-ring"},
	"grid":      {"nx", "ny", "nz"},
	"manhattan": {"n", "side"},
	"geometric": {"n", "radius", "dim"},
	"corridor":  {"n", "segment", "gap"},
}

func (f *generateFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.out, "o", "", "write the graph to `FILE.g2o` (required)")
	fs.StringVar(&f.truth, "truth", "", "write the ground truth to `PATH` (default FILE.gt.g2o; TUM for .tum/.txt)")
	fs.StringVar(&f.outFile, "outliers-file", "", "write the outlier list to `PATH` (default FILE.outliers.txt)")
	fs.Uint64Var(&f.seed, "seed", 1, "random seed of the structure and the noise")
	fs.Float64Var(&f.kappa, "kappa", 500, "rotation precision kappa (rotation noise about 1/sqrt(2 kappa) rad per axis)")
	fs.Float64Var(&f.tau, "tau", 400, "translation precision tau (translation noise 1/sqrt(tau) per axis)")
	fs.Float64Var(&f.rotSigma, "rot-sigma", 0, "rotation noise standard deviation per axis in `RADIANS` (sets kappa = 1/(2 sigma^2), written as I33 = 1/(2 sigma^2) in 2-D: SE-Sync's convention, half g2o's 1/sigma^2)")
	fs.Float64Var(&f.transSigma, "trans-sigma", 0, "translation noise standard deviation per axis (sets tau = 1/sigma^2)")
	fs.BoolVar(&f.noiseFree, "noise-free", false, "exact measurements (kappa and tau are still written as weights)")
	fs.Float64Var(&f.loopProb, "loop-prob", 1, "probability in [0, 1] of keeping each candidate loop closure")
	fs.Float64Var(&f.outliers, "outliers", 0, "append wrong loop closures, this `FRACTION` of the edge count")
	fs.IntVar(&f.outCount, "outlier-count", 0, "append this many wrong loop closures (instead of --outliers)")
	fs.Uint64Var(&f.outSeed, "outlier-seed", 0, "random seed of the outliers (default: --seed)")
	fs.Float64Var(&f.outMaxT, "outlier-max-translation", 0, "bound on each coordinate of an outlier's translation (0: 5)")
	fs.IntVar(&f.rings, "rings", 10, "sphere, torus: number of rings")
	fs.IntVar(&f.perRing, "per-ring", 20, "sphere, torus: poses per ring")
	fs.IntVar(&f.nx, "nx", 5, "grid: lattice size along x")
	fs.IntVar(&f.ny, "ny", 5, "grid: lattice size along y")
	fs.IntVar(&f.nz, "nz", 5, "grid: lattice size along z")
	fs.IntVar(&f.n, "n", 500, "manhattan, geometric, corridor: number of poses")
	fs.IntVar(&f.side, "side", 20, "manhattan: side of the square the walk stays in")
	fs.Float64Var(&f.radius, "radius", 1.5, "geometric: loop-closure radius (positions have unit density)")
	fs.IntVar(&f.dim, "dim", 2, "geometric: dimension, 2 or 3")
	fs.IntVar(&f.segment, "segment", 300, "corridor: poses per straight segment")
	fs.IntVar(&f.gap, "gap", 500, "corridor: poses between candidate loop closures on the way back")
	fs.IntVar(&f.landmarks, "landmarks", 0, "add `N` point landmarks observed from the poses near them")
	fs.Float64Var(&f.lmRange, "landmark-range", 3, "landmarks: the sensor's range: each landmark lies within it of a pose, and every pose within it observes the landmark")
	fs.IntVar(&f.observers, "landmark-observers", 0, "landmarks: keep at most the `K` nearest observers of each landmark (0: all in range)")
	fs.BoolVar(&f.quiet, "quiet", false, "print nothing but errors")
}

func runGenerate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var f generateFlags
	fs := newFlagSet("generate", generateUsage, generateDoc, stderr)
	f.register(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		fs.Usage()
		return usageError{fmt.Errorf("generate takes exactly one FAMILY (sphere, torus, grid, manhattan, geometric or corridor), not %d arguments", len(pos))}
	}
	family := pos[0]
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	if err := f.check(family, set); err != nil {
		return usageError{err}
	}
	truthPath, outPath := f.paths()
	var files fileSet
	files.output("-o", f.out)
	files.output("--truth", truthPath)
	if f.outliers > 0 || f.outCount > 0 {
		files.output("--outliers-file", outPath)
	}
	if err := files.check(); err != nil {
		return err
	}
	cfg := datasets.Config{Kappa: f.kappa, Tau: f.tau, NoiseFree: f.noiseFree, LoopProb: f.loopProb, Seed: f.seed}
	var g *posegraph.Graph
	var truth []posegraph.Pose
	switch family {
	case "sphere":
		g, truth, err = datasets.Sphere(f.rings, f.perRing, cfg)
	case "torus":
		g, truth, err = datasets.Torus(f.rings, f.perRing, cfg)
	case "grid":
		g, truth, err = datasets.Cube(f.nx, f.ny, f.nz, cfg)
	case "manhattan":
		g, truth, err = datasets.Manhattan(f.n, f.side, cfg)
	case "geometric":
		g, truth, err = datasets.Geometric(f.dim, f.n, f.radius, cfg)
	case "corridor":
		g, truth, err = datasets.Corridor(f.n, f.segment, f.gap, cfg)
	}
	if err != nil {
		// The generators check the sizes: a bad one is a usage error.
		return usageError{err}
	}
	var mask []bool
	if f.outliers > 0 || f.outCount > 0 {
		seed := f.seed
		if set["outlier-seed"] {
			seed = f.outSeed
		}
		g, mask, err = datasets.AddOutliers(g, datasets.OutlierConfig{
			Fraction: f.outliers, Count: f.outCount, MaxTranslation: f.outMaxT, Seed: seed})
		if err != nil {
			return usageError{err}
		}
	}
	if f.landmarks > 0 {
		// After the outliers, which join poses only; the observations
		// are appended after every edge, so the outlier mask extends
		// with false.
		g, truth, err = datasets.AddLandmarks(g, truth, datasets.LandmarkConfig{
			N: f.landmarks, Range: f.lmRange, MaxObservers: f.observers, Tau: f.tau, NoiseFree: f.noiseFree, Seed: f.seed})
		if err != nil {
			return usageError{err}
		}
		if mask != nil {
			mask = append(mask, make([]bool, g.M()-len(mask))...)
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}

	g.Source = f.out
	if err := writeOutput(f.out, stdout, func(w io.Writer) error { return g2o.Write(w, g, nil) }); err != nil {
		return err
	}
	// Read the file back: the check that it holds this graph, and the
	// edges' lines for the outlier list.
	back, err := g2o.ReadFile(f.out, g2o.ReadOptions{})
	if err != nil {
		return fmt.Errorf("generate: reading back what was written: %w", err)
	}
	if err := sameGenerated(g, back); err != nil {
		return fmt.Errorf("generate: %s does not read back as the generated graph: %w", f.out, err)
	}
	err = writeOutput(truthPath, stdout, func(w io.Writer) error {
		if g2o.IsTUMPath(truthPath) {
			return g2o.WriteTUM(w, g, truth)
		}
		return g2o.Write(w, g, truth)
	})
	if err != nil {
		return err
	}
	written := []string{f.out, "truth " + truthPath}
	nOut := 0
	if mask != nil {
		for _, m := range mask {
			if m {
				nOut++
			}
		}
		if err := writeOutput(outPath, stdout, func(w io.Writer) error { return datasets.WriteOutliers(w, f.out, back, mask) }); err != nil {
			return err
		}
		written = append(written, "outliers "+outPath)
	}
	if !f.quiet {
		noise := fmt.Sprintf("kappa=%.6g tau=%.6g (noise sd %.3g deg, %.3g per axis)", f.kappa, f.tau,
			180/math.Pi/math.Sqrt(2*f.kappa), 1/math.Sqrt(f.tau))
		if f.noiseFree {
			noise = fmt.Sprintf("kappa=%.6g tau=%.6g, noise-free", f.kappa, f.tau)
		}
		lm := ""
		if nl := g.NumLandmarks(); nl > 0 {
			obs := 0
			for k := range g.Edges {
				if g.IsObservation(&g.Edges[k]) {
					obs++
				}
			}
			lm = fmt.Sprintf(" landmarks=%d observations=%d", nl, obs)
		}
		info := stdout
		if files.toStdout() {
			info = stderr // stdout carries an output
		}
		fmt.Fprintf(info, "generate: %s d=%d n=%d%s m=%d outliers=%d %s -> %s\n",
			family, g.D, g.NumPoses(), lm, g.M(), nOut, noise, strings.Join(written, ", "))
	}
	return nil
}

// check validates the flags against each other and the family, and turns
// --rot-sigma and --trans-sigma into kappa and tau.
func (f *generateFlags) check(family string, set map[string]bool) error {
	sizes, ok := familySizes[family]
	if !ok {
		return fmt.Errorf("unknown FAMILY %q (want sphere, torus, grid, manhattan, geometric or corridor)", family)
	}
	for _, names := range familySizes {
		for _, name := range names {
			if set[name] && !slices.Contains(sizes, name) {
				return fmt.Errorf("--%s does not apply to %s (its size flags: --%s)", name, family, strings.Join(sizes, ", --"))
			}
		}
	}
	if err := f.checkPoses(family); err != nil {
		return err
	}
	if f.out == "" {
		return errors.New("-o FILE.g2o is required: where to write the graph")
	}
	if g2o.IsTUMPath(f.out) {
		return fmt.Errorf("-o %s: the graph is written as g2o; use --truth for a TUM ground truth", f.out)
	}
	if set["rot-sigma"] {
		if set["kappa"] {
			return errors.New("give --kappa or --rot-sigma, not both")
		}
		if !(f.rotSigma > 0) || math.IsInf(f.rotSigma, 0) {
			return fmt.Errorf("--rot-sigma must be positive and finite, not %g", f.rotSigma)
		}
		f.kappa = 1 / (2 * f.rotSigma * f.rotSigma)
	}
	if set["trans-sigma"] {
		if set["tau"] {
			return errors.New("give --tau or --trans-sigma, not both")
		}
		if !(f.transSigma > 0) || math.IsInf(f.transSigma, 0) {
			return fmt.Errorf("--trans-sigma must be positive and finite, not %g", f.transSigma)
		}
		f.tau = 1 / (f.transSigma * f.transSigma)
	}
	if !(f.kappa > 0) || math.IsInf(f.kappa, 0) {
		return fmt.Errorf("--kappa must be positive and finite, not %g", f.kappa)
	}
	if !(f.tau > 0) || math.IsInf(f.tau, 0) {
		return fmt.Errorf("--tau must be positive and finite, not %g", f.tau)
	}
	for _, w := range []struct {
		name string
		v    float64
	}{{"kappa", f.kappa}, {"tau", f.tau}} {
		// The solver refuses such a graph (posegraph.CheckScale): say so
		// now rather than write it.
		if w.v < posegraph.MinWeight || w.v > posegraph.MaxMagnitude {
			return fmt.Errorf("--%s %.3g is outside [%g, %g], the precisions double precision can solve with", w.name, w.v, posegraph.MinWeight, posegraph.MaxMagnitude)
		}
	}
	if !(f.loopProb >= 0 && f.loopProb <= 1) {
		return fmt.Errorf("--loop-prob must be in [0, 1], not %g", f.loopProb)
	}
	if set["outliers"] && set["outlier-count"] {
		return errors.New("give --outliers or --outlier-count, not both")
	}
	if !(f.outliers >= 0 && f.outliers <= 10) {
		return fmt.Errorf("--outliers must be a fraction in [0, 10], not %g", f.outliers)
	}
	if f.outCount < 0 {
		return fmt.Errorf("--outlier-count must be >= 0, not %d", f.outCount)
	}
	if f.outliers == 0 && f.outCount == 0 {
		for _, name := range []string{"outlier-seed", "outlier-max-translation", "outliers-file"} {
			if set[name] {
				return fmt.Errorf("--%s needs --outliers or --outlier-count", name)
			}
		}
	}
	if !(f.outMaxT >= 0) || math.IsInf(f.outMaxT, 0) {
		return fmt.Errorf("--outlier-max-translation must be positive and finite, not %g", f.outMaxT)
	}
	if f.landmarks < 0 {
		return fmt.Errorf("--landmarks must be >= 0, not %d", f.landmarks)
	}
	if f.landmarks == 0 {
		for _, name := range []string{"landmark-range", "landmark-observers"} {
			if set[name] {
				return fmt.Errorf("--%s needs --landmarks", name)
			}
		}
	}
	if !(f.lmRange > 0) || math.IsInf(f.lmRange, 0) {
		return fmt.Errorf("--landmark-range must be positive and finite, not %g", f.lmRange)
	}
	if f.observers < 0 {
		return fmt.Errorf("--landmark-observers must be >= 0, not %d", f.observers)
	}
	if f.landmarks > 0 && g2o.IsTUMPath(f.truth) {
		return fmt.Errorf("--truth %s: TUM holds poses only; the landmarks' true positions need a g2o truth", f.truth)
	}
	if err := notStdio("-o", f.out, "the graph is read back after writing, and names the other outputs: give a file"); err != nil {
		return err.(usageError).err
	}
	return nil
}

// paths returns the paths of the ground truth and the outlier list, the
// defaults derived from -o.
func (f *generateFlags) paths() (truth, outliers string) {
	base := strings.TrimSuffix(f.out, filepath.Ext(f.out))
	truth, outliers = f.truth, f.outFile
	if truth == "" {
		truth = base + ".gt.g2o"
	}
	if outliers == "" {
		outliers = base + ".outliers.txt"
	}
	return truth, outliers
}

// maxGeneratePoses bounds the poses generate writes: a hundred times
// city10000, far beyond what a benchmark needs, and still a graph that
// fits in memory. Without it a size flag such as --rings 3037000500 made
// the product overflow int, and the generators panicked or ran out of
// memory instead of reporting a usage error.
const maxGeneratePoses = 1_000_000

// checkPoses rejects size flags whose pose count overflows int or exceeds
// maxGeneratePoses. The generators check the lower bounds themselves.
func (f *generateFlags) checkPoses(family string) error {
	var sizes []int
	switch family {
	case "sphere", "torus":
		sizes = []int{f.rings, f.perRing}
	case "grid":
		sizes = []int{f.nx, f.ny, f.nz}
	default:
		sizes = []int{f.n}
	}
	n, ok := 1, true
	for _, s := range sizes {
		if s <= 0 {
			return nil // a generator's own error says which size is wrong
		}
		if n > maxGeneratePoses/s {
			ok = false
			break
		}
		n *= s
	}
	if ok && n <= maxGeneratePoses {
		return nil
	}
	dims := make([]string, len(sizes))
	for k, s := range sizes {
		dims[k] = strconv.Itoa(s)
	}
	return fmt.Errorf("%s: %s poses is more than generate writes (at most %d)", family, strings.Join(dims, " x "), maxGeneratePoses)
}

// sameGenerated checks that h, read from the file g was written to, is g:
// the same ids and edge endpoints, kappa and tau to rounding, and the
// measurements to the accuracy of the printed angle or quaternion.
func sameGenerated(g, h *posegraph.Graph) error {
	if g.D != h.D || g.N() != h.N() || g.M() != h.M() {
		return fmt.Errorf("d, n, m = %d, %d, %d; read back %d, %d, %d", g.D, g.N(), g.M(), h.D, h.N(), h.M())
	}
	if !slices.Equal(g.IDs, h.IDs) {
		return errors.New("the vertex ids differ")
	}
	for i := range g.IDs {
		if g.IsLandmark(i) != h.IsLandmark(i) {
			return fmt.Errorf("vertex %d: landmark %t, read back %t", g.IDs[i], g.IsLandmark(i), h.IsLandmark(i))
		}
	}
	rel := func(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Max(math.Abs(a), math.Abs(b)) }
	d := g.D
	for k := range g.Edges {
		a, b := &g.Edges[k], &h.Edges[k]
		if a.I != b.I || a.J != b.J || !rel(a.Kappa, b.Kappa) || !rel(a.Tau, b.Tau) {
			return fmt.Errorf("edge %d: (%d, %d, kappa %g, tau %g) reads back as (%d, %d, %g, %g)",
				k, a.I, a.J, a.Kappa, a.Tau, b.I, b.J, b.Kappa, b.Tau)
		}
		for c := 0; c < d*d; c++ {
			if math.Abs(a.R[c]-b.R[c]) > 1e-12 {
				return fmt.Errorf("edge %d: rotation differs by %g", k, math.Abs(a.R[c]-b.R[c]))
			}
		}
		for c := 0; c < d; c++ {
			if math.Abs(a.T[c]-b.T[c]) > 1e-12*math.Max(1, math.Abs(a.T[c])) {
				return fmt.Errorf("edge %d: translation differs by %g", k, math.Abs(a.T[c]-b.T[c]))
			}
		}
	}
	return nil
}
