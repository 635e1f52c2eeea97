package g2o

import (
	"bytes"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/bcmsync/bcmsync/posegraph"
)

// TestReadPriors2D reads g2o's two 2-D priors: the world vertex comes
// after the poses and before the landmarks, with the id above all, and
// each prior is an edge from it with the record's measurement, precisions
// and line.
func TestReadPriors2D(t *testing.T) {
	src := "VERTEX_SE2 0 0 0 0\nVERTEX_SE2 3 1 0 0.5\nVERTEX_XY 9 4 4\n" +
		"EDGE_SE2 0 3 1 0 0.5 4 0 0 4 0 9\n" +
		"EDGE_SE2_XY 0 9 4 4 1 0 1\n" +
		"EDGE_PRIOR_SE2 3 10 20 0.25 5 0 0 5 0 7\n" +
		"EDGE_PRIOR_SE2_XY 0 -1 2.5 3 0 3\n"
	g := mustRead(t, src, ReadOptions{})
	if err := g.Validate(); err != nil {
		t.Fatal(err)
	}
	if want := []int{0, 3, 10, 9}; !equalInts(g.IDs, want) {
		t.Fatalf("IDs = %v, want %v", g.IDs, want)
	}
	if g.World() != 2 || g.Anchor() != 2 || g.IsLandmark(2) || !g.IsLandmark(3) {
		t.Fatalf("world %d anchor %d landmarks %v", g.World(), g.Anchor(), g.Landmark)
	}
	ps := g.Priors()
	if len(ps) != 2 {
		t.Fatalf("%d priors", len(ps))
	}
	p := ps[0]
	if p.Kind != posegraph.PosePrior || p.Pose != 1 || p.T != [3]float64{10, 20} || p.Kappa != 7 || p.Tau != 5 ||
		p.Line != 6 || p.R != RotationFromAngle(0.25) || len(p.Meas) != 3 || len(p.Info) != 6 {
		t.Fatalf("pose prior %+v", p)
	}
	p = ps[1]
	if p.Kind != posegraph.PositionPrior || p.Pose != 0 || p.T != [3]float64{-1, 2.5} || p.Kappa != 0 || p.Tau != 3 ||
		p.Line != 7 || p.R != posegraph.Identity(2).R {
		t.Fatalf("position prior %+v", p)
	}
	// The observation still points at the landmark, now one index up.
	if e := g.Edges[1]; e.I != 0 || e.J != 3 {
		t.Fatalf("observation (%d, %d), want (0, 3)", e.I, e.J)
	}
}

// TestReadPriors3D reads EDGE_SE3_PRIOR (pose, offset, x y z q, 21
// values) and EDGE_SE3_XYZ_PRIOR (pose, offset, x y z, 6 values), with
// kappa and tau by the rules of EDGE_SE3:QUAT and of an observation.
func TestReadPriors3D(t *testing.T) {
	info21 := " 4 0 0 0 0 0 4 0 0 0 0 4 0 0 0 10 0 0 10 0 10"
	src := "PARAMS_SE3OFFSET 0 0 0 0 0 0 0 1\n" +
		"EDGE_SE3:QUAT 1 2 1 0 0 0 0 0 1" + info21 + "\n" +
		"EDGE_SE3_PRIOR 1 0 5 6 7 0 0 0.6 0.8" + info21 + "\n" +
		"EDGE_SE3_XYZ_PRIOR 2 0 1 2 3 2 0 0 2 0 2\n"
	g := mustRead(t, src, ReadOptions{})
	if err := g.Validate(); err != nil {
		t.Fatal(err)
	}
	ps := g.Priors()
	if len(ps) != 2 || g.World() != 2 || g.IDs[2] != 3 {
		t.Fatalf("%d priors, world %d id %d", len(ps), g.World(), g.IDs[g.World()])
	}
	r, _ := RotationFromQuat(0, 0, 0.6, 0.8)
	if p := ps[0]; p.Kind != posegraph.PosePrior || p.Pose != 0 || p.T != [3]float64{5, 6, 7} || p.R != r ||
		p.Tau != 4 || p.Kappa != 5 || len(p.Info) != 21 || len(p.Meas) != 7 {
		t.Fatalf("pose prior %+v", p)
	}
	if p := ps[1]; p.Kind != posegraph.PositionPrior || p.Pose != 1 || p.T != [3]float64{1, 2, 3} || p.Tau != 2 || p.Kappa != 0 {
		t.Fatalf("position prior %+v", p)
	}
}

