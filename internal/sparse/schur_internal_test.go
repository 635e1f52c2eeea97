package sparse

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// schurCase is a random part: nI interior blocks first, then nB boundary
// blocks of size b. The first lone boundary blocks have no interior
// neighbour; with all, every boundary block couples to every interior
// block (and every block pair is present).
type schurCase struct {
	nI, nB, b, lone int
	dens            float64
	all             bool
	grid            int // > 0: a grid x grid x grid lattice whose last face is the boundary (nI, nB ignored)
}

func (c schurCase) String() string {
	if c.grid > 0 {
		return fmt.Sprintf("grid %d^3 b=%d", c.grid, c.b)
	}
	return fmt.Sprintf("nI=%d nB=%d b=%d lone=%d dens=%g all=%v", c.nI, c.nB, c.b, c.lone, c.dens, c.all)
}

var schurCases = []schurCase{
	{nI: 0, nB: 4, b: 3, dens: 0.5},          // no interior
	{nI: 1, nB: 3, b: 4, dens: 0.5},          // one interior block
	{nI: 1, nB: 3, b: 3, lone: 2, dens: 0.5}, // one interior block, boundary blocks without interior neighbours
	{nI: 5, nB: 4, b: 3, all: true},          // everything coupled
	{nI: 7, nB: 5, b: 4, all: true},
	{nI: 30, nB: 6, b: 3, lone: 2, dens: 0.08},
	{nI: 60, nB: 10, b: 4, lone: 3, dens: 0.05},
	{nI: 80, nB: 12, b: 2, dens: 0.04},
	{nI: 40, nB: 5, b: 1, lone: 1, dens: 0.1},
	{nI: 12, nB: 6, b: 3, lone: 6, dens: 0.3}, // no boundary block has an interior neighbour
	{grid: 6, b: 3},
	{grid: 7, b: 4},
}

// randSchurPart returns a strictly block diagonally dominant (so positive
// definite) part's matrix for c and its interior count.
func randSchurPart(rng *rand.Rand, c schurCase) (*BlockSym, int) {
	nI, nB, b := c.nI, c.nB, c.b
	type edge struct{ i, j int }
	var edges []edge
	if c.grid > 0 {
		k := c.grid
		// Blocks by (x, y, z); the faces x = k-1 and z = k-1 are the
		// boundary, numbered after the interior.
		id := make([]int, k*k*k)
		at := func(x, y, z int) int { return id[(z*k+y)*k+x] }
		nI = (k - 1) * k * (k - 1)
		nB = k*k*k - nI
		ni, nb := 0, nI
		for v := range id {
			if x, z := v%k, v/(k*k); x == k-1 || z == k-1 {
				id[v] = nb
				nb++
			} else {
				id[v] = ni
				ni++
			}
		}
		for z := 0; z < k; z++ {
			for y := 0; y < k; y++ {
				for x := 0; x < k; x++ {
					if x+1 < k {
						edges = append(edges, edge{at(x, y, z), at(x+1, y, z)})
					}
					if y+1 < k {
						edges = append(edges, edge{at(x, y, z), at(x, y+1, z)})
					}
					if z+1 < k {
						edges = append(edges, edge{at(x, y, z), at(x, y, z+1)})
					}
				}
			}
		}
		for e := range edges {
			if edges[e].i > edges[e].j {
				edges[e].i, edges[e].j = edges[e].j, edges[e].i
			}
		}
	} else {
		n := nI + nB
		for i := 0; i < n; i++ {
			for j := i + 1; j < n; j++ {
				bi, bj := i >= nI, j >= nI
				lone := (bi && i-nI < c.lone) || (bj && j-nI < c.lone)
				if !bi && bj && lone {
					continue
				}
				if c.all || rng.Float64() < c.dens {
					edges = append(edges, edge{i, j})
				}
			}
		}
		// Every boundary block that may have an interior neighbour has one.
		for j := nI + c.lone; j < n && nI > 0; j++ {
			edges = append(edges, edge{rng.IntN(nI), j})
		}
	}
	n := nI + nB
	bb := NewBlockBuilder(n, b)
	rowSum := make([]float64, n)
	seen := map[edge]bool{}
	blk := make([]float64, b*b)
	for _, e := range edges {
		if seen[e] {
			continue
		}
		seen[e] = true
		s := 0.0
		for k := range blk {
			blk[k] = rng.NormFloat64()
			s += math.Abs(blk[k])
		}
		bb.AddOff(e.j, e.i, blk)
		rowSum[e.i] += s
		rowSum[e.j] += s
	}
	for i := 0; i < n; i++ {
		s := 0.0
		for r := 0; r < b; r++ {
			for c := 0; c <= r; c++ {
				v := 0.3 * rng.NormFloat64()
				blk[r*b+c], blk[c*b+r] = v, v
			}
		}
		for k := range blk {
			s += math.Abs(blk[k])
		}
		for r := 0; r < b; r++ {
			blk[r*b+r] += rowSum[i] + s + 1
		}
		bb.AddDiag(i, blk)
	}
	return bb.Build(), nI
}

