package g2o

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/bcmsync/bcmsync/posegraph"
)

func mustRead(t *testing.T, src string, opts ReadOptions) *posegraph.Graph {
	t.Helper()
	g, err := Read(strings.NewReader(src), "test.g2o", opts)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestReadSyntax covers what occurs in real files: comments (whole line and
// trailing), blank lines, CRLF, tabs and runs of spaces, no final newline,
// ids that are neither 0-based nor contiguous, a vertex declared after the
// edges that name it, and FIX.
func TestReadSyntax(t *testing.T) {
	src := "# a comment\r\n" +
		"\r\n" +
		"VERTEX_SE2 10 1 2 0.5   # trailing comment\r\n" +
		"VERTEX_SE2\t-3\t0 0 0\r\n" +
		"FIX 10\r\n" +
		"   \t\r\n" +
		"EDGE_SE2 -3 10  1 2 0.5  4 1 0 3 0 9\r\n" +
		"EDGE_SE2 10 700 0.25 -1 -0.5 2 0 0 2 0 5\r\n" +
		"EDGE_SE2 700 -3 1e-1 2E+0 0 1 0 0 1 0 1\r\n" +
		"VERTEX_SE2 700 3 4 -1" // no final newline
	g := mustRead(t, src, ReadOptions{})
	if g.D != 2 || g.Source != "test.g2o" {
		t.Errorf("D, Source = %d, %q", g.D, g.Source)
	}
	if want := []int{-3, 10, 700}; !slices.Equal(g.IDs, want) {
		t.Errorf("IDs = %v, want %v (ascending)", g.IDs, want)
	}
	type ij struct{ i, j, line int }
	var got []ij
	for _, e := range g.Edges {
		got = append(got, ij{e.I, e.J, e.Line})
	}
	if want := []ij{{0, 1, 7}, {1, 2, 8}, {2, 0, 9}}; !slices.Equal(got, want) {
		t.Errorf("edges (i, j, line) = %v, want %v", got, want)
	}
	if !slices.Equal(g.HasInitial, []bool{true, true, true}) {
		t.Errorf("HasInitial = %v", g.HasInitial)
	}
	if p := g.Initial[1]; p.T != [3]float64{1, 2, 0} || p.R != RotationFromAngle(0.5) {
		t.Errorf("pose of vertex 10 = %v", p)
	}
	if p := g.Initial[2]; p.T != [3]float64{3, 4, 0} || p.R != RotationFromAngle(-1) {
		t.Errorf("pose of vertex 700 = %v", p)
	}
	if !slices.Equal(g.Fixed, []int{1}) {
		t.Errorf("Fixed = %v, want [1]", g.Fixed)
	}
	e := g.Edges[0]
	if !slices.Equal(e.Meas, []float64{1, 2, 0.5}) || !slices.Equal(e.Info, []float64{4, 1, 0, 3, 0, 9}) {
		t.Errorf("raw values %v %v", e.Meas, e.Info)
	}
	// tau = 2 / tr(inv([[4 1] [1 3]])) = 2 / (7/11) = 22/7.
	if e.Kappa != 9 || math.Abs(e.Tau-22.0/7) > 1e-15 {
		t.Errorf("kappa, tau = %g, %g; want 9, 22/7", e.Kappa, e.Tau)
	}
	if e.T != [3]float64{1, 2, 0} || e.R != RotationFromAngle(0.5) {
		t.Errorf("edge R, T = %v, %v", e.R, e.T)
	}
	if g.Edges[2].T != [3]float64{0.1, 2, 0} {
		t.Errorf("exponent notation: T = %v", g.Edges[2].T)
	}
	if err := g.Validate(); err != nil {
		t.Error(err)
	}
}

// TestReadNoVertices checks that a file with no VERTEX lines is a graph of
// the vertices its edges name, none with an estimate.
func TestReadNoVertices(t *testing.T) {
	for _, src := range []string{
		"EDGE_SE2 3 5 1 0 0 1 0 0 1 0 1\nEDGE_SE2 5 8 1 0 0 1 0 0 1 0 1\nFIX 5\n",
		"EDGE2 3 5 1 0 0 1 0 1 1 0 0\nEDGE2 5 8 1 0 0 1 0 1 1 0 0\nFIX 5\n",
	} {
		g := mustRead(t, src, ReadOptions{})
		if !slices.Equal(g.IDs, []int{3, 5, 8}) || !slices.Equal(g.HasInitial, []bool{false, false, false}) {
			t.Errorf("%q: IDs %v, HasInitial %v", src, g.IDs, g.HasInitial)
		}
		for i, p := range g.Initial {
			if p != posegraph.Identity(2) {
				t.Errorf("%q: pose %d without a VERTEX line = %v, want identity", src, i, p)
			}
		}
	}
}

// TestReadUndeclaredVertex checks that, in a file that declares vertices,
// an edge to an undeclared vertex is an error at that edge's line, in g2o
// and TORO files, whichever endpoint is missing and wherever the VERTEX
// lines stand, and with lenient reading too: Lenient skips unsupported
// records, it does not invent poses.
func TestReadUndeclaredVertex(t *testing.T) {
	const e = " 1 0 0 1 0 0 1 0 1\n"
	const toroE = " 1 0 0 1 0 1 1 0 0\n"
	for _, c := range []struct {
		name, src string
		line      int
		msg       string
	}{
		{"second endpoint", "VERTEX_SE2 0 0 0 0\nVERTEX_SE2 1 1 0 0\nEDGE_SE2 0 1" + e + "EDGE_SE2 1 2" + e, 4,
			"edge 1 -> 2 names vertex 2, which no VERTEX line declares"},
		{"first endpoint", "VERTEX_SE2 0 0 0 0\nVERTEX_SE2 1 1 0 0\nEDGE_SE2 0 1" + e + "EDGE_SE2 7 1" + e, 4,
			"edge 7 -> 1 names vertex 7"},
		{"first of several", "EDGE_SE2 0 5" + e + "EDGE_SE2 0 1" + e + "VERTEX_SE2 0 0 0 0\nVERTEX_SE2 1 1 0 0\nEDGE_SE2 1 6" + e, 1,
			"names vertex 5"},
		{"TORO", "VERTEX2 0 0 0 0\nVERTEX2 1 1 0 0\nEDGE2 0 1" + toroE + "EDGE2 1 5" + toroE, 4,
			"edge 1 -> 5 names vertex 5"},
		{"SE3", "VERTEX_SE3:QUAT 0 0 0 0 0 0 0 1\nEDGE_SE3:QUAT 0 1 1 0 0 0 0 0 1 1 0 0 0 0 0 1 0 0 0 0 1 0 0 0 1 0 0 1 0 1\n", 2,
			"names vertex 1"},
	} {
		for _, lenient := range []bool{false, true} {
			_, err := Read(strings.NewReader(c.src), "bad.g2o", ReadOptions{Lenient: lenient})
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Errorf("%s, lenient %v: error %v, want a *ParseError", c.name, lenient, err)
				continue
			}
			if want := fmt.Sprintf("bad.g2o:%d: ", c.line); pe.Line != c.line || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("%s, lenient %v: error %q, want %q...%q", c.name, lenient, err, want, c.msg)
			}
		}
	}
	// A pose vertex skipped as unsupported is named in the message.
	_, err := Read(strings.NewReader("VERTEX_SE2 0 0 0 0\nVERTEX_SE2_EULER 1 0 0 0\nEDGE_SE2 0 1"+e), "bad.g2o", ReadOptions{Lenient: true})
	if err == nil || !strings.Contains(err.Error(), "bad.g2o:3: ") || !strings.Contains(err.Error(), "1 VERTEX_SE2_EULER record(s) were skipped") {
		t.Errorf("skipped vertex: %v", err)
	}
}

