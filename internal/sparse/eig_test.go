package sparse_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
)

// randRotation returns a random rotation of SO(d), row-major stride d.
func randRotation(rng *rand.Rand, d int) [9]float64 {
	var r [9]float64
	if d == 2 {
		th := 2 * math.Pi * rng.Float64()
		c, s := math.Cos(th), math.Sin(th)
		r[0], r[1], r[2], r[3] = c, -s, s, c
		return r
	}
	w, x, y, z := rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()
	n := math.Sqrt(w*w + x*x + y*y + z*z)
	w, x, y, z = w/n, x/n, y/n, z/n
	return [9]float64{
		1 - 2*(y*y+z*z), 2 * (x*y - w*z), 2 * (x*z + w*y),
		2 * (x*y + w*z), 1 - 2*(x*x+z*z), 2 * (y*z - w*x),
		2 * (x*z - w*y), 2 * (y*z + w*x), 1 - 2*(x*x+y*y),
	}
}

// noiseFreeGraph returns a connected pose graph (odometry chain plus
// random loop closures) whose measurements agree exactly with random true
// poses, so Q has a null space of dimension d+1 (the rows of the true X and
// the common translation). Weights are spread over [1, spread].
func noiseFreeGraph(rng *rand.Rand, n, d int, loops int, spread, tscale float64) (*posegraph.Graph, []posegraph.Pose) {
	poses := make([]posegraph.Pose, n)
	for i := range poses {
		poses[i].R = randRotation(rng, d)
		for a := 0; a < d; a++ {
			poses[i].T[a] = tscale * rng.NormFloat64()
		}
	}
	g := &posegraph.Graph{D: d, IDs: make([]int, n)}
	for i := range g.IDs {
		g.IDs[i] = i
	}
	add := func(i, j int) {
		e := posegraph.Edge{I: i, J: j, Kappa: math.Pow(spread, rng.Float64()), Tau: math.Pow(spread, rng.Float64())}
		ri, rj := poses[i].R, poses[j].R
		for a := 0; a < d; a++ {
			for b := 0; b < d; b++ {
				s := 0.0
				for k := 0; k < d; k++ {
					s += ri[k*d+a] * rj[k*d+b] // R_i^T R_j
				}
				e.R[a*d+b] = s
			}
			s := 0.0
			for k := 0; k < d; k++ {
				s += ri[k*d+a] * (poses[j].T[k] - poses[i].T[k])
			}
			e.T[a] = s
		}
		g.Edges = append(g.Edges, e)
	}
	for i := 0; i+1 < n; i++ {
		add(i, i+1)
	}
	for l := 0; l < loops; l++ {
		i, j := rng.IntN(n), rng.IntN(n)
		if i != j {
			add(min(i, j), max(i, j))
		}
	}
	return g, poses
}

// rankOne is A - delta u u^T for a unit u: an S-like operator with one
// negative direction when u is in the null space of A.
type rankOne struct {
	a     sparse.Operator
	u     []float64
	delta float64
}

func (r rankOne) Dim() int { return r.a.Dim() }
func (r rankOne) MulVec(dst, x []float64) {
	r.a.MulVec(dst, x)
	s := 0.0
	for i, v := range r.u {
		s += v * x[i]
	}
	for i, v := range r.u {
		dst[i] -= r.delta * s * v
	}
}

type eigCase struct {
	name string
	op   sparse.Operator
	// prec is a Cholesky factor of a positive definite shift of op (or of
	// the PSD matrix it perturbs), for the preconditioned solver.
	prec sparse.Preconditioner
	// stiff cases (||A|| / gap ~ 1e8 and more) are only given to the
	// preconditioned solver: unpreconditioned Krylov methods need tens of
	// thousands of products there.
	stiff bool
}

