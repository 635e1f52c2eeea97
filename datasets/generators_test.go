package datasets

import (
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/bcmsync/bcmsync/internal/smalldense"
	"github.com/bcmsync/bcmsync/posegraph"
)

// family builds one generator's graph for a config; the table below drives
// the structure tests through it.
type family struct {
	name string
	d    int
	gen  func(Config) (*posegraph.Graph, []posegraph.Pose, error)
	// n is the pose count; mFull the edge count with LoopProb 1 (-1 when
	// the family has no closed form, checked by its own test).
	n, mFull int
	// step bounds the length of an odometry step, for a sanity check.
	step float64
}

func families() []family {
	return []family{
		{"sphere", 3, func(c Config) (*posegraph.Graph, []posegraph.Pose, error) { return Sphere(6, 10, c) }, 60, 59 + 50, 1.2},
		{"torus", 3, func(c Config) (*posegraph.Graph, []posegraph.Pose, error) { return Torus(5, 12, c) }, 60, 59 + 60, 1.1},
		{"cube", 3, func(c Config) (*posegraph.Graph, []posegraph.Pose, error) { return Cube(3, 4, 5, c) }, 60, 2*4*5 + 3*3*5 + 3*4*4, 1},
		{"manhattan", 2, func(c Config) (*posegraph.Graph, []posegraph.Pose, error) { return Manhattan(300, 6, c) }, 300, -1, 1},
		{"geometric2", 2, func(c Config) (*posegraph.Graph, []posegraph.Pose, error) { return Geometric(2, 80, 1.5, c) }, 80, -1, math.Inf(1)},
		{"geometric3", 3, func(c Config) (*posegraph.Graph, []posegraph.Pose, error) { return Geometric(3, 80, 1.5, c) }, 80, -1, math.Inf(1)},
	}
}

func baseConfig() Config { return Config{Kappa: 100, Tau: 50, LoopProb: 1, Seed: 7} }

func TestStructure(t *testing.T) {
	for _, f := range families() {
		t.Run(f.name, func(t *testing.T) {
			for _, p := range []float64{0, 0.5, 1} {
				cfg := baseConfig()
				cfg.LoopProb = p
				g, truth, err := f.gen(cfg)
				if err != nil {
					t.Fatal(err)
				}
				if err := g.Validate(); err != nil {
					t.Fatalf("p=%g: %v", p, err)
				}
				if g.D != f.d || g.N() != f.n || len(truth) != f.n {
					t.Fatalf("p=%g: d=%d n=%d truth=%d, want d=%d n=%d", p, g.D, g.N(), len(truth), f.d, f.n)
				}
				if len(g.Components()) != 1 {
					t.Fatalf("p=%g: %d components", p, len(g.Components()))
				}
				checkChain(t, g, truth, f.step)
				closures := g.M() - (g.N() - 1)
				switch {
				case p == 0 && closures != 0:
					t.Errorf("p=0: %d closures, want none", closures)
				case p == 1 && f.mFull >= 0 && g.M() != f.mFull:
					t.Errorf("p=1: m=%d, want %d", g.M(), f.mFull)
				case p == 1 && closures == 0:
					t.Errorf("p=1: no closures")
				}
				if p == 0.5 && f.mFull > 0 {
					// Binomial(K, 1/2) closures out of K candidates.
					k := float64(f.mFull - (f.n - 1))
					if z := math.Abs(float64(closures)-k/2) / math.Sqrt(k/4); z > 4 {
						t.Errorf("p=0.5: %d of %g candidates kept (z = %.1f)", closures, k, z)
					}
				}
				seen := map[[2]int]bool{}
				for _, e := range g.Edges {
					if e.I >= e.J {
						t.Errorf("edge (%d, %d) does not point forward", e.I, e.J)
					}
					if seen[[2]int{e.I, e.J}] {
						t.Errorf("edge (%d, %d) repeated", e.I, e.J)
					}
					seen[[2]int{e.I, e.J}] = true
					if e.Kappa != cfg.Kappa || e.Tau != cfg.Tau || len(e.Meas) != 0 || len(e.Info) != 0 {
						t.Errorf("edge (%d, %d): kappa %g tau %g meas %v info %v", e.I, e.J, e.Kappa, e.Tau, e.Meas, e.Info)
					}
				}
			}
		})
	}
}

