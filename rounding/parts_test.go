package rounding

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bcmsync/bcmsync/posegraph"
)

// TestRoundByParts: the rounding made by parts (each part its own blocks,
// the coordinator the sums and the boundary system) equals the central
// rounding and translation recovery to 1e-9, for points at ranks d to
// d+2 mixed by a random orthogonal matrix and perturbed, on random graphs
// split into 1 to 5 parts by runs and at random.
func TestRoundByParts(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 30))
	for _, d := range []int{2, 3} {
		for _, n := range []int{2, 7, 60} {
			g, truth := randomGraph(rng, d, n, n, 0.05, 0.1)
			for _, r := range []int{d, d + 2} {
				x := g.Lift(truth, posegraph.Poses, r)
				for k := range x.Data {
					x.Data[k] += 0.05 * rng.NormFloat64()
				}
				want := RoundMasked(x, d, nil)
				if err := RecoverTranslations(g, want); err != nil {
					t.Fatal(err)
				}
				for _, K := range []int{1, 2, 5} {
					for _, random := range []bool{false, true} {
						part := make([]int, n)
						for i := range part {
							part[i] = i * K / n
							if random {
								part[i] = rng.IntN(K)
							}
						}
						got, err := RoundByParts(g, x, part)
						if err != nil {
							t.Fatal(err)
						}
						for i := range got {
							for c := 0; c < d*d; c++ {
								if math.Abs(got[i].R[c]-want[i].R[c]) > 1e-9 {
									t.Fatalf("d=%d n=%d r=%d K=%d: R[%d] differs: %v, central %v", d, n, r, K, i, got[i].R, want[i].R)
								}
							}
							for a := 0; a < d; a++ {
								if math.Abs(got[i].T[a]-want[i].T[a]) > 1e-9*(1+math.Abs(want[i].T[a])) {
									t.Fatalf("d=%d n=%d r=%d K=%d: T[%d] differs: %v, central %v", d, n, r, K, i, got[i].T, want[i].T)
								}
							}
						}
					}
				}
			}
		}
	}
}
