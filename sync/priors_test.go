package sync

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/bcmsync/bcmsync/posegraph"
)

// priorGraph is noisyGraph seen from a random world frame G: np priors on
// random poses measure their true poses G x_i (the first a pose prior when
// withPose, the others positions, GPS-like) with noise sigmaP. It returns
// the graph, with its world vertex at index n, the truth in the world
// frame (the world vertex the identity) and G.
func priorGraph(d, n, closures, np int, withPose bool, sigmaP float64, seed uint64) (*posegraph.Graph, []posegraph.Pose, posegraph.Pose) {
	g, truth := noisyGraph(d, n, closures, 0.02, 0.03, seed)
	rng := rand.New(rand.NewPCG(seed, 55))
	var w [3]float64
	for a := range w {
		w[a] = 2 * rng.NormFloat64()
	}
	world := posegraph.Pose{R: rotation(d, w)}
	for a := 0; a < d; a++ {
		world.T[a] = 20 * rng.NormFloat64()
	}
	inWorld := make([]posegraph.Pose, n+1)
	for i := 0; i < n; i++ {
		inWorld[i] = posegraph.Compose(&world, &truth[i], d)
	}
	inWorld[n] = posegraph.Identity(d)
	var ps []posegraph.Prior
	for k := 0; k < np; k++ {
		i := rng.IntN(n)
		p := posegraph.Prior{Kind: posegraph.PositionPrior, Pose: i, Tau: 1 / (sigmaP * sigmaP)}
		if k == 0 && withPose {
			var nw [3]float64
			for a := range nw {
				nw[a] = sigmaP * rng.NormFloat64()
			}
			p.Kind, p.R, p.Kappa = posegraph.PosePrior, mul(d, inWorld[i].R, rotation(d, nw)), 1/(2*sigmaP*sigmaP)
		}
		for a := 0; a < d; a++ {
			p.T[a] = inWorld[i].T[a] + sigmaP*rng.NormFloat64()
		}
		ps = append(ps, p)
	}
	return g.WithPriors(ps), inWorld, world
}

// The certified optimum with priors is the brute-force local solve from
// the truth in the world frame (F and every pose), it comes out in the
// world frame (the world vertex at the identity), and the dual bound is
// below it: with position priors alone (the world vertex placed by
// placeWorld) and with a pose prior among them, in 2-D and 3-D.
func TestSolvePriorsMatchesLocalSolve(t *testing.T) {
	for _, d := range []int{2, 3} {
		for _, withPose := range []bool{false, true} {
			for seed := uint64(1); seed <= 2; seed++ {
				name := fmt.Sprintf("d=%d/pose=%v/seed=%d", d, withPose, seed)
				g, truth, _ := priorGraph(d, 15, 4, 5, withPose, 0.3, seed+10*uint64(d))
				if err := g.Validate(); err != nil {
					t.Fatal(err)
				}
				w := g.World()
				res, err := Solve(context.Background(), g, Options{Seed: seed, Threads: 1})
				if err != nil {
					t.Fatal(err)
				}
				if !res.Certified {
					t.Fatalf("%s: %s (min eig %g, bound %g)", name, res.Status, res.MinEigenvalue, res.SuboptimalityBound)
				}
				id := posegraph.Identity(d)
				for k := 0; k < d*d; k++ {
					if math.Abs(res.Poses[w].R[k]-id.R[k]) > 1e-12 {
						t.Fatalf("%s: world vertex at %v, not the identity", name, res.Poses[w])
					}
				}
				if math.Abs(res.Poses[w].T[0])+math.Abs(res.Poses[w].T[1]) > 1e-9 {
					t.Fatalf("%s: world vertex at %v, not the identity", name, res.Poses[w])
				}
				local := localSolve(t, g, truth)
				fl := g.Cost(local, posegraph.Poses)
				if math.Abs(res.Objective-fl) > 1e-7*fl {
					t.Fatalf("%s: certified F = %.12g, local solve %.12g", name, res.Objective, fl)
				}
				if res.DualBound > fl*(1+1e-9) {
					t.Fatalf("%s: dual bound %.12g above the local optimum %.12g", name, res.DualBound, fl)
				}
				for i := range local {
					for a := 0; a < d; a++ {
						if dt := math.Abs(res.Poses[i].T[a] - local[i].T[a]); dt > 1e-4 {
							t.Fatalf("%s: pose %d t differs by %g", name, i, dt)
						}
					}
					for k := 0; k < d*d; k++ {
						if dr := math.Abs(res.Poses[i].R[k] - local[i].R[k]); dr > 1e-4 {
							t.Fatalf("%s: pose %d R differs by %g", name, i, dr)
						}
					}
				}
			}
		}
	}
}

