package g2o

import (
	"bytes"
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
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := Read(bytes.NewReader(data), "fuzz", ReadOptions{Lenient: len(data)%2 == 0})
		if err != nil {
			if g != nil {
				t.Fatal("graph and error both returned")
			}
			return
		}
		if err := g.Validate(); err != nil && !posegraph.IsDisconnected(err) {
			t.Fatalf("Read accepted an invalid graph: %v", err)
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
