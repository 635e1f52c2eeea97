// Package bcm minimizes F(X) = tr(X Q X^T) by block-coordinate minimization
// (Tian, Khosoussi and How, "Block-Coordinate Minimization for Large SDPs
// with Block-Diagonal Constraints", Algorithm 1), the first and default
// phase of bcmsync's certifiable pose-graph optimization.
//
// Q is the connection Laplacian of a pose graph (posegraph.Laplacian) and X
// the lifted variable in blockmat.Blocks layout. For rotation synchronization
// each block X_i = Y_i lies on the Stiefel manifold St(d, r) = {Y in R^{r x d}
// : Y^T Y = I}; for pose synchronization X_i = [Y_i p_i] adds a free
// translation column p_i. Any rank r >= d works, from any starting point.
//
// With all blocks but one fixed, F is minimized over that block in closed
// form. Writing Q_ii = [[A, b], [b^T, c]] and G_i = sum_{j != i} X_j Q_ji =
// [G_Y g_p], the translation is eliminated exactly, p*(Y) = -(Y b + g_p)/c,
// leaving F = const + 2 <H, Y> with H = G_Y - g_p b^T / c, minimized by the
// polar factor Y* = Polar(-H) (internal/smalldense, without allocation).
// Each update decreases F by exactly
//
//	2 (||H||_* + <H, Y_old>) + c ||p_old - p*(Y_old)||^2 >= 0,
//
// the descent identity the tests check on every update. For rotations there
// is no p and H = G_i.
//
// Blocks are chosen by a Rule: Cyclic sweeps; Uniform sampling; Importance
// sampling with probability proportional to ||H_i||_* (the weights kept
// current in a sum tree as neighbours change, O(log n) per sample); Greedy,
// the block of largest attainable decrease first (a tournament tree over the
// exact decreases); and Parallel, which colours the graph greedily and
// updates each colour class across goroutines. Blocks of one class share no
// edge, so Parallel gives bit-identical results for any number of threads.
// Cyclic, Uniform and Parallel gather G_i from the neighbours; Importance and
// Greedy maintain N = X Q by scatter updates, since they must refresh the
// weights of every neighbour after each update.
//
// Single-block updates diffuse information along the graph, which is slow on
// long chains. For pose problems Options.SolveTranslations starts every sweep
// with the exact minimization of F over all translations at once, given the
// Y blocks: one sparse Cholesky factorization of the tau-weighted graph
// Laplacian per Solver, r triangular solves per sweep. It is again a
// block-coordinate step, so F never increases; on intel from the file's
// guesses it turns "not at 1e-3 after 15 s" into 1e-6 in about 7000 sweeps.
//
// The Riemannian gradient of F is blockwise 2 [N_Y - Y sym(Y^T N_Y), N_p] with
// N = X Q. Convergence is judged by the relative gradient norm, defined as
//
//	RelGradNorm(X) = ||grad F(X)||_F / ||2 X Q||_F    (0 if X Q = 0),
//
// the Riemannian gradient over the Euclidean one. It is invariant under
// scaling of Q and under X -> O X, so one tolerance fits every graph.
//
// A sweep is n block updates (n samples for the samplers). After each sweep
// Solve recomputes N = X Q in one pass, which gives F, the gradient and the
// stopping tests, and hands a Record to the Progress callback. Everything
// random is seeded: the same Seed gives the same bits. Block updates do not
// allocate for r <= smalldense.MaxRows (16); larger ranks work but allocate
// scratch in the polar kernel.
//
// BCM is a first-order method: fast at first, slow to high accuracy on
// graphs with long chains, where a second-order phase should take over.
package bcm
