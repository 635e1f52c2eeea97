package plots

import (
	"bytes"
	"flag"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bcmsync/bcmsync/posegraph"
)

var update = flag.Bool("update", false, "rewrite the golden images in testdata")

// helixGraph returns a small 3-D graph, a helix of two turns with rungs
// between turns, its true poses, and a drifted copy standing in for an
// initial guess. In 2-D the helix is flattened into a spiral.
func helixGraph(d, n int) (*posegraph.Graph, []posegraph.Pose, []posegraph.Pose) {
	g := &posegraph.Graph{D: d, Source: "testdata/helix.g2o"}
	truth := make([]posegraph.Pose, n)
	guess := make([]posegraph.Pose, n)
	perTurn := n / 2
	for i := range truth {
		a := 2 * math.Pi * float64(i) / float64(perTurn)
		r := 5.0
		if d == 2 {
			r = 3 + 2*float64(i)/float64(n)
		}
		truth[i] = posegraph.Identity(d)
		truth[i].T = [3]float64{r * math.Cos(a), r * math.Sin(a), 0}
		if d == 3 {
			truth[i].T[2] = 3 * float64(i) / float64(perTurn)
		}
		// Drift grows along the path, like dead reckoning.
		s := float64(i) / float64(n)
		guess[i] = truth[i]
		guess[i].T[0] += 1.5 * s * s * 4
		guess[i].T[1] += 0.8 * math.Sin(3*a) * s * 3
		guess[i].T[2] -= float64(d-2) * 2 * s
		g.IDs = append(g.IDs, i)
		if i > 0 {
			g.Edges = append(g.Edges, posegraph.Edge{I: i - 1, J: i, Kappa: 1, Tau: 1})
		}
		if i >= perTurn && i%3 == 0 {
			g.Edges = append(g.Edges, posegraph.Edge{I: i - perTurn, J: i, Kappa: 1, Tau: 1})
		}
	}
	return g, truth, guess
}

// staircase returns a plausible history of three staircase levels: fast
// then slow linear convergence, a failed check at ranks 3 and 4 and a
// passed one at rank 5.
func staircase() ([]Level, float64) {
	const fFinal = 1687.0
	var levels []Level
	it, tm := 0.0, 0.0
	gap := 5e3
	for k, rank := range []int{3, 4, 5} {
		l := Level{Rank: rank}
		steps := []int{60, 30, 45}[k]
		for i := 0; i < steps; i++ {
			l.Iter = append(l.Iter, it)
			l.Time = append(l.Time, tm)
			l.F = append(l.F, fFinal+gap)
			l.GradNorm = append(l.GradNorm, 3*math.Sqrt(gap)*(1+0.3*math.Sin(float64(i))))
			it++
			tm += 0.004 * float64(rank)
			rate := 0.8
			if i > steps/2 {
				rate = 0.93
			}
			gap *= rate
		}
		passed := k == 2
		if passed {
			// The last record reaches F_final exactly: drawn on the floor.
			l.F[len(l.F)-1] = fFinal
		}
		l.Certified = &passed
		gap *= 0.5
		levels = append(levels, l)
	}
	return levels, fFinal
}

// decodePNG reads a PNG file and checks its size in pixels.
func decodePNG(t *testing.T, path string, w, h int) image.Image {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if b := img.Bounds(); b.Dx() != w || b.Dy() != h {
		t.Errorf("%s: %d x %d pixels, want %d x %d", path, b.Dx(), b.Dy(), w, h)
	}
	return img
}

// inked returns the share of non-white pixels and the number of distinct
// colours in the rectangle r of img.
func inked(img image.Image, r image.Rectangle) (share float64, colours int) {
	seen := map[color.RGBA]bool{}
	ink, all := 0, 0
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			c := color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)
			seen[c] = true
			all++
			if c.R < 250 || c.G < 250 || c.B < 250 {
				ink++
			}
		}
	}
	return float64(ink) / float64(all), len(seen)
}

// px converts centimetres to pixels at DPI, rounding as vgimg does.
func px(cm float64) int { return int(cm/2.54*DPI + 0.5) }

