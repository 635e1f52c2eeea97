package rounding

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
)

// chordalOracle solves the relaxed chordal least squares densely: unknowns
// the entries of R_1..R_{n-1}, residual rows sqrt(kappa)(R_j - R_i Rt) per
// edge and entry, R_0 = I.
func chordalOracle(t *testing.T, g *posegraph.Graph) [][9]float64 {
	n, d := g.N(), g.D
	dd := d * d
	col := func(i, a, c int) int { return (i-1)*dd + a*d + c }
	a := mat.NewDense(g.M()*dd, (n-1)*dd, nil)
	b := mat.NewVecDense(g.M()*dd, nil)
	for k, e := range g.Edges {
		w := math.Sqrt(e.Kappa)
		for p := 0; p < d; p++ {
			for c := 0; c < d; c++ {
				row := k*dd + p*d + c
				rhs := 0.0
				// (R_j)_{pc} - sum_q (R_i)_{pq} Rt_{qc}
				if e.J == 0 {
					if p == c {
						rhs -= w
					}
				} else {
					a.Set(row, col(e.J, p, c), w)
				}
				for q := 0; q < d; q++ {
					if e.I == 0 {
						if p == q {
							rhs += w * e.R[q*d+c]
						}
					} else {
						a.Set(row, col(e.I, p, q), a.At(row, col(e.I, p, q))-w*e.R[q*d+c])
					}
				}
				b.SetVec(row, rhs)
			}
		}
	}
	x := denseLeastSquares(t, a, b)
	out := make([][9]float64, n)
	for p := 0; p < d; p++ {
		out[0][p*d+p] = 1
	}
	for i := 1; i < n; i++ {
		for k := 0; k < dd; k++ {
			out[i][k] = x.AtVec((i-1)*dd + k)
		}
	}
	return out
}

func TestChordalRelaxedMatchesDense(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, d := range []int{2, 3} {
		for _, n := range []int{2, 6, 25} {
			g, _ := randomGraph(rng, d, n, 2*n, 0.3, 0.1)
			got, err := ChordalRelaxed(g)
			if err != nil {
				t.Fatal(err)
			}
			want := chordalOracle(t, g)
			for i := range want {
				for k := 0; k < d*d; k++ {
					if math.Abs(got[i][k]-want[i][k]) > 1e-8 {
						t.Fatalf("d=%d n=%d block %d entry %d: %.12g, dense least squares gives %.12g", d, n, i, k, got[i][k], want[i][k])
					}
				}
			}
			// The solution does not depend on the weights' units: pose 0's
			// grounding (chordalSystem) scales with them.
			for _, scale := range []float64{1e-9, 1e12} {
				gs := *g
				gs.Edges = append([]posegraph.Edge(nil), g.Edges...)
				for k := range gs.Edges {
					gs.Edges[k].Kappa *= scale
				}
				got, err := ChordalRelaxed(&gs)
				if err != nil {
					t.Fatalf("d=%d n=%d weights times %g: %v", d, n, scale, err)
				}
				for i := range want {
					for k := 0; k < d*d; k++ {
						if math.Abs(got[i][k]-want[i][k]) > 1e-8 {
							t.Fatalf("d=%d n=%d weights times %g, block %d entry %d: %.12g, dense least squares gives %.12g", d, n, scale, i, k, got[i][k], want[i][k])
						}
					}
				}
			}
			// Chordal is the projection of these blocks, in the input's gauge.
			poses, err := Chordal(g)
			if err != nil {
				t.Fatal(err)
			}
			for i := range poses {
				checkRotation(t, poses[i].R, d, 1e-12, "chordal rotation")
			}
			proj := make([]posegraph.Pose, n)
			for i := range proj {
				proj[i].R = NearestRotation(want[i][:d*d], d)
			}
			sameUpToGauge(t, poses, proj, d, true, 1e-8)
		}
	}
}

