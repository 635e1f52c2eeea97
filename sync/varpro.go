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
// (rounding.Plan): BCM's translation step. So every trial point has its
// translations replaced by that minimizer before it is judged ("variable
// projection": the trust region works, in effect, on the rotation-only
// problem, whose objective is F minimized over translations). F there is
// at most F at the retracted point, so rho only improves.

// translationProjector replaces the translations of a point by their
// exact minimizer given its Y blocks.
type translationProjector struct{ step *bcm.TranslationStep }

func newTranslationProjector(ts bcm.TranslationSolver, n int) (*translationProjector, error) {
	step, err := bcm.NewTranslationStep(n, ts)
	if err != nil {
		return nil, err
	}
	return &translationProjector{step}, nil
}

// project sets the translations of x (poses, any rank) to the minimizer of
// F = tr(X Q X^T) over them, centred, and nq to X Q at the result. The
// anchor's translation is held by the step, and the common shift, which F
// does not see, is removed after.
func (p *translationProjector) project(m *manifold, x, nq *sparse.Blocks) error {
	m.mulQ(nq, x)
	if err := p.step.Apply(x, nq, m.d); err != nil {
		return err
	}
	m.removeShift(x)
	m.mulQ(nq, x)
	return nil
}
