package sparsebench_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/g2o"
	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
)

// suiteDir finds the benchmark graphs (skipped, or failed under CI, when
// they are missing).
func suiteDir(tb testing.TB) string {
	tb.Helper()
	return datasets.SuiteOrSkip(tb)
}

var datasetNames = []string{"parking-garage", "sphere2500", "torus3D", "cubicle", "city10000", "intel"}

// shiftedQ returns Q + 1e-6 * max diag * I in lower CSC form.
func shiftedQ(q *sparse.BlockSym) *sparse.CSC {
	m := 0.0
	for i := 0; i < q.N; i++ {
		blk := q.Block(q.Diag[i])
		for a := 0; a < q.B; a++ {
			m = math.Max(m, blk[a*q.B+a])
		}
	}
	return sparse.LowerCSC(q, 1e-6*m, 0)
}

func BenchmarkDataset(b *testing.B) {
	dir := suiteDir(b)
	for _, name := range datasetNames {
		g, err := g2o.ReadFile(filepath.Join(dir, name+".g2o"), g2o.ReadOptions{Lenient: true})
		if err != nil {
			b.Fatal(err)
		}
		q := g.Laplacian(posegraph.Poses)
		a := shiftedQ(q)
		benchFactor(b, name, q, a)
	}
}

func benchFactor(b *testing.B, name string, q *sparse.BlockSym, a *sparse.CSC) {
	orderings := []struct {
		name string
		perm func() []int
	}{
		{"BlockAMD", func() []int { return sparse.BlockAMD(q, 0) }},
		{"AMD", func() []int { return sparse.AMD(a) }},
		{"ND", func() []int { return sparse.NestedDissection(q, 0) }},
	}
	for _, o := range orderings {
		b.Run(name+"/"+o.name+"/analyze", func(b *testing.B) {
			for b.Loop() {
				if _, err := sparse.Analyze(a, o.perm()); err != nil {
					b.Fatal(err)
				}
			}
		})
		ch, err := sparse.Analyze(a, o.perm())
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name+"/"+o.name+"/factor", func(b *testing.B) {
			for b.Loop() {
				if err := ch.Factorize(a); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(ch.NNZ()), "nnzL")
			b.ReportMetric(float64(ch.Supernodes()), "supernodes")
			b.ReportMetric(ch.Flops()*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFlop/s")
		})
		if o.name != "BlockAMD" {
			continue
		}
		x := make([]float64, a.N)
		rhs := make([]float64, a.N)
		for i := range rhs {
			rhs[i] = math.Sin(float64(i))
		}
		b.Run(name+"/solve", func(b *testing.B) {
			for b.Loop() {
				ch.Solve(x, rhs)
			}
		})
	}
	const r = 5
	xb := sparse.NewBlocks(r, q.B, q.N)
	for i := range xb.Data {
		xb.Data[i] = math.Cos(float64(i))
	}
	dst := sparse.NewBlocks(r, q.B, q.N)
	for _, th := range []int{1, 2} {
		b.Run(fmt.Sprintf("%s/MulBlocks/r=%d/threads=%d", name, r, th), func(b *testing.B) {
			for b.Loop() {
				q.MulBlocksParallel(dst, xb, th)
			}
		})
	}
}

