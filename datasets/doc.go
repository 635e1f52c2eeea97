// Package datasets makes pose graphs to test and demonstrate bcmsync with:
// synthetic graphs with known ground truth, a small embedded demo graph,
// and the list of real benchmark graphs with their certified optima.
//
// # Synthetic families
//
// Each generator returns a *posegraph.Graph, whose edges carry the
// measurement (R, T) and the precisions (Kappa, Tau) but no raw Meas/Info
// record, together with the ground-truth poses. The families follow the
// standard benchmarks: Sphere (rings of a sphere, like sphere2500), Torus,
// Cube (a snake path through a 3-D lattice, like smallGrid3D), Manhattan
// (a 2-D random walk on a grid, like Olson's manhattan) and Geometric
// (random poses in 2-D or 3-D joined when near). Every graph is connected
// by an odometry chain (i-1, i) through all poses, closes loops with
// probability Config.LoopProb per candidate (Mixed: a given number of
// random closures, and every edge's weights drawn log-uniformly over a
// range of decades, its noise drawn at them; RandomConsistent draws the
// population the certified rate is measured on), and carries the
// dead-reckoning estimate (the odometry composed from the first true pose)
// as its initial poses, as a robot's log would.
//
// AddLandmarks adds point landmarks to any of them: points scattered
// around the trajectory, each observed, in the observing pose's frame and
// with N(0, I/tau) noise, by the poses within a sensor range (the nearest
// ones, up to a cap), with the landmarks' true positions appended to the
// ground truth (posegraph's landmark convention: a landmark is a vertex
// with R = I whose observations have kappa = 0).
//
// # Noise model
//
// With Config.Kappa = kappa and Config.Tau = tau, edge e = (i, j) measures
//
//	Rt_e = R_i^T R_j E_e,        E_e ~ Langevin(I, kappa) on SO(d),
//	tt_e = R_i^T (t_j - t_i) + eps_e,  eps_e ~ N(0, I_d / tau),
//
// where Langevin(I, kappa) has density proportional to exp(kappa tr E)
// with respect to Haar measure. Since ||I - E||_F^2 = 2d - 2 tr E, twice the
// negative log-likelihood is exactly the objective F of docs/design.md section 1,
// kappa ||R_j - R_i Rt_e||_F^2 + tau ||t_j - t_i - R_i tt_e||^2, so the ML
// weight kappa is the Langevin concentration itself. In 2-D the rotation
// angle is von Mises with concentration 2 kappa; in 3-D the axis is uniform
// and the angle has density proportional to (1 - cos theta) exp(2 kappa
// cos theta). For large kappa the angle's standard deviation is about
// 1/sqrt(2 kappa) per rotational degree of freedom.
//
// At the ground truth each edge then contributes 4 kappa (1 - cos theta_e)
// + tau ||eps_e||^2 to F: the rotation part has mean tending to d(d-1)/2
// for large kappa (computed exactly by EdgeCostMoments), the translation
// part is chi-squared with d degrees of freedom. ExpectedCost sums these
// over the edges, so F(truth) can be checked against its distribution.
//
// When such a graph is written in g2o format the package g2o converts kappa
// and tau to information matrices by the inverse of the rules of docs/design.md
// section 2, so reading it back gives the same weights.
//
// Everything is seeded (math/rand/v2's PCG): the same configuration gives
// the same graph bit for bit. The structure and the noise use separate
// streams, so Config.NoiseFree keeps the edges of the noisy graph.
//
// # Outliers
//
// AddOutliers appends wrong loop closures to any graph: edges between two
// non-consecutive poses with a uniformly random relative pose, written with
// a confident weight (by default the median of the graph's own), as a
// place-recognition front end produces them. It returns the mask of which
// edges are outliers, the ground truth that outlier rejection is measured
// against (precision and recall).
//
// Written to disk, the mask becomes a sidecar text file beside the g2o file
// (WriteOutliers, ReadOutliers, OutlierMask): one line "LINE ID_I ID_J" per
// outlier, LINE being the EDGE record's line in the g2o file, since an
// outlier may join the same two poses as a true loop closure.
//
// # Demo graph and benchmark suite
//
// Demo returns the embedded demo graph, demo.g2o, which this package's own
// generator produced (a test regenerates it and compares). ReadReference
// parses the suite's REFERENCE.tsv and SuiteDir finds the suite directory
// (the environment variable BCMSYNC_DATA, else ../shared/datasets beside the
// module root).
package datasets
