package cli

import (
	"path/filepath"
	"testing"

	"github.com/bcmsync/bcmsync/datasets"
)

// TestGenerateCorridor: generate corridor writes datasets.Corridor's graph
// and truth, and takes only its own size flags.
func TestGenerateCorridor(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "corridor.g2o")
	code, _, stderr := runCmd("generate", "corridor", "-n", "400", "--segment", "50", "--gap", "20",
		"--kappa", "300", "--tau", "2000", "--loop-prob", "0.7", "--seed", "5", "-o", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	want, truth, err := datasets.Corridor(400, 50, 20, datasets.Config{Kappa: 300, Tau: 2000, LoopProb: 0.7, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	checkGenerated(t, "corridor", out, filepath.Join(dir, "corridor.gt.g2o"), want, truth, 1e-12)
	if code, _, _ := runCmd("generate", "corridor", "--side", "5", "-o", out); code != 2 {
		t.Errorf("--side accepted for corridor: exit %d", code)
	}
}
