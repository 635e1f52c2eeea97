// Package trajeval measures how far an estimated trajectory is from the
// ground truth, in the conventions of the evo tool (evo_ape, evo_rpe), so
// that numbers from `bcmsync evaluate` can be compared with published ones.
//
// The inputs are two sequences of poses already associated (pose k of the
// estimate and pose k of the reference were taken at the same time stamp or
// vertex id; Associate pairs them), in dimension d = 2 or 3.
//
// # Alignment
//
// A pose graph's solution is defined up to the gauge (a rigid motion of the
// whole trajectory, and for monocular systems a scale), so the estimate is
// first aligned to the reference by the transform x -> s R x + t that
// minimizes sum_k ||y_k - (s R x_k + t)||^2 over the positions x_k of the
// estimate and y_k of the reference (Umeyama 1991; Horn 1987 for s = 1):
//
//	mu_x, mu_y = the means of x and y,  sigma_x^2 = mean ||x_k - mu_x||^2
//	C = mean (y_k - mu_y)(x_k - mu_x)^T             (d x d)
//	R = U diag(1, ..., 1, det(U V^T)) V^T,  C = U S V^T  (nearest rotation to C)
//	s = <C, R> / sigma_x^2   (AlignSim; 1 for AlignSE)
//	t = mu_y - s R mu_x
//
// AlignNone uses the identity. When the estimate's positions lie on a line
// (or coincide) the rotation about that line is not determined by them: the
// fit, and so the ATE translation, is still optimal, but the rotation part
// of the ATE then depends on the completion the kernel picks. <C, R> = tr(S diag(1, ..., det(U V^T))) is
// Umeyama's scale numerator, so the nearest-rotation kernel of
// internal/smalldense is the whole SVD this needs.
//
// # Absolute trajectory error (ATE)
//
// After alignment, the ATE of pose k is the distance ||y_k - (s R x_k + t)||
// between the positions (evo_ape's default "translation part"). The rotation
// part, the angle of R_ref,k^T R R_est,k in degrees, is reported beside it.
//
// # Relative pose error (RPE)
//
// For a pair (i, j) of poses, with Q the reference and P the aligned
// estimate (only the scale of the alignment matters here),
//
//	E_ij = (Q_i^-1 Q_j)^-1 (P_i^-1 P_j),
//
// the translation error is ||trans(E_ij)|| and the rotation error the angle
// of rot(E_ij) in degrees. As in evo_rpe with its delta in frames, the pairs
// are (0, delta), (delta, 2 delta), ... (consecutive, non-overlapping); with
// Options.AllPairs they are every (i, i + delta).
//
// # Statistics
//
// Stats gives the RMSE, mean, median (the mean of the two middle values for
// an even count), standard deviation (of the population, numpy's default, as
// evo), minimum and maximum of an error sequence.
package trajeval
