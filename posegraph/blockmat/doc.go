// Package blockmat holds the two block matrices that bcmsync's solvers
// exchange with their users: Blocks, the lifted variable
// X = [X_1 ... X_n] stored block by block, and BlockSym, a symmetric
// block-sparse matrix such as the connection Laplacian Q
// (posegraph.Graph.Laplacian) whose quadratic form tr(X Q X^T) is the
// objective (docs/design.md section 3).
//
// Blocks is an R x (N*B) matrix: block i, the R x B matrix X_i, is
// contiguous and row-major, so that a block-coordinate update reads and
// writes one run of memory. For pose synchronization B = d+1 and X_i is
// [Y_i p_i] (a Stiefel part and a translation); for rotations B = d.
//
// BlockSym stores both triangles of a symmetric matrix of N x N blocks of
// size B x B in block compressed-row form, each row's blocks sorted by
// column with the diagonal block always present. Storing both triangles
// doubles the memory but makes X*Q one pass of contiguous reads per block
// row, the product every solver here lives on. BlockBuilder assembles one
// from contributions to blocks (i, i) and to pairs (i, j), (j, i).
//
// The sparse factorizations and eigensolvers that work on these matrices
// are internal to the module; this package is only the storage and its
// products.
package blockmat
