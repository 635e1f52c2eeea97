package bcm

import (
	"fmt"

	"github.com/bcmsync/bcmsync/internal/graphs"
	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph/blockmat"
)

// transSolver minimizes F jointly over all translation columns p_i with the
// Y blocks fixed. F is a convex quadratic in p with Hessian 2 L_tau (L_tau
// the tau-weighted graph Laplacian, the (d, d) entries of the blocks of Q)
// and gradient 2 N_p, N = X Q, so the exact step is
//
//	delta L_tau = -N_p,   p <- p + delta,
//
// one sparse Cholesky solve per row of X. L_tau is singular (a common shift
// of all p_i leaves F unchanged, one per connected component), so the first
// pose of every component keeps its p (delta = 0 there) and the rest of
// the system is positive definite. This is a block-coordinate step whose
// block is all translations at once: it moves the slow, diffusive
// translation modes of long chains in one go, which single-block updates
// need O(n^2) sweeps for.
type transSolver struct {
	chol   *sparse.Cholesky
	ext    TranslationSolver // instead of chol, when the caller gave one
	index  []int             // index[i] = row of pose i in the reduced system, -1 if anchored
	nfree  int
	rhs, x []float64
}

// TranslationStep is the exact joint minimization of F over all
// translations given the Y blocks, the step that Options.SolveTranslations
// starts every sweep with, made with the caller's solver of its system
// (Solver.StepTranslations makes it with Solve's own factorization):
// sync's trust region takes it at its trial points.
type TranslationStep struct{ ts *transSolver }

// NewTranslationStep returns the step for a connected graph of n poses.
func NewTranslationStep(n int, ts TranslationSolver) (*TranslationStep, error) {
	t, err := extTransSolver(n, ts)
	if err != nil {
		return nil, err
	}
	return &TranslationStep{t}, nil
}

// Apply updates the translation columns of x (r x b blocks, d rotation
// columns) given n = X Q: delta L_tau = -N_p for each row, the anchor's
// translation held. n is not updated.
func (s *TranslationStep) Apply(x, n *sparse.Blocks, d int) error {
	_, err := s.ts.step(x, n, d)
	return err
}

// extTransSolver is the step with the caller's solver of the system, for
// a connected graph of n poses.
func extTransSolver(n int, ext TranslationSolver) (*transSolver, error) {
	a := ext.Anchor()
	if a < 0 || a >= n {
		return nil, fmt.Errorf("bcm: translation solver anchored at pose %d of %d", a, n)
	}
	ts := &transSolver{ext: ext, index: make([]int, n), nfree: n - 1}
	for i := range ts.index {
		switch {
		case i < a:
			ts.index[i] = i
		case i == a:
			ts.index[i] = -1
		default:
			ts.index[i] = i - 1
		}
	}
	ts.rhs = make([]float64, ts.nfree)
	ts.x = make([]float64, ts.nfree)
	return ts, nil
}

func newTransSolver(q *sparse.BlockSym, d int) (*transSolver, error) {
	ts, a := assembleTrans(q.N, q.B, d, wholeRows(q))
	if a == nil {
		return ts, nil
	}
	return ts, ts.factor(a)
}

// rowChunks calls f with Q's block rows in order, some at a time: rows'
// row k is Q's row lo+k, its column indices Q's (valid during that call
// of f).
type rowChunks func(f func(lo int, rows *sparse.BlockSym))

// wholeRows is Q's rows all at once.
func wholeRows(q *sparse.BlockSym) rowChunks {
	return func(f func(int, *sparse.BlockSym)) { f(0, q) }
}

