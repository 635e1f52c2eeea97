// Package rounding turns solutions of the lifted relaxation into poses, and
// builds the initializations the solver starts from.
//
// Both jobs are the same three steps: relax, round, recover translations.
// A rank-r lifted solution X = [Y_1 p_1 ... Y_n p_n], Y_i an r x d block
// with orthonormal columns, is rounded (Round) by projecting the Y blocks
// onto the d-dimensional subspace that carries most of their energy (the
// top d left singular vectors of [Y_1 ... Y_n], taken from the small r x r
// matrix Y Y^T), choosing the orientation of that subspace so that most of
// the projected blocks are proper, and replacing each block by its nearest
// rotation. The p_i are not used: for fixed rotations the translations that
// minimize the objective
//
//	F(R, t) = sum_e kappa_e ||R_j - R_i Rt_e||_F^2 + tau_e ||t_j - t_i - R_i tt_e||^2
//
// solve a weighted graph-Laplacian system (one copy per coordinate), which
// RecoverTranslations factors once by sparse Cholesky and solves exactly.
// When the relaxation is tight (a rank-d certified solution) rounding is
// exact and the result is the global optimum.
//
// The chordal initialization (Chordal) relaxes SO(d) to all d x d matrices,
// where the rotation part of F is linear least squares; its normal
// equations are the rotation connection Laplacian with one block anchored,
// again one sparse Cholesky factorization with d right-hand sides. The
// blocks are then projected to SO(d) and the translations recovered.
// Odometry composes the measured rotations along a breadth-first spanning
// tree instead; FromVertices takes the file's own estimates; Random draws
// poses for tests. ChordalRotations and OdometryRotations serve rotation
// synchronization: rotations only, translations left zero.
//
// F is invariant under one global rigid motion, so every answer is defined
// only up to it. ToGauge picks the representative the user expects: the
// anchor pose (the first FIX'ed vertex, else the first) keeps its input
// estimate. The initializations return poses already in that gauge.
//
// Nothing here forms a dense matrix of the problem's size: the linear
// systems are sparse (O(n + m) nonzeros before fill) and everything else is
// a pass over the poses or edges with d x d or r x r dense work. Each
// system orders itself for fill unless the caller passes an elimination
// order of the pose graph (ChordalOrdered, ChordalRotationsOrdered,
// RecoverTranslationsOrdered), as sync.Solve does with the one it computes
// for Q: on a million-pose 3-D graph one nested-dissection ordering takes
// seconds, and the translation system's own AMD fills far more.
package rounding
