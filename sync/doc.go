// Package sync is bcmsync's certified pipeline: it takes a pose graph (SE(d)
// synchronization) or a rotation graph (SO(d)) and returns an estimate
// together with a proof that it is globally optimal.
//
// Solve initializes (chordal by default), then climbs the Riemannian
// staircase. At rank r it minimizes F(X) = tr(X Q X^T) over
// St(d, r)^n x R^{r n} by block-coordinate minimization (package bcm), the
// core algorithm, which makes fast early progress; a Riemannian trust region
// with truncated conjugate gradients then brings the point to the accuracy a
// certificate needs. Its preconditioner is a sparse Cholesky factor of the
// Riemannian Hessian itself, assembled in an orthonormal tangent basis, so
// each step is a Newton step. Where the Hessian is not yet positive
// definite, a modified factorization raises the few failing pivots, or, if
// they fail badly, the smallest diagonal shift that factors is used.
//
// The certificate (docs/design.md section 5) forms Lambda_i = sym(Y_i^T (XQ)_i)
// and S = Q - Lambda. If D S D plus a shift sigma on rotation coordinates
// has a Cholesky factor (D a power-of-two Jacobi scaling, the common
// translation grounded), S plus the shift sigma/D_c^2 at each of those
// coordinates c is positive semidefinite, and tr(Lambda) minus the
// shift's trace is a proven lower bound on the optimum (the relaxation
// fixes a trace of 1 per rotation coordinate). The shift sits on one
// anchor pose, the lightest one the factor can eliminate last (tried
// first, since its cost does not grow with n), or on every pose. The
// estimate is optimal to within F(estimate) minus that bound, the reported
// suboptimality bound, and is Certified exactly when that bound is at
// most max(Options.GapTol max(FUnit, |F|), Options.GapAbs), FUnit the
// unit of F tied to the certificate's rounding floor; the first shift
// tried costs at most half of that (a larger retry proves a looser bound,
// reported as such), and nothing else is allowed. When the proof holds
// but misses it, the level refines its point at a tighter gradient
// tolerance and certifies again. Otherwise the smallest eigenpair of S
// gives a direction of negative curvature at rank r+1: Solve steps along
// it (the saddle escape) and solves again, up to Options.MaxRank. A
// failing level still proves a weaker lower bound when S plus a larger
// shift factors; if that bound lies InconsistentZ standard deviations
// above the chi-squared expectation of F (Result.ExpectedObjective), the
// measurements contradict their weights and Solve stops with status
// Inconsistent. Options.TimeLimit and Options.MaxIterations stop a solve
// with statuses of their own, and no stage starts after the time limit
// (Result.Stages).
//
// Rounding projects the final point onto SO(d)^n, recovers the
// translations exactly, and expresses the answer in the input's gauge
// (package rounding). Above rank d the relaxation may not be tight; the
// returned estimate is then the best of that rounding, the rounding
// refined by the trust region at rank d, and the rank-d critical point the
// staircase left (Result.Estimate), so it is never worse than a point the
// solver held. When the final point's bound leaves more than the allowed
// gap (its translations are only as accurate as the last step), the
// estimate, with exactly optimal translations, is certified as well. An
// initial estimate whose F is at the rounding level of the weights (data
// that agree exactly: F* = 0) is certified as it is, without BCM or the
// trust region. Result reports every quantity of the proof, the history
// of each staircase level and of each trust-region step (tCG iterations
// and factorizations), and the time spent in each stage.
//
// The staircase is one driver, SolveWith, and what lowers F at a rank is
// its LevelOptimizer: Solve's is BCM then the trust region (NewBCMRTR);
// package sync/distributed's runs rounds of agent updates, each agent
// lowering its own block with the same trust region (BlockProblem). The
// certificate, the refinements, the escapes, the rounding and the status
// are the staircase's whatever the optimizer, so they mean the same for
// every method; package sync/leveltest checks an optimizer against the
// interface's contract. Options has every default in DefaultOptions, and
// Result.Options records the options a solve ran with.
//
// SolveRobust wraps Solve to reject outliers under the truncated
// least-squares loss: a consistency check of the loop closures
// against cycles of odometry and accepted closures, graduated
// non-convexity with cheap local solves, the pipeline above once on the
// settled inlier set, and a check of the loss's inlier test at that
// certified optimum. The certificate is then of the least-squares problem
// on the edges kept, and Result.Robust lists every edge's weight and the
// stage that rejected it.
//
// The package name shadows the standard library's sync; this package does
// not need it, and callers that need both import one under another name.
package sync
