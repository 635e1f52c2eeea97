package sparse

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
)

// rowsOf is m as a BlockRows: a copy of each block row, as a function of
// the row would compute it, and m's diagonal.
func rowsOf(m *BlockSym) *BlockRows {
	b := m.B
	diag := make([]float64, m.N*b)
	for i := 0; i < m.N; i++ {
		blk := m.Block(m.Diag[i])
		for a := 0; a < b; a++ {
			diag[i*b+a] = blk[a*b+a]
		}
	}
	pat := &BlockSym{N: m.N, B: b, RowPtr: m.RowPtr, ColIdx: m.ColIdx, Diag: m.Diag}
	bb := b * b
	return &BlockRows{Pattern: pat, Diagonal: diag, WorkLen: 3, Row: func(i int, dst, work []float64) {
		if len(work) != 3 || len(dst) != (m.RowPtr[i+1]-m.RowPtr[i])*bb {
			panic("wrong work or row length")
		}
		copy(dst, m.Val[m.RowPtr[i]*bb:m.RowPtr[i+1]*bb])
	}}
}

// TestFactorizeRows checks that factoring a matrix given by its rows
// gives the stored matrix's factor bit for bit, modified or not, on one
// thread and several (the rows are then computed concurrently), and that
// Dense gives the stored values back.
func TestFactorizeRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	g := gridBlockSym(8, 3)
	r := randomBlockSym(rng, 200, 4, 0.02, 1)
	// A pivot of about -7 the modified factorization raises.
	neg := withBlockSize(g, 3)
	neg.Block(neg.Diag[100])[0] = -7
	for _, m := range []*BlockSym{g, r, neg} {
		rows := rowsOf(m)
		d := rows.Dense()
		for k, v := range m.Val[:m.RowPtr[m.N]*m.B*m.B] {
			if d.Val[k] != v {
				t.Fatalf("Dense differs at %d", k)
			}
		}
		perm := NestedDissection(m, 0)
		sym, err := AnalyzeBlockPattern(m, perm)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := sym.Analyze(m)
		got, err := sym.Analyze(rows.Pattern)
		if err != nil {
			t.Fatal(err)
		}
		n := m.N * m.B
		rhs := make([]float64, n)
		for i := range rhs {
			rhs[i] = rng.NormFloat64()
		}
		for _, modified := range []bool{false, true} {
			var rw, rg int
			var ew, eg error
			if modified {
				rw, ew = want.FactorizeBlocksModified(m, 0.5, 0.5, 1e3)
			} else {
				ew = want.FactorizeBlocks(m, 0.5)
			}
			xw := make([]float64, n)
			want.Solve(xw, rhs)
			for _, procs := range []int{1, 2, 4} {
				old := runtime.GOMAXPROCS(procs)
				if modified {
					rg, eg = got.FactorizeRowsModified(rows, 0.5, 0.5, 1e3)
				} else {
					eg = got.FactorizeRows(rows, 0.5)
				}
				runtime.GOMAXPROCS(old)
				if modified && m == neg && rg == 0 {
					t.Fatal("the negative pivot was not raised")
				}
				if (ew == nil) != (eg == nil) || rw != rg {
					t.Fatalf("modified %v, %d threads: raised %d, err %v; stored: %d, %v", modified, procs, rg, eg, rw, ew)
				}
				xg := make([]float64, n)
				got.Solve(xg, rhs)
				for i := range xg {
					if xg[i] != xw[i] && !(math.IsNaN(xg[i]) && math.IsNaN(xw[i])) {
						t.Fatalf("modified %v, %d threads: solution differs at %d: %g, stored %g", modified, procs, i, xg[i], xw[i])
					}
				}
			}
		}
	}
}

// TestFactorizeRowsErrors checks that an unusable BlockRows is refused
// with an error, never a panic.
func TestFactorizeRowsErrors(t *testing.T) {
	m := gridBlockSym(3, 2)
	c, err := AnalyzeBlocks(m, NestedDissection(m, 0))
	if err != nil {
		t.Fatal(err)
	}
	good := rowsOf(m)
	bad := map[string]*BlockRows{
		"nil pattern":  {Row: good.Row, Diagonal: good.Diagonal},
		"nil row":      {Pattern: good.Pattern, Diagonal: good.Diagonal},
		"short diag":   {Pattern: good.Pattern, Row: good.Row, Diagonal: good.Diagonal[1:]},
		"negative len": {Pattern: good.Pattern, Row: good.Row, Diagonal: good.Diagonal, WorkLen: -1},
	}
	for name, rows := range bad {
		if err := c.FactorizeRows(rows, 0); err == nil {
			t.Errorf("%s: FactorizeRows accepted it", name)
		}
		if _, err := c.FactorizeRowsModified(rows, 0, 1, 1); err == nil {
			t.Errorf("%s: FactorizeRowsModified accepted it", name)
		}
	}
	if err := c.FactorizeRows(nil, 0); err == nil {
		t.Error("FactorizeRows accepted nil")
	}
	if err := c.FactorizeRows(good, 0); err != nil {
		t.Errorf("after the refusals: %v", err)
	}
}

// BenchmarkFactorizeRows compares factoring a stored block matrix with
// factoring the same matrix given by its rows (here copied, so the
// difference is the assembly's overhead, not a row function's cost):
//
//	go test ./internal/sparse -run '^$' -bench FactorizeRows
func BenchmarkFactorizeRows(b *testing.B) {
	m := withBlockSize(gridBlockSym(10, 3), 6)
	c, err := AnalyzeBlocks(m, NestedDissection(m, 0))
	if err != nil {
		b.Fatal(err)
	}
	rows := rowsOf(m)
	b.Run("stored", func(b *testing.B) {
		for range b.N {
			if err := c.FactorizeBlocks(m, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("rows", func(b *testing.B) {
		for range b.N {
			if err := c.FactorizeRows(rows, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
}