// denseBlockSym is a's dense copy.
func denseBlockSym(a *BlockSym) *mat.SymDense {
	b := a.B
	d := mat.NewSymDense(a.N*b, nil)
	for i := 0; i < a.N; i++ {
		for k := a.RowPtr[i]; k < a.RowPtr[i+1]; k++ {
			j := a.ColIdx[k]
			if j > i {
				continue
			}
			blk := a.Block(k)
			for r := 0; r < b; r++ {
				for c := 0; c < b; c++ {
					d.SetSym(i*b+r, j*b+c, blk[r*b+c])
				}
			}
		}
	}
	return d
}

// TestSchurPartComplement checks SchurPart's complement against gonum's
// dense Schur complement A_BB - A_BI A_II^-1 A_IB (itself from gonum's
// dense Cholesky of A_II), its exact symmetry, and W as stored by its
// reach against a dense forward solve: equal on the reach, exact zeros
// outside it.
//
// With split, the solves' schedule splits the factor into concurrent
// subtrees (as large factors are), whose forward solve sums their updates
// of the rows above them apart: W on its reach, which each supernode
// solves as a top one, is then equal to the dense solve's to rounding.
func TestSchurPartComplement(t *testing.T) {
	rng := rand.New(rand.NewPCG(30, 3))
	for _, c := range schurCases {
		for _, split := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/split=%v", c, split), func(t *testing.T) {
				schurPartComplement(t, rng, c, split)
			})
		}
	}
}

func schurPartComplement(t *testing.T, rng *rand.Rand, c schurCase, split bool) {
	for rep := 0; rep < 3; rep++ {
		a, nI := randSchurPart(rng, c)
		b, nB := a.B, a.N-nI
		p, err := NewSchurPart(a, nI)
		if err != nil {
			t.Fatal(err)
		}
		if split && nI > 0 {
			p.chol.sn.sched = p.chol.sn.newSolveSchedule(testSplitMin)
			if c.grid > 0 && len(p.chol.sn.sched.tasks) < 2 {
				t.Fatalf("the lattice's solve schedule is not split: %d tasks", len(p.chol.sn.sched.tasks))
			}
		}
		m := nB * b
		got := make([]float64, m*m)
		for k := range got {
			got[k] = math.NaN() // Factorize sets every entry
		}
		if err := p.Factorize(got, a); err != nil {
			t.Fatal(err)
		}
		ad := denseBlockSym(a)
		ni := nI * b
		want := mat.NewDense(m, m, nil)
		want.Copy(ad.SliceSym(ni, ni+m))
		if nI > 0 {
			var ch mat.Cholesky
			if !ch.Factorize(ad.SliceSym(0, ni)) {
				t.Fatal("gonum's Cholesky failed on a positive definite interior")
			}
			aib := mat.DenseCopyOf(ad).Slice(0, ni, ni, ni+m)
			var x, sub mat.Dense
			if err := ch.SolveTo(&x, aib); err != nil {
				t.Fatal(err)
			}
			sub.Mul(aib.T(), &x)
			want.Sub(want, &sub)
		}
		scale := 0.0
		for k := 0; k < a.N*b; k++ {
			scale = max(scale, ad.At(k, k))
		}
		for r := 0; r < m; r++ {
			for q := 0; q < m; q++ {
				if math.Float64bits(got[r*m+q]) != math.Float64bits(got[q*m+r]) {
					t.Fatalf("complement not symmetric at (%d, %d): %v and %v", r, q, got[r*m+q], got[q*m+r])
				}
				if d := math.Abs(got[r*m+q] - want.At(r, q)); !(d <= 1e-13*scale) {
					t.Fatalf("complement (%d, %d) = %v, gonum %v", r, q, got[r*m+q], want.At(r, q))
				}
			}
		}
		checkPackedW(t, p)
	}
}

