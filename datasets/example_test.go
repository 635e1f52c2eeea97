package datasets_test

import (
	"fmt"
	"log"
	"math"

	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/posegraph"
)

// A graph with the shape of sphere2500, its ground truth, and the cost of
// the truth compared with what the noise model predicts.
func ExampleSphere() {
	g, truth, err := datasets.Sphere(50, 50, datasets.Config{Kappa: 100, Tau: 10, LoopProb: 1, Seed: 1})
	if err != nil {
		log.Fatal(err)
	}
	mean, variance := datasets.ExpectedCost(g, posegraph.Poses)
	z := (g.Cost(truth, posegraph.Poses) - mean) / math.Sqrt(variance)
	fmt.Printf("n=%d m=%d, F(truth) within 4 sd of its mean: %v\n", g.N(), g.M(), math.Abs(z) < 4)
	// Output: n=2500 m=4949, F(truth) within 4 sd of its mean: true
}

// Without noise the measurements are exact: the truth costs nothing, and
// the dead-reckoning initial estimate is the truth.
func ExampleConfig_noiseFree() {
	g, truth, err := datasets.Cube(5, 5, 5, datasets.Config{Kappa: 1, Tau: 1, LoopProb: 0.3, NoiseFree: true})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("F(truth) < 1e-20: %v, F(initial) < 1e-20: %v\n",
		g.Cost(truth, posegraph.Poses) < 1e-20, g.Cost(g.Initial, posegraph.Poses) < 1e-20)
	// Output: F(truth) < 1e-20: true, F(initial) < 1e-20: true
}

// The per-edge cost statistics behind ExpectedCost: for large kappa the
// rotation term's mean tends to the dimension of SO(d).
func ExampleEdgeCostMoments() {
	for _, kappa := range []float64{1, 100, 1e6} {
		m2, _ := datasets.EdgeCostMoments(2, kappa, posegraph.Rotations)
		m3, _ := datasets.EdgeCostMoments(3, kappa, posegraph.Rotations)
		fmt.Printf("kappa=%-7g SO(2) %.4f  SO(3) %.4f\n", kappa, m2, m3)
	}
	// Output:
	// kappa=1       SO(2) 1.2089  SO(3) 3.3824
	// kappa=100     SO(2) 1.0013  SO(3) 3.0038
	// kappa=1e+06   SO(2) 1.0000  SO(3) 3.0000
}

func ExampleDemo() {
	g, err := datasets.Demo()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: d=%d n=%d m=%d\n", g.Source, g.D, g.N(), g.M())
	// Output: demo.g2o: d=2 n=250 m=394
}

// A 2-D grid world with landmarks: each of 200 points around the walk is
// seen by the poses within range 3 (at most 8), and F(truth) matches the
// noise model, observations included (each is chi-squared with d degrees
// of freedom).
func ExampleAddLandmarks() {
	cfg := datasets.Config{Kappa: 500, Tau: 400, LoopProb: 0.3, Seed: 1}
	g, truth, err := datasets.Manhattan(1000, 20, cfg)
	if err != nil {
		log.Fatal(err)
	}
	g, truth, err = datasets.AddLandmarks(g, truth, datasets.LandmarkConfig{N: 200, Range: 3, MaxObservers: 8, Tau: 100, Seed: 1})
	if err != nil {
		log.Fatal(err)
	}
	mean, variance := datasets.ExpectedCost(g, posegraph.Poses)
	z := (g.Cost(truth, posegraph.Poses) - mean) / math.Sqrt(variance)
	fmt.Printf("%d poses, %d landmarks, valid: %v, F(truth) within 4 sd of its mean: %v\n",
		g.NumPoses(), g.NumLandmarks(), g.Validate() == nil, math.Abs(z) < 4)
	// Output: 1000 poses, 200 landmarks, valid: true, F(truth) within 4 sd of its mean: true
}

// ExampleMixed draws one graph of the random consistent population: its
// size and weights come from the seed, and its measurements are noisy at
// exactly those weights.
func ExampleMixed() {
	cfg := datasets.RandomConsistent(7)
	g, truth, err := datasets.Mixed(cfg)
	if err != nil {
		panic(err)
	}
	fmt.Printf("d=%d n=%d m=%d closures=%d, weights in [%g, %g], %d true poses\n",
		g.D, g.N(), g.M(), cfg.Closures, cfg.MinWeight, cfg.MaxWeight, len(truth))
	// Output: d=2 n=51 m=100 closures=50, weights in [10, 1e+06], 51 true poses
}