// TestNoiseFreeInitializations: with exact measurements every
// initialization reproduces the ground truth up to gauge, F = 0 to rounding,
// and with the truth as the anchor's input estimate, exactly the truth.
func TestNoiseFreeInitializations(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	for _, d := range []int{2, 3} {
		n := 60
		g, truth := randomGraph(rng, d, n, 80, 0, 0)
		g.Fixed = []int{7}
		g.Initial = append([]posegraph.Pose(nil), truth...)
		g.HasInitial = make([]bool, n)
		for i := range g.HasInitial {
			g.HasInitial[i] = true
		}
		inits := map[string]func(*posegraph.Graph) ([]posegraph.Pose, error){
			"chordal": Chordal, "odometry": Odometry, "vertices": FromVertices,
		}
		for name, init := range inits {
			poses, err := init(g)
			if err != nil {
				t.Fatalf("%s d=%d: %v", name, d, err)
			}
			if f := g.Cost(poses, posegraph.Poses); f > 1e-16*float64(g.M())*100 {
				t.Fatalf("%s d=%d: F = %g on a noise-free graph", name, d, f)
			}
			sameUpToGauge(t, truth, poses, d, false, 1e-9)
			for i := range poses {
				for k := 0; k < d*d; k++ {
					if math.Abs(poses[i].R[k]-truth[i].R[k]) > 1e-9 {
						t.Fatalf("%s d=%d pose %d: rotation not in the input's gauge", name, d, i)
					}
				}
				for p := 0; p < d; p++ {
					if math.Abs(poses[i].T[p]-truth[i].T[p]) > 1e-9*(1+math.Abs(truth[i].T[p])) {
						t.Fatalf("%s d=%d pose %d: translation not in the input's gauge", name, d, i)
					}
				}
			}
		}
		// The rotation-only variants agree with the truth's rotations and
		// leave translations zero.
		for name, init := range map[string]func(*posegraph.Graph) ([]posegraph.Pose, error){
			"chordal": ChordalRotations, "odometry": OdometryRotations,
		} {
			poses, err := init(g)
			if err != nil {
				t.Fatalf("%s rotations d=%d: %v", name, d, err)
			}
			if f := g.Cost(poses, posegraph.Rotations); f > 1e-20*float64(g.M())*1e4 {
				t.Fatalf("%s rotations d=%d: F = %g on a noise-free graph", name, d, f)
			}
			for i := range poses {
				if poses[i].T != ([3]float64{}) {
					t.Fatalf("%s rotations: pose %d has translation %v", name, i, poses[i].T)
				}
				for k := 0; k < d*d; k++ {
					if math.Abs(poses[i].R[k]-truth[i].R[k]) > 1e-9 {
						t.Fatalf("%s rotations d=%d pose %d: rotation not in the input's gauge", name, d, i)
					}
				}
			}
		}
	}
}

// TestNoisyInitializations: on noisy graphs the initializations are proper
// rotations with translations optimal for them, and chordal beats random.
func TestNoisyInitializations(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 26))
	for _, d := range []int{2, 3} {
		g, _ := randomGraph(rng, d, 80, 100, 0.1, 0.2)
		random := Random(g, 5)
		fr := g.Cost(random, posegraph.Poses)
		for name, init := range map[string]func(*posegraph.Graph) ([]posegraph.Pose, error){
			"chordal": Chordal, "odometry": Odometry,
		} {
			poses, err := init(g)
			if err != nil {
				t.Fatal(err)
			}
			for i := range poses {
				checkRotation(t, poses[i].R, d, 1e-10, name)
			}
			for k, v := range translationGradient(g, poses) {
				if math.Abs(v) > 1e-7 {
					t.Fatalf("%s d=%d: dF/dt entry %d = %g", name, d, k, v)
				}
			}
			if f := g.Cost(poses, posegraph.Poses); !(f < fr) {
				t.Fatalf("%s d=%d: F = %g, not below random's %g", name, d, f, fr)
			}
		}
	}
}

func TestInitializationErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 28))
	g, _ := randomGraph(rng, 3, 5, 0, 0, 0)
	g.Source = "poses.g2o"
	if _, err := FromVertices(g); err == nil || !contains(err.Error(), "poses.g2o") {
		t.Fatalf("no VERTEX lines: got %v, want an error naming the file", err)
	}
	g.Initial = make([]posegraph.Pose, 5)
	g.HasInitial = []bool{true, true, false, true, true}
	if _, err := FromVertices(g); err == nil || !contains(err.Error(), "id 12") {
		t.Fatalf("pose without VERTEX: got %v, want an error naming id 12", err)
	}
	g.Edges = g.Edges[:3]
	for name, init := range map[string]func(*posegraph.Graph) ([]posegraph.Pose, error){
		"chordal": Chordal, "odometry": Odometry, "chordal rotations": ChordalRotations,
	} {
		if _, err := init(g); !posegraph.IsDisconnected(err) {
			t.Fatalf("%s on a disconnected graph: got %v", name, err)
		}
	}
}

func TestRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 30))
	for _, d := range []int{2, 3} {
		g, _ := randomGraph(rng, d, 20, 5, 0, 0)
		a, b, c := Random(g, 1), Random(g, 1), Random(g, 2)
		same := true
		for i := range a {
			checkRotation(t, a[i].R, d, 1e-12, "random rotation")
			if a[i] != b[i] {
				t.Fatalf("d=%d: the same seed gave different poses", d)
			}
			if a[i] != c[i] {
				same = false
			}
		}
		if same {
			t.Fatalf("d=%d: different seeds gave the same poses", d)
		}
	}
}

func TestInitializationsRejectBadWeights(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	g, _ := randomGraph(rng, 2, 5, 2, 0, 0)
	g.Edges[2].Kappa = math.NaN()
	g.Edges[2].Line = 7
	for name, init := range map[string]func(*posegraph.Graph) ([]posegraph.Pose, error){
		"chordal": Chordal, "odometry": Odometry, "chordal rotations": ChordalRotations, "odometry rotations": OdometryRotations,
	} {
		if _, err := init(g); err == nil || !contains(err.Error(), "random:7") {
			t.Fatalf("%s with a NaN precision: got %v, want an error naming random:7", name, err)
		}
	}
}

func TestSinglePose(t *testing.T) {
	for _, d := range []int{2, 3} {
		g := &posegraph.Graph{D: d, IDs: []int{5}}
		for name, init := range map[string]func(*posegraph.Graph) ([]posegraph.Pose, error){
			"chordal": Chordal, "odometry": Odometry, "chordal rotations": ChordalRotations,
		} {
			poses, err := init(g)
			if err != nil {
				t.Fatalf("%s d=%d: %v", name, d, err)
			}
			if len(poses) != 1 || poses[0] != posegraph.Identity(d) {
				t.Fatalf("%s d=%d: got %v, want the identity", name, d, poses)
			}
		}
		// With nothing to solve, a given order is still checked.
		for _, bad := range [][]int{{5}, {-1}, {0, 1}, {}} {
			if _, err := ChordalOrdered(g, bad); err == nil {
				t.Errorf("ChordalOrdered: order %v accepted for one pose", bad)
			}
			if _, err := ChordalRotationsOrdered(g, bad); err == nil {
				t.Errorf("ChordalRotationsOrdered: order %v accepted for one pose", bad)
			}
		}
		if _, err := ChordalRotationsOrdered(g, []int{0}); err != nil {
			t.Errorf("ChordalRotationsOrdered: order [0]: %v", err)
		}
	}
}