// gridGraph builds a 3-D pose graph on a kx x ky x kz lattice: odometry
// along a snake path through the lattice and edges to lattice neighbours
// with probability p, random rotations, measurements consistent with the
// poses.
func gridGraph(kx, ky, kz int, p float64, seed uint64) *posegraph.Graph {
	rng := rand.New(rand.NewPCG(seed, 99))
	n := kx * ky * kz
	// Snake order: pose k sits at lattice site site[k].
	pos := make([][3]int, 0, n)
	for z := 0; z < kz; z++ {
		for yy := 0; yy < ky; yy++ {
			y := yy
			if z%2 == 1 {
				y = ky - 1 - yy
			}
			for xx := 0; xx < kx; xx++ {
				x := xx
				if (z*ky+yy)%2 == 1 {
					x = kx - 1 - xx
				}
				pos = append(pos, [3]int{x, y, z})
			}
		}
	}
	index := make(map[[3]int]int, n)
	for k, s := range pos {
		index[s] = k
	}
	poses := make([]posegraph.Pose, n)
	for k := range poses {
		w, x, y, z := rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()
		s := math.Sqrt(w*w + x*x + y*y + z*z)
		w, x, y, z = w/s, x/s, y/s, z/s
		poses[k].R = [9]float64{
			1 - 2*(y*y+z*z), 2 * (x*y - w*z), 2 * (x*z + w*y),
			2 * (x*y + w*z), 1 - 2*(x*x+z*z), 2 * (y*z - w*x),
			2 * (x*z - w*y), 2 * (y*z + w*x), 1 - 2*(x*x+y*y),
		}
		for a := 0; a < 3; a++ {
			poses[k].T[a] = float64(pos[k][a])
		}
	}
	g := &posegraph.Graph{D: 3, IDs: make([]int, n)}
	for i := range g.IDs {
		g.IDs[i] = i
	}
	add := func(i, j int) {
		e := posegraph.Edge{I: i, J: j, Kappa: 100, Tau: 10}
		ri, rj := poses[i].R, poses[j].R
		for a := 0; a < 3; a++ {
			for c := 0; c < 3; c++ {
				s := 0.0
				for k := 0; k < 3; k++ {
					s += ri[k*3+a] * rj[k*3+c]
				}
				e.R[a*3+c] = s
			}
			s := 0.0
			for k := 0; k < 3; k++ {
				s += ri[k*3+a] * (poses[j].T[k] - poses[i].T[k])
			}
			e.T[a] = s
		}
		g.Edges = append(g.Edges, e)
	}
	for k := 0; k+1 < n; k++ {
		add(k, k+1)
	}
	for k, s := range pos {
		for d := 0; d < 3; d++ {
			t := s
			t[d]++
			j, ok := index[t]
			if !ok || j == k+1 || j == k-1 || rng.Float64() >= p {
				continue
			}
			add(min(k, j), max(k, j))
		}
	}
	return g
}

// BenchmarkGrid100k factors Q + I for a 47x47x46 lattice of poses. Run it
// once (-benchtime 1x); it reports the factor's nonzeros and the peak heap.
func BenchmarkGrid100k(b *testing.B) {
	g := gridGraph(47, 47, 46, 0.3, 1)
	q := g.Laplacian(posegraph.Poses)
	a := sparse.LowerCSC(q, 1, 0)
	b.Logf("grid: %d poses, %d edges, order %d, nnz(A) %d", g.N(), g.M(), a.N, a.NNZ())
	for b.Loop() {
		// Analyse with both orderings (cheap next to the numeric work)
		// and keep the one with fewer flops.
		var ch *sparse.Cholesky
		var t1 time.Time
		for _, o := range []struct {
			name string
			perm func() []int
		}{{"BlockAMD", func() []int { return sparse.BlockAMD(q, 0) }}, {"NestedDissection", func() []int { return sparse.NestedDissection(q, 0) }}} {
			t0 := time.Now()
			c, err := sparse.Analyze(a, o.perm())
			if err != nil {
				b.Fatal(err)
			}
			t1 = time.Now()
			b.Logf("%s analysis %v: nnz(L) %d, %d supernodes, %.3g flops", o.name, t1.Sub(t0), c.NNZ(), c.Supernodes(), c.Flops())
			if ch == nil || c.Flops() < ch.Flops() {
				ch = c
			}
		}
		if os.Getenv("BCMSYNC_ANALYZE_ONLY") != "" {
			continue
		}
		if err := ch.Factorize(a); err != nil {
			b.Fatal(err)
		}
		b.Logf("numeric factorization %v", time.Since(t1))
		b.ReportMetric(float64(ch.NNZ()), "nnzL")
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapSys)/(1<<20), "heapMiB")
}