// assembleTrans returns the step's pose index and its system L_tau, read
// from the n block rows (of size b) of Q that rows gives, unfactored (nil
// when every pose is its component's anchor).
func assembleTrans(n, b, d int, rows rowChunks) (*transSolver, *sparse.CSC) {
	// Components by union-find over the pattern of Q.
	u := graphs.NewUnionFind(n)
	rows(func(lo int, q *sparse.BlockSym) {
		for k := 0; k < q.N; k++ {
			for p := q.RowPtr[k]; p < q.RowPtr[k+1]; p++ {
				u.Union(lo+k, q.ColIdx[p])
			}
		}
	})
	ts := &transSolver{index: make([]int, n)}
	for i := 0; i < n; i++ {
		if u.Find(i) == i {
			ts.index[i] = -1 // the smallest index of its component
		} else {
			ts.index[i] = ts.nfree
			ts.nfree++
		}
	}
	if ts.nfree == 0 {
		return ts, nil
	}
	a := &sparse.CSC{N: ts.nfree, ColPtr: make([]int, ts.nfree+1)}
	dd := d*b + d
	// Column of free pose j: rows i >= j (reduced order is increasing in
	// the pose index, so the lower triangle is i >= j), read from row j of
	// Q, whose column indices are sorted.
	rows(func(lo int, q *sparse.BlockSym) {
		for k := 0; k < q.N; k++ {
			j := lo + k
			cj := ts.index[j]
			if cj < 0 {
				continue
			}
			for p := q.RowPtr[k]; p < q.RowPtr[k+1]; p++ {
				i := q.ColIdx[p]
				ci := ts.index[i]
				if i < j || ci < 0 {
					continue
				}
				v := q.Val[p*b*b+dd]
				if v == 0 && i != j {
					continue
				}
				a.RowIdx = append(a.RowIdx, ci)
				a.Val = append(a.Val, v)
			}
			a.ColPtr[cj+1] = len(a.RowIdx)
		}
	})
	return ts, a
}

// factor factors the system a that assembleTrans made.
func (ts *transSolver) factor(a *sparse.CSC) error {
	chol, err := sparse.NewCholesky(a)
	if err != nil {
		return fmt.Errorf("bcm: translation Laplacian: %w", err)
	}
	ts.chol = chol
	ts.rhs = make([]float64, ts.nfree)
	ts.x = make([]float64, ts.nfree)
	return nil
}

// Translations is the exact joint step over all translations with a
// factorization of its own, as Solver.StepTranslations makes it, for a
// caller that holds no Q (sync/distributed's coordinator: Q is 41 MB and
// its assembly 28 MB more at 10^5 poses in 3-D, on top of the factor's
// 30 MB).
type Translations struct {
	ts *transSolver
	d  int
}

// NewTranslationsByRows assembles and factors the step's system, the
// tau-weighted Laplacian (the (d, d) entries of Q's blocks), for a pose
// problem in dimension d whose Q has n block rows: chunks calls its
// function with Q's block rows from lo on, in order, a few thousand at a
// time (posegraph's LaplacianRows.Chunks; the rows need to last only the
// call), and is called twice, so that only the step's system and its
// factor are ever whole.
func NewTranslationsByRows(n, d int, chunks func(f func(lo int, rows *blockmat.BlockSym))) (*Translations, error) {
	if d < 1 || d > 3 {
		return nil, fmt.Errorf("bcm: dimension d = %d, want 2 or 3", d)
	}
	ts, a := assembleTrans(n, d+1, d, chunks)
	if err := ts.factor(a); err != nil {
		return nil, err
	}
	return &Translations{ts: ts, d: d}, nil
}

// Step updates the translation columns of x given n = X Q and returns F's
// decrease, as Solver.StepTranslations does, to the bit: the same system,
// factored the same way.
func (t *Translations) Step(x, n *blockmat.Blocks) (float64, error) {
	return t.ts.step(x, n, t.d)
}

// step updates the translation columns of x given n = X Q and returns
// F's decrease, -<N_p, delta> = delta^T L_tau delta >= 0.
func (ts *transSolver) step(x, n *sparse.Blocks, d int) (float64, error) {
	if ts.nfree == 0 {
		return 0, nil
	}
	dec := 0.0
	b, rb := x.B, x.R*x.B
	for a := 0; a < x.R; a++ {
		for i, ci := range ts.index {
			if ci >= 0 {
				ts.rhs[ci] = -n.Data[i*rb+a*b+d]
			}
		}
		if ts.ext != nil {
			if err := ts.ext.SolveTranslations(ts.x, ts.rhs); err != nil {
				return 0, err
			}
		} else {
			ts.chol.Solve(ts.x, ts.rhs)
		}
		for i, ci := range ts.index {
			if ci >= 0 {
				x.Data[i*rb+a*b+d] += ts.x[ci]
				dec += ts.rhs[ci] * ts.x[ci]
			}
		}
	}
	return dec, nil
}