func eigCases(t *testing.T) []eigCase {
	rng := rand.New(rand.NewPCG(11, 12))
	var cs []eigCase
	for ci, c := range cholCases {
		q := randBlockSym(rng, c.nb, c.b, c.dens, c.ncomp)
		d := denseOf(q)
		ev, _ := eigenvalues(t, d, false)
		shift := -ev[0] + 0.5*(ev[len(ev)-1]-ev[0]) + 1
		ch, err := sparse.NewCholesky(sparse.LowerCSC(q, shift, 0))
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, eigCase{fmt.Sprintf("random%d", ci), q, ch, false})
	}
	for _, pc := range []struct {
		n, d, loops    int
		spread, tscale float64
		delta          float64 // relative to ||Q||
		stiff          bool
	}{
		{30, 2, 10, 1e2, 1, 0, false}, {60, 3, 20, 1e2, 1, 0, false}, {40, 2, 15, 1e2, 1, 1e-3, false}, {80, 3, 30, 1e1, 1, 1e-4, false},
		{60, 3, 20, 1e4, 10, 0, true}, {40, 2, 15, 1e4, 10, 1e-7, true}, {80, 3, 30, 1e4, 10, 1e-7, true}, {50, 3, 20, 1e5, 10, 1e-3, true},
		{300, 3, 100, 1e6, 10, 1e-9, true},
	} {
		g, poses := noiseFreeGraph(rng, pc.n, pc.d, pc.loops, pc.spread, pc.tscale)
		q := g.Laplacian(posegraph.Poses)
		dq := denseOf(q)
		qn := normInf(dq)
		// The shift of the preconditioner should be of the order of the
		// magnitude of the eigenvalue sought: much smaller, and the
		// negative direction is amplified into a stiff preconditioned
		// problem; much larger, and the small eigenvalues are not resolved.
		ch, err := sparse.NewCholesky(sparse.LowerCSC(q, max(1e-10, pc.delta)*qn, 0))
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("Q%d-%dD", pc.n, pc.d)
		var op sparse.Operator = q
		if pc.delta > 0 {
			// Subtract along a null vector of Q: the first row of the
			// true lifted X, normalized. Smallest eigenvalue -delta,
			// zero of multiplicity d next to it.
			x := g.Lift(poses, posegraph.Poses, pc.d)
			u := make([]float64, q.Dim())
			for k := range u {
				u[k] = x.At(0, k)
			}
			nu := vnorm(u)
			for k := range u {
				u[k] /= nu
			}
			op = rankOne{q, u, pc.delta * qn}
			name += fmt.Sprintf("-minus%g", pc.delta)
		}
		cs = append(cs, eigCase{name, op, ch, pc.stiff})
	}
	return cs
}

var eigMethods = []struct {
	name  string
	stiff bool // suitable for stiff cases
	opts  func(c eigCase) sparse.EigOptions
}{
	{"Lanczos", false, func(eigCase) sparse.EigOptions {
		return sparse.EigOptions{Method: sparse.EigLanczos, Tol: 1e-10, MaxIter: 20000}
	}},
	{"LOBPCG", false, func(eigCase) sparse.EigOptions {
		return sparse.EigOptions{Method: sparse.EigLOBPCG, Tol: 1e-10, MaxIter: 5000}
	}},
	{"LOBPCG-Cholesky", true, func(c eigCase) sparse.EigOptions {
		return sparse.EigOptions{Tol: 1e-10, MaxIter: 1000, Precond: c.prec}
	}},
}

func TestSmallestEig(t *testing.T) {
	for _, c := range eigCases(t) {
		d := denseOf(c.op)
		ev, _ := eigenvalues(t, d, false)
		anorm := math.Max(math.Abs(ev[0]), math.Abs(ev[len(ev)-1]))
		for _, m := range eigMethods {
			if c.stiff && !m.stiff {
				continue
			}
			t.Run(c.name+"/"+m.name, func(t *testing.T) {
				opts := m.opts(c)
				res, err := sparse.SmallestEig(c.op, opts)
				if err != nil {
					t.Fatal(err)
				}
				checkEigPair(t, c.op, res, ev[0], anorm, opts.Tol)
				t.Logf("n %d lambda %.6g (dense %.6g) iters %d res %.2g", c.op.Dim(), res.Value, ev[0], res.Iterations, res.Residual)
			})
		}
		t.Run(c.name+"/Largest", func(t *testing.T) {
			res, err := sparse.LargestEig(c.op, sparse.EigOptions{Tol: 1e-10})
			if err != nil {
				t.Fatal(err)
			}
			checkEigPair(t, c.op, res, ev[len(ev)-1], anorm, 1e-10)
		})
	}
}

func checkEigPair(t *testing.T, op sparse.Operator, res sparse.EigResult, want, anorm, tol float64) {
	t.Helper()
	if !res.Converged {
		t.Errorf("not converged after %d iterations, residual %g", res.Iterations, res.Residual)
	}
	n := op.Dim()
	if len(res.Vector) != n || math.Abs(vnorm(res.Vector)-1) > 1e-12 {
		t.Fatalf("vector of length %d and norm %g", len(res.Vector), vnorm(res.Vector))
	}
	av := make([]float64, n)
	op.MulVec(av, res.Vector)
	for i := range av {
		av[i] -= res.Value * res.Vector[i]
	}
	// The reported residual is relative to an estimate of ||A|| that
	// may be low by a few per cent.
	if r := vnorm(av) / anorm; r > 2*tol {
		t.Errorf("true residual %g, reported %g", r, res.Residual)
	}
	if math.Abs(res.Value-want) > 4*tol*anorm+1e-13*anorm {
		t.Errorf("eigenvalue %.15g, dense %.15g (diff %g, ||A|| %g)", res.Value, want, res.Value-want, anorm)
	}
}

