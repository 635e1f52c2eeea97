package datasets

import (
	"math"
	"reflect"
	"testing"

	"github.com/bcmsync/bcmsync/posegraph"
)

// Mixed's graphs have the shape its configuration asks for: the odometry
// chain, distinct non-adjacent closures, every weight within its range,
// one connected component, and the same bits for the same seed.
func TestMixedStructure(t *testing.T) {
	for _, cfg := range []MixedConfig{
		{D: 2, N: 2, MinWeight: 10, MaxWeight: 1e6, Seed: 1},
		{D: 3, N: 3, Closures: 1, MinWeight: 10, MaxWeight: 1e6, Seed: 2},
		{D: 2, N: 40, Closures: 60, MinWeight: 1, MaxWeight: 1, Seed: 3},
		{D: 3, N: 60, Closures: 120, MinWeight: 10, MaxWeight: 1e6, Seed: 4},
	} {
		g, truth, err := Mixed(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Validate(); err != nil {
			t.Fatalf("%+v: %v", cfg, err)
		}
		if g.D != cfg.D || g.N() != cfg.N || len(truth) != cfg.N || g.M() != cfg.N-1+cfg.Closures || len(g.Components()) != 1 {
			t.Fatalf("%+v: d=%d n=%d m=%d truth %d, %d components", cfg, g.D, g.N(), g.M(), len(truth), len(g.Components()))
		}
		seen := map[[2]int]bool{}
		for k, e := range g.Edges {
			if k < cfg.N-1 && (e.I != k || e.J != k+1) {
				t.Fatalf("%+v: edge %d is (%d, %d), want the chain's (%d, %d)", cfg, k, e.I, e.J, k, k+1)
			}
			if k >= cfg.N-1 && (e.J-e.I < 2 || seen[[2]int{e.I, e.J}]) {
				t.Fatalf("%+v: closure %d (%d, %d) is adjacent or repeated", cfg, k, e.I, e.J)
			}
			seen[[2]int{e.I, e.J}] = true
			for _, w := range []float64{e.Kappa, e.Tau} {
				if !(w >= cfg.MinWeight*(1-1e-12) && w <= cfg.MaxWeight*(1+1e-12)) {
					t.Fatalf("%+v: edge %d weight %g outside [%g, %g]", cfg, k, w, cfg.MinWeight, cfg.MaxWeight)
				}
			}
		}
		checkChain(t, g, truth, math.Inf(1))
		again, _, _ := Mixed(cfg)
		if !reflect.DeepEqual(g, again) {
			t.Fatalf("%+v: not deterministic", cfg)
		}
	}
	for _, cfg := range []MixedConfig{
		{D: 4, N: 5, MinWeight: 1, MaxWeight: 1}, {D: 2, N: 1, MinWeight: 1, MaxWeight: 1},
		{D: 2, N: 4, Closures: 4, MinWeight: 1, MaxWeight: 1}, {D: 2, N: 4, MinWeight: 0, MaxWeight: 1},
		{D: 2, N: 4, MinWeight: 2, MaxWeight: 1}, {D: 2, N: 4, MinWeight: 1, MaxWeight: math.Inf(1)},
	} {
		if _, _, err := Mixed(cfg); err == nil {
			t.Errorf("%+v: no error", cfg)
		}
	}
}

// The measurements are drawn at their stated weights: over many graphs,
// F at the truth matches ExpectedCost (each edge at its own kappa and tau)
// to a few standard deviations, and the weights are log-uniform (half of
// them below the geometric mean of the range). NoiseFree graphs are exact.
func TestMixedNoiseAtStatedWeights(t *testing.T) {
	sumF, sumMean, sumVar := 0.0, 0.0, 0.0
	low, all := 0, 0
	// 100 graphs: ExpectedCost integrates each distinct kappa's angle
	// moments, here one per edge.
	for seed := uint64(1); seed <= 100; seed++ {
		cfg := RandomConsistent(seed)
		g, truth, err := Mixed(cfg)
		if err != nil {
			t.Fatal(err)
		}
		mean, variance := ExpectedCost(g, posegraph.Poses)
		sumF += g.Cost(truth, posegraph.Poses)
		sumMean += mean
		sumVar += variance
		for _, e := range g.Edges {
			for _, w := range []float64{e.Kappa, e.Tau} {
				all++
				if w < math.Sqrt(cfg.MinWeight*cfg.MaxWeight) {
					low++
				}
			}
		}
		cfg.NoiseFree = true
		exact, truth, _ := Mixed(cfg)
		if f := exact.Cost(truth, posegraph.Poses); f > 1e-18*sumMean {
			t.Fatalf("seed %d: noise-free graph has F(truth) = %g", seed, f)
		}
	}
	if z := (sumF - sumMean) / math.Sqrt(sumVar); math.Abs(z) > 4 {
		t.Errorf("F at the truth summed over the graphs: %.1f, expected %.1f +- %.1f (z = %.1f)", sumF, sumMean, math.Sqrt(sumVar), z)
	}
	if z := (float64(low) - float64(all)/2) / math.Sqrt(float64(all)/4); math.Abs(z) > 4 {
		t.Errorf("%d of %d weights below the range's geometric mean (z = %.1f)", low, all, z)
	}
}

// RandomConsistent spans the population it describes: both dimensions,
// 3 to 60 poses, trees and graphs with up to two closures per pose,
// weights from 10 to 1e6.
func TestRandomConsistentPopulation(t *testing.T) {
	dims := map[int]bool{}
	minN, maxN, trees := 1000, 0, 0
	for seed := uint64(1); seed <= 200; seed++ {
		c := RandomConsistent(seed)
		dims[c.D] = true
		minN, maxN = min(minN, c.N), max(maxN, c.N)
		if c.Closures == 0 {
			trees++
		}
		if c.N < 3 || c.N > 60 || c.Closures > 2*c.N || c.MinWeight != 10 || c.MaxWeight != 1e6 || c.Seed != seed {
			t.Fatalf("seed %d: %+v", seed, c)
		}
	}
	if !dims[2] || !dims[3] || minN > 5 || maxN < 55 || trees == 0 {
		t.Errorf("dimensions %v, n in [%d, %d], %d trees: the population is not covered", dims, minN, maxN, trees)
	}
}
