package rounding_test

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/g2o"
	"github.com/bcmsync/bcmsync/posegraph"
	"github.com/bcmsync/bcmsync/rounding"
)

// dataDir locates the benchmark graphs (skipped, or failed under CI, when
// they are missing).
func dataDir(tb testing.TB) string {
	tb.Helper()
	return datasets.SuiteOrSkip(tb)
}

// reference reads the certified optima f_star by file name.
func reference(tb testing.TB, dir string) map[string]float64 {
	tb.Helper()
	refs, err := datasets.ReadReference(filepath.Join(dir, "REFERENCE.tsv"))
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]float64{}
	for _, r := range refs {
		out[r.File] = r.FStar
	}
	return out
}

func load(tb testing.TB, dir, name string) *posegraph.Graph {
	tb.Helper()
	g, err := g2o.ReadFile(filepath.Join(dir, name), g2o.ReadOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	if err := g.Validate(); err != nil {
		tb.Fatal(err)
	}
	return g
}

// TestRealGraphs runs the initializations on the small benchmark graphs:
// the results are proper rotations, the translations are stationary for
// them, F is never below the certified optimum, and rounding a lifted,
// rotated copy of the chordal solution gives it back.
func TestRealGraphs(t *testing.T) {
	dir := dataDir(t)
	ref := reference(t, dir)
	for _, name := range []string{"tinyGrid3D.g2o", "smallGrid3D.g2o", "intel.g2o", "MIT.g2o", "CSAIL.g2o", "FR079_P_toro.graph", "parking-garage.g2o"} {
		g := load(t, dir, name)
		fstar, ok := ref[name]
		if !ok {
			t.Fatalf("%s: not in REFERENCE.tsv", name)
		}
		inits := map[string]func(*posegraph.Graph) ([]posegraph.Pose, error){
			"chordal": rounding.Chordal, "odometry": rounding.Odometry,
		}
		for kind, init := range inits {
			poses, err := init(g)
			if err != nil {
				t.Fatalf("%s %s: %v", name, kind, err)
			}
			f := g.Cost(poses, posegraph.Poses)
			if f < fstar*(1-1e-9) {
				t.Fatalf("%s %s: F = %.12g is below the certified optimum %.12g", name, kind, f, fstar)
			}
			t.Logf("%s %s: F = %.6g (optimum %.6g)", name, kind, f, fstar)
			checkStationary(t, g, poses, name+" "+kind)
		}
		// Round trip: lift the chordal poses to rank 5, mix the rows by an
		// orthogonal matrix, round and recover translations: same F.
		poses, _ := rounding.Chordal(g)
		f := g.Cost(poses, posegraph.Poses)
		x := g.Lift(poses, posegraph.Poses, 5)
		mixRows(x.Data, x.R, x.B, x.N)
		back := rounding.Round(x, g.D)
		if err := rounding.RecoverTranslations(g, back); err != nil {
			t.Fatal(err)
		}
		rounding.ToGauge(g, back)
		if fb := g.Cost(back, posegraph.Poses); math.Abs(fb-f) > 1e-8*(1+f) {
			t.Fatalf("%s: rounding the lifted chordal solution changed F from %.12g to %.12g", name, f, fb)
		}
		for i := range poses {
			for k := 0; k < g.D*g.D; k++ {
				if math.Abs(back[i].R[k]-poses[i].R[k]) > 1e-8 {
					t.Fatalf("%s pose %d: round trip moved the rotation by %g", name, i, back[i].R[k]-poses[i].R[k])
				}
			}
		}
	}
}

// mixRows replaces X by O X for a fixed orthogonal O (a product of Givens
// rotations and one reflection), as a solver's arbitrary gauge would.
func mixRows(data []float64, r, b, n int) {
	for i := 0; i < n; i++ {
		blk := data[i*r*b : (i+1)*r*b]
		for p := 0; p+1 < r; p++ {
			c, s := math.Cos(0.3+float64(p)), math.Sin(0.3+float64(p))
			for k := 0; k < b; k++ {
				u, v := blk[p*b+k], blk[(p+1)*b+k]
				blk[p*b+k], blk[(p+1)*b+k] = c*u-s*v, s*u+c*v
			}
		}
		for k := 0; k < b; k++ {
			blk[k] = -blk[k]
		}
	}
}

func checkStationary(t *testing.T, g *posegraph.Graph, poses []posegraph.Pose, what string) {
	t.Helper()
	d := g.D
	grad := make([]float64, g.N()*d)
	scale := 0.0
	for _, e := range g.Edges {
		for p := 0; p < d; p++ {
			r := poses[e.J].T[p] - poses[e.I].T[p]
			for q := 0; q < d; q++ {
				r -= poses[e.I].R[p*d+q] * e.T[q]
			}
			grad[e.J*d+p] += 2 * e.Tau * r
			grad[e.I*d+p] -= 2 * e.Tau * r
			scale = math.Max(scale, e.Tau*(1+math.Abs(e.T[p])))
		}
	}
	for k, v := range grad {
		if math.Abs(v) > 1e-6*scale {
			t.Fatalf("%s: dF/dt entry %d = %g", what, k, v)
		}
	}
}

// BenchmarkChordal times the chordal initialization (two sparse Cholesky
// solves, projections, gauge) on the larger benchmark graphs; reading the
// file is outside the timing.
func BenchmarkChordal(b *testing.B) {
	dir := dataDir(b)
	for _, name := range []string{"parking-garage.g2o", "sphere2500.g2o", "torus3D.g2o", "cubicle.g2o", "city10000.g2o"} {
		g := load(b, dir, name)
		b.Run(strings.TrimSuffix(name, ".g2o"), func(b *testing.B) {
			for b.Loop() {
				if _, err := rounding.Chordal(g); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRound times rounding a rank-5 lifted solution and recovering its
// translations, the last step of every solve.
func BenchmarkRound(b *testing.B) {
	dir := dataDir(b)
	for _, name := range []string{"sphere2500.g2o", "city10000.g2o"} {
		g := load(b, dir, name)
		poses, err := rounding.Chordal(g)
		if err != nil {
			b.Fatal(err)
		}
		x := g.Lift(poses, posegraph.Poses, 5)
		mixRows(x.Data, x.R, x.B, x.N)
		b.Run(strings.TrimSuffix(name, ".g2o"), func(b *testing.B) {
			for b.Loop() {
				out := rounding.Round(x, g.D)
				if err := rounding.RecoverTranslations(g, out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