func TestEigOptions(t *testing.T) {
	q := randBlockSym(rand.New(rand.NewPCG(15, 16)), 20, 2, 0.2, 1)
	if _, err := sparse.SmallestEig(q, sparse.EigOptions{X0: make([]float64, 7)}); err == nil {
		t.Error("X0 of a wrong length accepted")
	}
	if _, err := sparse.SmallestEig(q, sparse.EigOptions{Tol: -1}); err == nil {
		t.Error("negative tolerance accepted")
	}
	if _, err := sparse.LargestEig(nil, sparse.EigOptions{}); err == nil {
		t.Error("nil operator accepted")
	}
	// Starting from the exact eigenvector converges at once, and the same
	// seed gives the same bits.
	ev, vecs := eigenvalues(t, denseOf(q), true)
	x0 := mat.Col(nil, 0, vecs)
	for _, m := range []sparse.EigMethod{sparse.EigLanczos, sparse.EigLOBPCG} {
		res, err := sparse.SmallestEig(q, sparse.EigOptions{X0: x0, Method: m, BlockSize: 1})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Converged || res.Iterations > 2 || math.Abs(res.Value-ev[0]) > 1e-10*math.Abs(ev[len(ev)-1]) {
			t.Errorf("%v from the eigenvector: %+v (want %g)", m, res, ev[0])
		}
		r1, _ := sparse.SmallestEig(q, sparse.EigOptions{Method: m, Seed: 7})
		r2, _ := sparse.SmallestEig(q, sparse.EigOptions{Method: m, Seed: 7})
		if r1.Value != r2.Value || r1.Iterations != r2.Iterations {
			t.Errorf("%v not deterministic", m)
		}
	}
}

// TestSmallestEigShiftedPreconditioner builds a certificate-like matrix
// A = Q - D (D a positive multiple of the identity on the rotation
// coordinates, large against the low-frequency modes of Q) and checks
// preconditioned LOBPCG with a factor of A + tau I from FactorShifted.
func TestSmallestEigShiftedPreconditioner(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	for _, d := range []int{2, 3} {
		g, _ := noiseFreeGraph(rng, 120, d, 40, 1e4, 10)
		q := g.Laplacian(posegraph.Poses)
		qn := normInf(denseOf(q))
		bb := sparse.NewBlockBuilder(q.N, q.B)
		blk := make([]float64, q.B*q.B)
		for a := 0; a < d; a++ {
			blk[a*q.B+a] = -1e-4 * qn
		}
		for i := 0; i < q.N; i++ {
			bb.AddDiag(i, q.Block(q.Diag[i]))
			bb.AddDiag(i, blk)
			for k := q.RowPtr[i]; k < q.RowPtr[i+1]; k++ {
				if j := q.ColIdx[k]; j > i {
					bb.AddOff(i, j, q.Block(k))
				}
			}
		}
		a := bb.Build()
		ev, _ := eigenvalues(t, denseOf(a), false)
		anorm := math.Max(-ev[0], ev[len(ev)-1])
		pre, tau, err := sparse.FactorShifted(a, 1e-8*qn, 20)
		if err != nil {
			t.Fatal(err)
		}
		if !(tau > -ev[0]) || tau > -100*ev[0] {
			t.Errorf("shift %g for lambda_min %g", tau, ev[0])
		}
		res, err := sparse.SmallestEig(a, sparse.EigOptions{Tol: 1e-10, Precond: pre, MaxIter: 500})
		if err != nil {
			t.Fatal(err)
		}
		checkEigPair(t, a, res, ev[0], anorm, 1e-10)
		// For comparison only: the factor of Q + sigma I.
		qpre, err := sparse.NewCholesky(sparse.LowerCSC(q, 1e-9*qn, 0))
		if err != nil {
			t.Fatal(err)
		}
		qres, err := sparse.SmallestEig(a, sparse.EigOptions{Tol: 1e-10, Precond: qpre, MaxIter: 500})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("d=%d: lambda_min %g, tau %g, %d iterations (with Q + sigma I: %d, converged %v)", d, ev[0], tau, res.Iterations, qres.Iterations, qres.Converged)
	}
}

func TestSmallestEigBadPreconditioner(t *testing.T) {
	q := randBlockSym(rand.New(rand.NewPCG(25, 26)), 30, 2, 0.2, 1)
	a := sparse.LowerCSC(q, 1e3, 0)
	ch, err := sparse.NewCholesky(a)
	if err != nil {
		t.Fatal(err)
	}
	a.Val[0] = -1e6
	if err := ch.Factorize(a); err == nil {
		t.Fatal("indefinite matrix factored")
	}
	if _, err := sparse.SmallestEig(q, sparse.EigOptions{Precond: ch}); err == nil {
		t.Error("a failed factor as preconditioner gave no error")
	}
}
