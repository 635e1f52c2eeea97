package sparse_test

import (
	"math"
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/bcmsync/bcmsync/internal/sparse"
)

// TestReleaseReusesStorage checks that a factor made in storage another
// factor released (holding that factor's values) is bit for bit the
// factor made in fresh storage, solves to the dense oracle's accuracy, and
// that a released factor no longer solves; and that what Release keeps
// expires after a few collections.
func TestReleaseReusesStorage(t *testing.T) {
	// No collection expires what Release keeps while the test runs, and
	// none is kept from other tests (the reuse is checked by identity).
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	if n := expireStorages(); n > 0 {
		t.Fatalf("%d storages still kept after 50 collections", n)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	const nb, b, shift = 300, 3, 60
	q1 := randBlockSym(rng, nb, b, 0.03, 1)
	q2 := q1.Clone() // the same pattern (the same storage size), other values
	for k := range q2.Val {
		q2.Val[k] *= -0.5
	}
	rhs := randVec(rng, nb*b)
	factor := func(q *sparse.BlockSym) (*sparse.Cholesky, []float64) {
		t.Helper()
		c, err := sparse.AnalyzeBlocks(q, sparse.BlockOrder(q, 0))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.FactorizeBlocks(q, shift); err != nil {
			t.Fatal(err)
		}
		x := make([]float64, nb*b)
		c.Solve(x, rhs)
		return c, x
	}
	_, fresh := factor(q2)

	c1, _ := factor(q1)
	old := sparse.FactorStorage(c1)
	if len(old) == 0 {
		t.Fatal("the test matrix was not factored supernodally")
	}
	c1.Release()
	x := make([]float64, nb*b)
	c1.Solve(x, rhs)
	if !math.IsNaN(x[0]) {
		t.Errorf("Solve after Release gave %v, want NaN", x[0])
	}
	c2, reused := factor(q2)
	if s := sparse.FactorStorage(c2); &s[:1][0] != &old[:1][0] {
		t.Error("the second factor did not reuse the storage the first released")
	}
	for i := range fresh {
		if math.Float64bits(fresh[i]) != math.Float64bits(reused[i]) {
			t.Fatalf("x[%d] = %v in reused storage, %v in fresh", i, reused[i], fresh[i])
		}
	}
	a := denseOf(sparse.LowerCSC(q2, shift, 0))
	if r := residual(sparse.LowerCSC(q2, shift, 0), normInf(a), reused, rhs); r > 1e-12 {
		t.Errorf("relative residual %g", r)
	}
	// A released factor factors again, in new storage.
	if err := c1.FactorizeBlocks(q1, shift); err != nil {
		t.Fatal(err)
	}
	c1.Solve(x, rhs)
	if math.IsNaN(x[0]) {
		t.Error("a released factor did not factor again")
	}

	// What is kept expires after a few collections.
	c2.Release()
	if sparse.FreeStorages() == 0 {
		t.Fatal("Release kept nothing")
	}
	if n := expireStorages(); n > 0 {
		t.Errorf("%d storages still kept after 50 collections", n)
	}
}

// expireStorages collects until the kept factor storages expire, and
// returns how many are left.
func expireStorages() int {
	for k := 0; k < 50 && sparse.FreeStorages() > 0; k++ {
		runtime.GC()
		time.Sleep(time.Millisecond) // cleanups run on their own goroutine
	}
	return sparse.FreeStorages()
}

// TestValClass checks the storage classes: large enough, at most 1/8
// unused, and each class its own class (what a released storage is filed
// under).
func TestValClass(t *testing.T) {
	for n := 1; n < 1<<30; n = n*9/8 + 1 {
		c := sparse.ValClass(n)
		if c < n || float64(c-n) > float64(n)/8 || sparse.ValClass(c) != c {
			t.Fatalf("ValClass(%d) = %d (its class %d)", n, c, sparse.ValClass(c))
		}
	}
}
