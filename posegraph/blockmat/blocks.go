package blockmat

import (
	"runtime"
	stdsync "sync"
)

// Blocks is an R x (N*B) matrix stored block by block: block i is the R x B
// matrix X_i, row-major, at Data[i*R*B : (i+1)*R*B]. It is the layout of the
// lifted variable X = [X_1 ... X_n] and of products X*Q: a block update reads
// and writes one contiguous run. With R = 1 it is a plain vector.
type Blocks struct {
	R, B, N int
	Data    []float64
}

// NewBlocks returns a zero R x (N*B) block matrix.
func NewBlocks(r, b, n int) *Blocks {
	return &Blocks{R: r, B: b, N: n, Data: make([]float64, r*b*n)}
}

// Block returns X_i, aliasing the storage.
func (x *Blocks) Block(i int) []float64 {
	s := x.R * x.B
	return x.Data[i*s : (i+1)*s]
}

// At returns entry (row, col) of the R x (N*B) matrix.
func (x *Blocks) At(row, col int) float64 {
	i, c := col/x.B, col%x.B
	return x.Data[i*x.R*x.B+row*x.B+c]
}

// Set sets entry (row, col).
func (x *Blocks) Set(row, col int, v float64) {
	i, c := col/x.B, col%x.B
	x.Data[i*x.R*x.B+row*x.B+c] = v
}

// MulBlockRow writes (X*Q)_i = sum_j X_j Q_ji into dst (R x B, row-major).
// Q_ji is the transpose of the stored Q_ij.
func (m *BlockSym) MulBlockRow(dst []float64, x *Blocks, i int) {
	m.mulBlockRowTo(dst, x, i, m.RowPtr[i+1])
}

// mulBlockRowTo is MulBlockRow over row i's blocks up to position end.
func (m *BlockSym) mulBlockRowTo(dst []float64, x *Blocks, i, end int) {
	b, r := m.B, x.R
	for k := range dst[:r*b] {
		dst[k] = 0
	}
	rb := r * b
	for k := m.RowPtr[i]; k < end; k++ {
		j := m.ColIdx[k]
		q := m.Val[k*b*b : (k+1)*b*b]
		xj := x.Data[j*rb : (j+1)*rb]
		for a := 0; a < r; a++ {
			xa := xj[a*b : (a+1)*b]
			da := dst[a*b : (a+1)*b]
			for c := 0; c < b; c++ {
				qc := q[c*b : (c+1)*b] // row c of Q_ij = column c of Q_ji
				s := 0.0
				for t, v := range xa {
					s += v * qc[t]
				}
				da[c] += s
			}
		}
	}
}

// MulBlocks sets dst = X*Q. dst and x must not alias. It does not allocate.
func (m *BlockSym) MulBlocks(dst, x *Blocks) {
	m.mulRange(dst, x, 0, m.N, nil)
}

// LeadingEnds returns, for each block row i < n, the position after its
// last block in a column below n: the extent of row i in the leading n x n
// block Q_LL. Each row's columns are sorted, so its blocks in Q_LL come
// first.
func (m *BlockSym) LeadingEnds(n int) []int {
	ends := make([]int, n)
	for i := range ends {
		k := m.RowPtr[i]
		for k < m.RowPtr[i+1] && m.ColIdx[k] < n {
			k++
		}
		ends[i] = k
	}
	return ends
}

// MulBlocksLeading sets dst = X Q_LL, Q_LL the leading dst.N x dst.N block
// of m (block rows and columns 0..dst.N-1) and x of dst.N blocks, reading
// row i's blocks up to ends[i] (LeadingEnds(dst.N)). It is MulBlocks on a
// copy of Q_LL, bit for bit, without the copy: the subproblem of a block of
// poses with its neighbours fixed (package sync's BlockProblem) keeps Q's
// rows once. It does not allocate.
func (m *BlockSym) MulBlocksLeading(dst, x *Blocks, ends []int) {
	m.mulRange(dst, x, 0, dst.N, ends)
}

// rowEnd is the position after row i's last block that a product reads:
// ends[i], or the row's end when ends is nil.
func (m *BlockSym) rowEnd(i int, ends []int) int {
	if ends != nil {
		return ends[i]
	}
	return m.RowPtr[i+1]
}

func (m *BlockSym) mulRange(dst, x *Blocks, lo, hi int, ends []int) {
	switch m.B {
	case 3:
		m.mulRange3(dst, x, lo, hi, ends)
	case 4:
		m.mulRange4(dst, x, lo, hi, ends)
	default:
		rb := x.R * m.B
		for i := lo; i < hi; i++ {
			m.mulBlockRowTo(dst.Data[i*rb:(i+1)*rb], x, i, m.rowEnd(i, ends))
		}
	}
}