// TestOrderedVariants checks that an elimination order given from outside
// (as sync.Solve passes Q's) changes nothing but rounding: ChordalOrdered,
// ChordalRotationsOrdered and RecoverTranslationsOrdered agree with their
// self-ordering forms, with the anchor at pose 0 or elsewhere, and refuse
// orders that are not permutations of the poses.
func TestOrderedVariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	for _, d := range []int{2, 3} {
		for _, anchor := range []int{0, 17} {
			n := 60
			g, _ := randomGraph(rng, d, n, 80, 0.1, 0.2)
			if anchor != 0 {
				g.Fixed = []int{anchor}
			}
			identity := make([]int, n)
			for i := range identity {
				identity[i] = i
			}
			for _, order := range [][]int{rng.Perm(n), identity} {
				same := func(name string, got, want []posegraph.Pose) {
					t.Helper()
					for i := range want {
						for k := 0; k < d*d; k++ {
							if math.Abs(got[i].R[k]-want[i].R[k]) > 1e-9 {
								t.Fatalf("%s d=%d anchor %d: pose %d R differs: %v, %v", name, d, anchor, i, got[i].R, want[i].R)
							}
						}
						for k := 0; k < d; k++ {
							if math.Abs(got[i].T[k]-want[i].T[k]) > 1e-9*(1+math.Abs(want[i].T[k])) {
								t.Fatalf("%s d=%d anchor %d: pose %d T differs: %v, %v", name, d, anchor, i, got[i].T, want[i].T)
							}
						}
					}
				}
				want, err := Chordal(g)
				if err != nil {
					t.Fatal(err)
				}
				got, err := ChordalOrdered(g, order)
				if err != nil {
					t.Fatal(err)
				}
				same("chordal", got, want)
				wantR, err := ChordalRotations(g)
				if err != nil {
					t.Fatal(err)
				}
				gotR, err := ChordalRotationsOrdered(g, order)
				if err != nil {
					t.Fatal(err)
				}
				same("chordal rotations", gotR, wantR)
				a, b := append([]posegraph.Pose(nil), want...), append([]posegraph.Pose(nil), want...)
				for i := range a {
					a[i].T, b[i].T = [3]float64{}, [3]float64{}
				}
				if err := RecoverTranslations(g, a); err != nil {
					t.Fatal(err)
				}
				if err := RecoverTranslationsOrdered(g, b, order); err != nil {
					t.Fatal(err)
				}
				same("translations", b, a)
			}
			dup := rng.Perm(n)
			dup[1] = dup[0]
			for name, bad := range map[string][]int{"short": identity[:n-1], "repeated": dup, "out of range": append(identity[:n-1:n-1], n)} {
				if _, err := ChordalOrdered(g, bad); err == nil {
					t.Errorf("ChordalOrdered: %s order accepted", name)
				}
				if _, err := ChordalRotationsOrdered(g, bad); err == nil {
					t.Errorf("ChordalRotationsOrdered: %s order accepted", name)
				}
				poses := make([]posegraph.Pose, n)
				for i := range poses {
					poses[i].R = RandomRotation(rng, d)
				}
				if err := RecoverTranslationsOrdered(g, poses, bad); err == nil {
					t.Errorf("RecoverTranslationsOrdered: %s order accepted", name)
				}
			}
		}
	}
}

func TestReducedOrder(t *testing.T) {
	got, err := reducedOrder([]int{3, 0, 4, 2, 1}, 5, 2)
	if err != nil || !slices.Equal(got, []int{2, 0, 3, 1}) {
		t.Fatalf("reducedOrder = %v, %v; want [2 0 3 1]", got, err)
	}
	for _, bad := range [][]int{{0, 1}, {0, 1, 1}, {0, 1, 3}, {-1, 0, 1}} {
		if _, err := reducedOrder(bad, 3, 0); err == nil {
			t.Errorf("order %v accepted for 3 poses", bad)
		}
	}
}

// TestGivenOrderIsUsed checks the numbering of a given order where it
// matters, by fill: on a path whose poses are labelled in random order, the
// path order eliminates with no fill at all, and any misnumbering (the
// wrong anchor dropped, reversed or shifted indices) makes some. Both
// anchored systems are checked, with the translation anchor at an end of
// the numbering and in the middle of the path.
func TestGivenOrderIsUsed(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 44))
	for _, d := range []int{2, 3} {
		n := 40
		g, _ := randomGraph(rng, d, n, 0, 0.1, 0.2) // the chain 0-1-...-(n-1)
		pi := rng.Perm(n)
		for k := range g.Edges {
			g.Edges[k].I, g.Edges[k].J = pi[g.Edges[k].I], pi[g.Edges[k].J]
		}
		for _, anchor := range []int{0, pi[n/2]} {
			g.Fixed = []int{anchor}
			lap := laplacianCSC(g, g.Anchor())
			red, err := reducedOrder(pi, g.N(), g.Anchor())
			if err != nil {
				t.Fatal(err)
			}
			c, err := sparse.Analyze(lap, red)
			if err != nil {
				t.Fatal(err)
			}
			if c.NNZ() != lap.ColPtr[lap.N] {
				t.Errorf("d=%d anchor %d: translation factor has %d nonzeros, the path %d", d, anchor, c.NNZ(), lap.ColPtr[lap.N])
			}
		}
		q, _ := chordalSystem(g)
		a := sparse.LowerCSC(q, 0, 0)
		c, err := sparse.AnalyzeBlocks(q, blockPerm(pi, d))
		if err != nil {
			t.Fatal(err)
		}
		if c.NNZ() != a.ColPtr[a.N] {
			t.Errorf("d=%d: chordal factor has %d nonzeros, the path %d", d, c.NNZ(), a.ColPtr[a.N])
		}
	}
}
