// Package covariance computes the marginal covariances of a pose graph's
// estimate, typically the certified optimum sync.Solve returns: for each
// pose a 3 x 3 (2-D: x, y, theta) or 6 x 6 (3-D: x, y, z, rx, ry, rz)
// matrix, for each landmark a d x d one, and for given pairs of vertices
// their joint covariance, as data-association gating needs.
//
// # The noise model
//
// The objective bcmsync minimizes (docs/design.md section 1),
//
//	F = sum_e kappa_e ||R_j - R_i Rt_e||_F^2 + tau_e ||t_j - t_i - R_i tt_e||^2,
//
// has no factor 1/2: it is twice the negative log-likelihood of
// measurements with Langevin rotation noise of concentration kappa_e
// (density proportional to exp(-kappa/2 ||I - E||_F^2)) and Gaussian
// translation noise N(0, I/tau_e), the model the generators of package
// datasets draw from. Written as F = ||r||^2 with r the whitened residuals
// sqrt(kappa) vec(R_j - R_i Rt_e) and sqrt(tau) (t_j - t_i - R_i tt_e),
// the negative log-likelihood is ||r||^2 / 2, so the Fisher information of
// the poses is J^T J (J the Jacobian of r), half the Hessian of F, and the
// covariance is its inverse. For small rotation noise
// ||I - E||_F^2 = 2 |theta|^2 to second order, so an edge with weight kappa
// says its rotation error has a standard deviation of 1/sqrt(2 kappa)
// radians per axis; tau says 1/sqrt(tau) per axis for the translation.
//
// # Coordinates and gauge
//
// A pose (R, t) is perturbed as (R Exp(w), t + dt): the translation in the
// world frame, the rotation on the right (in the body frame), with w an
// angle (2-D) or an axis-angle vector (3-D). A landmark is perturbed in the
// world frame. F does not change when every pose moves by one rigid motion,
// so the information is singular until a gauge is fixed: one vertex, the
// gauge (Options.Gauge; by default the graph's anchor, the first FIX'ed
// pose or else pose 0, the pose that keeps its input value in sync's
// answer), is held fixed, its covariance is zero and every other
// covariance is relative to it. A graph with a world-frame pose variable
// gets covariances in the world frame by naming that vertex as the gauge.
//
// # Method
//
// Compute assembles the Gauss-Newton information J^T J at the given poses
// (exactly the Hessian of F/2 where the residuals vanish) as a block-sparse
// matrix of pose blocks, without the gauge's block, scales it to unit
// diagonal, factors it with the supernodal sparse Cholesky that the
// certificate uses, and computes the entries of its inverse on the factor's
// pattern by selected inversion (Takahashi's recurrences on the
// supernodes: internal/sparse.SelectedInverse), which holds every diagonal
// block. No dense inverse and no column of the inverse is formed, except
// for a joint pair whose cross block lies off the factor's pattern: that
// block comes from triangular solves with the same factor.
package covariance