// TestReadSparseIDs uses ids too far apart for the dense id table.
func TestReadSparseIDs(t *testing.T) {
	if strconv.IntSize < 64 {
		t.Skip("ids of 10^12 do not fit a 32-bit int")
	}
	src := "EDGE_SE2 1000000000000 5 1 0 0 1 0 0 1 0 1\n" +
		"EDGE_SE2 5 -1000000000000 1 0 0 1 0 0 1 0 1\n" +
		"FIX -1000000000000\n"
	g := mustRead(t, src, ReadOptions{})
	if big := int64(1e12); !slices.Equal(g.IDs, []int{-int(big), 5, int(big)}) {
		want := []int64{-big, 5, big}
		t.Errorf("IDs = %v, want %v", g.IDs, want)
	}
	if e := g.Edges[0]; e.I != 2 || e.J != 1 {
		t.Errorf("first edge (%d, %d), want (2, 1)", e.I, e.J)
	}
	if !slices.Equal(g.Fixed, []int{0}) {
		t.Errorf("Fixed = %v", g.Fixed)
	}
}

// TestReadTORO checks that EDGE2's information order
// (Ixx Ixy Iyy Ith Ixth Iyth) is mapped to g2o's (I11 I12 I13 I22 I23 I33).
func TestReadTORO(t *testing.T) {
	toro := mustRead(t, "VERTEX2 0 0 0 0\nVERTEX2 1 1 0 0\nEDGE2 0 1 1 0.5 0.1 10 2 20 30 3 4\n", ReadOptions{})
	g2o := mustRead(t, "VERTEX_SE2 0 0 0 0\nVERTEX_SE2 1 1 0 0\nEDGE_SE2 0 1 1 0.5 0.1 10 2 3 20 4 30\n", ReadOptions{})
	a, b := toro.Edges[0], g2o.Edges[0]
	if !slices.Equal(a.Info, b.Info) || a.Kappa != b.Kappa || a.Tau != b.Tau || a.R != b.R || a.T != b.T {
		t.Errorf("TORO edge %+v\ndiffers from g2o edge %+v", a, b)
	}
	if a.Kappa != 30 {
		t.Errorf("kappa = %g, want Ith = 30", a.Kappa)
	}
}