// checkChain checks that edge (j-1, j) exists for every j, with a step of
// at most maxStep in the truth, and that the truth's rotations are proper.
func checkChain(t *testing.T, g *posegraph.Graph, truth []posegraph.Pose, maxStep float64) {
	t.Helper()
	has := make([]bool, g.N())
	for _, e := range g.Edges {
		if e.J == e.I+1 {
			has[e.J] = true
			if s := math.Sqrt(dist2(truth[e.I].T, truth[e.J].T)); s > maxStep || s == 0 {
				t.Errorf("odometry step (%d, %d) has length %g", e.I, e.J, s)
			}
		}
	}
	for j := 1; j < g.N(); j++ {
		if !has[j] {
			t.Fatalf("no odometry edge (%d, %d)", j-1, j)
		}
	}
	for i, p := range truth {
		if dev := orthoDev(p.R, g.D); dev > 1e-12 {
			t.Fatalf("truth %d is not a rotation (%g)", i, dev)
		}
	}
}

func orthoDev(r [9]float64, d int) float64 {
	rt := smalldense.MulTN(&r, &r, d)
	dev := math.Abs(posegraph.Det(r[:], d) - 1)
	for a := 0; a < d; a++ {
		rt[a*d+a]--
	}
	for _, v := range rt[:d*d] {
		dev += math.Abs(v)
	}
	return dev
}

func degrees(g *posegraph.Graph) []int {
	deg := make([]int, g.N())
	for _, e := range g.Edges {
		deg[e.I]++
		deg[e.J]++
	}
	return deg
}

func TestSphereShape(t *testing.T) {
	// The sphere2500 shape: 50 rings of 50.
	g, truth, err := Sphere(50, 50, Config{Kappa: 1, Tau: 1, LoopProb: 1, NoiseFree: true})
	if err != nil {
		t.Fatal(err)
	}
	if g.N() != 2500 || g.M() != 4949 {
		t.Fatalf("n=%d m=%d, want 2500 4949", g.N(), g.M())
	}
	radius := 50 / (2 * math.Pi)
	for i, p := range truth {
		r := math.Sqrt(dist2(p.T, [3]float64{}))
		if math.Abs(r-radius) > 1e-9 {
			t.Fatalf("pose %d at distance %g from the centre, want %g", i, r, radius)
		}
		// z axis is the outward normal.
		for k := 0; k < 3; k++ {
			if math.Abs(p.R[k*3+2]-p.T[k]/r) > 1e-12 {
				t.Fatalf("pose %d: z axis %v is not the normal", i, [3]float64{p.R[2], p.R[5], p.R[8]})
			}
		}
	}
	for i, d := range degrees(g) {
		if d < 2 || d > 4 {
			t.Fatalf("pose %d has degree %d", i, d)
		}
	}
}

func TestCubeLattice(t *testing.T) {
	nx, ny, nz := 4, 3, 5
	g, truth, err := Cube(nx, ny, nz, Config{Kappa: 1, Tau: 1, LoopProb: 1, NoiseFree: true})
	if err != nil {
		t.Fatal(err)
	}
	// With every closure kept, the graph is the lattice: every edge joins
	// unit neighbours and every pose has its full lattice degree.
	deg := degrees(g)
	for _, e := range g.Edges {
		if s := dist2(truth[e.I].T, truth[e.J].T); math.Abs(s-1) > 1e-12 {
			t.Fatalf("edge (%d, %d) spans %g", e.I, e.J, math.Sqrt(s))
		}
	}
	for i, p := range truth {
		want := 0
		for k, size := range [3]int{nx, ny, nz} {
			c := int(p.T[k])
			if c > 0 {
				want++
			}
			if c < size-1 {
				want++
			}
		}
		if deg[i] != want {
			t.Fatalf("pose %d at %v: degree %d, want %d", i, p.T, deg[i], want)
		}
		// x axis faces the next pose.
		j := i + 1
		a := i
		if j == len(truth) {
			a, j = i-1, i
		}
		for k := 0; k < 3; k++ {
			if math.Abs(p.R[k*3]-(truth[j].T[k]-truth[a].T[k])) > 1e-12 {
				t.Fatalf("pose %d does not face its step", i)
			}
		}
	}
}

func TestTorusClosesTube(t *testing.T) {
	g, _, err := Torus(4, 8, Config{Kappa: 1, Tau: 1, LoopProb: 1, NoiseFree: true})
	if err != nil {
		t.Fatal(err)
	}
	// Every pose has two ring neighbours along the tube, so with the
	// odometry the degree is 4 except at the walk's two ends.
	for i, d := range degrees(g) {
		want := 4
		if i == 0 || i == g.N()-1 {
			want = 3
		}
		if d != want {
			t.Fatalf("pose %d has degree %d, want %d", i, d, want)
		}
	}
}

