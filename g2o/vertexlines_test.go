package g2o

import (
	"strings"
	"testing"
)

// TestVertexLines: the graph keeps each vertex's VERTEX line, through the
// reordering that puts landmarks last, so that CheckScale can name it.
func TestVertexLines(t *testing.T) {
	src := "# a comment\n" +
		"VERTEX_SE2 1 0 0 0\n" + // line 2
		"VERTEX_XY 0 1 1\n" + // line 3: a landmark with the smallest id
		"VERTEX_SE2 2 1 0 0\n" + // line 4
		"EDGE_SE2 1 2 1 0 0 1 0 0 1 0 1\n" +
		"EDGE_SE2_XY 1 0 1 1 1 0 1\n"
	g, err := Read(strings.NewReader(src), "lm.g2o", ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]int{1: 2, 2: 4, 0: 3}
	for i, id := range g.IDs {
		if g.VertexLines[i] != want[id] {
			t.Errorf("vertex %d: line %d, want %d", id, g.VertexLines[i], want[id])
		}
	}
	if !g.IsLandmark(len(g.IDs) - 1) {
		t.Fatal("the landmark is not last")
	}
	// A file without VERTEX lines has none.
	g, err = Read(strings.NewReader("EDGE_SE2 0 1 1 0 0 1 0 0 1 0 1\n"), "e.g2o", ReadOptions{})
	if err != nil || g.VertexLines != nil {
		t.Errorf("edges only: VertexLines %v, err %v", g.VertexLines, err)
	}
	// A VERTEX line beyond what double precision can compute with is
	// refused at that line by validation.
	g, err = Read(strings.NewReader("VERTEX_SE2 0 0 0 0\nVERTEX_SE2 1 1e200 0 0\nEDGE_SE2 0 1 1 0 0 1 0 0 1 0 1\n"), "far.g2o", ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Validate(); err == nil || !strings.HasPrefix(err.Error(), "far.g2o:2: vertex 1's position") {
		t.Errorf("Validate: %v", err)
	}
}