// TestReadSE3 checks quaternion normalization and that Meas keeps the
// quaternion as written.
func TestReadSE3(t *testing.T) {
	info := "1 0 0 0 0 0 2 0 0 0 0 4 0 0 0 10 0 0 10 0 10"
	src := "VERTEX_SE3:QUAT 0 0 0 0 0 0 0 2\n" +
		"EDGE_SE3:QUAT 0 1 1 2 3 0 0 3 4 " + info + "\n"
	g := mustRead(t, src+"VERTEX_SE3:QUAT 1 1 2 3 0 0 0 1\n", ReadOptions{})
	if g.D != 3 || g.N() != 2 {
		t.Fatalf("d, n = %d, %d", g.D, g.N())
	}
	if g.Initial[0] != posegraph.Identity(3) {
		t.Errorf("vertex with quaternion (0 0 0 2): %v, want identity", g.Initial[0])
	}
	e := g.Edges[0]
	if !slices.Equal(e.Meas, []float64{1, 2, 3, 0, 0, 3, 4}) {
		t.Errorf("Meas = %v, want the quaternion unnormalized", e.Meas)
	}
	// (0, 0, 0.6, 0.8) is a rotation about z by theta with cos = 0.8^2 - 0.6^2, sin = 2 * 0.6 * 0.8.
	c, s := 0.28, 0.96
	want := []float64{c, -s, 0, s, c, 0, 0, 0, 1}
	if !close(e.R[:], want, 1e-15) {
		t.Errorf("R = %v, want %v", e.R, want)
	}
	// tau = 3 / (1 + 1/2 + 1/4), kappa = 3 / (2 * 3/10).
	if math.Abs(e.Tau-3/1.75) > 1e-15 || math.Abs(e.Kappa-5) > 1e-15 {
		t.Errorf("kappa, tau = %g, %g; want 5, %g", e.Kappa, e.Tau, 3/1.75)
	}
	if len(e.Info) != 21 || e.Info[20] != 10 {
		t.Errorf("Info = %v", e.Info)
	}
}

