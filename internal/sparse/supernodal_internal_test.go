package sparse

import "testing"

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
