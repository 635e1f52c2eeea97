package bcm

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
)

// withLandmarks appends nl landmarks to g, each observed from 1 to 3
// random poses with random measurements and precisions.
func withLandmarks(rng *rand.Rand, g *posegraph.Graph, nl int) *posegraph.Graph {
	d, n := g.D, g.N()
	g.Landmark = make([]bool, n, n+nl)
	for k := 0; k < nl; k++ {
		g.IDs = append(g.IDs, 1000+k)
		g.Landmark = append(g.Landmark, true)
		for o := 1 + rng.IntN(3); o > 0; o-- {
			e := posegraph.Edge{I: rng.IntN(n), J: n + k, R: posegraph.Identity(d).R, Tau: 0.5 + 1.5*rng.Float64()}
			for a := 0; a < d; a++ {
				e.T[a] = 2 * rng.NormFloat64()
			}
			g.Edges = append(g.Edges, e)
		}
	}
	return g
}

// With landmark blocks every rule still obeys the descent identity against
// the dense oracle, never moves a landmark's Y, and the landmarks'
// gradient is zero in Y; every rule moves the landmarks' positions
// (importance sampling included, whose ||H||_* is 0 there).
func TestLandmarkBlocks(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	for d := 2; d <= 3; d++ {
		for _, r := range []int{d, d + 2} {
			g := withLandmarks(rng, randomGraph(rng, d, 10, 6, 0.2), 8)
			if err := g.Validate(); err != nil {
				t.Fatal(err)
			}
			np := g.NumPoses()
			q := g.Laplacian(posegraph.Poses)
			s := New(q, d, posegraph.Poses)
			b := q.B
			for _, rule := range allRules {
				x := sparse.NewBlocks(r, b, q.N)
				RandomStiefel(x, d, rng.Uint64())
				x0 := append([]float64(nil), x.Data...)
				prev := denseCost(q, x)
				s.onStep = func(i int, dec float64) {
					f := denseCost(q, x)
					if diff := (prev - f) - dec; math.Abs(diff) > 1e-9*math.Max(1, math.Abs(prev)) {
						t.Fatalf("d=%d r=%d %v: block %d: F fell by %v, identity says %v", d, r, rule, i, prev-f, dec)
					}
					prev = f
				}
				if _, err := s.Solve(context.Background(), x, Options{Rule: rule, Threads: 2, MaxSweeps: 3, Seed: 5}); err != nil {
					t.Fatal(err)
				}
				moved := 0
				for i := np; i < q.N; i++ {
					blk, old := x.Block(i), x0[i*r*b:(i+1)*r*b]
					for a := 0; a < r; a++ {
						for c := 0; c < d; c++ {
							if blk[a*b+c] != old[a*b+c] {
								t.Fatalf("d=%d r=%d %v: landmark %d's Y changed", d, r, rule, i)
							}
						}
						if blk[a*b+d] != old[a*b+d] {
							moved++
						}
					}
				}
				if moved == 0 {
					t.Fatalf("d=%d r=%d %v: no landmark position moved", d, r, rule)
				}
				grad := sparse.NewBlocks(r, b, q.N)
				s.Gradient(grad, x)
				for i := np; i < q.N; i++ {
					blk := grad.Block(i)
					for a := 0; a < r; a++ {
						for c := 0; c < d; c++ {
							if blk[a*b+c] != 0 {
								t.Fatalf("d=%d r=%d %v: landmark %d has Y gradient %g", d, r, rule, i, blk[a*b+c])
							}
						}
					}
				}
			}
			s.onStep = nil
		}
	}
}
