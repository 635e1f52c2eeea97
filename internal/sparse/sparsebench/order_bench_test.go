package sparsebench_test

import (
	"flag"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/g2o"
	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
)

// largeOrder adds the 10^6-pose lattice (side 100) to BenchmarkOrder; the
// graph alone takes seconds to build and the symbolic analyses about a
// gigabyte.
var largeOrder = flag.Bool("bcmsync.large-order", false, "also order the 10^6-pose lattice in BenchmarkOrder")

// orderings are the block orderings compared by BenchmarkOrder.
var orderings = []struct {
	name  string
	order func(q *sparse.BlockSym, drop int) []int
}{
	{"BlockAMD", sparse.BlockAMD},
	{"ND", sparse.NestedDissection},
	{"BlockOrder", sparse.BlockOrder},
}

// BenchmarkOrder times the fill-reducing orderings of Q (pose blocks) and
// of the rotation Laplacian (rotation blocks) on the scaling lattices of
// sync's BenchmarkScalingGrid3D (datasets.Cube, side 22 and 46, and 100
// with -bcmsync.large-order) and on every graph of the benchmark suite,
// and reports the fill and work of the factor each ordering gives:
// nnzL/pose (nonzeros of L per pose, i.e. per block) and flops of the numeric
// factorization, from the symbolic analysis of Q + I. BlockFactorCost
// times the symbolic count that BlockOrder compares the orderings by.
//
//	go test ./internal/sparse/sparsebench -run '^$' -bench Order -benchtime 1x
func BenchmarkOrder(b *testing.B) {
	sides := []int{22, 46}
	if *largeOrder {
		sides = append(sides, 100)
	}
	cfg := datasets.Config{Kappa: 200, Tau: 100, LoopProb: 0.05, Seed: 1}
	for _, side := range sides {
		g, _, err := datasets.Cube(side, side, side, cfg)
		if err != nil {
			b.Fatal(err)
		}
		benchOrder(b, fmt.Sprintf("cube%d", side), g)
	}
	dir := suiteDir(b)
	refs, err := datasets.ReadReference(filepath.Join(dir, "REFERENCE.tsv"))
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range refs {
		g, err := g2o.ReadFile(filepath.Join(dir, r.File), g2o.ReadOptions{Lenient: true})
		if err != nil {
			b.Fatal(err)
		}
		benchOrder(b, r.File, g)
	}
}

func benchOrder(b *testing.B, name string, g *posegraph.Graph) {
	for _, p := range []struct {
		name string
		pr   posegraph.Problem
	}{{"Q", posegraph.Poses}, {"rot", posegraph.Rotations}} {
		q := g.Laplacian(p.pr)
		a := sparse.LowerCSC(q, 1, 0)
		// The symbolic count BlockOrder compares orderings by.
		b.Run(name+"/"+p.name+"/BlockFactorCost", func(b *testing.B) {
			perm := sparse.BlockAMD(q, 0)
			for b.Loop() {
				sparse.BlockFactorCost(q, 0, perm)
			}
		})
		for _, o := range orderings {
			b.Run(name+"/"+p.name+"/"+o.name, func(b *testing.B) {
				var perm []int
				for b.Loop() {
					perm = o.order(q, 0)
				}
				ch, err := sparse.Analyze(a, perm)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(ch.NNZ())/float64(q.N), "nnzL/pose")
				b.ReportMetric(ch.Flops(), "flops")
			})
		}
	}
}

// BenchmarkOrderFactor times the numeric factorization of Q + I under
// BlockAMD and NestedDissection on the 10^5-pose lattice (and the 10^6 one
// with -bcmsync.large-order) and on the suite graphs where the two are
// closest, to check that the flop
// counts BlockOrder compares translate into time: dissection's large
// dense separators run faster per flop, minimum degree's small supernodes
// slower.
//
//	go test ./internal/sparse/sparsebench -run '^$' -bench OrderFactor -benchtime 2x
func BenchmarkOrderFactor(b *testing.B) {
	cfg := datasets.Config{Kappa: 200, Tau: 100, LoopProb: 0.05, Seed: 1}
	sides := []int{46}
	if *largeOrder {
		sides = append(sides, 100)
	}
	graphs := map[string]*posegraph.Graph{}
	var names []string
	for _, side := range sides {
		g, _, err := datasets.Cube(side, side, side, cfg)
		if err != nil {
			b.Fatal(err)
		}
		name := fmt.Sprintf("cube%d", side)
		graphs[name] = g
		names = append(names, name)
	}
	if dir, err := datasets.SuiteDir(); err == nil {
		for _, name := range []string{"city10000", "torus3D", "cubicle", "sphere2500"} {
			g, err := g2o.ReadFile(filepath.Join(dir, name+".g2o"), g2o.ReadOptions{Lenient: true})
			if err != nil {
				b.Fatal(err)
			}
			graphs[name] = g
			names = append(names, name)
		}
	}
	for _, name := range names {
		q := graphs[name].Laplacian(posegraph.Poses)
		a := sparse.LowerCSC(q, 1, 0)
		for _, o := range orderings[:2] {
			b.Run(name+"/"+o.name, func(b *testing.B) {
				ch, err := sparse.Analyze(a, o.order(q, 0))
				if err != nil {
					b.Fatal(err)
				}
				for b.Loop() {
					if err := ch.Factorize(a); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(ch.Flops(), "flops")
				b.ReportMetric(float64(ch.NNZ()), "nnzL")
				b.ReportMetric(float64(ch.Supernodes()), "supernodes")
				b.ReportMetric(ch.Flops()*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFlop/s")
			})
			// The same factor from the block matrix, as the solver
			// makes it: each supernode assembled where it is factored
			// instead of one scatter of the CSC.
			b.Run(name+"/"+o.name+"/blocks", func(b *testing.B) {
				ch, err := sparse.AnalyzeBlocks(q, o.order(q, 0))
				if err != nil {
					b.Fatal(err)
				}
				for b.Loop() {
					if err := ch.FactorizeBlocks(q, 1); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(ch.Flops()*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFlop/s")
			})
		}
	}
}
