package sparse

import (
	"github.com/bcmsync/bcmsync/internal/fpfuse"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSplitTasks checks that the subtree split covers every supernode
// exactly once, that tasks are closed under descendants, and that a 2-D
// grid is split into several tasks (so the concurrent path is exercised by
// the external tests on it).
func TestSplitTasks(t *testing.T) {
	a := gridCSCInternal(60)
	c, err := NewCholesky(a)
	if err != nil {
		t.Fatal(err)
	}
	sn := c.sn
	ns := len(sn.first) - 1
	if len(sn.tasks) < 2 {
		t.Fatalf("grid not split: %d tasks", len(sn.tasks))
	}
	owner := make([]int, ns)
	for s := range owner {
		owner[s] = -1
	}
	for ti, r := range sn.tasks {
		for s := r[0]; s < r[1]; s++ {
			if owner[s] != -1 {
				t.Fatalf("supernode %d in two tasks", s)
			}
			owner[s] = ti
		}
	}
	for _, s := range sn.top {
		if owner[s] != -1 {
			t.Fatalf("top supernode %d also in a task", s)
		}
		owner[s] = -2
	}
	for s := 0; s < ns; s++ {
		if owner[s] == -1 {
			t.Fatalf("supernode %d in no task", s)
		}
		// The parent of a task supernode is in the same task or on top.
		if p := c.parentOf(sn.first[s+1] - 1); p >= 0 && owner[s] >= 0 {
			if op := owner[sn.super[p]]; op != owner[s] && op != -2 {
				t.Fatalf("supernode %d (task %d) has its parent in task %d", s, owner[s], op)
			}
		}
	}
	t.Logf("%d supernodes: %d tasks, %d on top", ns, len(sn.tasks), len(sn.top))
}

// TestDroppedWork: a factor whose work space is let go after each
// factorization (maxKeptWork) makes it again for the next one, and its
// factors are those of a factor that keeps it, bit for bit.
func TestDroppedWork(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 52))
	q := randomBlockSym(rng, 60, 3, 0.08, 1)
	perm := expandBlockOrder(rng.Perm(q.N), q.B)
	keep, err := AnalyzeBlocks(q, perm)
	if err != nil {
		t.Fatal(err)
	}
	drop, err := AnalyzeBlocks(q, perm)
	if err != nil {
		t.Fatal(err)
	}
	for shift := range 2 {
		if err := keep.FactorizeBlocks(q, float64(shift)); err != nil {
			t.Fatal(err)
		}
		func() {
			defer func(m int) { maxKeptWork = m }(maxKeptWork)
			maxKeptWork = 0
			if err := drop.FactorizeBlocks(q, float64(shift)); err != nil {
				t.Fatal(err)
			}
		}()
		if keep.sn.work == nil || drop.sn.work != nil {
			t.Fatalf("shift %d: work kept %v, dropped %v", shift, keep.sn.work != nil, drop.sn.work == nil)
		}
		if !slices.Equal(keep.sn.val, drop.sn.val) {
			t.Fatalf("shift %d: the factors differ", shift)
		}
	}
}

// TestSmallUpdateSameSums checks smallUpdate against its definition bit for
// bit: each entry cb[r][q], q <= r and q < wd, is the sum over t in order
// of l[r][t] l[q][t], for the widths with loops of their own and others,
// odd and even row counts; entries above the diagonal are left alone.
// (Bit for bit where the compiler never fuses a multiply and an add,
// amd64 below GOAMD64=v3; elsewhere to rounding: fpfuse.)
func TestSmallUpdateSameSums(t *testing.T) {
	same := func(got, want float64) bool {
		if !fpfuse.Fuses {
			return math.Float64bits(got) == math.Float64bits(want)
		}
		return math.Abs(got-want) <= 1e-13*(1+math.Abs(want))
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for _, ncd := range []int{1, 2, 3, 4, 5, 6, 7, 12} {
		for _, m := range []int{1, 2, 5, 8, 13} {
			for wd := 1; wd <= m; wd++ {
				l := make([]float64, m*ncd)
				for k := range l {
					l[k] = rng.NormFloat64()
				}
				cb := make([]float64, m*wd)
				for k := range cb {
					cb[k] = math.NaN()
				}
				smallUpdate(cb, l, m, wd, ncd)
				for r := 0; r < m; r++ {
					for q := 0; q < wd; q++ {
						got := cb[r*wd+q]
						if q > r {
							if !math.IsNaN(got) {
								t.Fatalf("ncd=%d m=%d wd=%d: wrote cb[%d][%d] above the diagonal", ncd, m, wd, r, q)
							}
							continue
						}
						want := 0.0
						for k := 0; k < ncd; k++ {
							want += l[r*ncd+k] * l[q*ncd+k]
						}
						if !same(got, want) {
							t.Fatalf("ncd=%d m=%d wd=%d: cb[%d][%d] = %v, want %v", ncd, m, wd, r, q, got, want)
						}
					}
				}
			}
		}
	}
}
