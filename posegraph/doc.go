// Package posegraph is the pose-graph model of bcmsync: poses in SE(d) or
// SO(d) (d = 2, 3), relative measurements with isotropic precisions, the
// maximum-likelihood objective, and its connection Laplacian Q.
//
// A Graph indexes its poses 0..n-1 and keeps the ids its file used in IDs,
// so results are written back under the original ids. Each Edge carries the
// measured relative rotation R and translation T of pose J seen from pose I
// and the precisions Kappa and Tau that docs/design.md section 2 derives from the
// information matrix.
//
// The objective, with no factor 1/2, is
//
//	F(R, t) = sum_e kappa_e ||R_j - R_i R_e||_F^2 + tau_e ||t_j - t_i - R_i t_e||^2.
//
// Laplacian assembles the symmetric positive-semidefinite Q with
// F(X) = tr(X Q X^T) for the lifted variable X = [X_1 ... X_n], X_i = [Y_i p_i]
// (Poses) or X_i = Y_i (Rotations). Cost evaluates F edge by edge; Lift and
// TraceCost evaluate it through Q. The two agree to rounding error, which the
// tests check for SE(2), SE(3), SO(2) and SO(3). LaplacianRows makes Q's
// rows a chunk at a time, the same bits, for a product with Q by a process
// that does not hold it (a distributed coordinator).
//
// Landmarks (landmarks.go) are vertices with a position only, observed
// from poses. Priors (priors.go), absolute measurements of a pose or of
// its position, are edges from one more pose, the world vertex, which is
// then the gauge anchor, so that an estimate comes out in the priors'
// world frame; Prior, Graph.WithPriors and Graph.World are their API.
//
// Graph.RawRotations marks edge rotations read as SE-Sync reads them, from
// unnormalized quaternions and so slightly off orthogonal: Validate then
// allows RawRotationTol, and Cost adds sum_e kappa_e (d - ||R_e||_F^2) so
// that it is still tr(X Q X^T), the value SE-Sync reports.
//
// Validate checks structure (ids, self-loops, finite data, proper rotations,
// positive precisions) and connectivity: a certified solve needs one
// connected component, and a disconnected graph is reported with the sizes of
// its components (Components, Subgraph pick one). It then checks scale
// (CheckScale): numbers whose products would overflow, and weights whose
// contrast leaves double precision too few digits to factor or certify the
// problem, are refused at their record (FILE:LINE, from Edge.Line and
// VertexLines), with what a user can do about them.
package posegraph