// mulRange4 is MulBlockRow for 4 x 4 blocks (SE(3) poses) on rows lo..hi-1,
// unrolled: the generic loops over b run 4 iterations each and spend more
// time on their bounds and counters than on the products. Every entry is
// summed in MulBlockRow's order, so where Go never fuses a multiply and
// an add (amd64 below GOAMD64=v3, the default) the bits are the same
// (elsewhere the two may round differently in the last place).
func (m *BlockSym) mulRange4(dst, x *Blocks, lo, hi int, ends []int) {
	r := x.R
	if r == 3 {
		m.mulRange4r3(dst, x, lo, hi, ends)
		return
	}
	rb := r * 4
	for i := lo; i < hi; i++ {
		di := dst.Data[i*rb : (i+1)*rb]
		clear(di)
		for k, ke := m.RowPtr[i], m.rowEnd(i, ends); k < ke; k++ {
			j := m.ColIdx[k]
			q := (*[16]float64)(m.Val[k*16 : k*16+16])
			xj := x.Data[j*rb : (j+1)*rb]
			for a := 0; a < r; a++ {
				xa := (*[4]float64)(xj[a*4 : a*4+4])
				da := (*[4]float64)(di[a*4 : a*4+4])
				da[0] += xa[0]*q[0] + xa[1]*q[1] + xa[2]*q[2] + xa[3]*q[3]
				da[1] += xa[0]*q[4] + xa[1]*q[5] + xa[2]*q[6] + xa[3]*q[7]
				da[2] += xa[0]*q[8] + xa[1]*q[9] + xa[2]*q[10] + xa[3]*q[11]
				da[3] += xa[0]*q[12] + xa[1]*q[13] + xa[2]*q[14] + xa[3]*q[15]
			}
		}
	}
}

// mulRange4r3 is mulRange4 at rank 3 (SE(3) at rank d, the trust
// region's products on most 3-D graphs): one row a of the block row's
// result at a time, its four sums kept in registers across the row's
// blocks instead of loaded and stored at every block. Each entry is the
// same sequence of additions, so the bits are too where nothing fuses
// (see mulRange4).
func (m *BlockSym) mulRange4r3(dst, x *Blocks, lo, hi int, ends []int) {
	for i := lo; i < hi; i++ {
		ks, ke := m.RowPtr[i], m.rowEnd(i, ends)
		di := (*[12]float64)(dst.Data[i*12 : i*12+12])
		for a := 0; a < 12; a += 4 {
			var d0, d1, d2, d3 float64
			for k := ks; k < ke; k++ {
				q := (*[16]float64)(m.Val[k*16 : k*16+16])
				xa := (*[4]float64)(x.Data[m.ColIdx[k]*12+a : m.ColIdx[k]*12+a+4])
				x0, x1, x2, x3 := xa[0], xa[1], xa[2], xa[3]
				d0 += x0*q[0] + x1*q[1] + x2*q[2] + x3*q[3]
				d1 += x0*q[4] + x1*q[5] + x2*q[6] + x3*q[7]
				d2 += x0*q[8] + x1*q[9] + x2*q[10] + x3*q[11]
				d3 += x0*q[12] + x1*q[13] + x2*q[14] + x3*q[15]
			}
			di[a], di[a+1], di[a+2], di[a+3] = d0, d1, d2, d3
		}
	}
}

// mulRange3 is mulRange4 for 3 x 3 blocks (SE(2) poses, SO(3) rotations).
func (m *BlockSym) mulRange3(dst, x *Blocks, lo, hi int, ends []int) {
	r := x.R
	switch r {
	case 2:
		m.mulRange3r2(dst, x, lo, hi, ends)
		return
	case 3:
		m.mulRange3r3(dst, x, lo, hi, ends)
		return
	}
	rb := r * 3
	for i := lo; i < hi; i++ {
		di := dst.Data[i*rb : (i+1)*rb]
		clear(di)
		for k, ke := m.RowPtr[i], m.rowEnd(i, ends); k < ke; k++ {
			j := m.ColIdx[k]
			q := (*[9]float64)(m.Val[k*9 : k*9+9])
			xj := x.Data[j*rb : (j+1)*rb]
			for a := 0; a < r; a++ {
				xa := (*[3]float64)(xj[a*3 : a*3+3])
				da := (*[3]float64)(di[a*3 : a*3+3])
				da[0] += xa[0]*q[0] + xa[1]*q[1] + xa[2]*q[2]
				da[1] += xa[0]*q[3] + xa[1]*q[4] + xa[2]*q[5]
				da[2] += xa[0]*q[6] + xa[1]*q[7] + xa[2]*q[8]
			}
		}
	}
}

