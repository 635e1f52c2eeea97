package sparse

import (
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
)

// boxBlockSym is the 7-point pattern of an sx x sy x sz lattice, wrapping
// around in every direction when wrap is set, with b x b blocks of random
// values made positive definite by a dominant diagonal. A torus has no
// small separator at the top: its root separator holds more than a third
// of the factorization's work, the case splitFiner is for; some boxes
// leave one subtree below a small top with most of the work.
func boxBlockSym(rng *rand.Rand, sx, sy, sz, b int, wrap bool) *BlockSym {
	nb := sx * sy * sz
	bb := NewBlockBuilder(nb, b)
	blk := make([]float64, b*b)
	id := func(x, y, z int) int { return (z%sz*sy+y%sy)*sx + x%sx }
	for z := 0; z < sz; z++ {
		for y := 0; y < sy; y++ {
			for x := 0; x < sx; x++ {
				i := id(x, y, z)
				for dir, j := range []int{id(x+1, y, z), id(x, y+1, z), id(x, y, z+1)} {
					// (A side shorter than 3 does not wrap: its edges would
					// repeat or loop.)
					if (dir == 0 && x+1 == sx && (!wrap || sx < 3)) || (dir == 1 && y+1 == sy && (!wrap || sy < 3)) ||
						(dir == 2 && z+1 == sz && (!wrap || sz < 3)) {
						continue
					}
					for k := range blk {
						blk[k] = rng.NormFloat64()
					}
					if i < j {
						bb.AddOff(i, j, blk)
					} else {
						bb.AddOff(j, i, blk)
					}
				}
				clear(blk)
				for a := 0; a < b; a++ {
					blk[a*b+a] = 8*float64(b) + rng.Float64()
				}
				bb.AddDiag(i, blk)
			}
		}
	}
	return bb.Build()
}

// replayCases are matrices whose factors have a finer split (xtasks) or
// top supernodes whose updates two goroutines share (topsplit.go): tori
// under both orderings, boxes where the finer split moves supernodes of
// the split's tasks to the top below its own top supernodes, a box whose
// top has a thin update (by Dgemm), and a random sparse graph of several
// components.
func replayCases() []struct {
	name string
	q    *BlockSym
	perm []int
} {
	rng := rand.New(rand.NewPCG(28, 2))
	torus := boxBlockSym(rng, 8, 8, 8, 3, true)
	torus6 := boxBlockSym(rng, 6, 6, 6, 2, true)
	slab := boxBlockSym(rng, 16, 5, 5, 3, false)
	bar := boxBlockSym(rng, 20, 6, 3, 3, false)
	scalar := boxBlockSym(rng, 10, 10, 10, 1, true)
	thin := boxBlockSym(rng, 30, 8, 3, 4, false)
	random := randomBlockSym(rng, 300, 3, 0.012, 1)
	return []struct {
		name string
		q    *BlockSym
		perm []int
	}{
		{"torus 8^3 AMD", torus, BlockAMD(torus, 0)},
		{"torus 8^3 ND", torus, NestedDissection(torus, 0)},
		{"torus 6^3", torus6, BlockAMD(torus6, 0)},
		{"box 16x5x5", slab, BlockAMD(slab, 0)},
		{"box 20x6x3", bar, BlockAMD(bar, 0)},
		{"scalar torus 10^3", scalar, NestedDissection(scalar, 0)},
		{"box 30x8x3 b=4", thin, NestedDissection(thin, 0)},
		{"random", random, BlockAMD(random, 0)},
	}
}

// withProcs runs f with GOMAXPROCS set to n.
func withProcs(n int, f func()) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(n))
	f()
}