// checkNotBlank checks that the central area of a figure has ink in it,
// in many colours (curves, antialiasing, text), and that it has pixels of
// each colour in want (the series' colours, up to antialiasing).
func checkNotBlank(t *testing.T, img image.Image, want ...color.RGBA) {
	t.Helper()
	b := img.Bounds()
	inner := image.Rect(b.Dx()/8, b.Dy()/8, b.Dx()*7/8, b.Dy()*7/8)
	share, colours := inked(img, inner)
	if share < 0.004 || colours < 20 {
		t.Errorf("figure looks blank: %.2f%% of the central area inked, %d colours", 100*share, colours)
	}
	for _, c := range want {
		if !hasColour(img, c) {
			t.Errorf("no pixel of colour %v", c)
		}
	}
}

func hasColour(img image.Image, want color.RGBA) bool {
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)
			if c == want {
				return true
			}
		}
	}
	return false
}

// golden compares the PNG at path with testdata/name pixel by pixel, or
// rewrites testdata/name under -update.
func golden(t *testing.T, path, name string) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ref := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(ref, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(ref)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	a, err := png.Decode(bytes.NewReader(got))
	if err != nil {
		t.Fatal(err)
	}
	b, err := png.Decode(bytes.NewReader(want))
	if err != nil {
		t.Fatalf("%s: %v", ref, err)
	}
	if n, at := pixelDiff(a, b); n > 0 {
		t.Errorf("%s differs from %s in %d pixels, first at %v (run go test -update and look at it if the change is intended)", path, ref, n, at)
	}
}

// pixelDiff counts the pixels where a and b differ (all of them if the
// sizes differ) and returns the first. It compares decoded colours, as
// gonum/plot's cmpimg does (cmpimg itself needs a module this build lacks).
func pixelDiff(a, b image.Image) (int, image.Point) {
	if a.Bounds() != b.Bounds() {
		return a.Bounds().Dx() * a.Bounds().Dy(), a.Bounds().Max
	}
	n, first := 0, image.Point{-1, -1}
	r := a.Bounds()
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			if color.RGBA64Model.Convert(a.At(x, y)) != color.RGBA64Model.Convert(b.At(x, y)) {
				if n == 0 {
					first = image.Point{x, y}
				}
				n++
			}
		}
	}
	return n, first
}

func TestTrajectories2D(t *testing.T) {
	g, truth, guess := helixGraph(2, 120)
	path := filepath.Join(t.TempDir(), "traj2.png")
	trajs := []Trajectory{{"initial guess", guess}, {"optimized", truth}}
	if err := Trajectories(path, g, trajs, TrajectoryOptions{LoopClosures: true}); err != nil {
		t.Fatal(err)
	}
	img := decodePNG(t, path, px(16), px(12))
	checkNotBlank(t, img, palette[0], palette[1])
	checkEqualScale(t, img, palette[0], truth, 2)
	golden(t, path, "trajectories2d.png")
}

func TestTrajectories3D(t *testing.T) {
	g, truth, guess := helixGraph(3, 120)
	path := filepath.Join(t.TempDir(), "traj3.png")
	trajs := []Trajectory{{"initial guess", guess}, {"optimized", truth}}
	if err := Trajectories(path, g, trajs, TrajectoryOptions{LoopClosures: true, Title: "helix"}); err != nil {
		t.Fatal(err)
	}
	img := decodePNG(t, path, px(16), px(16))
	checkNotBlank(t, img, palette[0], palette[1])
	golden(t, path, "trajectories3d.png")
}