// TestReadErrors checks that each kind of bad input is a *ParseError that
// names the file, the line and the problem.
func TestReadErrors(t *testing.T) {
	const (
		v0  = "VERTEX_SE2 0 0 0 0\n"
		e01 = "EDGE_SE2 0 1 1 0 0 1 0 0 1 0 1\n"
		v01 = "VERTEX_SE2 0 0 0 0\nVERTEX_SE2 1 1 0 0\n" // declares e01's ends, after the line under test
		i6  = " 1 0 0 0 0 0 1 0 0 0 0 1 0 0 0 1 0 0 1 0 1"
	)
	for _, c := range []struct {
		name, src string
		line      int
		msg       string
	}{
		{"too few", v0 + "EDGE_SE2 0 1 1 0 0 1 0 0 1 0\n", 2, "too few fields"},
		{"too many", "VERTEX_SE2 0 0 0 0 7\n" + e01, 1, "too many fields"},
		{"too few SE3", "EDGE_SE3:QUAT 0 1 0 0 0 0 0 0 1\n", 1, "too few fields"},
		{"FIX alone", e01 + "FIX\n", 2, "FIX needs at least one"},
		{"not a number", v0 + "EDGE_SE2 0 1 1 x 0 1 0 0 1 0 1\n", 2, `field 4 of EDGE_SE2 (x) is not a number`},
		{"NaN", e01 + "VERTEX_SE2 1 NaN 0 0\n", 2, "not a finite number"},
		{"Inf", e01 + "EDGE_SE2 1 2 1 0 0 +Inf 0 0 1 0 1\n", 2, "not a finite number"},
		{"overflow", e01 + "EDGE_SE2 1 2 1e999 0 0 1 0 0 1 0 1\n", 2, "not a finite number"},
		{"bad id", "EDGE_SE2 0 1.5 1 0 0 1 0 0 1 0 1\n", 1, "is not a vertex id"},
		{"huge id", "EDGE_SE2 0 99999999999999999999 1 0 0 1 0 0 1 0 1\n", 1, "is not a vertex id"},
		{"not PD translation", e01 + "EDGE_SE2 1 2 1 0 0 1 2 0 1 0 1\n", 2, "not positive definite in its translation block"},
		{"not PD rotation", e01 + "EDGE_SE2 1 2 1 0 0 1 0 0 1 0 0\n", 2, "not positive definite (I33 = 0)"},
		{"not PD SE3", "EDGE_SE3:QUAT 0 1 0 0 0 0 0 0 1 1 0 0 0 0 0 1 0 0 0 0 1 0 0 0 -1 0 0 1 0 1\n", 1, "not positive definite in its rotation block"},
		{"zero quaternion", "EDGE_SE3:QUAT 0 1 0 0 0 0 0 0 0" + i6 + "\n", 1, "zero quaternion"},
		{"zero vertex quaternion", "VERTEX_SE3:QUAT 0 0 0 0 0 0 0 0\n", 1, "zero quaternion"},
		{"bearing", e01 + "EDGE_BEARING_SE2_XY 0 5 1 1\n", 2, "EDGE_BEARING_SE2_XY is not supported (this kind of landmark record"},
		{"observation not PD", e01 + "EDGE_SE2_XY 0 5 1 2 1 2 1\n", 2, "EDGE_SE2_XY: information matrix is not positive definite in its position block"},
		{"observation fields", e01 + "EDGE_SE2_XY 0 5 1 2 1 0\n", 2, "too few fields: EDGE_SE2_XY needs 7 after the tag (2 ids and 5 numbers)"},
		{"track fields", "EDGE_SE3_TRACKXYZ 0 5 1 2 3 1 0 0 1 0 1\n", 1, "too few fields: EDGE_SE3_TRACKXYZ needs 12 after the tag (3 ids and 9 numbers)"},
		{"track offset", "PARAMS_SE3OFFSET 0 0 0 0 0 0 0 1\nEDGE_SE3_TRACKXYZ 0 5 1 1 2 3 1 0 0 1 0 1\n", 2, "uses sensor offset 1, which no PARAMS_SE3OFFSET"},
		{"landmark as pose", e01 + "EDGE_SE2_XY 0 1 1 2 1 0 1\n", 1, "vertex 1 is a landmark (line 2) but this edge uses it as a pose"},
		{"observation from landmark", "VERTEX_XY 5 1 2\n" + e01 + "EDGE_SE2_XY 5 0 1 1 1 0 1\n" + v01, 3, "vertex 5 is a landmark (line 1) but this observation uses it as a pose"},
		{"landmark vertex as pose", "VERTEX_SE2 5 0 0 0\n" + e01 + "EDGE_SE2_XY 0 5 1 1 1 0 1\n" + v01, 1, "vertex 5 is a landmark (line 3) but this VERTEX record uses it as a pose"},
		{"landmark dims", e01 + "VERTEX_TRACKXYZ 5 1 2 3\n", 2, "is a 3-D record but line 1 has a 2-D one"},
		{"landmark twice", e01 + "VERTEX_XY 5 1 2\nVERTEX_XY 5 1 2\n", 3, "vertex 5 declared twice (first at line 2)"},
		{"prior", e01 + "EDGE_SE2_PRIOR 0 1 0 0 1 0 0 1 0 1\n", 2, "EDGE_SE2_PRIOR is not supported (this kind of prior; pose and position priors are read as EDGE_PRIOR_SE2"},
		{"params zero quaternion", "PARAMS_SE3OFFSET 0 0 0 1 0 0 0 0\n" + e01, 1, "PARAMS_SE3OFFSET 0 has a zero quaternion"},
		{"params short", e01 + "PARAMS_SE3OFFSET 0 0 0 1 0 0 0\n", 2, "PARAMS_SE3OFFSET needs"},
		{"params not a number", "PARAMS_SE3OFFSET 0 0 0 x 0 0 0 1\n", 1, "field 4 of PARAMS_SE3OFFSET (x) is not a number"},
		{"track through offset", "PARAMS_SE3OFFSET 2 0 0 1 0 0 0 1\nEDGE_SE3_TRACKXYZ 0 5 2 1 2 3 1 0 0 1 0 1\n", 2,
			"EDGE_SE3_TRACKXYZ uses sensor offset 2 (line 1), which is not the identity"},
		{"unknown", e01 + "\n\nHELLO world\n", 4, "HELLO is not supported (unknown record type"},
		{"garbage tag", "\x00\x01\n", 1, `"\x00\x01" is not supported`},
		{"mixed dimensions", e01 + "VERTEX_SE3:QUAT 0 0 0 0 0 0 0 1\n", 2, "is a 3-D record but line 1 has a 2-D one (EDGE_SE2)"},
		{"self edge", v0 + "EDGE_SE2 0 0 1 0 0 1 0 0 1 0 1\n", 2, "from vertex 0 to itself"},
		{"vertex twice", v0 + e01 + "\n" + v0, 4, "vertex 0 declared twice (first at line 1)"},
		{"FIX unknown", e01 + "FIX 0 7\n", 2, "FIX names vertex 7"},
		{"long line", e01 + strings.Repeat(" ", MaxLineLength+10) + "\n", 2, "line longer than"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Read(strings.NewReader(c.src), "bad.g2o", ReadOptions{})
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v (%T), want a *ParseError", err, err)
			}
			if pe.Line != c.line || pe.File != "bad.g2o" {
				t.Errorf("error at %s:%d, want bad.g2o:%d", pe.File, pe.Line, c.line)
			}
			prefix := fmt.Sprintf("bad.g2o:%d: ", c.line)
			if msg := err.Error(); !strings.HasPrefix(msg, prefix) || !strings.Contains(msg, c.msg) {
				t.Errorf("error %q, want %q...%q", msg, prefix, c.msg)
			}
			// Exactly the unsupported-record errors wrap ErrUnsupported.
			if unsup := strings.Contains(c.msg, "is not supported"); errors.Is(err, ErrUnsupported) != unsup {
				t.Errorf("errors.Is(%q, ErrUnsupported) = %v, want %v", err, !unsup, unsup)
			}
		})
	}
}