// A graph with priors and landmarks, written and read back, gives the same
// records bit for bit (from Meas and Info), and one made in memory comes
// back with its precisions; the world vertex is not written.
func TestWritePriorsRoundTrip(t *testing.T) {
	info21 := " 4 0.5 0 0 0 0 4 0 0 0 0 4 0 0 0 10 0 0 10 0 10"
	for _, src := range []string{
		"VERTEX_SE2 0 0 0 0\nVERTEX_SE2 1 1 0 0.5\nVERTEX_XY 7 3 3\nEDGE_SE2 0 1 1 0 0.5 4 0 0 4 0 9\n" +
			"EDGE_SE2_XY 1 7 2 2 1 0.1 1\nEDGE_PRIOR_SE2 1 0.1 0.2 0.3 5 1 0 5 0 7\nEDGE_PRIOR_SE2_XY 0 0.30000000000000004 1e-3 3 0.5 3\n",
		"EDGE_SE3:QUAT 1 2 1 0 0 0 0 0 1" + info21 + "\nEDGE_SE3_PRIOR 1 0 5 6 7 0 0 0.6 0.81" + info21 +
			"\nEDGE_SE3_XYZ_PRIOR 2 0 1 2 3 2 0.1 0 2 0 2\n",
	} {
		g := mustRead(t, src, ReadOptions{})
		var buf bytes.Buffer
		if err := Write(&buf, g, nil); err != nil {
			t.Fatal(err)
		}
		wid := strconv.Itoa(g.IDs[g.World()])
		for _, l := range strings.Split(buf.String(), "\n") {
			if f := strings.Fields(l); len(f) > 1 && (strings.HasPrefix(f[0], "VERTEX") || f[0] == "FIX") && f[1] == wid {
				t.Fatalf("the world vertex was written: %q", l)
			}
		}
		h := mustRead(t, buf.String(), ReadOptions{})
		if h.N() != g.N() || h.World() != g.World() || len(h.Edges) != len(g.Edges) {
			t.Fatalf("read back %d vertices, world %d, %d edges; want %d, %d, %d:\n%s",
				h.N(), h.World(), len(h.Edges), g.N(), g.World(), len(g.Edges), buf.String())
		}
		for k := range g.Edges {
			a, b := g.Edges[k], h.Edges[k]
			if a.Prior != b.Prior || a.I != b.I || a.J != b.J || a.R != b.R || a.T != b.T || a.Kappa != b.Kappa || a.Tau != b.Tau ||
				!slices.Equal(a.Meas, b.Meas) || !slices.Equal(a.Info, b.Info) {
				t.Fatalf("edge %d: %+v read back as %+v", k, a, b)
			}
		}
		// Made in memory: no Meas or Info; the isotropic matrices give
		// the precisions back.
		for k := range g.Edges {
			g.Edges[k].Meas, g.Edges[k].Info = nil, nil
		}
		buf.Reset()
		if err := Write(&buf, g, nil); err != nil {
			t.Fatal(err)
		}
		h = mustRead(t, buf.String(), ReadOptions{})
		for k := range g.Edges {
			a, b := g.Edges[k], h.Edges[k]
			if a.Prior == posegraph.NoPrior {
				continue
			}
			if a.Prior != b.Prior || a.J != b.J || math.Abs(a.Kappa-b.Kappa) > 1e-12*a.Kappa || math.Abs(a.Tau-b.Tau) > 1e-12*a.Tau {
				t.Fatalf("prior %d: %+v read back as %+v", k, a, b)
			}
			for c := range a.R {
				if math.Abs(a.R[c]-b.R[c]) > 1e-15 || c < 3 && a.T[c] != b.T[c] {
					t.Fatalf("prior %d: %+v read back as %+v", k, a, b)
				}
			}
		}
	}
}

