// Package g2o reads and writes pose graphs in the text formats of g2o and
// TORO, the formats the public SLAM benchmark graphs come in.
//
// # Records
//
// Read understands, one record per line:
//
//	VERTEX_SE2 id x y theta
//	EDGE_SE2 i j dx dy dtheta I11 I12 I13 I22 I23 I33
//	VERTEX_SE3:QUAT id x y z qx qy qz qw
//	EDGE_SE3:QUAT i j x y z qx qy qz qw I11 I12 ... I66   (21 values)
//	VERTEX2 id x y theta                                   (TORO)
//	EDGE2 i j dx dy dtheta Ixx Ixy Iyy Ith Ixth Iyth        (TORO)
//	FIX id [id ...]
//	VERTEX_XY id x y                                       (2-D landmark)
//	EDGE_SE2_XY pose landmark x y I11 I12 I22
//	VERTEX_TRACKXYZ id x y z                               (3-D landmark)
//	EDGE_SE3_TRACKXYZ pose landmark offset x y z I11 I12 I13 I22 I23 I33
//	PARAMS_SE3OFFSET id x y z qx qy qz qw                  (sensor offset)
//	EDGE_PRIOR_SE2 pose x y theta I11 I12 I13 I22 I23 I33   (pose prior)
//	EDGE_PRIOR_SE2_XY pose x y I11 I12 I22                  (position prior)
//	EDGE_SE3_PRIOR pose offset x y z qx qy qz qw I11 ... I66
//	EDGE_SE3_XYZ_PRIOR pose offset x y z I11 I12 I13 I22 I23 I33
//
// A prior measures a pose, or its position, in a world frame; it becomes
// an edge from the graph's world vertex (posegraph's priors.go), with kappa
// and tau by the rules of EDGE_SE2 / EDGE_SE3:QUAT for a pose prior and of
// a landmark observation for a position prior (priors.go here). An
// EDGE_SE3_PRIOR measures the pose composed with its sensor offset O, any
// rigid offset: it becomes the prior Z O^-1, with the information matrix
// carried through O (offsetPrior in priors.go; docs/priors.md). Write
// leaves the world vertex out and writes the priors back as these records,
// with their PARAMS_SE3OFFSET lines.
//
// A landmark observation measures the landmark's position in the pose's
// frame; its information matrix I becomes the isotropic precision
// tau = d / tr(inv(I)), the rule for a pose edge's translation block, and
// it must be positive definite. Landmarks are numbered after all poses
// (posegraph's landmarks.go); an id used both as a pose and as a landmark
// is an error. EDGE_SE3_TRACKXYZ names a sensor offset: only the identity
// is supported (an observation through another offset is an error at its
// line), and a file that declares none is read as if all were identity.
//
// Information matrices are given by their upper triangle, row by row, in
// the order x, y, theta (2-D) or x, y, z, qx, qy, qz (3-D); TORO's order is
// mapped to g2o's. Quaternions have w last and are normalized on reading;
// ReadOptions.RawQuaternions instead reads edge quaternions as SE-Sync does,
// unnormalized (see "SE-Sync's reading" below).
// '#' starts a comment that runs to the end of the line; blank lines, CRLF
// line ends, any mix of spaces and tabs and a leading UTF-8 byte-order mark
// are fine. A file holds either 2-D or 3-D records, not both. Numbers are
// read as they are; posegraph.Graph.Validate refuses, at their lines, those
// beyond what double precision can solve with (CheckScale).
//
// Other records (other landmark kinds such as EDGE_BEARING_SE2_XY, priors on points,
// sensor parameters, unknown tags) are errors, or with ReadOptions.Lenient
// are skipped with one warning per tag that counts them. Every problem in a
// file is a *ParseError that names the file, the line and the problem;
// Read never panics (FuzzRead checks this).
//
// # Precisions
//
// An edge's information matrix W becomes the two isotropic precisions of
// the objective sum_e kappa ||R_j - R_i R_e||_F^2 + tau ||t_j - t_i - R_i t_e||^2
// (docs/design.md section 2), the convention of the published certified optima:
//
//	2-D: kappa = I33,                  tau = 2 / tr(inv(W_t)), W_t = [[I11 I12] [I12 I22]]
//	3-D: kappa = 3 / (2 tr(inv(W_R))),  tau = 3 / tr(inv(W_t)), W_t, W_R the diagonal 3 x 3 blocks
//
// The cross terms do not enter. W_t and W_R must be positive definite. A
// full matrix that is indefinite because of its cross terms (5021 edges of
// cubicle.g2o are) is read with a warning, or rejected with
// ReadOptions.StrictInfo. Edge.Meas and Edge.Info keep the values as
// written, so Write reproduces the edges exactly.
//
// # SE-Sync's reading
//
// Published 3-D files print quaternions to about 6 digits, so |q|^2 - 1 is
// up to a few 1e-6. SE-Sync builds each edge rotation from the quaternion as
// printed (Eigen's toRotationMatrix, RotationFromQuatRaw), which is then off
// orthogonal by as much, and reports tr(X Q X^T) with kappa I on Q's
// diagonal blocks: on rotations that is the edge objective plus
// sum_e kappa_e (3 - ||R_e||_F^2). The optima differ from those of the
// normalized reading by up to 3e-5 relative (parking-garage), enough to
// matter when comparing with SE-Sync's numbers, such as the 3-D optima of
// REFERENCE.tsv. ReadOptions.RawQuaternions reproduces that reading and
// marks the graph (posegraph.Graph.RawRotations) so that Validate and Cost
// follow it.
//
// # Ids
//
// Vertex ids need not start at 0 or be contiguous. A file either declares
// every vertex its edges name (VERTEX lines, in any order) or declares none
// (some published files have only edges): in a file with VERTEX lines, an
// edge to an undeclared vertex is an error at that edge's line, as a FIX of
// an unknown vertex is, because reading it would invent a pose.
// ReadOptions.Lenient does not relax this. The pose index of an id is its
// rank among all ids the file mentions, in ascending order; Graph.IDs maps
// indices back to ids, and the writers use the original ids. Graph.Initial
// holds the VERTEX estimates (the identity, with Graph.HasInitial false,
// in a file without VERTEX lines).
//
// # Writing
//
// Write produces g2o (VERTEX_SE2/EDGE_SE2 or VERTEX_SE3:QUAT/EDGE_SE3:QUAT,
// also for TORO input) with numbers in their shortest exact form, so a graph
// read from a file and written again reads back the same. WriteTUM writes a
// trajectory in the TUM format ("timestamp tx ty tz qx qy qz qw") with the
// vertex id as timestamp, for tools such as evo.
//
// # Trajectories
//
// A Trajectory is a list of stamped poses without edges, what trajectory
// evaluation compares. ReadTUM reads the TUM format back (any time stamps,
// in file order); ReadKITTI reads the KITTI odometry benchmark's pose files
// (12 numbers a line, no stamps: pose k is stamped k); ReadVertices reads
// the VERTEX records of a g2o or TORO file, stamped by vertex id, and needs
// no edges; ReadTrajectoryFile picks between them by the content, whatever
// the extension (SniffTrajectory: a record name, 8 numbers or 12 numbers on
// the first line). TUM and KITTI are always 3-D:
// Trajectory.Flatten turns a planar one (z = 0, rotations about z, as
// WriteTUM writes 2-D poses) back into 2-D. Errors name the file and line.
package g2o
