package covariance_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/g2o"
	"github.com/bcmsync/bcmsync/posegraph"
	"github.com/bcmsync/bcmsync/sync/covariance"
)

// testGraphs are small graphs with and without landmarks in both
// dimensions, with their true poses moved off the optimum (the formula
// holds at any point) and edge weights that differ from edge to edge.
func testGraphs(t *testing.T) map[string]struct {
	g *posegraph.Graph
	x []posegraph.Pose
} {
	t.Helper()
	out := map[string]struct {
		g *posegraph.Graph
		x []posegraph.Pose
	}{}
	cfg := datasets.Config{Kappa: 50, Tau: 20, LoopProb: 1, Seed: 4}
	man, mt, err := datasets.Manhattan(30, 4, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cube, ct, err := datasets.Cube(3, 3, 2, cfg)
	if err != nil {
		t.Fatal(err)
	}
	geo, gt, err := datasets.Geometric(3, 25, 1.6, cfg)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(28, 1))
	add := func(name string, g *posegraph.Graph, truth []posegraph.Pose, landmarks int) {
		if landmarks > 0 {
			g, truth, err = datasets.AddLandmarks(g, truth, datasets.LandmarkConfig{N: landmarks, Tau: 30, Range: 2, Seed: 5})
			if err != nil {
				t.Fatal(err)
			}
		}
		for k := range g.Edges {
			g.Edges[k].Tau *= 0.5 + rng.Float64()
			if g.Edges[k].Kappa > 0 {
				g.Edges[k].Kappa *= 0.5 + rng.Float64()
			}
		}
		x := append([]posegraph.Pose(nil), truth...)
		for i := range x {
			for a := 0; a < g.D; a++ {
				x[i].T[a] += 0.1 * rng.NormFloat64()
			}
			if !g.IsLandmark(i) {
				var w [3]float64
				for a := range w {
					w[a] = 0.05 * rng.NormFloat64()
				}
				x[i].R = mulRot(x[i].R, expRot(g.D, w), g.D)
			}
		}
		out[name] = struct {
			g *posegraph.Graph
			x []posegraph.Pose
		}{g, x}
	}
	add("manhattan", man, mt, 0)
	add("manhattan+landmarks", man, mt, 8)
	add("cube", cube, ct, 0)
	add("cube+landmarks", cube, ct, 6)
	add("geometric3d", geo, gt, 0)
	return out
}

// TestComputeMatchesDense compares every marginal and joint with the dense
// oracle (finite-difference Jacobian of the residuals, gonum inverse), for
// the anchor gauge and another pose as gauge, with pairs whose cross
// blocks lie on and off the factor's pattern and pairs with the gauge.
func TestComputeMatchesDense(t *testing.T) {
	for name, tc := range testGraphs(t) {
		g, x := tc.g, tc.x
		for _, gauge := range []int{-1, g.NumPoses() / 2} {
			t.Run(fmt.Sprintf("%s/gauge%d", name, gauge), func(t *testing.T) {
				opts := covariance.Options{}
				gv := g.Anchor()
				if gauge >= 0 {
					opts.Gauge, gv = covariance.GaugeAt(gauge), gauge
				}
				n := g.N()
				// Every pair of distinct vertices among a spread-out set, and
				// pairs with the gauge.
				var sel []int
				for i := 0; i < n; i += max(1, n/7) {
					sel = append(sel, i)
				}
				sel = append(sel, n-1)
				for a, i := range sel {
					for _, j := range sel[a+1:] {
						if i != j {
							opts.Pairs = append(opts.Pairs, [2]int{i, j})
						}
					}
					if i != gv {
						opts.Pairs = append(opts.Pairs, [2]int{gv, i})
					}
				}
				got, err := covariance.Compute(g, x, opts)
				if err != nil {
					t.Fatal(err)
				}
				want, c := denseCovariance(t, g, x, gv)
				scale := 0.0
				for k := 0; k < c.dim; k++ {
					scale = max(scale, want.At(k, k))
				}
				tol := 1e-6 * scale
				if got.Gauge != gv || got.N() != n || got.D != g.D {
					t.Fatalf("gauge %d, n %d, d %d; want %d, %d, %d", got.Gauge, got.N(), got.D, gv, n, g.D)
				}
				for i := 0; i < n; i++ {
					k := got.Size(i)
					if k != c.size[i] {
						t.Fatalf("vertex %d: size %d, want %d", i, k, c.size[i])
					}
					m := got.Marginal(i)
					for a := 0; a < k; a++ {
						for b := 0; b < k; b++ {
							w := want.At(c.off[i]+a, c.off[i]+b)
							if math.Abs(m[a*k+b]-w) > tol {
								t.Fatalf("vertex %d: C(%d, %d) = %.10g, dense %.10g", i, a, b, m[a*k+b], w)
							}
						}
					}
				}
				if len(got.Joints) != len(opts.Pairs) {
					t.Fatalf("%d joints for %d pairs", len(got.Joints), len(opts.Pairs))
				}
				for q, jt := range got.Joints {
					i, j := opts.Pairs[q][0], opts.Pairs[q][1]
					if jt.I != i || jt.J != j {
						t.Fatalf("joint %d is of (%d, %d), want (%d, %d)", q, jt.I, jt.J, i, j)
					}
					idx := []int{}
					for a := 0; a < c.size[i]; a++ {
						idx = append(idx, c.off[i]+a)
					}
					for a := 0; a < c.size[j]; a++ {
						idx = append(idx, c.off[j]+a)
					}
					w := len(idx)
					if len(jt.Cov) != w*w {
						t.Fatalf("joint (%d, %d) has %d entries, want %d", i, j, len(jt.Cov), w*w)
					}
					for a := range idx {
						for b := range idx {
							if dw := want.At(idx[a], idx[b]); math.Abs(jt.Cov[a*w+b]-dw) > tol {
								t.Fatalf("joint (%d, %d): entry (%d, %d) = %.10g, dense %.10g", i, j, a, b, jt.Cov[a*w+b], dw)
							}
						}
					}
				}
				if got.FactorNNZ <= 0 || got.Supernodes <= 0 {
					t.Errorf("factor statistics %d nnz, %d supernodes", got.FactorNNZ, got.Supernodes)
				}
				t.Logf("%d pairs, %d needed solves", len(opts.Pairs), got.PairSolves)
			})
		}
	}
}

