package sparse

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"
)

// EigMethod selects the eigensolver of SmallestEig.
type EigMethod int

const (
	// EigAuto is LOBPCG when a preconditioner is given, else Lanczos.
	EigAuto EigMethod = iota
	// EigLOBPCG is the locally optimal block preconditioned conjugate
	// gradient method (Knyazev), with or without a preconditioner.
	EigLOBPCG
	// EigLanczos is thick-restart Lanczos with full reorthogonalization.
	EigLanczos
)

func (m EigMethod) String() string {
	switch m {
	case EigLOBPCG:
		return "LOBPCG"
	case EigLanczos:
		return "Lanczos"
	}
	return "auto"
}

// EigOptions controls SmallestEig and LargestEig. Zero values select
// defaults: Tol 1e-10, MaxIter 1000 for LOBPCG (iterations) and 10000 for
// Lanczos (products with A), BlockSize 4, Seed 1.
type EigOptions struct {
	// Tol bounds the residual ||A v - lambda v|| relative to an estimate
	// of ||A|| (the largest magnitude Ritz value seen).
	Tol     float64
	MaxIter int
	// BlockSize is LOBPCG's block size. A block a little larger than the
	// multiplicity of the wanted eigenvalue converges much faster.
	BlockSize int
	Seed      uint64
	// Precond, an approximation of A^{-1} that is symmetric positive
	// definite (for example a Cholesky factor of Q + sigma I for S = Q -
	// Lambda), speeds LOBPCG up by orders of magnitude on the stiff
	// matrices of pose graphs. Lanczos ignores it.
	Precond Preconditioner
	// X0 is an optional starting vector (length Dim()) or block of
	// starting vectors (column-major, a multiple of Dim()).
	X0     []float64
	Method EigMethod
}

// EigResult is an eigenpair estimate. Vector has unit norm; Residual is
// ||A v - Value v|| divided by the ||A|| estimate.
type EigResult struct {
	Value      float64
	Vector     []float64
	Residual   float64
	Iterations int
	Converged  bool
}

// SmallestEig returns the smallest (algebraic) eigenvalue of the symmetric
// operator a with a unit eigenvector. Not converging within MaxIter is
// reported in the result (with the best estimate), not as an error.
func SmallestEig(a Operator, opts EigOptions) (EigResult, error) {
	if err := checkEigOptions(a, &opts); err != nil {
		return EigResult{}, err
	}
	m := opts.Method
	if m == EigAuto {
		m = EigLanczos
		if opts.Precond != nil {
			m = EigLOBPCG
		}
	}
	if m == EigLOBPCG {
		return lobpcg(a, opts)
	}
	return lanczos(a, false, opts)
}

// LargestEig returns the largest (algebraic) eigenvalue of a by Lanczos.
// The top of the spectrum of a graph Laplacian is well separated, so this
// is cheap.
func LargestEig(a Operator, opts EigOptions) (EigResult, error) {
	if err := checkEigOptions(a, &opts); err != nil {
		return EigResult{}, err
	}
	return lanczos(a, true, opts)
}

