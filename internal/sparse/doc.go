// Package sparse is the sparse linear algebra under bcmsync: block-sparse
// symmetric storage of the connection Laplacian Q, a fill-reducing
// ordering, a sparse Cholesky factorization, preconditioned conjugate
// gradients and eigensolvers for the extreme eigenvalues of Q or of the
// certificate matrix S = Q - Lambda.
//
// # Storage
//
// BlockSym holds a symmetric matrix of B x B blocks with both triangles in
// block compressed-row form; it is what the block-coordinate solver and the
// products X*Q (MulBlocks, on the block-by-block layout Blocks of the lifted
// variable) use. Both are package blockmat's, public because users pass
// them (this package names them by aliases). CSC holds the scalar lower triangle in compressed-column
// form; LowerCSC(BlockSym, shift, drop) converts, adding shift*I and
// optionally dropping anchored blocks. Both satisfy Operator, the
// matrix-free interface of PCG and the eigensolvers.
//
// # Ordering
//
// AMD computes an approximate minimum degree ordering on the quotient graph
// (elements for eliminated cliques, Amestoy-Davis-Duff degree bounds,
// aggressive element absorption), after merging consecutive columns with
// identical patterns into supervariables. BlockAMD runs the same algorithm
// on the block graph of a BlockSym and expands the result; it is several
// times cheaper on pose graphs, keeps pose blocks together and gives
// factors as sparse as scalar AMD; AMD itself switches to the block graph
// when it sees that a matrix is made of pose blocks. NestedDissection is a
// multilevel dissection of the block graph (heavy-edge coarsening,
// Fiduccia-Mattheyses refinement, vertex separators from minimum vertex
// covers, leaves by minimum degree); it halves the factorization of a
// 10^6-pose 3-D grid but loses to minimum degree on most pose graphs.
// BlockFactorCost counts a factor's nonzeros and flops on the block graph
// without forming it, and BlockOrder, which every solver in bcmsync uses,
// keeps BlockAMD unless its factor is expensive and dissection's is
// cheaper.
//
// # Cholesky
//
// NewCholesky (or Analyze then Factorize) computes P A P^T = L L^T.
// Analysis postorders the elimination tree, counts the columns of L and
// groups columns into relaxed supernodes (a few explicit zeros are stored
// so that columns share one dense block). The numeric factorization is
// left-looking and supernodal: each supernode receives the updates of its
// descendants as dense matrix products and is factored by a blocked dense
// Cholesky, with gonum's BLAS for the large blocks at the top of the tree.
// Independent subtrees of the supernodal tree are factored on concurrent
// goroutines (GOMAXPROCS of them); the split and the order of every sum are
// fixed by the matrix alone (and by whether the CPU has AVX2 and FMA, which
// the dense products use when present), so the factor is bitwise the same on any
// number of threads (only which failing pivot is reported for an
// indefinite matrix may differ).
// Solve and SolveMany run the triangular solves the same way: a factor of
// more than 2^19 stored values is split by stored entries into subtrees
// solved concurrently, each adding its updates of the shared ancestors into
// a buffer of its own that is summed in a fixed order, and the large dense
// rectangles at the top are cut into chunks fixed by their size; the bits
// again do not depend on the thread count. The solves are memory-bound, so
// rows run through gonum's assembly dot and axpy kernels.
// AnalyzeBlocks does the analysis of a BlockSym on its block graph, about
// b^2 times less work than on the scalar matrix, with the same ordering,
// column counts, supernodes, row structures and value map (the tests
// compare each of these arrays); FactorizeBlocks then factors straight
// from the blocks, so no scalar copy of the matrix is ever formed.
// Factorize reuses the analysis for new values on the same pattern. A pivot
// that is NaN or not above PivotTol (1e-13) times the largest diagonal entry
// stops the factorization at once with a *NotPositiveDefiniteError and
// leaves no usable factor: "S + eta I has a Cholesky factor" is the cheap
// certificate test, and exactly singular matrices such as Q itself are
// refused instead of yielding a factor built on rounding noise.
// FactorizeBlocksModified is the preconditioner's variant for a mildly
// indefinite matrix: a failing finite pivot not below -limit is raised to
// max(|pivot|, floor) and the factorization goes on, so one pass gives the
// exact factor of A + E, E >= 0 diagonal on the raised pivots only; a
// pivot below -limit (strong indefiniteness, or the growth that follows an
// accepted tiny pivot) still fails. AnalyzeSimplicial gives the plain
// up-looking factorization, the reference the tests compare with.
// SelectedInverse computes the entries of A^{-1} on the pattern of a
// supernodal factor (Takahashi's recurrences, swept from the last
// supernode to the first), the diagonal blocks among them: marginal
// covariances without a dense inverse.
//
// # Iterative solvers
//
// PCG solves A x = b for symmetric positive definite operators, with no
// preconditioner, BlockJacobi (the inverse diagonal blocks) or a Cholesky
// factor (of a shifted or approximate matrix) as preconditioner.
//
// SmallestEig finds the smallest eigenpair of a symmetric operator, by
// LOBPCG or by thick-restart Lanczos with full reorthogonalization;
// LargestEig runs Lanczos at the other end. Without a preconditioner both
// converge like sqrt(||A|| / gap), which is slow for pose graphs whose
// weights span 1e4..1e6. With one, LOBPCG usually needs a handful of
// iterations when the preconditioner is a Cholesky factor of the matrix
// itself shifted by tau of the order of |lambda_min|: FactorShifted finds
// such a tau by trying tau0, 10 tau0, ... on one symbolic analysis (each
// failure also proves lambda_min < -tau). For S = Q - Lambda a factor of
// Q + sigma I is a much weaker preconditioner (Lambda is large on the
// low-frequency modes of Q; the tests show it stalling where the shifted
// factor of S needs 6 iterations). Use BlockSize a little above the
// expected multiplicity of the smallest eigenvalue (d+1 near an optimum).
//
// The factor, BlockJacobi and the work buffers hold state, so none of them
// may be used by several goroutines at once; the matrices may.
package sparse
