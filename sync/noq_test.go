package sync

import (
	"math"
	"slices"
	"testing"

	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
)

// TestCertifierWithoutQ: a certifier that let Q go (certifier.letGo, as a
// run whose parts certify does) decides what one that holds Q decides, to
// the bit, at intel's and sphere2500's optima and at an intel rank-2
// saddle: the test by parts (the parts' tr(Lambda) checked against the
// point's own, a product with Q's rows made a chunk at a time,
// posegraph.LaplacianRows) and the test on the gathered point
// (certifyCentral, the fallback, with Q made whole for the test), its
// eigenvector included; after the fallback it holds neither Q nor S.
// Q made again from the graph is the first one's bits.
func TestCertifierWithoutQ(t *testing.T) {
	for _, tc := range suitePoints(t) {
		g, res := tc.g, tc.res
		x, d, opts := res.final, g.D, res.Options
		q := g.Laplacian(posegraph.Poses)
		part := runsPartition(q.N, 4)
		makes := 0
		makeQ := func() *sparse.BlockSym {
			makes++
			again := g.Laplacian(posegraph.Poses)
			if !slices.Equal(again.RowPtr, q.RowPtr) || !slices.Equal(again.ColIdx, q.ColIdx) || !slices.Equal(again.Diag, q.Diag) ||
				!slices.EqualFunc(again.Val, q.Val, func(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }) {
				t.Fatalf("%s: Q made again differs from the first", tc.file)
			}
			return again
		}
		var got [2][2]certificate
		var holds [2]*certifier
		for v, letGo := range []bool{false, true} {
			c := partsCertifier(t, q, x, part, d, opts)
			m := newManifold(q, d, x.R, 1)
			if letGo {
				byRows := 0
				mulRows := func(dst, x *sparse.Blocks) {
					byRows++
					g.NewLaplacianRows(posegraph.Poses).MulBlocks(dst, x)
				}
				if !c.letGo(makeQ, mulRows) || c.q != nil {
					t.Fatalf("%s: the certifier kept Q", tc.file)
				}
				m = c.manifold(x.R, 1)
				defer func() {
					if byRows == 0 {
						t.Errorf("%s: the check of the parts' tr(Lambda) did not multiply by Q's rows", tc.file)
					}
				}()
			}
			var err error
			if got[v][0], err = c.checkOnly(m, x); err != nil {
				t.Fatal(err)
			}
			if got[v][1], err = c.certifyCentral(m, x, true); err != nil {
				t.Fatal(err)
			}
			if letGo && (c.q != nil || c.s != nil || c.sh != nil || c.dd != nil || m.q != nil) {
				t.Errorf("%s: after the test on the gathered point the certifier holds Q %v, S %v, its factor %v; the manifold Q %v",
					tc.file, c.q != nil, c.s != nil, c.dd != nil, m.q != nil)
			}
			holds[v] = c
		}
		t.Logf("%s: by parts psd %v bound %.12g, gathered psd %v min eig %.6g; Q made %d times", tc.file,
			got[1][0].psd, got[1][0].lowerBound, got[1][1].psd, got[1][1].minEig, makes)
		if makes == 0 {
			t.Errorf("%s: Q never made again", tc.file)
		}
		for k, what := range []string{"by parts", "gathered"} {
			a, b := got[0][k], got[1][k]
			same := func(x, y float64) bool { return math.Float64bits(x) == math.Float64bits(y) }
			if a.psd != b.psd || a.method != b.method || !same(a.trLambda, b.trLambda) || !same(a.dualBound, b.dualBound) ||
				!same(a.lowerBound, b.lowerBound) || (!same(a.minEig, b.minEig) && !(math.IsNaN(a.minEig) && math.IsNaN(b.minEig))) ||
				!slices.Equal(a.vector, b.vector) || a.psd != tc.psd {
				t.Errorf("%s, %s: without Q psd %v %s tr %v bound %v/%v min eig %v; with Q psd %v %s tr %v bound %v/%v min eig %v (want psd %v)",
					tc.file, what, b.psd, b.method, b.trLambda, b.dualBound, b.lowerBound, b.minEig,
					a.psd, a.method, a.trLambda, a.dualBound, a.lowerBound, a.minEig, tc.psd)
			}
		}
		if holds[0].q == nil {
			t.Errorf("%s: the certifier that kept Q lost it", tc.file)
		}
	}
}

// partsCertifier returns a certifier of x that tests by the parts part
// makes of q (localParts, holding x), anchored where the central test in
// the parts' order anchors.
func partsCertifier(t *testing.T, q *sparse.BlockSym, x *sparse.Blocks, part []int, d int, opts Options) *certifier {
	t.Helper()
	ref := newCertifier(q, d, opts.GapTol, opts.GapAbs, opts.EigTol, nil, opts.Seed)
	ref.ddPart = part
	if err := ref.analyze(); err != nil {
		t.Fatal(err)
	}
	lp := newLocalParts(t, q, part, ref.anchor)
	lp.x = x
	c := newCertifier(q, d, opts.GapTol, opts.GapAbs, opts.EigTol, nil, opts.Seed)
	c.usePartsProver(lp)
	return c
}
