package datasets

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/bcmsync/bcmsync/g2o"
)

// TestOutlierSidecarRoundTrip writes a graph with outliers as g2o, reads it
// back, writes the sidecar and reads that back: the mask is the one
// AddOutliers returned, in 2-D and 3-D.
func TestOutlierSidecarRoundTrip(t *testing.T) {
	for _, d := range []int{2, 3} {
		g, _, err := Geometric(d, 60, 2, Config{Kappa: 100, Tau: 50, LoopProb: 0.5, Seed: 7})
		if err != nil {
			t.Fatal(err)
		}
		g, mask, err := AddOutliers(g, OutlierConfig{Fraction: 0.2, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		var gb bytes.Buffer
		if err := g2o.Write(&gb, g, nil); err != nil {
			t.Fatal(err)
		}
		back, err := g2o.Read(bytes.NewReader(gb.Bytes()), "g.g2o", g2o.ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var sb bytes.Buffer
		if err := WriteOutliers(&sb, "g.g2o", back, mask); err != nil {
			t.Fatal(err)
		}
		recs, err := ReadOutliers(bytes.NewReader(sb.Bytes()), "g.outliers.txt")
		if err != nil {
			t.Fatal(err)
		}
		got, err := OutlierMask(back, recs, "g.outliers.txt")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, mask) {
			t.Errorf("d=%d: mask differs after the round trip", d)
		}
		// Independently of the reader: every listed line of the g2o text is
		// an EDGE record between the listed ids.
		lines := strings.Split(gb.String(), "\n")
		for _, r := range recs {
			f := strings.Fields(lines[r.Line-1])
			if !strings.HasPrefix(f[0], "EDGE_") || f[1] != itoa(r.I) || f[2] != itoa(r.J) {
				t.Errorf("d=%d: line %d is %q, not an edge %d-%d", d, r.Line, lines[r.Line-1], r.I, r.J)
			}
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestOutlierSidecarErrors: bad sidecars name their own line.
func TestOutlierSidecarErrors(t *testing.T) {
	g, err := g2o.Read(strings.NewReader("EDGE_SE2 0 1 1 0 0 1 0 0 1 0 1\nEDGE_SE2 1 2 1 0 0 1 0 0 1 0 1\n"), "g.g2o", g2o.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ src, want string }{
		{"# c\n2 0 1 extra\n", "s:2: 4 fields"},
		{"x 0 1\n", "s:1: field 1 (\"x\") is not an integer"},
		{"0 0 1\n", "s:1: line number 0 is not positive"},
		{"2 0 1\n2 0 1\n", "s:2: line 2 is listed twice (first at line 1)"},
		{"\n5 0 1\n", "s:2: g.g2o has no EDGE record at line 5"},
		{"2 0 1\n", "s:1: the edge at g.g2o:2 joins 1 and 2, not 0 and 1"},
	} {
		recs, err := ReadOutliers(strings.NewReader(c.src), "s")
		if err == nil {
			_, err = OutlierMask(g, recs, "s")
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.src, err, c.want)
		}
	}
	mask, err := OutlierMask(g, []OutlierEdge{{Line: 2, I: 1, J: 2, At: 1}}, "s")
	if err != nil || !slices.Equal(mask, []bool{false, true}) {
		t.Errorf("valid record: %v %v", mask, err)
	}
}