// Bad prior records are *ParseErrors at their lines.
func TestReadPriorErrors(t *testing.T) {
	e01 := "EDGE_SE2 0 1 1 0 0 1 0 0 1 0 1\n"
	v01 := "VERTEX_SE2 0 0 0 0\nVERTEX_SE2 1 1 0 0\n"
	info21 := " 4 0 0 0 0 0 4 0 0 0 0 4 0 0 0 10 0 0 10 0 10"
	e3 := "EDGE_SE3:QUAT 1 2 1 0 0 0 0 0 1" + info21 + "\n"
	cases := []struct {
		name, src string
		line      int
		want      string
	}{
		{"short", e01 + "EDGE_PRIOR_SE2 1 0 0 0 1 0 0 1 0\n", 2, "too few fields: EDGE_PRIOR_SE2 needs 10"},
		{"long xy", e01 + "EDGE_PRIOR_SE2_XY 1 0 0 1 0 1 5\n", 2, "too many fields: EDGE_PRIOR_SE2_XY needs 6"},
		{"bad number", e01 + "EDGE_PRIOR_SE2_XY 1 0 x 1 0 1\n", 2, "field 3 of EDGE_PRIOR_SE2_XY (x) is not a number"},
		{"not pd", e01 + "EDGE_PRIOR_SE2_XY 1 0 0 1 2 1\n", 2, "EDGE_PRIOR_SE2_XY: "},
		{"zero kappa", e01 + "EDGE_PRIOR_SE2 1 0 0 0 1 0 0 1 0 0\n", 2, "EDGE_PRIOR_SE2: "},
		{"dims", e01 + "EDGE_SE3_XYZ_PRIOR 1 0 1 2 3 1 0 0 1 0 1\n", 2, "is a 3-D record but line 1 has a 2-D one"},
		{"unknown vertex", e01 + "EDGE_PRIOR_SE2_XY 5 0 0 1 0 1\n", 2, "prior on vertex 5, which no VERTEX or EDGE record names"},
		{"undeclared", v01 + "VERTEX_SE2 2 0 0 0\n" + e01 + "EDGE_SE2 1 2 1 0 0 1 0 0 1 0 1\nEDGE_PRIOR_SE2_XY 3 0 0 1 0 1\n", 6, "prior on vertex 3"},
		{"landmark", e01 + "EDGE_SE2_XY 1 7 1 1 1 0 1\nEDGE_PRIOR_SE2_XY 7 0 0 1 0 1\n", 3, "prior on vertex 7, a landmark (line 2)"},
		{"offset", "PARAMS_SE3OFFSET 0 0 0 0 0 0 0 1\n" + e3 + "EDGE_SE3_PRIOR 1 4 0 0 0 0 0 0 1" + info21 + "\n", 3,
			"EDGE_SE3_PRIOR uses sensor offset 4, which no PARAMS_SE3OFFSET line before it declares"},
		{"zero quat", e3 + "EDGE_SE3_PRIOR 1 0 0 0 0 0 0 0 0" + info21 + "\n", 2, "EDGE_SE3_PRIOR has a zero quaternion"},
		{"offset twice", "PARAMS_SE3OFFSET 1 0 0 1 0 0 0.7071067811865476 0.7071067811865476\nPARAMS_SE3OFFSET 1 0 0 0 0 0 0 1\n" +
			e3 + "EDGE_SE3_PRIOR 1 1 0 0 0 0 0 0 1" + info21 + "\n", 2, "PARAMS_SE3OFFSET 1 declared twice (first at line 1)"},
		{"xyz short", e3 + "EDGE_SE3_XYZ_PRIOR 1 0 1 2 3 1 0 0 1 0\n", 2, "too few fields: EDGE_SE3_XYZ_PRIOR needs 11"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Read(strings.NewReader(c.src), "bad.g2o", ReadOptions{})
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v (%T), want a *ParseError", err, err)
			}
			if pe.Line != c.line || pe.File != "bad.g2o" || !strings.Contains(pe.Error(), c.want) {
				t.Fatalf("error %q, want bad.g2o:%d: ...%q", pe.Error(), c.line, c.want)
			}
		})
	}
}

// A file of priors and vertices alone (no relative edge) is a graph: one
// pose held by a prior.
func TestReadPriorsOnly(t *testing.T) {
	g := mustRead(t, "VERTEX_SE2 4 1 2 0\nEDGE_PRIOR_SE2 4 1 2 0 1 0 0 1 0 1\n", ReadOptions{})
	if err := g.Validate(); err != nil {
		t.Fatal(err)
	}
	if g.N() != 2 || g.World() != 1 || g.IDs[1] != 5 {
		t.Fatalf("n=%d world=%d ids %v", g.N(), g.World(), g.IDs)
	}
}
