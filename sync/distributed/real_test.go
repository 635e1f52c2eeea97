package distributed

import (
	"path/filepath"
	"testing"

	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/g2o"
	"github.com/bcmsync/bcmsync/posegraph"
)

// The benchmark graphs split into 2, 4 and 8 contiguous parts (DPGO's
// split of single-robot graphs) reach the central optimum and certificate.
func TestBenchmarkGraphsParts(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	dir := datasets.SuiteOrSkip(t)
	for _, name := range []string{"intel.g2o", "sphere2500.g2o"} {
		g, err := g2o.ReadFile(filepath.Join(dir, name), g2o.ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []int{2, 4, 8} {
			p, err := Contiguous(g.N(), k)
			if err != nil {
				t.Fatal(err)
			}
			t.Run(name, func(t *testing.T) { compare(t, g, p, posegraph.Poses) })
		}
	}
}
