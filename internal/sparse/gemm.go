package sparse

import (
	"runtime"
	stdsync "sync"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// gemmUsesDgemm reports whether gemmNT leaves an m x n product to gonum's
// Dgemm (below a whole tile in either direction): the top's split updates
// (topsplit.go) must choose the kernel as gemmNT does, or their bits
// would differ from one goroutine's.
func gemmUsesDgemm(m, n int) bool {
	return m < gemmMR || n < gemmNR-2
}

// gemmNT computes C = alpha A B^T + beta C for row-major A (m x k, stride
// lda), B (n x k, stride ldb) and C (m x n, stride ldc): the product every
// supernodal update is made of. gonum's Dgemm forms it from dot products of
// rows (SSE2, about 3 to 4 GFlop/s per core here). On CPUs with AVX2 and FMA
// this packs A and B into strips (Goto's scheme: k in blocks of gemmKC, A
// in blocks of gemmMC rows) and runs a 6 x 8 register tile in assembly,
// several times faster on the large separators at the top of a 3-D
// factor. Large products split their rows among GOMAXPROCS goroutines.
// Every entry of C is summed in the same order (k ascending, by blocks of
// gemmKC) however the rows are split, so the result does not depend on the
// number of threads.
func gemmNT(m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	// The assembly kernel reads and writes through pointers: check here
	// what the slices of a BLAS call would check.
	if m < 0 || n < 0 || k < 0 || lda < max(1, k) || ldb < max(1, k) || ldc < n ||
		len(a) < (m-1)*lda+k || len(b) < (n-1)*ldb+k || len(c) < (m-1)*ldc+n {
		panic("sparse: gemmNT with slices or strides too short for the shape")
	}
	// Below a whole tile in either direction every tile is an edge tile,
	// and gonum's dot products are faster (measured: 50 x 1 x 200 takes
	// 12 us here, 2 us in gonum).
	if gemmUsesDgemm(m, n) || !hasFMA() {
		gonum.Implementation{}.Dgemm(blas.NoTrans, blas.Trans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	if beta != 1 {
		for i := 0; i < m; i++ {
			ci := c[i*ldc : i*ldc+n]
			if beta == 0 {
				clear(ci)
			} else {
				for j := range ci {
					ci[j] *= beta
				}
			}
		}
	}
	if k == 0 || alpha == 0 {
		return
	}
	threads := runtime.GOMAXPROCS(0)
	// Split rows in whole gemmMC blocks, and only when each part has
	// enough work to pay for its goroutine and its own packed B.
	parts := min(threads, (m+gemmMC-1)/gemmMC, max(1, m*n*k/gemmSplitFlops))
	if parts <= 1 {
		gemmRows(0, m, n, k, alpha, a, lda, b, ldb, c, ldc)
		return
	}
	blocks := (m + gemmMC - 1) / gemmMC
	var wg stdsync.WaitGroup
	for t := 1; t < parts; t++ {
		lo, hi := blocks*t/parts*gemmMC, min(m, blocks*(t+1)/parts*gemmMC)
		wg.Add(1)
		go func() {
			defer wg.Done()
			gemmRows(lo, hi, n, k, alpha, a, lda, b, ldb, c, ldc)
		}()
	}
	gemmRows(0, min(m, blocks/parts*gemmMC), n, k, alpha, a, lda, b, ldb, c, ldc)
	wg.Wait()
}

// trsmRT sets the m x n row-major B = B L^{-T}, L the n x n lower
// triangle of a. Gonum's Dtrsm solves each row by dot products, about 3.5
// GFlop/s a core here, and below every panel of a large supernode it took
// a quarter of the factorization's time. Rows are independent, so they
// are split among goroutines when there is enough work, and each part is
// solved by trsmRTBlocked, whose bulk is gemmNT's kernel. Each row is
// solved by the same operations however the rows are split, so the bits
// do not depend on the number of threads.
func trsmRT(m, n int, a []float64, lda int, b []float64, ldb int) {
	// trsmRTBlocked hands gemmRows, which reaches the assembly kernel,
	// parts of a and b: check here what a BLAS call would check.
	if m < 0 || n < 0 || lda < max(1, n) || ldb < max(1, n) ||
		(m > 0 && n > 0 && (len(a) < (n-1)*lda+n || len(b) < (m-1)*ldb+n)) {
		panic("sparse: trsmRT with slices or strides too short for the shape")
	}
	// Every part keeps at least a tile's rows, so that no part falls back
	// to Dtrsm on a thread count where another would not.
	parts := min(runtime.GOMAXPROCS(0), max(1, m*n*n/gemmSplitFlops), max(1, m/gemmMR))
	if parts <= 1 {
		trsmRTBlocked(m, n, a, lda, b, ldb)
		return
	}
	var wg stdsync.WaitGroup
	for t := 1; t < parts; t++ {
		lo, hi := m*t/parts, m*(t+1)/parts
		wg.Add(1)
		go func() {
			defer wg.Done()
			trsmRTBlocked(hi-lo, n, a, lda, b[lo*ldb:], ldb)
		}()
	}
	trsmRTBlocked(m/parts, n, a, lda, b, ldb)
	wg.Wait()
}

// trsmRTBlocked is trsmRT on one goroutine. The triangle is split in two
// (recursively, down to trsmLeaf columns): X1 = B1 L11^{-T}, then
// B2 -= X1 L21^T, most of the flops, by the product kernel, then X2 =
// B2 L22^{-T}. This is the blocked algorithm of LAPACK's solvers and as
// stable; the sums are grouped differently from Dtrsm's, so the last bits
// differ from it. The leaves are trsmRTLeaf; without the kernel (no AVX2
// and FMA), or with fewer rows than a tile, the whole solve is Dtrsm.
func trsmRTBlocked(m, n int, a []float64, lda int, b []float64, ldb int) {
	if m == 0 || n == 0 {
		return
	}
	if m < gemmMR || !hasFMA() {
		gonum.Implementation{}.Dtrsm(blas.Right, blas.Lower, blas.Trans, blas.NonUnit, m, n, 1, a, lda, b, ldb)
		return
	}
	if n <= trsmLeaf {
		trsmRTLeaf(m, n, a, lda, b, ldb)
		return
	}
	n1 := n / 2
	trsmRTBlocked(m, n1, a, lda, b, ldb)
	// gemmNT's checks and its fallbacks for thin shapes do not apply:
	// trsmRT checked the slices, m >= gemmMR, and n - n1 > trsmLeaf/2.
	gemmRows(0, m, n-n1, n1, -1, b, ldb, a[n1*lda:], lda, b[n1:], ldb)
	trsmRTBlocked(m, n-n1, a[n1*lda+n1:], lda, b[n1:], ldb)
}

// trsmLeaf is the width up to which trsmRTBlocked solves by substitution:
// below it the products are too thin for the kernel's 6 x 8 tiles to pay.
const trsmLeaf = 16

// trsmRTLeaf solves B = B L^{-T} by forward substitution: each entry less
// its earlier columns' terms in order, then divided by the pivot. Four
// rows go together: a row's sum is a chain of dependent subtractions, and
// four independent chains keep the core busy (in these leaves gonum's
// Dtrsm took 80 percent of the blocked solve's time, one row at a time
// 77). Grouping does not change any row's operations, so the bits do not
// depend on it.
func trsmRTLeaf(m, n int, a []float64, lda int, b []float64, ldb int) {
	i := 0
	for ; i+4 <= m; i += 4 {
		b0 := b[i*ldb : i*ldb+n]
		b1 := b[(i+1)*ldb : (i+1)*ldb+n]
		b2 := b[(i+2)*ldb : (i+2)*ldb+n]
		b3 := b[(i+3)*ldb : (i+3)*ldb+n]
		for j := 0; j < n; j++ {
			aj := a[j*lda : j*lda+j+1]
			s0, s1, s2, s3 := b0[j], b1[j], b2[j], b3[j]
			for k, v := range aj[:j] {
				s0 -= v * b0[k]
				s1 -= v * b1[k]
				s2 -= v * b2[k]
				s3 -= v * b3[k]
			}
			p := aj[j]
			b0[j], b1[j], b2[j], b3[j] = s0/p, s1/p, s2/p, s3/p
		}
	}
	for ; i < m; i++ {
		bi := b[i*ldb : i*ldb+n]
		for j := range bi {
			aj := a[j*lda : j*lda+j+1]
			s := bi[j]
			for k, v := range aj[:j] {
				s -= v * bi[k]
			}
			bi[j] = s / aj[j]
		}
	}
}

const (
	gemmMR = 6   // rows of the register tile
	gemmNR = 8   // columns of the register tile
	gemmKC = 256 // depth of a packed block: an 8 x 256 strip of B is 16 KB
	gemmMC = 96  // rows of A packed at once (a multiple of gemmMR)
	// gemmSplitFlops is the work (m n k) per goroutine below which a
	// product is not split.
	gemmSplitFlops = 1 << 21
)

// gemmBuf holds one goroutine's packed blocks.
type gemmBuf struct {
	pa, pb []float64
	tile   [gemmMR * gemmNR]float64
}

var gemmPool = stdsync.Pool{New: func() any { return new(gemmBuf) }}

// gemmRows adds alpha A[lo:hi] B^T to C[lo:hi].
func gemmRows(lo, hi, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, c []float64, ldc int) {
	buf := gemmPool.Get().(*gemmBuf)
	defer gemmPool.Put(buf)
	np := (n + gemmNR - 1) / gemmNR * gemmNR
	if need := np * gemmKC; cap(buf.pb) < need {
		buf.pb = make([]float64, need)
	}
	if need := gemmMC * gemmKC; cap(buf.pa) < need {
		buf.pa = make([]float64, need)
	}
	pa, pb := buf.pa[:gemmMC*gemmKC], buf.pb[:np*gemmKC]
	for pc := 0; pc < k; pc += gemmKC {
		kc := min(gemmKC, k-pc)
		packStrips(pb, b, ldb, 0, n, pc, kc, gemmNR)
		for ic := lo; ic < hi; ic += gemmMC {
			mc := min(gemmMC, hi-ic)
			packStrips(pa, a, lda, ic, mc, pc, kc, gemmMR)
			for jr := 0; jr < n; jr += gemmNR {
				nr := min(gemmNR, n-jr)
				bs := pb[jr*kc:]
				for ir := 0; ir < mc; ir += gemmMR {
					mr := min(gemmMR, mc-ir)
					as := pa[ir*kc:]
					if mr == gemmMR && nr == gemmNR {
						kernel6x8(kc, &as[0], &bs[0], &c[(ic+ir)*ldc+jr], ldc, alpha)
						continue
					}
					// An edge tile: the kernel writes a full tile into
					// scratch (the packed strips are zero-padded), of
					// which the valid part is added to C.
					t := buf.tile[:]
					clear(t)
					kernel6x8(kc, &as[0], &bs[0], &t[0], gemmNR, alpha)
					for i := 0; i < mr; i++ {
						ci := c[(ic+ir+i)*ldc+jr : (ic+ir+i)*ldc+jr+nr]
						for j := range ci {
							ci[j] += t[i*gemmNR+j]
						}
					}
				}
			}
		}
	}
}

// packStrips copies rows r0..r0+rows-1, columns p0..p0+kc-1 of the
// row-major matrix x (stride ldx) into strips of w rows: strip s holds,
// for each column p, the w values x[r0+s*w+i][p0+p] at dst[s*w*kc+p*w+i],
// zero beyond the last row.
func packStrips(dst, x []float64, ldx, r0, rows, p0, kc, w int) {
	for s := 0; s*w < rows; s++ {
		d := dst[s*w*kc : (s+1)*w*kc]
		h := min(w, rows-s*w)
		// Whole strips of the kernel's two widths are copied column by
		// column, eight or six rows at a time: the updates of a pose
		// graph's factor have a small depth kc (a descendant's few
		// columns), where the loop below spends more on each row's
		// slicing and its strided stores than on the copy.
		if h == w && kc > 0 {
			switch w {
			case 8:
				pack8(d, x[(r0+s*w)*ldx+p0:], ldx, kc)
				continue
			case 6:
				pack6(d, x[(r0+s*w)*ldx+p0:], ldx, kc)
				continue
			}
		}
		for i := 0; i < h; i++ {
			src := x[(r0+s*w+i)*ldx+p0 : (r0+s*w+i)*ldx+p0+kc]
			for p, v := range src {
				d[p*w+i] = v
			}
		}
		for i := h; i < w; i++ {
			for p := 0; p < kc; p++ {
				d[p*w+i] = 0
			}
		}
	}
}

// pack8 is packStrips' copy of one whole strip of eight rows (stride ldx,
// kc columns each, starting at x[0]) into d, column by column.
func pack8(d, x []float64, ldx, kc int) {
	x0 := x[:kc]
	x1 := x[ldx : ldx+kc][:len(x0)]
	x2 := x[2*ldx : 2*ldx+kc][:len(x0)]
	x3 := x[3*ldx : 3*ldx+kc][:len(x0)]
	x4 := x[4*ldx : 4*ldx+kc][:len(x0)]
	x5 := x[5*ldx : 5*ldx+kc][:len(x0)]
	x6 := x[6*ldx : 6*ldx+kc][:len(x0)]
	x7 := x[7*ldx : 7*ldx+kc][:len(x0)]
	d = d[:8*len(x0)]
	for p := range x0 {
		dp := d[8*p : 8*p+8 : 8*p+8]
		dp[0], dp[1], dp[2], dp[3] = x0[p], x1[p], x2[p], x3[p]
		dp[4], dp[5], dp[6], dp[7] = x4[p], x5[p], x6[p], x7[p]
	}
}

// pack6 is pack8 for a strip of six rows.
func pack6(d, x []float64, ldx, kc int) {
	x0 := x[:kc]
	x1 := x[ldx : ldx+kc][:len(x0)]
	x2 := x[2*ldx : 2*ldx+kc][:len(x0)]
	x3 := x[3*ldx : 3*ldx+kc][:len(x0)]
	x4 := x[4*ldx : 4*ldx+kc][:len(x0)]
	x5 := x[5*ldx : 5*ldx+kc][:len(x0)]
	d = d[:6*len(x0)]
	for p := range x0 {
		dp := d[6*p : 6*p+6 : 6*p+6]
		dp[0], dp[1], dp[2] = x0[p], x1[p], x2[p]
		dp[3], dp[4], dp[5] = x3[p], x4[p], x5[p]
	}
}