// mulRange3r2 is mulRange3 at rank 2 (SE(2) at rank d), its sums kept in
// registers across the block row instead of stored after every block;
// each is the same sequence of additions, so the bits are too. It and
// mulRange3r3 repeat each other's shape: one function for both ranks,
// with slices where these have arrays, ran 12 to 34% more instructions.
func (m *BlockSym) mulRange3r2(dst, x *Blocks, lo, hi int, ends []int) {
	for i := lo; i < hi; i++ {
		var d0, d1, d2, d3, d4, d5 float64
		for k, ke := m.RowPtr[i], m.rowEnd(i, ends); k < ke; k++ {
			q := (*[9]float64)(m.Val[k*9 : k*9+9])
			xj := (*[6]float64)(x.Data[m.ColIdx[k]*6:])
			a0, a1, a2 := rowTimes3(q, xj[0], xj[1], xj[2])
			b0, b1, b2 := rowTimes3(q, xj[3], xj[4], xj[5])
			d0, d1, d2 = d0+a0, d1+a1, d2+a2
			d3, d4, d5 = d3+b0, d4+b1, d5+b2
		}
		di := (*[6]float64)(dst.Data[i*6:])
		di[0], di[1], di[2], di[3], di[4], di[5] = d0, d1, d2, d3, d4, d5
	}
}

// mulRange3r3 is mulRange3r2 at rank 3 (the first rank above d in 2-D).
func (m *BlockSym) mulRange3r3(dst, x *Blocks, lo, hi int, ends []int) {
	for i := lo; i < hi; i++ {
		var d0, d1, d2, d3, d4, d5, d6, d7, d8 float64
		for k, ke := m.RowPtr[i], m.rowEnd(i, ends); k < ke; k++ {
			q := (*[9]float64)(m.Val[k*9 : k*9+9])
			xj := (*[9]float64)(x.Data[m.ColIdx[k]*9:])
			a0, a1, a2 := rowTimes3(q, xj[0], xj[1], xj[2])
			d0, d1, d2 = d0+a0, d1+a1, d2+a2
			a0, a1, a2 = rowTimes3(q, xj[3], xj[4], xj[5])
			d3, d4, d5 = d3+a0, d4+a1, d5+a2
			a0, a1, a2 = rowTimes3(q, xj[6], xj[7], xj[8])
			d6, d7, d8 = d6+a0, d7+a1, d8+a2
		}
		di := (*[9]float64)(dst.Data[i*9:])
		di[0], di[1], di[2], di[3], di[4], di[5], di[6], di[7], di[8] = d0, d1, d2, d3, d4, d5, d6, d7, d8
	}
}

// rowTimes3 returns the row (x0, x1, x2) times the 3 x 3 block q^T (q
// row-major), each entry summed as mulRange3 sums it.
func rowTimes3(q *[9]float64, x0, x1, x2 float64) (float64, float64, float64) {
	return x0*q[0] + x1*q[1] + x2*q[2], x0*q[3] + x1*q[4] + x2*q[5], x0*q[6] + x1*q[7] + x2*q[8]
}

// MulBlocksParallel is MulBlocks on up to threads goroutines (0 means
// GOMAXPROCS). Each block row is written by exactly one goroutine, so the
// result is bit-for-bit that of MulBlocks.
func (m *BlockSym) MulBlocksParallel(dst, x *Blocks, threads int) {
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	if threads == 1 || m.N < mulParallelMin {
		m.MulBlocks(dst, x)
		return
	}
	var wg stdsync.WaitGroup
	nnz := len(m.ColIdx)
	lo := 0
	for t := 0; t < threads; t++ {
		// Split by stored blocks, not rows, so each goroutine gets equal work.
		target := nnz * (t + 1) / threads
		hi := lo
		for hi < m.N && m.RowPtr[hi] < target {
			hi++
		}
		if t == threads-1 {
			m.mulRange(dst, x, lo, m.N, nil) // the last part on this goroutine
			break
		}
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			m.mulRange(dst, x, lo, hi, nil)
		}(lo, hi)
		lo = hi
	}
	wg.Wait()
}

// mulParallelMin is the number of block rows below which MulBlocksParallel
// multiplies on the calling goroutine. A product costs about 0.1 us per
// pose, and waking an idle core tens of microseconds on a shared VM (a
// trace of CSAIL's solve, 1045 poses, counted 185 futex calls, most of
// them for these hand-offs); the rows are computed alike either way, so
// the result does not depend on it.
var mulParallelMin = 4096 // a variable so that tests can split small matrices

// MulVec sets dst = Q*x for plain vectors of length Dim(). Q is symmetric, so
// this is MulBlocks with R = 1.
func (m *BlockSym) MulVec(dst, x []float64) {
	m.MulBlocks(&Blocks{R: 1, B: m.B, N: m.N, Data: dst}, &Blocks{R: 1, B: m.B, N: m.N, Data: x})
}
