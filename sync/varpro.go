package sync

import (
	"github.com/bcmsync/bcmsync/bcm"
	"github.com/bcmsync/bcmsync/internal/sparse"
)

// The trust region's steps move rotations and translations together, by
// a model that is quadratic in both; the rotations then go through the
// retraction, which the model does not see. On a long chain with stiff
// translations (a corridor), a small rotation of one pose swings every
// position after it by the chain's length, the translations the model
// chose no longer fit the retracted rotations, and F at the new point is
// far above the model's prediction: the step is rejected, or accepted with
// a radius that must stay small. The translations, however, are a convex
// quadratic given the rotations, and their exact minimizer costs one solve
// with the translation Laplacian's factor, which the solve holds anyway
// (rounding.Plan). So every trial point has its translations replaced by
// that minimizer before it is judged ("variable projection": the trust
// region works, in effect, on the rotation-only problem, whose objective
// is F minimized over translations). F there is at most F at the
// retracted point, so rho only improves.

// translationProjector replaces the translations of a point by their
// exact minimizer given its Y blocks.
type translationProjector struct {
	ts       bcm.TranslationSolver
	index    []int // index[i] = pose i's unknown, -1 for the anchor
	rhs, sol []float64
}

func newTranslationProjector(ts bcm.TranslationSolver, n int) *translationProjector {
	p := &translationProjector{ts: ts, index: make([]int, n), rhs: make([]float64, n-1), sol: make([]float64, n-1)}
	a := ts.Anchor()
	for i := range p.index {
		switch {
		case i < a:
			p.index[i] = i
		case i == a:
			p.index[i] = -1
		default:
			p.index[i] = i - 1
		}
	}
	return p
}

// project sets the translations of x (poses, any rank) to the minimizer of
// F = tr(X Q X^T) over them, centred, and nq to X Q at the result. The
// step is delta L_tau = -N_p for each row of X, N = X Q, as BCM's
// translation step takes it (bcm/translation.go); the anchor's translation
// is held, and the common shift, which F does not see, is removed after.
func (p *translationProjector) project(m *manifold, x, nq *sparse.Blocks) error {
	m.mulQ(nq, x)
	b, rb, d := x.B, x.R*x.B, m.d
	for a := 0; a < x.R; a++ {
		for i, k := range p.index {
			if k >= 0 {
				p.rhs[k] = -nq.Data[i*rb+a*b+d]
			}
		}
		if err := p.ts.SolveTranslations(p.sol, p.rhs); err != nil {
			return err
		}
		for i, k := range p.index {
			if k >= 0 {
				x.Data[i*rb+a*b+d] += p.sol[k]
			}
		}
	}
	m.removeShift(x)
	m.mulQ(nq, x)
	return nil
}
