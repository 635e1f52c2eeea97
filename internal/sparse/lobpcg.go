package sparse

import (
	"errors"
	"math"
	"math/rand/v2"
)

// lobpcg computes the smallest eigenpair by Knyazev's LOBPCG: each
// iteration does a Rayleigh-Ritz step on span[X, W, P], the current block,
// the preconditioned residuals and the previous search directions. The basis
// is kept orthonormal explicitly (Gram-Schmidt twice, dropping directions
// that are numerically dependent), which is what keeps the method stable
// once residuals are tiny against ||A|| ~ 1e6.
func lobpcg(a Operator, opts EigOptions) (EigResult, error) {
	n := a.Dim()
	rng := rand.New(rand.NewPCG(opts.Seed, 0x10b9c))
	maxIter := opts.MaxIter
	if maxIter == 0 {
		maxIter = 1000
	}
	bs := min(opts.BlockSize, n)
	// ||A|| estimate for the stopping test: a short Lanczos run.
	est, err := lanczos(a, true, EigOptions{Tol: 1e-2, MaxIter: min(n, 30), Seed: opts.Seed + 1})
	if err != nil {
		return EigResult{}, err
	}
	anorm := math.Abs(est.Value)

	z := make([]float64, 3*bs*n)  // basis [X W P], column-major
	az := make([]float64, 3*bs*n) // A times the basis
	nx := make([]float64, bs*n)   // new X
	nax := make([]float64, bs*n)  // new A X
	np := make([]float64, bs*n)   // new P
	wtmp := make([]float64, bs*n) // residuals
	tmp := make([]float64, n)
	startBlock(z[:bs*n], n, bs, opts.X0, rng)
	for c := 0; c < bs; c++ {
		a.MulVec(az[c*n:(c+1)*n], z[c*n:(c+1)*n])
	}
	nP := 0 // columns of P
	theta := make([]float64, bs)
	col := func(buf []float64, c int) []float64 { return buf[c*n : (c+1)*n] }
	first := true
	var res EigResult
	for it := 0; ; it++ {
		// Rayleigh-Ritz on the current basis (X alone on the first pass).
		k := bs // X columns
		if !first {
			// W = M R, R = A X - X theta, preconditioned as one block
			// when the preconditioner can (a Cholesky factor reads L
			// once for all columns).
			for c := 0; c < bs; c++ {
				r := col(wtmp, c)
				copy(r, col(az, c))
				axpy(r, -theta[c], col(z, c))
			}
			wcols := z[bs*n : 2*bs*n]
			switch pm := opts.Precond.(type) {
			case nil:
				copy(wcols, wtmp)
			case interface {
				PreconditionMany(dst, r []float64, k int)
			}:
				pm.PreconditionMany(wcols, wtmp, bs)
			default:
				for c := 0; c < bs; c++ {
					pm.Precondition(col(wcols, c), col(wtmp, c))
				}
			}
			if opts.Precond != nil {
				for _, v := range wcols {
					if math.IsNaN(v) || math.IsInf(v, 0) {
						return EigResult{}, errors.New("sparse: LOBPCG: the preconditioner returned NaN or Inf (a factor whose Factorize failed?)")
					}
				}
			}
			nw := 0
			for c := 0; c < bs; c++ {
				if nw != c {
					copy(col(z, k+nw), col(z, k+c))
				}
				if orthonormalize(z, n, k+nw) {
					a.MulVec(col(az, k+nw), col(z, k+nw))
					nw++
				}
			}
			k += nw
			for c := 0; c < nP; c++ {
				p := col(z, k)
				copy(p, col(np, c))
				if orthonormalize(z, n, k) {
					a.MulVec(col(az, k), p)
					k++
				}
			}
		}
		first = false
		g := make([]float64, k*k)
		for i := 0; i < k; i++ {
			for j := i; j < k; j++ {
				v := dot(col(z, i), col(az, j))
				g[i*k+j], g[j*k+i] = v, v
			}
		}
		vals, vecs, err := symEig(g, k)
		if err != nil {
			return EigResult{}, err
		}
		// New X = Z C, A X = (A Z) C, P = Z[:, bs:] C[bs:, :].
		for c := 0; c < bs; c++ {
			x, ax, p := col(nx, c), col(nax, c), col(np, c)
			for i := range x {
				x[i], ax[i], p[i] = 0, 0, 0
			}
			for i := 0; i < k; i++ {
				s := vecs.At(i, c)
				axpy(x, s, col(z, i))
				axpy(ax, s, col(az, i))
				if i >= bs {
					axpy(p, s, col(z, i))
				}
			}
			theta[c] = vals[c]
		}
		nP = 0
		if k > bs {
			nP = bs
		}
		copy(z[:bs*n], nx)
		copy(az[:bs*n], nax)
		// Convergence of the smallest pair.
		r := tmp
		copy(r, col(az, 0))
		axpy(r, -theta[0], col(z, 0))
		anorm = max(anorm, math.Abs(theta[0]), math.Abs(theta[bs-1]))
		rn := norm(r) / max(anorm, math.SmallestNonzeroFloat64)
		res = EigResult{Value: theta[0], Residual: rn, Iterations: it, Converged: rn <= opts.Tol}
		if res.Converged || it >= maxIter || bs == n {
			break
		}
	}
	res.Vector = append([]float64(nil), z[:n]...)
	nv := norm(res.Vector)
	scale(res.Vector, 1/nv)
	return res, nil
}