// checkPackedW compares W stored by its reach with a dense forward solve
// of every column of A_IB at once: on the reach, the same bits when the
// solve's schedule does not split the factor and equal to rounding when it
// does; zero outside it.
func checkPackedW(t *testing.T, p *SchurPart) {
	t.Helper()
	stored, dense := p.WStats()
	if p.nI == 0 {
		if stored != 0 || dense != 0 {
			t.Fatalf("WStats without interior: %d, %d", stored, dense)
		}
		return
	}
	r := p.reach()
	b, n := p.b, p.nI*p.b
	nc := len(r.bcols) * b
	if dense != n*nc || stored > dense {
		t.Fatalf("WStats %d stored, %d dense, want at most %d of %d", stored, dense, n*nc, n*nc)
	}
	if nc == 0 {
		return
	}
	rhs := make([]float64, n*nc)
	for q := 0; q < nc; q++ {
		j, e := r.bcols[q/b], q%b
		for _, c := range p.coup[j] {
			copy(rhs[q*n+c.i*b:q*n+(c.i+1)*b], p.coupVal[c.v+e*b:c.v+(e+1)*b])
		}
	}
	full := make([]float64, n*nc)
	p.chol.ForwardMany(full, rhs, nc)
	w := p.packedW(r)
	colMax := make([]float64, nc)
	for q := range colMax {
		for _, v := range full[q*n : (q+1)*n] {
			colMax[q] = max(colMax[q], math.Abs(v))
		}
	}
	exact := len(p.chol.sn.sched.tasks) == 0
	inReach := make([]bool, n)
	for q := 0; q < nc; q++ {
		jb, e := q/b, q%b
		clear(inReach)
		for x := r.reachPtr[jb]; x < r.reachPtr[jb+1]; x++ {
			s, pos := int(r.reachNode[x]), int(r.reachPos[x])
			if int(r.cols[r.colPtr[s]+pos]) != jb {
				t.Fatalf("column block %d at position %d of supernode %d, which lists %d there", jb, pos, s, r.cols[r.colPtr[s]+pos])
			}
			f, l := r.first[s], r.first[s+1]
			off := r.valPtr[s] + (pos*b+e)*(l-f)
			for i := f; i < l; i++ {
				inReach[i] = true
				if exact && math.Float64bits(w[off+i-f]) != math.Float64bits(full[q*n+i]) {
					t.Fatalf("W[%d, %d] stored %v, dense solve %v: not the same bits on an unsplit schedule", i, q, w[off+i-f], full[q*n+i])
				}
				if d := math.Abs(w[off+i-f] - full[q*n+i]); !(d <= 1e-13*colMax[q]) {
					t.Fatalf("W[%d, %d] stored %v, dense solve %v", i, q, w[off+i-f], full[q*n+i])
				}
			}
		}
		for i, in := range inReach {
			if !in && full[q*n+i] != 0 {
				t.Fatalf("W[%d, %d] = %v outside the column's reach", i, q, full[q*n+i])
			}
		}
	}
}

// BenchmarkSchurPart factors a lattice part (blocks of 4, as S's in 3-D)
// whose boundary is two of its faces and forms its Schur complement,
// reporting the bytes of W as stored (by its reach) and as a dense
// matrix would hold it.
func BenchmarkSchurPart(b *testing.B) {
	for _, k := range []int{10, 14} {
		b.Run(fmt.Sprintf("grid=%d", k), func(b *testing.B) {
			a, nI := randSchurPart(rand.New(rand.NewPCG(1, 2)), schurCase{grid: k, b: 4})
			p, err := NewSchurPart(a, nI)
			if err != nil {
				b.Fatal(err)
			}
			m := p.Boundary() * a.B
			t := make([]float64, m*m)
			b.ReportAllocs()
			for b.Loop() {
				if err := p.Factorize(t, a); err != nil {
					b.Fatal(err)
				}
			}
			stored, dense := p.WStats()
			b.ReportMetric(float64(8*stored)/1e6, "W-MB")
			b.ReportMetric(float64(8*dense)/1e6, "denseW-MB")
		})
	}
}
