// Package smalldense holds allocation-free kernels for the tiny dense
// matrices of block-coordinate minimization: an r x d block with d <= 3 and
// r a small rank (typically 3..10), stored row-major in a plain slice.
//
// The central routine is Polar, the polar factor U V^T of an r x d matrix
// h = U S V^T, which is the Stiefel matrix maximizing <h, Y>. It is computed
// by a one-sided (Hestenes) Jacobi SVD: Jacobi rotations on pairs of the d
// columns make them mutually orthogonal, so the columns become U S and the
// accumulated rotations V. With only d(d-1)/2 column pairs and a few sweeps
// this costs a few hundred flops, needs no allocation, and keeps small
// singular values relatively accurate. For d = 3 the sweeps start from the
// closed-form (trigonometric) eigenvectors of the 3 x 3 Gram matrix h^T h;
// those are not accurate enough on their own when h is nearly rank-deficient,
// but from there the sweeps rarely need to rotate at all. Rank-deficient
// inputs are completed deterministically to an orthonormal basis, since any
// completion is a maximizer.
//
// NearestRotation uses the same kernel with the determinant correction of the
// orthogonal Procrustes problem. Nuclear returns the sum of singular values
// alone. Mul and MulTN are the d x d products on the fixed-size arrays of
// posegraph.Pose, shared by the generators and trajectory evaluation.
//
// The routines keep their scratch on the stack for r <= MaxRows; larger r
// works but allocates.
package smalldense
