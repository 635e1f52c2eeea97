package sparse

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/floats"
)

// BlockJacobi is the block-diagonal preconditioner of a BlockSym: it
// applies (Q_ii + shift I)^{-1} to each block of the residual, using a dense
// Cholesky factor of each diagonal block computed once.
type BlockJacobi struct {
	n, b int
	l    []float64 // lower Cholesky factors of the diagonal blocks, row-major
}

// NewBlockJacobi factors the diagonal blocks of q + shift I. It returns a
// *NotPositiveDefiniteError (Column = scalar index) if one is not positive
// definite.
func NewBlockJacobi(q *BlockSym, shift float64) (*BlockJacobi, error) {
	if q == nil || q.N < 0 || len(q.Diag) != q.N {
		return nil, errors.New("sparse: NewBlockJacobi: malformed block matrix")
	}
	b := q.B
	bj := &BlockJacobi{n: q.N, b: b, l: make([]float64, q.N*b*b)}
	for i := 0; i < q.N; i++ {
		l := bj.l[i*b*b : (i+1)*b*b]
		copy(l, q.Block(q.Diag[i]))
		for a := 0; a < b; a++ {
			l[a*b+a] += shift
		}
		if c, piv := denseCholesky(l, b); c >= 0 {
			return nil, &NotPositiveDefiniteError{Column: i*b + c, Pivot: piv}
		}
	}
	return bj, nil
}

// denseCholesky overwrites the lower triangle of the b x b row-major a with
// its Cholesky factor. It returns the failing column and pivot, or -1.
func denseCholesky(a []float64, b int) (int, float64) {
	for j := 0; j < b; j++ {
		d := a[j*b+j]
		for k := 0; k < j; k++ {
			d -= a[j*b+k] * a[j*b+k]
		}
		if !(d > 0) || math.IsInf(d, 0) {
			return j, d
		}
		d = math.Sqrt(d)
		a[j*b+j] = d
		for i := j + 1; i < b; i++ {
			s := a[i*b+j]
			for k := 0; k < j; k++ {
				s -= a[i*b+k] * a[j*b+k]
			}
			a[i*b+j] = s / d
		}
	}
	return -1, 0
}

// Precondition sets dst = blockdiag(Q + shift I)^{-1} r. dst and r may alias.
func (bj *BlockJacobi) Precondition(dst, r []float64) {
	b := bj.b
	for i := 0; i < bj.n; i++ {
		l := bj.l[i*b*b : (i+1)*b*b]
		y := dst[i*b : (i+1)*b]
		copy(y, r[i*b:(i+1)*b])
		for a := 0; a < b; a++ {
			s := y[a]
			for k := 0; k < a; k++ {
				s -= l[a*b+k] * y[k]
			}
			y[a] = s / l[a*b+a]
		}
		for a := b - 1; a >= 0; a-- {
			s := y[a]
			for k := a + 1; k < b; k++ {
				s -= l[k*b+a] * y[k]
			}
			y[a] = s / l[a*b+a]
		}
	}
}

// PCGOptions controls PCG. Zero values mean Tol = 1e-10 and
// MaxIter = max(2n, 100).
type PCGOptions struct {
	Tol     float64 // on the relative residual ||b - A x|| / ||b||
	MaxIter int
}

// PCGResult reports how PCG ended. Residual is the true relative residual
// ||b - A x|| / ||b|| of the returned x.
type PCGResult struct {
	Iterations int
	Residual   float64
	Converged  bool
}

// PCGWork holds the four vectors PCG needs, so repeated solves do not
// allocate.
type PCGWork struct {
	r, z, p, q []float64
}

// NewPCGWork returns buffers for systems of order n.
func NewPCGWork(n int) *PCGWork {
	return &PCGWork{r: make([]float64, n), z: make([]float64, n), p: make([]float64, n), q: make([]float64, n)}
}

// ErrNotPositiveDefinite is returned (wrapped) by PCG when it meets a
// direction of non-positive curvature p^T A p <= 0.
var ErrNotPositiveDefinite = errors.New("sparse: operator is not positive definite")

// PCG solves A x = b for symmetric positive definite A by preconditioned
// conjugate gradients. x holds the initial guess and receives the solution.
// m may be nil (no preconditioner); w may be nil (PCG allocates its own).
// Not converging within MaxIter is reported in the result, not as an error.
func PCG(a Operator, x, b []float64, m Preconditioner, opts PCGOptions, w *PCGWork) (PCGResult, error) {
	n := a.Dim()
	if len(x) != n || len(b) != n {
		return PCGResult{}, fmt.Errorf("sparse: PCG: operator of order %d with x of length %d and b of length %d", n, len(x), len(b))
	}
	if w == nil {
		w = NewPCGWork(n)
	}
	if len(w.r) < n {
		return PCGResult{}, fmt.Errorf("sparse: PCG: work space for order %d, need %d", len(w.r), n)
	}
	tol := opts.Tol
	if tol <= 0 {
		tol = 1e-10
	}
	maxIter := opts.MaxIter
	if maxIter <= 0 {
		maxIter = max(2*n, 100)
	}
	r, z, p, q := w.r[:n], w.z[:n], w.p[:n], w.q[:n]
	bnorm := norm(b)
	if bnorm == 0 {
		for i := range x {
			x[i] = 0
		}
		return PCGResult{Converged: true}, nil
	}
	a.MulVec(r, x)
	for i := range r {
		r[i] = b[i] - r[i]
	}
	res := norm(r) / bnorm
	applyPrec := func() {
		if m == nil {
			copy(z, r)
		} else {
			m.Precondition(z, r)
		}
	}
	applyPrec()
	copy(p, z)
	rz := dot(r, z)
	it := 0
	for ; it < maxIter && res > tol; it++ {
		a.MulVec(q, p)
		pq := dot(p, q)
		if !(pq > 0) {
			return PCGResult{Iterations: it, Residual: res}, fmt.Errorf("sparse: PCG iteration %d: curvature %g: %w", it, pq, ErrNotPositiveDefinite)
		}
		alpha := rz / pq
		for i := range x {
			x[i] += alpha * p[i]
			r[i] -= alpha * q[i]
		}
		res = norm(r) / bnorm
		if res <= tol {
			it++
			break
		}
		applyPrec()
		rzNew := dot(r, z)
		beta := rzNew / rz
		rz = rzNew
		for i := range p {
			p[i] = z[i] + beta*p[i]
		}
	}
	// Report the true residual: the recurrence drifts on hard problems.
	a.MulVec(r, x)
	for i := range r {
		r[i] = b[i] - r[i]
	}
	res = norm(r) / bnorm
	return PCGResult{Iterations: it, Residual: res, Converged: res <= tol}, nil
}

// dot and axpy use gonum's assembly kernels: the eigensolvers' full
// reorthogonalization is mostly these two.
func dot(x, y []float64) float64 { return floats.Dot(x, y) }

func norm(x []float64) float64 {
	// Scaled to avoid overflow on the large weights of real datasets.
	scale, ssq := 0.0, 1.0
	for _, v := range x {
		if v == 0 {
			continue
		}
		av := math.Abs(v)
		if scale < av {
			ssq = 1 + ssq*(scale/av)*(scale/av)
			scale = av
		} else {
			ssq += (v / scale) * (v / scale)
		}
	}
	return scale * math.Sqrt(ssq)
}