// TestReplaySameBits checks that the factorization on the finer split
// (two threads) gives the factor of the split that fixes the sums (one
// thread) bit for bit, and the same solves, plain and modified; that the
// finer split ran; and, on the small torus, the factor against gonum's
// dense Cholesky.
func TestReplaySameBits(t *testing.T) {
	interleaved := false
	splits, thin := 0, 0
	defer func() {
		if !interleaved {
			t.Error("no case has supernodes of the split's tasks on the finer top below its own top")
		}
		t.Logf("%d top supernodes' updates split between two goroutines, %d updates by Dgemm among them", splits, thin)
		if hasFMA() && (splits == 0 || thin == 0) {
			t.Error("no case split a top supernode's updates, or none had an update by Dgemm")
		}
	}()
	for _, tc := range replayCases() {
		serial, err := AnalyzeBlocks(tc.q, tc.perm)
		if err != nil {
			t.Fatal(err)
		}
		parallel, err := AnalyzeBlocks(tc.q, tc.perm)
		if err != nil {
			t.Fatal(err)
		}
		if inner := len(parallel.sn.xtop) - len(parallel.sn.top); len(parallel.sn.top) > 0 && inner > 0 {
			interleaved = true
		}
		t.Logf("%s: %d columns, split %d tasks + %d on top, finer %d + %d", tc.name, parallel.sn.n(),
			len(parallel.sn.tasks), len(parallel.sn.top), len(parallel.sn.xtasks), len(parallel.sn.xtop))
		rhs := make([]float64, serial.n)
		for i := range rhs {
			rhs[i] = math.Sin(float64(3 * i))
		}
		xs, xp := make([]float64, serial.n), make([]float64, serial.n)
		for _, shift := range []float64{0.5, 0} {
			withProcs(1, func() { err = serial.FactorizeBlocks(tc.q, shift) })
			if err != nil {
				t.Fatal(err)
			}
			before, splitsBefore := parallel.sn.replays, parallel.sn.splits
			splits, thin = splits-parallel.sn.splits, thin-parallel.sn.thin
			withProcs(2, func() { err = parallel.FactorizeBlocks(tc.q, shift) })
			splits, thin = splits+parallel.sn.splits, thin+parallel.sn.thin
			if err != nil {
				t.Fatal(err)
			}
			if parallel.sn.xtasks != nil && parallel.sn.replays != before+1 {
				t.Fatalf("%s: the factorization on two threads did not run the finer split", tc.name)
			}
			// This call's own counts (the fields add up over calls); the
			// updates are split only where the helper runs (hasFMA).
			ran := parallel.sn.replays > before || parallel.sn.splits > splitsBefore
			if !ran && hasFMA() {
				t.Fatalf("%s shift %g: neither a finer split nor split updates: the case checks nothing", tc.name, shift)
			}
			if !sameBits(serial.sn.val, parallel.sn.val) {
				t.Fatalf("%s shift %g: the factors differ", tc.name, shift)
			}
			serial.Solve(xs, rhs)
			withProcs(2, func() { parallel.Solve(xp, rhs) })
			if !sameBits(xs, xp) {
				t.Fatalf("%s shift %g: the solves differ", tc.name, shift)
			}
		}
		if tc.q.N*tc.q.B <= 500 {
			checkFactor(t, parallel, tc.q)
		}
		// A modified factorization of an indefinite matrix: the same
		// pivots raised, the same factor.
		neg := indefiniteCopy(tc.q, 7)
		var rs, rp int
		var es, ep error
		withProcs(1, func() { rs, es = serial.FactorizeBlocksModified(neg, 0, 1e-3, 1e6) })
		withProcs(2, func() { rp, ep = parallel.FactorizeBlocksModified(neg, 0, 1e-3, 1e6) })
		if es != nil || ep != nil || rs == 0 || rs != rp || !sameBits(serial.sn.val, parallel.sn.val) {
			t.Fatalf("%s modified: raised %d (%v) on one thread, %d (%v) on two, same factor %v", tc.name, rs, es, rp, ep,
				sameBits(serial.sn.val, parallel.sn.val))
		}
	}
}

// TestReplayFirstFailure checks that a failing factorization on the finer
// split reports the pivot one thread meets first, however its tasks
// interleave, whichever tasks fail.
func TestReplayFirstFailure(t *testing.T) {
	for _, tc := range replayCases() {
		c, err := AnalyzeBlocks(tc.q, tc.perm)
		if err != nil {
			t.Fatal(err)
		}
		for _, every := range []int{3, 11, 40} {
			neg := indefiniteCopy(tc.q, every)
			var want, got error
			withProcs(1, func() { want = c.FactorizeBlocks(neg, 0) })
			var w *NotPositiveDefiniteError
			if !errors.As(want, &w) {
				t.Fatalf("%s: one thread: %v, want a failed pivot", tc.name, want)
			}
			for range 5 {
				withProcs(2, func() { got = c.FactorizeBlocks(neg, 0) })
				var g *NotPositiveDefiniteError
				if !errors.As(got, &g) || *g != *w {
					t.Fatalf("%s every %d: two threads: %v, one thread: %v", tc.name, every, got, want)
				}
			}
		}
	}
}

// indefiniteCopy is q with the first diagonal entry of every every-th
// block negated.
func indefiniteCopy(q *BlockSym, every int) *BlockSym {
	neg := *q
	neg.Val = slices.Clone(q.Val)
	for i := 0; i < q.N; i += every {
		neg.Val[q.Diag[i]*q.B*q.B] *= -1
	}
	return &neg
}

func sameBits(a, b []float64) bool {
	return slices.EqualFunc(a, b, func(x, y float64) bool { return math.Float64bits(x) == math.Float64bits(y) })
}

// BenchmarkFactorTop factors lattices whose top holds much of the work:
// tori, where the split of splitTasks keeps one task and the finer split
// runs (factorReplay), and a long box, whose top supernodes' updates two
// goroutines share (topsplit.go). Run with -cpu 1,2 to see the second
// core's share:
//
//	go test ./internal/sparse -run '^$' -bench FactorTop -cpu 1,2
func BenchmarkFactorTop(b *testing.B) {
	rng := rand.New(rand.NewPCG(28, 3))
	for _, bc := range []struct {
		name       string
		sx, sy, sz int
		bs         int
		wrap       bool
	}{
		{"torus12^3b3", 12, 12, 12, 3, true},
		{"torus16^3b1", 16, 16, 16, 1, true},
		{"box40x10x6b4", 40, 10, 6, 4, false},
	} {
		q := boxBlockSym(rng, bc.sx, bc.sy, bc.sz, bc.bs, bc.wrap)
		c, err := AnalyzeBlocks(q, BlockAMD(q, 0))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if err := c.FactorizeBlocks(q, 0); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(c.Flops()*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFlop/s")
		})
	}
}
