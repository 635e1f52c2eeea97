package g2o

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
)

// TestByteOrderMark: a leading UTF-8 byte-order mark is skipped by every
// reader, from a file, a seekable reader and a stream alike, and lines
// are still counted from the first.
func TestByteOrderMark(t *testing.T) {
	const bom = "\xef\xbb\xbf"
	const graph = "VERTEX_SE2 0 0 0 0\nVERTEX_SE2 1 1 0 0\nEDGE_SE2 0 1 1 0 0 1 0 0 1 0 1\n"
	want, err := Read(strings.NewReader(graph), "plain", ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "bom.g2o")
	if err := os.WriteFile(path, []byte(bom+graph), 0o644); err != nil {
		t.Fatal(err)
	}
	readers := map[string]func() (io.Reader, func()){
		"file": func() (io.Reader, func()) {
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			return f, func() { f.Close() }
		},
		"seeker": func() (io.Reader, func()) { return strings.NewReader(bom + graph), func() {} },
		"stream": func() (io.Reader, func()) { return iotest.OneByteReader(strings.NewReader(bom + graph)), func() {} },
	}
	for name, open := range readers {
		r, done := open()
		g, err := Read(r, name, ReadOptions{})
		done()
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if g.N() != want.N() || g.M() != want.M() || g.Edges[0].Line != 3 || g.Edges[0].T != want.Edges[0].T {
			t.Errorf("%s: read n=%d m=%d line %d, want n=%d m=%d line 3", name, g.N(), g.M(), g.Edges[0].Line, want.N(), want.M())
		}
	}
	if g, err := ReadFile(path, ReadOptions{}); err != nil || g.M() != 1 {
		t.Errorf("ReadFile: %v", err)
	}
	// Errors keep their line numbers.
	_, err = Read(strings.NewReader(bom+"VERTEX_SE2 0 0 0 0\nEDGE_SE2 0 1 x\n"), "bad.g2o", ReadOptions{})
	if err == nil || !strings.HasPrefix(err.Error(), "bad.g2o:2:") {
		t.Errorf("error %v, want bad.g2o:2:", err)
	}
	// A file of fewer than three bytes, or that only starts like a mark,
	// is read as it is.
	for _, src := range []string{"", "\xef", "\xef\xbb", "\xef\xbbX"} {
		_, err := Read(iotest.OneByteReader(strings.NewReader(src)), "short", ReadOptions{})
		if err == nil {
			t.Errorf("%q: no error", src)
		}
	}
	if tr, err := ReadVertices(strings.NewReader(bom+graph), "v", ReadOptions{}); err != nil || len(tr.Poses) != 2 {
		t.Errorf("ReadVertices: %v", err)
	}
	if tr, err := ReadTUM(iotest.OneByteReader(strings.NewReader(bom+"1 0 0 0 0 0 0 1\n")), "t.tum"); err != nil || len(tr.Poses) != 1 {
		t.Errorf("ReadTUM: %v", err)
	}
}