// TestComputeByHand checks closed forms on a two-pose 2-D graph with one
// edge: with pose 0 fixed, pose 1's covariance is diag(1/tau, 1/tau,
// 1/(2 kappa)); with pose 1 fixed, pose 0's angle still has variance
// 1/(2 kappa), but its position moves with the lever arm:
// C_tt = I/tau + v v^T / (2 kappa), v = R_0 G tt (G the quarter turn).
func TestComputeByHand(t *testing.T) {
	const kappa, tau = 8.0, 5.0
	th0 := 0.7
	c0, s0 := math.Cos(th0), math.Sin(th0)
	tt := [3]float64{2, -1}
	g := &posegraph.Graph{D: 2, IDs: []int{10, 11}, Edges: []posegraph.Edge{{
		I: 0, J: 1, R: [9]float64{1, 0, 0, 1}, T: tt, Kappa: kappa, Tau: tau,
	}}}
	x := []posegraph.Pose{{R: [9]float64{c0, -s0, s0, c0}, T: [3]float64{1, 2}}}
	x = append(x, posegraph.Pose{R: x[0].R, T: [3]float64{1 + c0*tt[0] - s0*tt[1], 2 + s0*tt[0] + c0*tt[1]}})
	c, err := covariance.Compute(g, x, covariance.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want1 := []float64{1 / tau, 0, 0, 0, 1 / tau, 0, 0, 0, 1 / (2 * kappa)}
	for k, w := range want1 {
		if m := c.Marginal(1); math.Abs(m[k]-w) > 1e-14 {
			t.Errorf("pose 1 (gauge 0): entry %d = %.17g, want %.17g", k, m[k], w)
		}
	}
	for k, v := range c.Marginal(0) {
		if v != 0 {
			t.Errorf("the gauge's covariance has entry %d = %g", k, v)
		}
	}
	c, err = covariance.Compute(g, x, covariance.Options{Gauge: covariance.GaugeAt(1)})
	if err != nil {
		t.Fatal(err)
	}
	// v = R_0 G tt, G tt = (-tt_y, tt_x).
	gt := [2]float64{-tt[1], tt[0]}
	v := [2]float64{c0*gt[0] - s0*gt[1], s0*gt[0] + c0*gt[1]}
	want0 := []float64{
		1/tau + v[0]*v[0]/(2*kappa), v[0] * v[1] / (2 * kappa), -v[0] / (2 * kappa),
		v[1] * v[0] / (2 * kappa), 1/tau + v[1]*v[1]/(2*kappa), -v[1] / (2 * kappa),
		-v[0] / (2 * kappa), -v[1] / (2 * kappa), 1 / (2 * kappa),
	}
	m := c.Marginal(0)
	for k, w := range want0 {
		if math.Abs(m[k]-w) > 1e-13 {
			t.Errorf("pose 0 (gauge 1): entry %d = %.17g, want %.17g", k, m[k], w)
		}
	}
}

// TestInformationConvention checks the numbers docs/covariances.md and
// docs/formats.md state about reading a g2o user's information matrix: an
// EDGE_SE2 with I33 = 1/sigma^2 gives the angle the variance
// 1/(2 I33) = sigma^2/2, and an EDGE_SE3:QUAT with the rotation block
// w I gives each rotation axis the variance 1/w; the translation's
// variance is 1/I11 in both. The file's information is bcmsync's reading,
// which is SE-Sync's (kappa = I33; kappa = 3 / (2 tr(inv(W_R)))).
func TestInformationConvention(t *testing.T) {
	const sigma, w = 0.1, 400.0
	src2 := fmt.Sprintf("VERTEX_SE2 0 0 0 0\nVERTEX_SE2 1 1 0 0\nEDGE_SE2 0 1 1 0 0 25 0 0 25 0 %g\n", 1/(sigma*sigma))
	g, err := g2o.Read(strings.NewReader(src2), "two.g2o", g2o.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := covariance.Compute(g, g.Initial, covariance.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := c.Marginal(1)
	if got, want := m[8], sigma*sigma/2; math.Abs(got-want) > 1e-15 {
		t.Errorf("2-D: angle variance %.17g, want sigma^2/2 = %.17g", got, want)
	}
	if got := m[0]; math.Abs(got-1.0/25) > 1e-15 {
		t.Errorf("2-D: x variance %.17g, want 1/I11 = 0.04", got)
	}
	info := fmt.Sprintf("16 0 0 0 0 0 16 0 0 0 0 16 0 0 0 %g 0 0 %g 0 %g", w, w, w)
	src3 := "VERTEX_SE3:QUAT 0 0 0 0 0 0 0 1\nVERTEX_SE3:QUAT 1 1 0 0 0 0 0 1\nEDGE_SE3:QUAT 0 1 1 0 0 0 0 0 1 " + info + "\n"
	g, err = g2o.Read(strings.NewReader(src3), "two3.g2o", g2o.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c, err = covariance.Compute(g, g.Initial, covariance.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m = c.Marginal(1)
	for a := 0; a < 3; a++ {
		if got := m[(3+a)*6+3+a]; math.Abs(got-1/w) > 1e-15 {
			t.Errorf("3-D: rotation axis %d variance %.17g, want 1/w = %.17g", a, got, 1/w)
		}
		if got := m[a*6+a]; math.Abs(got-1.0/16) > 1e-15 {
			t.Errorf("3-D: translation axis %d variance %.17g, want 1/16", a, got)
		}
	}
	// g2o's own EDGE_SE3 error is the vector part of the error quaternion,
	// sin(theta/2) times the axis: theta/2 to first order, so w on it is
	// 4/w in theta^2. Check the factor 1/2 on a rotation by 1e-4 rad.
	const th = 1e-4
	r := expRot(3, [3]float64{0, th, 0})
	_, qy, _, _ := g2o.QuatFromRotation(r)
	if math.Abs(qy/th-0.5) > 1e-8 {
		t.Errorf("quaternion vector part %g for the angle %g: ratio %g, want 1/2", qy, th, qy/th)
	}
}

// TestComputeErrors checks that bad input is an error, not a panic or a
// wrong answer.
func TestComputeErrors(t *testing.T) {
	cfg := datasets.Config{Kappa: 50, Tau: 20, LoopProb: 1, Seed: 4}
	g, truth, err := datasets.Manhattan(12, 3, cfg)
	if err != nil {
		t.Fatal(err)
	}
	gl, tl, err := datasets.AddLandmarks(g, truth, datasets.LandmarkConfig{N: 2, Tau: 30, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	nan := append([]posegraph.Pose(nil), truth...)
	nan[3].T[1] = math.NaN()
	for _, c := range []struct {
		name string
		g    *posegraph.Graph
		x    []posegraph.Pose
		opts covariance.Options
		want string
	}{
		{"nil graph", nil, nil, covariance.Options{}, "nil graph"},
		{"short poses", g, truth[:3], covariance.Options{}, "3 poses for a graph of 12"},
		{"NaN", g, nan, covariance.Options{}, "not finite"},
		{"gauge out of range", g, truth, covariance.Options{Gauge: covariance.GaugeAt(12)}, "outside"},
		{"landmark gauge", gl, tl, covariance.Options{Gauge: covariance.GaugeAt(gl.N() - 1)}, "is a landmark"},
		{"pair out of range", g, truth, covariance.Options{Pairs: [][2]int{{1, 40}}}, "outside"},
		{"pair twice", g, truth, covariance.Options{Pairs: [][2]int{{2, 2}}}, "twice"},
	} {
		if _, err := covariance.Compute(c.g, c.x, c.opts); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
	// A 3-D landmark seen by one pose is determined (d equations, d
	// unknowns); a 2-D pose joined to the rest by one landmark is not:
	// it can turn about the landmark.
	two := &posegraph.Graph{D: 2, IDs: []int{0, 1, 2}, Landmark: []bool{false, false, true},
		Edges: []posegraph.Edge{
			{I: 0, J: 2, R: posegraph.Identity(2).R, T: [3]float64{1, 0}, Tau: 1},
			{I: 1, J: 2, R: posegraph.Identity(2).R, T: [3]float64{0, 1}, Tau: 1},
		}}
	x := []posegraph.Pose{posegraph.Identity(2), posegraph.Identity(2), posegraph.Identity(2)}
	x[1].T = [3]float64{1, -1}
	x[2].T = [3]float64{1, 0}
	if _, err := covariance.Compute(two, x, covariance.Options{}); err == nil || !strings.Contains(err.Error(), "singular at pose 1") {
		t.Errorf("a pose free to turn about a landmark: error %v", err)
	}
	// One vertex: nothing is free.
	one := &posegraph.Graph{D: 3, IDs: []int{5}}
	c, err := covariance.Compute(one, []posegraph.Pose{posegraph.Identity(3)}, covariance.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range c.Marginal(0) {
		if v != 0 {
			t.Fatal("a one-pose graph has a nonzero covariance")
		}
	}
}
