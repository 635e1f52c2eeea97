package bcm

import (
	"context"
	"testing"
	"time"

	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
)

// TestSmallGrid3D: from a random start at rank 5, BCM reaches RelGradNorm
// 1e-6 on smallGrid3D, and F is then no lower than the certified optimum of
// REFERENCE.tsv (the rank-5 relaxation is tight there).
func TestSmallGrid3D(t *testing.T) {
	g := loadG2O(t, "smallGrid3D.g2o")
	if g.N() != 125 || g.M() != 297 {
		t.Fatalf("read n=%d m=%d, want 125, 297", g.N(), g.M())
	}
	q := g.Laplacian(posegraph.Poses)
	s := New(q, 3, posegraph.Poses)
	x := sparse.NewBlocks(5, q.B, q.N)
	RandomStiefel(x, 3, 1)
	res, err := s.Solve(context.Background(), x, Options{Rule: Parallel, GradTol: 1e-6, MaxSweeps: 200000, MaxTime: 40 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%v after %d sweeps, %v: F = %.10g, rel grad %.3g", res.Status, res.Sweeps, res.Elapsed, res.F, res.RelGradNorm)
	if res.Status != GradientConverged {
		t.Fatalf("stopped by %v at RelGradNorm %g", res.Status, res.RelGradNorm)
	}
	const fStar = 1025.39802075
	if res.F < fStar*(1-1e-6) {
		t.Fatalf("F = %.10g below the certified optimum %.10g", res.F, fStar)
	}
}
