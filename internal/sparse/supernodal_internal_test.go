package sparse

import (
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