// Rotation synchronization uses the pose priors' rotations and drops the
// position priors; with position priors alone it drops the world vertex.
func TestSolvePriorsRotations(t *testing.T) {
	for _, withPose := range []bool{false, true} {
		g, _, _ := priorGraph(3, 15, 4, 4, withPose, 0.1, 3)
		res, err := Solve(context.Background(), g, Options{Problem: posegraph.Rotations, Seed: 1, Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Certified {
			t.Fatalf("pose=%v: %s", withPose, res.Status)
		}
		h := res.Graph
		for _, e := range h.Edges {
			if e.Prior == posegraph.PositionPrior {
				t.Fatalf("pose=%v: a position prior is left in the rotation problem", withPose)
			}
		}
		if withPose {
			if w := h.World(); w != 15 || h.N() != 16 || res.Poses[w].R != posegraph.Identity(3).R {
				t.Fatalf("world %d of %d vertices at %v", w, h.N(), res.Poses[w].R)
			}
			// The estimate is in the world frame: the prior's pose agrees
			// with its measured rotation to about its noise.
			p := h.Priors()[0]
			rt := mul(3, transpose(3, p.R), res.Poses[p.Pose].R)
			if ang := math.Acos(math.Min(1, (rt[0]+rt[4]+rt[8]-1)/2)); ang > 0.5 {
				t.Fatalf("pose %d is %.3g rad from its prior", p.Pose, ang)
			}
		} else if h.World() != -1 || h.N() != 15 || len(res.Poses) != 15 {
			t.Fatalf("position priors alone: world %d, %d vertices, %d poses", h.World(), h.N(), len(res.Poses))
		}
	}
}

// Replay sends the world vertex with the first prior, so that each prior arrives with its
// pose, and the replayed graph solves to the whole graph's certified
// optimum.
func TestReplayPriors(t *testing.T) {
	g, _, _ := priorGraph(2, 30, 5, 6, true, 0.2, 4)
	w := g.World()
	batches, err := Replay(g, 4)
	if err != nil {
		t.Fatal(err)
	}
	// The world vertex arrives with the first prior, and each prior with
	// its pose.
	arrived := map[int]int{}
	firstPrior := -1
	for s, b := range batches {
		for _, id := range b.Poses {
			arrived[id] = s
		}
		for _, e := range b.Edges {
			if e.Prior != posegraph.NoPrior {
				if arrived[e.J] != s {
					t.Fatalf("prior on %d sent at step %d, its pose at step %d", e.J, s, arrived[e.J])
				}
				if firstPrior < 0 {
					firstPrior = s
				}
			}
		}
	}
	if ws, ok := arrived[g.IDs[w]]; !ok || ws != firstPrior {
		t.Fatalf("world vertex sent at step %d (sent: %v), the first prior at step %d", ws, ok, firstPrior)
	}
	inc, err := NewIncremental(2, Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	var last *Result
	for _, b := range batches {
		if err := b.Add(inc); err != nil {
			t.Fatal(err)
		}
		if last, err = inc.Solve(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	whole, err := Solve(context.Background(), g, Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !last.Certified || !whole.Certified || math.Abs(last.Objective-whole.Objective) > 1e-7*whole.Objective {
		t.Fatalf("replayed %s F=%.12g, whole %s F=%.12g", last.Status, last.Objective, whole.Status, whole.Objective)
	}
}

// planarGPSGraph is a 3-D ground vehicle: a chain of poses turning about
// z only, on the plane z = 0, with precise odometry and GPS-like position
// priors (noise 0.5) every sixth pose, and, when kappa > 0, a pose prior
// of that precision on the first pose.
func planarGPSGraph(seed uint64, kappa float64) *posegraph.Graph {
	rng := rand.New(rand.NewPCG(seed, 1))
	n := 60
	truth := make([]posegraph.Pose, n)
	truth[0] = posegraph.Identity(3)
	for i := 1; i < n; i++ {
		truth[i].R = mul(3, truth[i-1].R, rotation(3, [3]float64{0, 0, 0.3 * rng.NormFloat64()}))
		for a := 0; a < 3; a++ {
			truth[i].T[a] = truth[i-1].T[a] + truth[i-1].R[a*3]
		}
	}
	g := &posegraph.Graph{D: 3}
	for i := 0; i < n; i++ {
		g.IDs = append(g.IDs, i)
	}
	for i := 0; i+1 < n; i++ {
		rel := posegraph.Between(&truth[i], &truth[i+1], 3)
		var w [3]float64
		for a := range w {
			w[a] = 0.01 * rng.NormFloat64()
		}
		e := posegraph.Edge{I: i, J: i + 1, R: mul(3, rel.R, rotation(3, w)), T: rel.T, Kappa: 5000, Tau: 400}
		for a := 0; a < 3; a++ {
			e.T[a] += 0.05 * rng.NormFloat64()
		}
		g.Edges = append(g.Edges, e)
	}
	var ps []posegraph.Prior
	if kappa > 0 {
		ps = append(ps, posegraph.Prior{Kind: posegraph.PosePrior, Pose: 0, R: truth[0].R, T: truth[0].T, Kappa: kappa, Tau: 4})
	}
	for i := 0; i < n; i += 6 {
		p := posegraph.Prior{Kind: posegraph.PositionPrior, Pose: i, Tau: 4, T: truth[i].T}
		for a := 0; a < 3; a++ {
			p.T[a] += 0.5 * rng.NormFloat64()
		}
		ps = append(ps, p)
	}
	return g.WithPriors(ps)
}

// GPS fixes on a plane (a ground vehicle in 3-D) leave the relaxation
// free to mirror the world frame through that plane, since the world
// vertex's rotation relaxes to O(3) and only the fixes see it: such a
// solve may end with a bound instead of a certificate (docs/priors.md),
// but never certifies a point the bound does not cover. One pose prior,
// even a loose one, couples the world frame's orientation to the poses'
// and the solves certify.
func TestSolvePlanarGPS(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		g := planarGPSGraph(seed, 0)
		res, err := Solve(context.Background(), g, Options{Threads: 1, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		if res.Certified && res.SuboptimalityBound > res.GapAllowed {
			t.Fatalf("seed %d: certified with bound %g above the allowance %g", seed, res.SuboptimalityBound, res.GapAllowed)
		}
		if !res.HasBound || res.DualBound > res.Objective*(1+1e-9) {
			t.Fatalf("seed %d: %s, bound %v %g above F %g", seed, res.Status, res.HasBound, res.DualBound, res.Objective)
		}
		g = planarGPSGraph(seed, 100)
		if res, err = Solve(context.Background(), g, Options{Threads: 1, Seed: seed}); err != nil {
			t.Fatal(err)
		}
		if !res.Certified {
			t.Fatalf("seed %d with a pose prior: %s (bound %g)", seed, res.Status, res.SuboptimalityBound)
		}
	}
}