func checkEigOptions(a Operator, o *EigOptions) error {
	if a == nil {
		return errors.New("sparse: eigensolver: nil operator")
	}
	n := a.Dim()
	if n <= 0 {
		return fmt.Errorf("sparse: eigensolver: operator of order %d", n)
	}
	if len(o.X0) > 0 && len(o.X0)%n != 0 {
		return fmt.Errorf("sparse: eigensolver: X0 has length %d, not a multiple of %d", len(o.X0), n)
	}
	if o.Tol < 0 || math.IsNaN(o.Tol) || o.MaxIter < 0 || o.BlockSize < 0 {
		return fmt.Errorf("sparse: eigensolver: bad options Tol %g MaxIter %d BlockSize %d", o.Tol, o.MaxIter, o.BlockSize)
	}
	if o.Tol == 0 {
		o.Tol = 1e-10
	}
	if o.BlockSize == 0 {
		o.BlockSize = 4
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	return nil
}

// orthonormalize makes column c of the column-major block z (n rows)
// orthogonal to columns 0..c-1 (assumed orthonormal) and of unit norm by
// classical Gram-Schmidt applied twice. It returns false if the column is
// numerically inside the span of the others.
func orthonormalize(z []float64, n, c int) bool {
	v := z[c*n : (c+1)*n]
	nv := norm(v)
	if nv == 0 || math.IsNaN(nv) || math.IsInf(nv, 0) {
		return false
	}
	scale(v, 1/nv)
	for pass := 0; pass < 2; pass++ {
		for i := 0; i < c; i++ {
			u := z[i*n : (i+1)*n]
			axpy(v, -dot(u, v), u)
		}
	}
	nv = norm(v)
	if nv < 1e-10 {
		return false
	}
	scale(v, 1/nv)
	return true
}

func scale(v []float64, s float64) {
	for i := range v {
		v[i] *= s
	}
}

// axpy sets y += s*x (len(x) == len(y)).
func axpy(y []float64, s float64, x []float64) { floats.AddScaled(y, s, x) }

// symEig returns the ascending eigenvalues and the eigenvectors (columns)
// of the k x k symmetric matrix held row-major in g (upper triangle used
// after symmetrization).
func symEig(g []float64, k int) ([]float64, *mat.Dense, error) {
	s := mat.NewSymDense(k, nil)
	for i := 0; i < k; i++ {
		for j := i; j < k; j++ {
			s.SetSym(i, j, 0.5*(g[i*k+j]+g[j*k+i]))
		}
	}
	var es mat.EigenSym
	if !es.Factorize(s, true) {
		return nil, nil, errors.New("sparse: dense symmetric eigensolver failed")
	}
	var v mat.Dense
	es.VectorsTo(&v)
	return es.Values(nil), &v, nil
}

// startBlock fills the column-major n x k block x from x0 (as many columns
// as it has) and random normal columns, then orthonormalizes it, replacing
// dependent columns by fresh random ones.
func startBlock(x []float64, n, k int, x0 []float64, rng *rand.Rand) {
	copy(x, x0)
	for c := len(x0) / n; c < k; c++ {
		for i := c * n; i < (c+1)*n; i++ {
			x[i] = rng.NormFloat64()
		}
	}
	for c := 0; c < k; c++ {
		for tries := 0; !orthonormalize(x, n, c); tries++ {
			if tries > 10 {
				panic("sparse: cannot build an orthonormal start block") // k <= n makes this unreachable
			}
			for i := c * n; i < (c+1)*n; i++ {
				x[i] = rng.NormFloat64()
			}
		}
	}
}

// lanczos is thick-restart Lanczos with full reorthogonalization for the
// smallest (largest = false) or largest eigenvalue. The basis holds at most
// m vectors; at a restart the m/2 Ritz vectors nearest the wanted end of the
// spectrum are kept, so what was learned about the neighbouring eigenvalues
// (a cluster at zero, say) is not thrown away.
func lanczos(a Operator, largest bool, opts EigOptions) (EigResult, error) {
	n := a.Dim()
	rng := rand.New(rand.NewPCG(opts.Seed, 0x1a2c))
	maxIter := opts.MaxIter
	if maxIter == 0 {
		maxIter = 10000
	}
	m := min(n, 50)
	keep := max(1, m/2)
	v := make([]float64, n*(m+1))
	col := func(i int) []float64 { return v[i*n : (i+1)*n] }
	ld := m + 1
	h := make([]float64, ld*ld)
	coef := make([]float64, m+1)
	corr := make([]float64, m+1)
	tmp := make([]float64, n*keep)
	var x0 []float64
	if len(opts.X0) >= n {
		x0 = opts.X0[:n]
	}
	startBlock(v[:n], n, 1, x0, rng)
	k, iters := 0, 0
	anorm := 0.0
	for {
		mm := m
		beta := 0.0
		for j := k; j < m; j++ {
			w := col(j + 1)
			a.MulVec(w, col(j))
			iters++
			// Classical Gram-Schmidt twice: the second pass restores the
			// orthogonality the first loses, and its corrections belong to
			// the projected matrix too.
			for i := 0; i <= j; i++ {
				coef[i] = dot(col(i), w)
			}
			for i := 0; i <= j; i++ {
				axpy(w, -coef[i], col(i))
			}
			for i := 0; i <= j; i++ {
				corr[i] = dot(col(i), w)
			}
			for i := 0; i <= j; i++ {
				axpy(w, -corr[i], col(i))
				coef[i] += corr[i]
			}
			for i := 0; i <= j; i++ {
				h[i*ld+j] = coef[i]
				h[j*ld+i] = coef[i]
			}
			anorm = max(anorm, math.Abs(coef[j]))
			beta = norm(w)
			anorm = max(anorm, beta)
			if beta <= 1e-12*anorm || beta == 0 {
				// The Krylov space is invariant: its Ritz values are
				// exact eigenvalues and, from a random start, include
				// every distinct eigenvalue the start vector touches.
				mm = j + 1
				beta = 0
				break
			}
			scale(w, 1/beta)
			if j+1 < m {
				h[(j+1)*ld+j] = beta
				h[j*ld+j+1] = beta
			}
			if iters >= maxIter {
				mm = j + 1
				break
			}
		}
		g := make([]float64, mm*mm)
		for i := 0; i < mm; i++ {
			copy(g[i*mm:(i+1)*mm], h[i*ld:i*ld+mm])
		}
		theta, s, err := symEig(g, mm)
		if err != nil {
			return EigResult{}, err
		}
		anorm = max(anorm, math.Abs(theta[0]), math.Abs(theta[mm-1]))
		t := 0
		if largest {
			t = mm - 1
		}
		res := math.Abs(beta * s.At(mm-1, t))
		done := res <= opts.Tol*anorm || beta == 0 || iters >= maxIter
		if done {
			y := make([]float64, n)
			for i := 0; i < mm; i++ {
				axpy(y, s.At(i, t), col(i))
			}
			scale(y, 1/norm(y))
			ay := make([]float64, n)
			a.MulVec(ay, y)
			lam := dot(y, ay)
			axpy(ay, -lam, y)
			r := norm(ay) / max(anorm, math.SmallestNonzeroFloat64)
			return EigResult{Value: lam, Vector: y, Residual: r, Iterations: iters, Converged: r <= opts.Tol}, nil
		}
		// Thick restart: keep the Ritz vectors at the wanted end, then the
		// residual direction v_{m+1}.
		idx := make([]int, keep)
		for i := range idx {
			idx[i] = i
			if largest {
				idx[i] = mm - 1 - i
			}
		}
		for c, ti := range idx {
			u := tmp[c*n : (c+1)*n]
			for i := range u {
				u[i] = 0
			}
			for i := 0; i < mm; i++ {
				axpy(u, s.At(i, ti), col(i))
			}
		}
		copy(col(keep), col(mm))
		copy(v[:keep*n], tmp)
		for i := range h {
			h[i] = 0
		}
		for c, ti := range idx {
			h[c*ld+c] = theta[ti]
			b := beta * s.At(mm-1, ti)
			h[keep*ld+c] = b
			h[c*ld+keep] = b
		}
		k = keep
	}
}