// TestReadEmpty checks that a file without edges is an error naming the file.
func TestReadEmpty(t *testing.T) {
	for _, src := range []string{"", "\n\n", "# only a comment\n", "VERTEX_SE2 0 0 0 0\n"} {
		_, err := Read(strings.NewReader(src), "empty.g2o", ReadOptions{})
		if err == nil || !strings.HasPrefix(err.Error(), "empty.g2o: no edges") {
			t.Errorf("%q: error %v, want empty.g2o: no edges...", src, err)
		}
	}
	_, err := Read(strings.NewReader(""), "", ReadOptions{})
	if err == nil || !strings.HasPrefix(err.Error(), "<input>: ") {
		t.Errorf("unnamed input: %v", err)
	}
}

// TestReadLenient checks that lenient reading skips unsupported records with
// one warning per tag that counts them, and that other errors still stop it.
func TestReadLenient(t *testing.T) {
	src := "VERTEX_SE2 0 0 0 0\nVERTEX_POINTXY 5 1 2\nEDGE_BEARING_SE2_XY 0 5 1\n" +
		"EDGE_SE2 0 1 1 0 0 1 0 0 1 0 1\nVERTEX_POINTXY 6 1 2\nFOO\nVERTEX_SE2 1 1 0 0\n"
	var warns []string
	g := mustRead(t, src, ReadOptions{Lenient: true, Warn: func(m string) { warns = append(warns, m) }})
	if g.N() != 2 || g.M() != 1 {
		t.Errorf("n, m = %d, %d; want 2, 1 (landmarks skipped)", g.N(), g.M())
	}
	want := []string{"skipped 2 VERTEX_POINTXY", "skipped 1 EDGE_BEARING_SE2_XY", "skipped 1 FOO"}
	if len(warns) != len(want) {
		t.Fatalf("warnings %q, want %d", warns, len(want))
	}
	for k, w := range want {
		if !strings.Contains(warns[k], w) {
			t.Errorf("warning %q, want %q", warns[k], w)
		}
	}
	_, err := Read(strings.NewReader("VERTEX_POINTXY 5 1 2\n"), "x.g2o", ReadOptions{Lenient: true})
	if err == nil || !strings.Contains(err.Error(), "no edges") {
		t.Errorf("only landmarks: %v", err)
	}
	_, err = Read(strings.NewReader("VERTEX_POINTXY 5 1 2\nVERTEX_SE2 0 0 0\n"), "x.g2o", ReadOptions{Lenient: true})
	if err == nil || !strings.HasPrefix(err.Error(), "x.g2o:2: too few") {
		t.Errorf("lenient reading let a broken line through: %v", err)
	}
}

