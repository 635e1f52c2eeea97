package g2o

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/bcmsync/bcmsync/posegraph"
)

// FuzzRead checks that Read never panics, and that whatever it accepts is a
// valid graph (up to connectivity) that survives Write and Read unchanged.
// The seed corpus is in testdata/fuzz/FuzzRead; run it longer with
//
//	go test -run XXX -fuzz FuzzRead ./g2o
func FuzzRead(f *testing.F) {
	f.Add([]byte("VERTEX_SE2 0 0 0 0\nEDGE_SE2 0 1 1 0 0.1 1 0 0 1 0 1\n"))
	f.Add([]byte("EDGE_SE3:QUAT 3 1 1 2 3 0 0 0.6 0.8 1 0 0 0 0 0 1 0 0 0 0 1 0 0 0 1 0 0 1 0 1\nFIX 1\n"))
	f.Add([]byte("PARAMS_SE3OFFSET 0 0.5 -1 2 0.1 0.2 0.3 0.9\nEDGE_SE3:QUAT 3 1 1 2 3 0 0 0.6 0.8 1 0 0 0 0 0 1 0 0 0 0 1 0 0 0 1 0 0 1 0 1\n" +
		"EDGE_SE3_PRIOR 1 0 5 6 7 0 0 0.6 0.8 4 0.5 0 0 0 0 4 0 0 0 0 4 0 0 0 10 0 0 10 0 10\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := Read(bytes.NewReader(data), "fuzz", ReadOptions{Lenient: len(data)%2 == 0})
		if err != nil {
			if g != nil {
				t.Fatal("graph and error both returned")
			}
			return
		}
		// Read checks each record; what only the whole graph shows (a
		// disconnected graph, weights too far apart for double precision,
		// priors that leave the world frame's rotation free) is
		// Validate's, which solvers run. Its refusal must name the input
		// ("fuzz" or "fuzz:LINE"), as a user's file would be named.
		if err := g.Validate(); err != nil && !posegraph.IsDisconnected(err) && !strings.HasPrefix(err.Error(), "fuzz") {
			t.Fatalf("Read accepted a graph whose refusal does not name the file: %v", err)
		}
		var buf bytes.Buffer
		if err := Write(&buf, g, nil); err != nil {
			t.Fatalf("Write: %v", err)
		}
		h, err := Read(&buf, "written", ReadOptions{})
		if err != nil {
			t.Fatalf("reading what Write wrote: %v\n%s", err, buf.String())
		}
		if msg := sameGraph(g, h, 1e-12); msg != "" {
			t.Fatalf("write-then-read changed the graph: %s", msg)
		}
	})
}

// FuzzReadTrajectory checks that ReadTUM and ReadVertices never panic, and
// that a TUM trajectory they accept survives WriteTUM and ReadTUM: the same
// stamps and poses to rounding (stamps that are integers, as WriteTUM
// writes vertex ids). Run it longer with
//
//	go test -run XXX -fuzz FuzzReadTrajectory ./g2o
func FuzzReadTrajectory(f *testing.F) {
	f.Add([]byte("0 0 0 0 0 0 0 1\n1 1 2 3 0.1 0.2 0.3 0.9\n"))
	f.Add([]byte("# c\n5 1e3 -2 0 0 0 1 0\r\n\n7\t0 0 0 1 0 0 0 # x\n"))
	f.Add([]byte("VERTEX_SE2 3 1 2 0.5\nVERTEX_SE2 1 0 0 0\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if tr, err := ReadVertices(bytes.NewReader(data), "fuzz", ReadOptions{Lenient: len(data)%2 == 0}); err == nil {
			if len(tr.Poses) == 0 || len(tr.Stamps) != len(tr.Poses) || len(tr.Lines) != len(tr.Poses) {
				t.Fatalf("inconsistent trajectory %+v", tr)
			}
		}
		tr, err := ReadTUM(bytes.NewReader(data), "fuzz")
		if err != nil {
			if tr != nil {
				t.Fatal("trajectory and error both returned")
			}
			return
		}
		g := &posegraph.Graph{D: 3}
		for _, s := range tr.Stamps {
			if s != math.Trunc(s) || math.Abs(s) > 1<<52 {
				return // WriteTUM writes integer ids only
			}
			g.IDs = append(g.IDs, int(s))
		}
		var buf bytes.Buffer
		if err := WriteTUM(&buf, g, tr.Poses); err != nil {
			t.Fatalf("WriteTUM: %v", err)
		}
		back, err := ReadTUM(&buf, "written")
		if err != nil {
			t.Fatalf("reading what WriteTUM wrote: %v\n%s", err, buf.String())
		}
		for k := range tr.Poses {
			if back.Stamps[k] != tr.Stamps[k] {
				t.Fatalf("stamp %v became %v", tr.Stamps[k], back.Stamps[k])
			}
			p, q := tr.Poses[k], back.Poses[k]
			for a := range p.R {
				if math.Abs(p.R[a]-q.R[a]) > 1e-12 {
					t.Fatalf("pose %d rotation changed: %v -> %v", k, p.R, q.R)
				}
			}
			if p.T != q.T {
				t.Fatalf("pose %d position changed: %v -> %v", k, p.T, q.T)
			}
		}
	})
}
