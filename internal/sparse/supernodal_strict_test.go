package sparse

import (
	"math"
	"testing"
)

// A factor whose relaxed supernodes would take relaxedMaxVals values or
// more gets strict ones (strictOK): fewer stored values, no explicit zero
// in any supernode of more than 4 columns, and the same solution to
// rounding. The threshold is lowered so that a small grid crosses it.
func TestStrictSupernodes(t *testing.T) {
	a := gridCSCInternal(40)
	n := a.N
	b := make([]float64, n)
	for i := range b {
		b[i] = math.Sin(float64(i))
	}
	solve := func() (*Cholesky, []float64) {
		c, err := NewCholesky(a)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Factorize(a); err != nil {
			t.Fatal(err)
		}
		x := make([]float64, n)
		c.Solve(x, b)
		return c, x
	}
	relaxed, xr := solve()
	saved := relaxedMaxVals
	relaxedMaxVals = 0
	defer func() { relaxedMaxVals = saved }()
	strict, xs := solve()

	if relaxed.simplicial || strict.simplicial {
		t.Fatal("the grid's factor is simplicial: the test exercises nothing")
	}
	rs, ss := relaxed.sn, strict.sn
	if ss.valPtr[len(ss.first)-1] >= rs.valPtr[len(rs.first)-1] || ss.stored > rs.stored {
		t.Errorf("strict supernodes store %d values (%d in their triangles), relaxed %d (%d)",
			ss.valPtr[len(ss.first)-1], ss.stored, rs.valPtr[len(rs.first)-1], rs.stored)
	}
	if rs.stored == relaxed.nnz {
		t.Error("the relaxed supernodes hold no explicit zero: the test exercises nothing")
	}
	for s := 0; s+1 < len(ss.first); s++ {
		f, l := ss.first[s], ss.first[s+1]-1
		nc, nr := l-f+1, ss.rowPtr[s+1]-ss.rowPtr[s]
		real := 0
		for j := f; j <= l; j++ {
			real += strict.count(j)
		}
		if stored := nc*(nc+1)/2 + (nr-nc)*nc; nc > 4 && stored != real {
			t.Fatalf("strict supernode %d (%d columns) stores %d values for %d nonzeros", s, nc, stored, real)
		}
	}
	for i := range xr {
		if d := math.Abs(xs[i] - xr[i]); d > 1e-12*(1+math.Abs(xr[i])) {
			t.Fatalf("x[%d] = %v with strict supernodes, %v with relaxed", i, xs[i], xr[i])
		}
	}
	// And through the block analysis, which partitions by the same rule.
	m := gridBlockSym(8, 3)
	bs, err := AnalyzeBlockPattern(m, BlockOrder(m, 0))
	if err != nil {
		t.Fatal(err)
	}
	c := bs.cholesky(m)
	for s := 0; s+1 < len(c.sn.first); s++ {
		f, l := c.sn.first[s], c.sn.first[s+1]-1
		nc, nr := l-f+1, c.sn.rowPtr[s+1]-c.sn.rowPtr[s]
		real := 0
		for j := f; j <= l; j++ {
			real += c.count(j)
		}
		if stored := nc*(nc+1)/2 + (nr-nc)*nc; nc > 4 && stored != real {
			t.Fatalf("block analysis: strict supernode %d (%d columns) stores %d values for %d nonzeros", s, nc, stored, real)
		}
	}
	t.Logf("grid of %d: relaxed %d supernodes, %d values; strict %d, %d (nonzeros %d)",
		n, len(rs.first)-1, rs.valPtr[len(rs.first)-1], len(ss.first)-1, ss.valPtr[len(ss.first)-1], relaxed.nnz)
}