func TestManhattanClosures(t *testing.T) {
	g, truth, err := Manhattan(2000, 12, Config{Kappa: 1, Tau: 1, LoopProb: 1, NoiseFree: true})
	if err != nil {
		t.Fatal(err)
	}
	perPose := make([]int, g.N())
	for _, e := range g.Edges {
		if dist2(truth[e.I].T, truth[e.J].T) > 1+1e-12 {
			t.Fatalf("edge (%d, %d) joins poses %v and %v", e.I, e.J, truth[e.I].T, truth[e.J].T)
		}
		if e.J != e.I+1 {
			if e.J-e.I < 10 || truth[e.I].T != truth[e.J].T {
				t.Fatalf("closure (%d, %d) is not a revisit at least 10 poses later", e.I, e.J)
			}
			perPose[e.J]++
		}
		// Poses face their step: the heading is a multiple of 90 degrees.
		for _, v := range truth[e.I].R[:4] {
			if v != 0 && math.Abs(math.Abs(v)-1) > 1e-15 {
				t.Fatalf("pose %d heading %v is not axis-aligned", e.I, truth[e.I].R[:4])
			}
		}
	}
	total := 0
	for j, c := range perPose {
		if c > 2 {
			t.Fatalf("pose %d closes %d loops, more than 2", j, c)
		}
		total += c
	}
	if total < g.N()/4 {
		t.Errorf("only %d closures on a 2000-step walk in a 12 x 12 square", total)
	}
	for i, p := range truth {
		if p.T[0] < 0 || p.T[0] > 11 || p.T[1] < 0 || p.T[1] > 11 {
			t.Fatalf("pose %d at %v left the square", i, p.T)
		}
	}
}