// TestReadIndefiniteCross checks an edge whose diagonal blocks are positive
// definite but whose cross terms make the full matrix indefinite (as in
// cubicle.g2o): read with a warning by default, an error with StrictInfo.
func TestReadIndefiniteCross(t *testing.T) {
	src := "EDGE_SE2 0 1 1 0 0 1 0 0 1 0 1\nEDGE_SE2 1 2 1 0 0 1 0 5 1 0 1\n"
	var warns []string
	g := mustRead(t, src, ReadOptions{Warn: func(m string) { warns = append(warns, m) }})
	if e := g.Edges[1]; e.Kappa != 1 || e.Tau != 1 {
		t.Errorf("kappa, tau = %g, %g; want 1, 1 (cross terms ignored)", e.Kappa, e.Tau)
	}
	if len(warns) != 1 || !strings.HasPrefix(warns[0], "test.g2o:2: 1 edge(s)") {
		t.Errorf("warnings %q", warns)
	}
	_, err := Read(strings.NewReader(src), "test.g2o", ReadOptions{StrictInfo: true})
	if err == nil || !strings.HasPrefix(err.Error(), "test.g2o:2: EDGE_SE2: full 3x3 information matrix is not positive definite") {
		t.Errorf("StrictInfo: %v", err)
	}
}

// TestReadDisconnected checks that a graph in pieces is read (the caller
// decides what to do) and that Validate reports it.
func TestReadDisconnected(t *testing.T) {
	g := mustRead(t, "VERTEX_SE2 9 0 0 0\nVERTEX_SE2 0 0 0 0\nVERTEX_SE2 1 1 0 0\nEDGE_SE2 0 1 1 0 0 1 0 0 1 0 1\n", ReadOptions{})
	if err := g.Validate(); !posegraph.IsDisconnected(err) {
		t.Errorf("Validate: %v, want disconnected", err)
	}
}