// checkEqualScale checks the equal-aspect requirement on a 2-D top view:
// the trajectory drawn in colour c spans, in pixels, widths proportional to
// its data extent in x and y (the spiral is about as wide as tall).
func checkEqualScale(t *testing.T, img image.Image, c color.RGBA, poses []posegraph.Pose, d int) {
	t.Helper()
	b := img.Bounds()
	// Skip the title and legend strip (whose thumbnail has colour c too):
	// measure below the top 12% of the image.
	minX, minY, maxX, maxY := b.Max.X, b.Max.Y, b.Min.X, b.Min.Y
	for y := b.Dy() * 12 / 100; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			if color.RGBAModel.Convert(img.At(x, y)).(color.RGBA) == c {
				minX, maxX = min(minX, x), max(maxX, x)
				minY, maxY = min(minY, y), max(maxY, y)
			}
		}
	}
	lo, hi := [2]float64{math.Inf(1), math.Inf(1)}, [2]float64{math.Inf(-1), math.Inf(-1)}
	for _, p := range poses {
		for k := 0; k < d; k++ {
			lo[k], hi[k] = math.Min(lo[k], p.T[k]), math.Max(hi[k], p.T[k])
		}
	}
	sx := float64(maxX-minX) / (hi[0] - lo[0])
	sy := float64(maxY-minY) / (hi[1] - lo[1])
	if math.Abs(sx-sy) > 0.03*sx {
		t.Errorf("unequal scales: %.2f px per unit in x, %.2f in y", sx, sy)
	}
}

func TestConvergence(t *testing.T) {
	levels, fFinal := staircase()
	path := filepath.Join(t.TempDir(), "conv.png")
	if err := Convergence(path, levels, fFinal, ConvergenceOptions{}); err != nil {
		t.Fatal(err)
	}
	img := decodePNG(t, path, px(16), px(12))
	checkNotBlank(t, img, colorAt(0), colorAt(1), colorAt(2), passColor, failColor)
	golden(t, path, "convergence.png")

	// One column, no gradient norms, no times.
	for k := range levels {
		levels[k].GradNorm, levels[k].Time = nil, nil
	}
	path = filepath.Join(t.TempDir(), "conv1.png")
	if err := Convergence(path, levels, fFinal, ConvergenceOptions{Title: "F only"}); err != nil {
		t.Fatal(err)
	}
	checkNotBlank(t, decodePNG(t, path, px(16), px(12)), colorAt(0))
}

func TestStageTimes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stages.png")
	names := []string{"read", "initialize", "optimize", "certify", "round"}
	secs := []float64{0.12, 0.05, 1.9, 0.4, 0.0008}
	if err := StageTimes(path, names, secs); err != nil {
		t.Fatal(err)
	}
	img := decodePNG(t, path, px(16), px((5*22+70)/72.0*2.54))
	checkNotBlank(t, img, palette[0])
	golden(t, path, "stages.png")
}