func TestGeometricNeighbours(t *testing.T) {
	for _, d := range []int{2, 3} {
		const n, radius = 150, 1.3
		g, truth, err := Geometric(d, n, radius, Config{Kappa: 1, Tau: 1, LoopProb: 1, NoiseFree: true})
		if err != nil {
			t.Fatal(err)
		}
		// Oracle: all pairs by brute force.
		want := map[[2]int]bool{}
		for j := 0; j < n; j++ {
			for i := 0; i < j-1; i++ {
				if dist2(truth[i].T, truth[j].T) < radius*radius {
					want[[2]int{i, j}] = true
				}
			}
		}
		got := map[[2]int]bool{}
		for _, e := range g.Edges {
			if e.J != e.I+1 {
				got[[2]int{e.I, e.J}] = true
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("d=%d: %d closures, brute force finds %d", d, len(got), len(want))
		}
		side := math.Pow(n, 1/float64(d))
		for i, p := range truth {
			for k := 0; k < 3; k++ {
				hi := side
				if k >= d {
					hi = 0
				}
				if p.T[k] < 0 || p.T[k] > hi {
					t.Fatalf("d=%d: pose %d at %v outside the cube of side %g", d, i, p.T, side)
				}
			}
		}
	}
}

func TestNoiseFree(t *testing.T) {
	for _, f := range families() {
		cfg := baseConfig()
		cfg.NoiseFree = true
		g, truth, err := f.gen(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if c := g.Cost(truth, posegraph.Poses); c > 1e-12 {
			t.Errorf("%s: noise-free cost at the truth is %g", f.name, c)
		}
		// Dead reckoning with exact odometry is the truth.
		for i := range truth {
			for k := 0; k < 9; k++ {
				if math.Abs(g.Initial[i].R[k]-truth[i].R[k]) > 1e-9 {
					t.Fatalf("%s: initial rotation %d differs from the truth", f.name, i)
				}
			}
			if math.Sqrt(dist2(g.Initial[i].T, truth[i].T)) > 1e-9 {
				t.Fatalf("%s: initial translation %d is %v, truth %v", f.name, i, g.Initial[i].T, truth[i].T)
			}
		}
		// Same structure as the noisy graph with the same seed.
		noisy, _, err := f.gen(baseConfig())
		if err != nil {
			t.Fatal(err)
		}
		if noisy.M() != g.M() {
			t.Fatalf("%s: noise changes the structure: m %d vs %d", f.name, noisy.M(), g.M())
		}
		for k := range g.Edges {
			if g.Edges[k].I != noisy.Edges[k].I || g.Edges[k].J != noisy.Edges[k].J {
				t.Fatalf("%s: edge %d differs between noisy and noise-free", f.name, k)
			}
		}
	}
}

func TestDeterministic(t *testing.T) {
	for _, f := range families() {
		a, ta, err := f.gen(baseConfig())
		if err != nil {
			t.Fatal(err)
		}
		b, tb, _ := f.gen(baseConfig())
		if !reflect.DeepEqual(a, b) || !reflect.DeepEqual(ta, tb) {
			t.Errorf("%s: two runs with the same seed differ", f.name)
		}
		cfg := baseConfig()
		cfg.Seed++
		c, _, _ := f.gen(cfg)
		if reflect.DeepEqual(a.Edges, c.Edges) {
			t.Errorf("%s: seeds %d and %d give the same edges", f.name, baseConfig().Seed, cfg.Seed)
		}
	}
}

func TestBadConfig(t *testing.T) {
	good := baseConfig()
	bad := []struct {
		name string
		err  func() error
		want string
	}{
		{"kappa", func() error { c := good; c.Kappa = 0; _, _, err := Sphere(3, 5, c); return err }, "Kappa"},
		{"tau", func() error { c := good; c.Tau = math.Inf(1); _, _, err := Torus(3, 5, c); return err }, "Tau"},
		{"loop", func() error { c := good; c.LoopProb = 1.5; _, _, err := Cube(2, 2, 2, c); return err }, "LoopProb"},
		{"nan", func() error { c := good; c.LoopProb = math.NaN(); _, _, err := Manhattan(10, 3, c); return err }, "LoopProb"},
		{"rings", func() error { _, _, err := Sphere(0, 5, good); return err }, "rings"},
		{"perRing", func() error { _, _, err := Torus(3, 2, good); return err }, "perRing"},
		{"cube", func() error { _, _, err := Cube(1, 1, 1, good); return err }, "2 points"},
		{"side", func() error { _, _, err := Manhattan(10, 1, good); return err }, "side"},
		{"dim", func() error { _, _, err := Geometric(4, 10, 1, good); return err }, "dimension 4"},
		{"radius", func() error { _, _, err := Geometric(2, 10, -1, good); return err }, "radius"},
	}
	for _, c := range bad {
		err := c.err()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one mentioning %q", c.name, err, c.want)
		}
	}
}

// edgeNoise recovers edge e's rotation noise E = (R_i^T R_j)^T Rt and
// translation noise eps = tt - R_i^T (t_j - t_i) from the truth.
func edgeNoise(e posegraph.Edge, truth []posegraph.Pose, d int) (rot [9]float64, eps [3]float64) {
	rel := smalldense.MulTN(&truth[e.I].R, &truth[e.J].R, d)
	rot = smalldense.MulTN(&rel, &e.R, d)
	for a := 0; a < d; a++ {
		s := 0.0
		for k := 0; k < d; k++ {
			s += truth[e.I].R[k*d+a] * (truth[e.J].T[k] - truth[e.I].T[k])
		}
		eps[a] = e.T[a] - s
	}
	return rot, eps
}

// TestNoiseStatistics checks the noise recovered from generated edges
// against the model: the mean of 1 - cos(angle) and of its square, the
// mean and per-coordinate variance of the translation noise, each within
// 4.5 standard errors.
func TestNoiseStatistics(t *testing.T) {
	cases := []struct {
		name  string
		d     int
		kappa float64
		tau   float64
		gen   func(Config) (*posegraph.Graph, []posegraph.Pose, error)
	}{
		{"sphere", 3, 40, 9, func(c Config) (*posegraph.Graph, []posegraph.Pose, error) { return Sphere(40, 40, c) }},
		{"cube-low-kappa", 3, 0.3, 1, func(c Config) (*posegraph.Graph, []posegraph.Pose, error) { return Cube(12, 12, 12, c) }},
		{"manhattan", 2, 25, 4, func(c Config) (*posegraph.Graph, []posegraph.Pose, error) { return Manhattan(4000, 20, c) }},
		{"geometric2-high-kappa", 2, 1e4, 1e3, func(c Config) (*posegraph.Graph, []posegraph.Pose, error) { return Geometric(2, 1500, 1.2, c) }},
	}
	for _, c := range cases {
		g, truth, err := c.gen(Config{Kappa: c.kappa, Tau: c.tau, LoopProb: 1, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		m1, m2 := angleMoments(c.d, c.kappa)
		_, m4 := angleMomentsHigher(c.d, c.kappa)
		var su, su2, st2 float64
		var sc [3]float64
		var sc2 [3]float64
		for _, e := range g.Edges {
			rot, eps := edgeNoise(e, truth, c.d)
			tr := 0.0
			for a := 0; a < c.d; a++ {
				tr += rot[a*c.d+a]
			}
			cos := tr / 2
			if c.d == 3 {
				cos = (tr - 1) / 2
			}
			u := 1 - cos
			su += u
			su2 += u * u
			n2 := 0.0
			for a := 0; a < c.d; a++ {
				sc[a] += eps[a]
				sc2[a] += eps[a] * eps[a]
				n2 += eps[a] * eps[a]
			}
			st2 += n2
		}
		nm := float64(g.M())
		check := func(what string, got, want, sd float64) {
			t.Helper()
			if z := math.Abs(got-want) / (sd / math.Sqrt(nm)); z > 4.5 {
				t.Errorf("%s: %s: sample %g, model %g (%.1f standard errors, %d edges)", c.name, what, got, want, z, g.M())
			}
		}
		check("mean 1-cos", su/nm, m1, math.Sqrt(m2-m1*m1))
		check("mean (1-cos)^2", su2/nm, m2, math.Sqrt(m4-m2*m2))
		s2 := 1 / c.tau
		check("mean |eps|^2", st2/nm, float64(c.d)*s2, math.Sqrt(2*float64(c.d))*s2)
		for a := 0; a < c.d; a++ {
			check("mean eps", sc[a]/nm, 0, math.Sqrt(s2))
			check("var eps", sc2[a]/nm, s2, math.Sqrt(2)*s2)
		}
	}
}

// angleMomentsHigher returns E[(1-cos)^3] and E[(1-cos)^4] by the same
// quadrature as angleMoments, for the standard error of the second moment.
func angleMomentsHigher(d int, kappa float64) (m3, m4 float64) {
	a := 2 * kappa
	const n = 20000
	var z float64
	for k := 0; k <= n; k++ {
		th := math.Pi * float64(k) / n
		u := 1 - math.Cos(th)
		w := math.Exp(-a * u)
		if d == 3 {
			w *= u
		}
		if k == 0 || k == n {
			w /= 2
		}
		z += w
		m3 += w * u * u * u
		m4 += w * u * u * u * u
	}
	return m3 / z, m4 / z
}

// besselI returns the modified Bessel function I_nu(x) by its power series,
// an oracle for moderate x independent of the quadrature.
func besselI(nu int, x float64) float64 {
	term := math.Pow(x/2, float64(nu))
	for k := 2; k <= nu; k++ {
		term /= float64(k)
	}
	s := term
	for k := 1; k < 500; k++ {
		term *= (x / 2) * (x / 2) / (float64(k) * float64(k+nu))
		s += term
		if term < 1e-17*s {
			break
		}
	}
	return s
}

func TestAngleMoments(t *testing.T) {
	for _, kappa := range []float64{0.01, 0.5, 2, 10, 40} {
		a := 2 * kappa
		i0, i1, i2, i3 := besselI(0, a), besselI(1, a), besselI(2, a), besselI(3, a)
		// 2-D, von Mises(2 kappa): E cos = I1/I0, E cos^2 = (I0 + I2)/(2 I0).
		ec, ec2 := i1/i0, (i0+i2)/(2*i0)
		want1, want2 := 1-ec, 1-2*ec+ec2
		m1, m2 := angleMoments(2, kappa)
		if math.Abs(m1-want1) > 1e-10*math.Max(1, want1) || math.Abs(m2-want2) > 1e-10 {
			t.Errorf("2-D kappa=%g: moments %g %g, Bessel %g %g", kappa, m1, m2, want1, want2)
		}
		// 3-D, weight (1 - cos) e^{a cos}: with c_k = integral cos^k e^{a cos} / pi,
		// c0 = I0, c1 = I1, c2 = (I0+I2)/2, c3 = (3 I1 + I3)/4.
		c0, c1, c2, c3 := i0, i1, (i0+i2)/2, (3*i1+i3)/4
		z := c0 - c1
		ec, ec2 = (c1-c2)/z, (c2-c3)/z
		want1, want2 = 1-ec, 1-2*ec+ec2
		m1, m2 = angleMoments(3, kappa)
		if math.Abs(m1-want1) > 1e-9*math.Max(1, want1) || math.Abs(m2-want2) > 1e-9 {
			t.Errorf("3-D kappa=%g: moments %g %g, Bessel %g %g", kappa, m1, m2, want1, want2)
		}
	}
	// Large kappa: E[4 kappa (1 - cos)] tends to dim SO(d).
	for _, d := range []int{2, 3} {
		mean, _ := EdgeCostMoments(d, 1e7, posegraph.Rotations)
		if want := float64(d*(d-1)) / 2; math.Abs(mean-want) > 1e-5 {
			t.Errorf("d=%d: rotation term mean %g at kappa 1e7, want %g", d, mean, want)
		}
	}
}

// TestSamplers draws the angle samplers directly in every regime
// (including the small-kappa and wrapped-normal branches) and compares
// sample moments with the quadrature.
func TestSamplers(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 40000
	for _, d := range []int{2, 3} {
		for _, kappa := range []float64{1e-9, 0.2, 0.6, 3, 300, 1e7} {
			m1, m2 := angleMoments(d, kappa)
			var s float64
			for i := 0; i < n; i++ {
				r := rotNoise(rng, d, kappa)
				if dev := orthoDev(r, d); dev > 1e-12 {
					t.Fatalf("d=%d kappa=%g: noise is not a rotation (%g)", d, kappa, dev)
				}
				tr := r[0] + r[d+1]
				if d == 3 {
					tr += r[8] - 1
				}
				s += 1 - tr/2
			}
			got := s / n
			if z := math.Abs(got-m1) / math.Sqrt((m2-m1*m1)/n); z > 4.5 {
				t.Errorf("d=%d kappa=%g: mean 1-cos %g, model %g (%.1f standard errors)", d, kappa, got, m1, z)
			}
		}
	}
	// Isotropy in 3-D: the skew part sin(theta) k of the noise has mean 0
	// and the same variance E[sin^2 theta]/3 along each axis.
	for _, kappa := range []float64{0.2, 3, 300} {
		var sum, sum2 [3]float64
		for i := 0; i < n; i++ {
			r := rotNoise(rng, 3, kappa)
			w := [3]float64{(r[7] - r[5]) / 2, (r[2] - r[6]) / 2, (r[3] - r[1]) / 2}
			for k := range w {
				sum[k] += w[k]
				sum2[k] += w[k] * w[k]
			}
		}
		m1, m2 := angleMoments(3, kappa)
		// sin^2 = 1 - cos^2 = 2u - u^2 with u = 1 - cos.
		v := (2*m1 - m2) / 3
		for k := range sum {
			if z := math.Abs(sum[k]/n) / math.Sqrt(v/n); z > 4.5 {
				t.Errorf("kappa=%g: skew component %d has mean %g (%.1f standard errors)", kappa, k, sum[k]/n, z)
			}
			if got := sum2[k] / n; math.Abs(got-v) > 0.05*v {
				t.Errorf("kappa=%g: skew component %d has variance %g, model %g", kappa, k, got, v)
			}
		}
	}
}

// TestExpectedCost checks that F at the ground truth, for every family,
// lies within 4 standard deviations of its expectation, for both problems.
func TestExpectedCost(t *testing.T) {
	for _, f := range families() {
		for _, seed := range []uint64{1, 2} {
			cfg := baseConfig()
			cfg.Seed = seed
			cfg.Kappa = 20
			g, truth, err := f.gen(cfg)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range []posegraph.Problem{posegraph.Poses, posegraph.Rotations} {
				mean, v := ExpectedCost(g, p)
				got := g.Cost(truth, p)
				if z := math.Abs(got-mean) / math.Sqrt(v); z > 4 {
					t.Errorf("%s seed %d %v: F(truth) = %g, expected %g +- %g (%.1f sd)", f.name, seed, p, got, mean, math.Sqrt(v), z)
				}
			}
		}
	}
}

func BenchmarkSphere2500(b *testing.B) {
	cfg := Config{Kappa: 100, Tau: 10, LoopProb: 1, Seed: 1}
	for b.Loop() {
		if _, _, err := Sphere(50, 50, cfg); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGeometric3D(b *testing.B) {
	cfg := Config{Kappa: 100, Tau: 10, LoopProb: 0.5, Seed: 1}
	for b.Loop() {
		if _, _, err := Geometric(3, 5000, 1.2, cfg); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLangevin3(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	for b.Loop() {
		rotNoise(rng, 3, 100)
	}
}

func BenchmarkVonMises(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	for b.Loop() {
		rotNoise(rng, 2, 100)
	}
}