// TestReadEdgeStoreSizing reads the same files from an input that can be
// read at an offset (whose lines left size the edge store at the first
// edge) and from one that cannot (the estimate from the bytes left): the
// graphs must be the same, with edges before, after and among the
// vertices, more than a chunk of them, and a last line without its end.
func TestReadEdgeStoreSizing(t *testing.T) {
	var vfirst, mixed, longFirst strings.Builder
	// More than the reader's 64 KB buffer and several of the counting's
	// 32 KB reads, with vertex lines across their boundaries.
	const n = 6000
	for i := range n {
		fmt.Fprintf(&vfirst, "VERTEX_SE2 %d %d 0 0\n", i, i)
	}
	for i := range n - 1 {
		e := fmt.Sprintf("EDGE_SE2 %d %d 1 0 0.01 1 0 0 1 0 1\n", i, i+1)
		vfirst.WriteString(e)
		fmt.Fprintf(&mixed, "VERTEX_SE2 %d %d 0 0\n%s", i, i, e)
		if i == 0 {
			// A long first edge line: the byte estimate runs short.
			e = fmt.Sprintf("EDGE_SE2 %d %d 1.000000000000 0.00000000000 0.0100000000000000 1 0 0 1 0 1\n", i, i+1)
		}
		longFirst.WriteString(e)
	}
	fmt.Fprintf(&mixed, "VERTEX_SE2 %d 0 0 0", n-1)
	for name, src := range map[string]string{"vertices first": vfirst.String(), "mixed": mixed.String(), "long first edge": longFirst.String()} {
		atOffset, err := Read(strings.NewReader(src), "t", ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		stream, err := Read(struct{ io.Reader }{strings.NewReader(src)}, "t", ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(atOffset.Edges) != n-1 || !reflect.DeepEqual(atOffset, stream) {
			t.Errorf("%s: %d edges; the graphs read at an offset and as a stream differ", name, len(atOffset.Edges))
		}
		if name == "vertices first" && cap(atOffset.Edges) > n {
			t.Errorf("%s: %d edges in a store for %d: the edges were not counted", name, len(atOffset.Edges), cap(atOffset.Edges))
		}
	}
}

// TestReadRepeatedInfo checks the reading of runs of edges with the same
// information matrix, which share one array and one check: each edge gets
// the precisions of its own values (a matrix that differs only in the
// sign of a zero is its own), an indefinite matrix is counted once per
// edge, and an invalid one after a run is still an error on its line.
func TestReadRepeatedInfo(t *testing.T) {
	src := "EDGE_SE2 0 1 1 0 0 1 0 5 1 0 1\n" +
		"EDGE_SE2 1 2 1 0 0 1 0 5 1 0 1\n" +
		"EDGE_SE2 2 3 1 0 0 4 0 0 4 0 2\n" +
		"EDGE_SE2 3 4 1 0 0 4 -0 0 4 0 2\n" +
		"EDGE_SE2 4 5 1 0 0 4 0 0 4 0 2\n" +
		"EDGE_SE2 5 6 1 0 0 1 0 5 1 0 1\n"
	var warns []string
	g := mustRead(t, src, ReadOptions{Warn: func(m string) { warns = append(warns, m) }})
	for k, e := range g.Edges {
		kappa, tau, err := SE2Precisions(e.Info)
		if err != nil || e.Kappa != kappa || e.Tau != tau {
			t.Errorf("edge %d: kappa, tau = %g, %g; its matrix gives %g, %g (%v)", k, e.Kappa, e.Tau, kappa, tau, err)
		}
	}
	if &g.Edges[0].Info[0] != &g.Edges[1].Info[0] || &g.Edges[2].Info[0] == &g.Edges[3].Info[0] {
		t.Errorf("edges 0 and 1 should share their matrix, 2 and 3 (0 and -0) should not")
	}
	if !math.Signbit(g.Edges[3].Info[1]) || math.Signbit(g.Edges[4].Info[1]) {
		t.Errorf("Info[1] of edges 3 and 4: %g, %g; want -0, 0", g.Edges[3].Info[1], g.Edges[4].Info[1])
	}
	if len(warns) != 1 || !strings.HasPrefix(warns[0], "test.g2o:1: 3 edge(s)") {
		t.Errorf("warnings %q", warns)
	}
	_, err := Read(strings.NewReader(src+"EDGE_SE2 6 7 1 0 0 1 0 5 1 0 0\n"), "test.g2o", ReadOptions{})
	if err == nil || !strings.HasPrefix(err.Error(), "test.g2o:7: EDGE_SE2: ") {
		t.Errorf("zero kappa after a run: %v", err)
	}
}

// TestRecordsLeft counts the vertices and edges of a file from its first
// line, vertex lines running across the counting's reads.
func TestRecordsLeft(t *testing.T) {
	var b strings.Builder
	const n = 5000
	for i := range n {
		fmt.Fprintf(&b, "VERTEX_SE2 %d %d 0.%d 0\n", i, i, i*i)
	}
	for i := range n - 1 {
		fmt.Fprintf(&b, "EDGE_SE2 %d %d 1 0 0.01 1 0 0 1 0 1\n", i, i+1)
	}
	r := strings.NewReader(b.String())
	p := parser{name: "t", src: r, br: bufio.NewReaderSize(r, MaxLineLength)}
	line, _ := p.br.ReadSlice('\n')
	p.left, p.lineLen = int64(b.Len()), len(line)
	p.fields = [][]byte{line[:len("VERTEX_SE2")]}
	verts, edges, ok := p.recordsLeft()
	if !ok || verts != n || edges != n {
		t.Errorf("recordsLeft = %d, %d, %v; want %d vertices, %d edges (one more: a last line may lack its end)", verts, edges, ok, n, n)
	}
}