func TestVectorFormats(t *testing.T) {
	g, truth, guess := helixGraph(3, 60)
	levels, fFinal := staircase()
	dir := t.TempDir()
	for _, ext := range []string{".svg", ".pdf"} {
		files := []string{"traj" + ext, "conv" + ext, "stages" + ext}
		if err := Trajectories(filepath.Join(dir, files[0]), g, []Trajectory{{"guess", guess}, {"truth", truth}}, TrajectoryOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := Convergence(filepath.Join(dir, files[1]), levels, fFinal, ConvergenceOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := StageTimes(filepath.Join(dir, files[2]), []string{"a", "b"}, []float64{1, 2}); err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			raw, err := os.ReadFile(filepath.Join(dir, f))
			if err != nil {
				t.Fatal(err)
			}
			magic := "%PDF"
			if ext == ".svg" {
				magic = "<svg"
			}
			if len(raw) < 1000 || !bytes.Contains(raw[:min(len(raw), 400)], []byte(magic)) {
				t.Errorf("%s: %d bytes, no %s header", f, len(raw), magic)
			}
		}
	}
}

func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	g, truth, _ := helixGraph(2, 20)
	levels, fFinal := staircase()
	ok := []Trajectory{{"t", truth}}
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"format", Trajectories(filepath.Join(dir, "x.gif"), g, ok, TrajectoryOptions{}), "unsupported output format \".gif\""},
		{"no graph", Trajectories(filepath.Join(dir, "x.png"), nil, ok, TrajectoryOptions{}), "no graph"},
		{"no traj", Trajectories(filepath.Join(dir, "x.png"), g, nil, TrajectoryOptions{}), "no trajectory"},
		{"short", Trajectories(filepath.Join(dir, "x.png"), g, []Trajectory{{"t", truth[:3]}}, TrajectoryOptions{}), "has 3 poses, the graph 20"},
		{"nan", Trajectories(filepath.Join(dir, "x.png"), g, []Trajectory{{"t", nanPose(truth, 4)}}, TrajectoryOptions{}), "pose 4 has a non-finite position"},
		{"dir", Trajectories(filepath.Join(dir, "no", "x.png"), g, ok, TrajectoryOptions{}), "the folder " + filepath.Join(dir, "no") + " does not exist"},
		{"no levels", Convergence(filepath.Join(dir, "c.png"), nil, 1, ConvergenceOptions{}), "no levels"},
		{"lengths", Convergence(filepath.Join(dir, "c.png"), []Level{{Rank: 3, Iter: []float64{0}, F: []float64{1, 2}}}, 1, ConvergenceOptions{}), "1 iterations but 2 values of F"},
		{"times", Convergence(filepath.Join(dir, "c.png"), []Level{{Rank: 3, Iter: []float64{0, 1}, F: []float64{1, 2}, Time: []float64{0}}}, 1, ConvergenceOptions{}), "1 times"},
		{"nan F", Convergence(filepath.Join(dir, "c.png"), []Level{{Rank: 3, Iter: []float64{0, 1}, F: []float64{1, math.NaN()}}}, 1, ConvergenceOptions{}), "F 1 is NaN"},
		{"final", Convergence(filepath.Join(dir, "c.png"), levels, math.Inf(1), ConvergenceOptions{}), "F_final"},
		{"time only", Convergence(filepath.Join(dir, "c.png"), []Level{{Rank: 3, Iter: []float64{0}, F: []float64{1}}}, 1, ConvergenceOptions{XAxes: TimeOnly}), "no level has times"},
		{"xaxes", Convergence(filepath.Join(dir, "c.png"), levels, fFinal, ConvergenceOptions{XAxes: 7}), "unknown XAxes"},
		{"stages", StageTimes(filepath.Join(dir, "s.png"), []string{"a"}, []float64{1, 2}), "1 stage names but 2 times"},
		{"no stages", StageTimes(filepath.Join(dir, "s.png"), nil, nil), "no stages"},
		{"negative", StageTimes(filepath.Join(dir, "s.png"), []string{"a", "b"}, []float64{1, -2}), "stage 1 (\"b\"): time -2"},
	}
	for _, c := range cases {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, c.err, c.want)
		}
	}
}

func nanPose(p []posegraph.Pose, i int) []posegraph.Pose {
	q := append([]posegraph.Pose(nil), p...)
	q[i].T[1] = math.NaN()
	return q
}

func TestDecadeTicks(t *testing.T) {
	for _, c := range []struct {
		min, max float64
		labels   []string
	}{
		{1e-12, 1e4, []string{"1e-12", "1e-9", "1e-6", "0.001", "1", "1000"}},
		{0.5, 30, []string{"0.1", "1", "10", "100"}},
		{2, 30, []string{"1", "2", "5", "10", "20", "50", "100"}},
		{3e-8, 2e-7, []string{"1e-8", "2e-8", "5e-8", "1e-7", "2e-7", "5e-7", "1e-6"}},
		{1e-3, 10, []string{"0.001", "0.01", "0.1", "1", "10"}},
	} {
		var got []string
		for _, tk := range (decadeTicks{}).Ticks(c.min, c.max) {
			if tk.Label != "" {
				got = append(got, tk.Label)
			}
		}
		if strings.Join(got, " ") != strings.Join(c.labels, " ") {
			t.Errorf("[%g, %g]: labels %v, want %v", c.min, c.max, got, c.labels)
		}
	}
}

// BenchmarkTrajectories3D renders a 5000-pose 3-D graph with its loop
// closures to PNG, the size of torus3D.
func BenchmarkTrajectories3D(b *testing.B) {
	g, truth, guess := helixGraph(3, 5000)
	path := filepath.Join(b.TempDir(), "t.png")
	trajs := []Trajectory{{"guess", guess}, {"truth", truth}}
	for b.Loop() {
		if err := Trajectories(path, g, trajs, TrajectoryOptions{LoopClosures: true}); err != nil {
			b.Fatal(err)
		}
	}
}
