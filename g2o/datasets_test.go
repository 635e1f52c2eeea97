package g2o

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/bcmsync/bcmsync/posegraph"
)

// TestDatasets reads every benchmark graph, checks d, n, m against
// REFERENCE.tsv and the graph's validity, and that writing and reading it
// back reproduces it.
func TestDatasets(t *testing.T) {
	dir := dataDir(t)
	for _, r := range reference(t, dir) {
		t.Run(r.file, func(t *testing.T) {
			g, err := ReadFile(filepath.Join(dir, r.file), ReadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if g.D != r.d || g.N() != r.n || g.M() != r.m {
				t.Errorf("d, n, m = %d, %d, %d; REFERENCE.tsv says %d, %d, %d", g.D, g.N(), g.M(), r.d, r.n, r.m)
			}
			if err := g.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
			var buf bytes.Buffer
			if err := Write(&buf, g, nil); err != nil {
				t.Fatal(err)
			}
			h, err := Read(&buf, "written", ReadOptions{})
			if err != nil {
				t.Fatalf("reading what Write wrote: %v", err)
			}
			if msg := sameGraph(g, h, 1e-14); msg != "" {
				t.Error(msg)
			}
		})
	}
}

var _ = posegraph.Identity
