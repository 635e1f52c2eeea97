package sparsebench_test

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/bcmsync/bcmsync/g2o"
	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
)

// BenchmarkReorder replays intel and city10000 in 50 steps as `bcmsync
// replay` feeds them (poses in id order, each with the edges whose ends
// have arrived) and, at every step, orders Q of the graph so far twice:
// afresh (BlockOrder) and by ReorderBlocks from the last step's kept
// order. It reports the kept order's factor cost over the fresh one's
// (BlockOrder's model, flops + 100 nnz(L)) at the median, the last step
// and the worst, the share of the blocks reordered, and the time of each
// way of ordering summed over the steps.
//
//	go test ./internal/sparse/sparsebench -run '^$' -bench Reorder -benchtime 1x
func BenchmarkReorder(b *testing.B) {
	dir := suiteDir(b)
	for _, name := range []string{"intel", "city10000"} {
		g, err := g2o.ReadFile(filepath.Join(dir, name+".g2o"), g2o.ReadOptions{})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				benchReorder(b, g, 50)
			}
		})
	}
}

// prefixGraph is g's first n poses in id order (renumbered 0..n-1 in
// that order) with the edges between them, and the edges it has that the
// prefix of m < n poses lacks.
func prefixGraph(g *posegraph.Graph, byID, at []int, n int) *posegraph.Graph {
	p := &posegraph.Graph{D: g.D, IDs: make([]int, n)}
	for k := 0; k < n; k++ {
		p.IDs[k] = g.IDs[byID[k]]
	}
	for _, e := range g.Edges {
		i, j := at[e.I], at[e.J]
		if i < n && j < n {
			e.I, e.J = i, j
			p.Edges = append(p.Edges, e)
		}
	}
	return p
}

func benchReorder(b *testing.B, g *posegraph.Graph, steps int) {
	n := g.N()
	byID := make([]int, n)
	for i := range byID {
		byID[i] = i
	}
	slices.SortStableFunc(byID, func(x, y int) int { return g.IDs[x] - g.IDs[y] })
	at := make([]int, n)
	for k, v := range byID {
		at[v] = k
	}
	cost := func(q *sparse.BlockSym, perm []int) float64 {
		nnz, flops := sparse.BlockFactorCost(q, 0, perm)
		return flops + 100*float64(nnz)
	}
	var ratios []float64
	var tFresh, tKept time.Duration
	reordered, blocks := 0, 0
	var prev, parent []int
	for s := 1; s <= steps; s++ {
		m := s * n / steps
		pg := prefixGraph(g, byID, at, m)
		q := pg.Laplacian(posegraph.Poses)
		t0 := time.Now()
		fresh := sparse.BlockOrder(q, 0)
		tFresh += time.Since(t0)
		if prev == nil {
			sym, err := sparse.AnalyzeBlockPattern(q, fresh)
			if err != nil {
				b.Fatal(err)
			}
			prev, parent = sym.Tree()
			continue
		}
		touched := make([]bool, m)
		old := len(prev)
		for _, e := range pg.Edges {
			if e.I >= old || e.J >= old {
				touched[e.I], touched[e.J] = true, true
			}
		}
		t0 = time.Now()
		kept, r, err := sparse.ReorderBlocks(q, prev, parent, touched)
		if err != nil {
			b.Fatal(err)
		}
		sym, err := sparse.AnalyzeBlockPattern(q, kept)
		tKept += time.Since(t0)
		if err != nil {
			b.Fatal(err)
		}
		prev, parent = sym.Tree()
		reordered += r
		blocks += m
		ratios = append(ratios, cost(q, kept)/cost(q, fresh))
		if testing.Verbose() {
			b.Logf("step %d: %d poses, reordered %d, kept/fresh cost %.3f", s, m, r, ratios[len(ratios)-1])
		}
	}
	lastRatio := ratios[len(ratios)-1]
	slices.Sort(ratios)
	b.ReportMetric(ratios[len(ratios)/2], "kept/fresh_p50")
	b.ReportMetric(lastRatio, "kept/fresh_last")
	b.ReportMetric(ratios[len(ratios)-1], "kept/fresh_max")
	b.ReportMetric(float64(reordered)/float64(blocks), "reordered")
	b.ReportMetric(tFresh.Seconds(), "fresh_order_s")
	b.ReportMetric(tKept.Seconds(), "kept_order+analysis_s")
}
