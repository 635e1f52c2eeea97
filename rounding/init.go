package rounding

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"

	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
)

// Chordal returns the chordal initialization (of a graph with priors: of
// the graph without its world vertex, which is then placed by the priors;
// see priors.go): the rotations are relaxed from
// SO(d) to all of R^{d x d}, where
//
//	minimize sum_e kappa_e ||R_j - R_i Rt_e||_F^2,   R_0 = I
//
// is linear least squares. Its normal equations are the rotation connection
// Laplacian with pose 0's block row and column removed, with the d columns
// of [R_1 ... R_{n-1}]^T as d right-hand sides of one sparse Cholesky
// factorization. Each block is then projected to SO(d), the translations
// are recovered exactly (RecoverTranslations) and the result is put in the
// input's gauge (ToGauge).
func Chordal(g *posegraph.Graph) ([]posegraph.Pose, error) {
	return ChordalOrdered(g, nil)
}

// ChordalOrdered is Chordal with a fill-reducing elimination order of the
// pose graph (order[k] = the pose eliminated k-th, a permutation of
// 0..n-1), for a caller that has one already: sync.Solve orders the
// connection Laplacian, whose block graph is the pose graph, and ordering a
// million-pose 3-D graph by nested dissection takes seconds. The chordal
// system is grounded at pose 0 and the translation system at the anchor;
// both keep every pose in the order. nil computes one, as Chordal does.
func ChordalOrdered(g *posegraph.Graph, order []int) ([]posegraph.Pose, error) {
	if x, ok, err := aroundWorld(g, order, false, ChordalOrdered); ok {
		return x, err // priors.go
	}
	if g.HasLandmarks() {
		return chordalLandmarks(g, order)
	}
	poses, red, err := chordalRotations(g, order, posegraph.Poses)
	if err != nil {
		return nil, err
	}
	// The translation Laplacian has the pose graph's pattern; when it is
	// anchored at pose 0 too, the chordal system's block order fits it and
	// saves a second ordering.
	if g.Anchor() != 0 {
		red = nil
	}
	return placeTranslations(g, poses, order, red)
}

// placeTranslations completes poses whose rotations are set: it recovers
// the translations (and landmark positions) exactly, ordering their
// system by order when one is given (by red otherwise, nil for the
// default), and puts the result in g's gauge. Chordal and chordalLandmarks
// end with it.
func placeTranslations(g *posegraph.Graph, poses []posegraph.Pose, order, red []int) ([]posegraph.Pose, error) {
	if order != nil {
		if _, err := reducedOrder(order, g.N(), g.Anchor()); err != nil {
			return nil, fmt.Errorf("%s: chordal initialization: %w", source(g), err)
		}
		if err := recoverOrdered(g, poses, order, nil); err != nil {
			return nil, err
		}
	} else if err := recoverTranslations(g, poses, red); err != nil {
		return nil, err
	}
	ToGauge(g, poses)
	return poses, nil
}

// ChordalRotations is Chordal for rotation synchronization: it returns the
// projected rotations, in the input's gauge, and leaves the translations
// zero.
func ChordalRotations(g *posegraph.Graph) ([]posegraph.Pose, error) {
	return ChordalRotationsOrdered(g, nil)
}

// ChordalRotationsOrdered is ChordalRotations with an elimination order of
// the pose graph, as in ChordalOrdered.
func ChordalRotationsOrdered(g *posegraph.Graph, order []int) ([]posegraph.Pose, error) {
	if x, ok, err := aroundWorld(g, order, true, ChordalRotationsOrdered); ok {
		return x, err // priors.go
	}
	poses, _, err := chordalRotations(g, order, posegraph.Rotations)
	if err != nil {
		return nil, err
	}
	rotationGauge(g, poses)
	return poses, nil
}

// chordalRotations returns the projected chordal rotations (R_0 = I) and
// the block elimination order used for the solve (order[k] = the pose, less
// one, eliminated k-th; nil when there was nothing to solve). order, if not
// nil, is the elimination order of all poses to use (see ChordalOrdered).
// g is validated for the problem prob (a rotation problem is not refused
// for its translations: posegraph.Graph.ValidateFor).
func chordalRotations(g *posegraph.Graph, order []int, prob posegraph.Problem) ([]posegraph.Pose, []int, error) {
	return chordalRotationsWith(g, order, prob, nil)
}

// chordalRotationsWith is chordalRotations with the block analysis of the
// pose graph in order, when the caller has one (see NewPlan).
func chordalRotationsWith(g *posegraph.Graph, order []int, prob posegraph.Problem, sym *sparse.BlockSymbolic) ([]posegraph.Pose, []int, error) {
	relaxed, order, err := chordalRelaxed(g, order, prob, sym)
	if err != nil {
		return nil, nil, err
	}
	d := g.D
	poses := make([]posegraph.Pose, len(relaxed))
	for i := range relaxed {
		nearestRotation(poses[i].R[:d*d], relaxed[i][:d*d], d)
	}
	return poses, order, nil
}

// rotationGauge is ToGauge on the rotations only: translations stay as they
// are (zero for the rotation-only initializations).
func rotationGauge(g *posegraph.Graph, poses []posegraph.Pose) {
	saved := make([][3]float64, len(poses))
	for i := range poses {
		saved[i] = poses[i].T
		poses[i].T = [3]float64{}
	}
	// With all translations zero the rigid motion's translation is that of
	// the anchor's target; drop it to keep them zero.
	ToGauge(g, poses)
	for i := range poses {
		poses[i].T = saved[i]
	}
}

// ChordalRelaxed returns the minimizer of the relaxed chordal problem before
// projection: the d x d blocks R_i (row-major, R_0 = I) of the linear least
// squares in Chordal. It is exported for diagnostics and tests.
func ChordalRelaxed(g *posegraph.Graph) ([][9]float64, error) {
	out, _, err := chordalRelaxed(g, nil, posegraph.Rotations, nil) // it sees only the rotations
	return out, err
}

func chordalRelaxed(g *posegraph.Graph, all []int, prob posegraph.Problem, sym *sparse.BlockSymbolic) ([][9]float64, []int, error) {
	n, d := g.N(), g.D
	// Bad measurements or weights would surface as a failed factorization
	// far from their cause; name them instead.
	if err := g.ValidateFor(prob); err != nil {
		return nil, nil, err
	}
	// A given order is checked even when there is nothing to solve.
	if all != nil {
		if _, err := reducedOrder(all, n, 0); err != nil {
			return nil, nil, fmt.Errorf("%s: chordal initialization: %w", source(g), err)
		}
	}
	out := make([][9]float64, n)
	for a := 0; a < d; a++ {
		out[0][a*d+a] = 1
	}
	if n == 1 {
		return out, nil, nil
	}
	q, b := chordalSystem(g)
	var perm []int
	if all != nil {
		perm = blockPerm(all, d)
	} else {
		perm = sparse.BlockOrder(q, 0)
	}
	var c *sparse.Cholesky
	var err error
	if sym != nil && all != nil {
		c, err = sym.Analyze(q)
	}
	if c == nil {
		c, err = sparse.AnalyzeBlocks(q, perm)
	}
	if err == nil {
		err = c.FactorizeBlocks(q, 0)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%s: chordal initialization: %w", source(g), err)
	}
	m := n * d
	z := make([]float64, m*d)
	c.SolveMany(z, b, d)
	for i := 1; i < n; i++ {
		for ra := 0; ra < d; ra++ {
			for c := 0; c < d; c++ {
				out[i][ra*d+c] = z[ra*m+i*d+c]
			}
		}
	}
	// The block order of the poses; without pose 0 it orders the
	// translation system anchored there.
	poses := make([]int, n)
	for k := range poses {
		poses[k] = perm[k*d] / d
	}
	red, err := reducedOrder(poses, n, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: chordal initialization: %w", source(g), err)
	}
	return out, red, nil
}

// chordalSystem returns the chordal least squares' normal equations over
// all n poses, grounded at pose 0: the rotation connection Laplacian with
// pose 0's coupling blocks zeroed and its diagonal block s I, and the d
// right-hand sides (column-major, n d x d) s I for pose 0 and -Q_j0 for
// pose j. The solution is then R_0 = I and, for the other poses, exactly
// that of the Laplacian with pose 0's row and column removed, since
// nothing couples them to pose 0 any more. Keeping pose 0 keeps the pose
// graph's block pattern, so the block analysis and factorization apply
// (the scalar analysis of the reduced system took most of the
// initialization's 10 s at a million poses) with an ordering of all the
// poses. s is Q's largest diagonal entry, so that pose 0's pivots pass
// the factorization's relative threshold whatever the weights' units.
func chordalSystem(g *posegraph.Graph) (*sparse.BlockSym, []float64) {
	q := g.Laplacian(posegraph.Rotations)
	return q, groundAtPose0(q, g.D, q.MaxDiag())
}

// groundAtPose0 grounds q (block size q.B >= d, the first d coordinates of
// each block being a relaxed rotation's rows) at pose 0 for the chordal
// least squares with X_0 = [I 0]: it zeroes pose 0's coupling blocks, sets
// its diagonal block to s I, and returns the d right-hand sides
// (column-major, q.N q.B x d): s X_0^T for pose 0 and -Q_j0 X_0^T for its
// neighbours j. Column a of -Q_j0 X_0^T is -(Q_j0)[:, a] = -(row a of
// Q_0j), since Q_j0 = Q_0j^T. Both chordalSystem (q.B = d) and
// chordalLandmarkSystem (q.B = d+1) ground this way.
func groundAtPose0(q *sparse.BlockSym, d int, s float64) []float64 {
	n, b := q.N, q.B
	m := n * b
	rhs := make([]float64, m*d)
	for a := 0; a < d; a++ {
		rhs[a*m+a] = s
	}
	for k := q.RowPtr[0]; k < q.RowPtr[1]; k++ {
		j := q.ColIdx[k]
		if j == 0 {
			continue
		}
		blk := q.Block(k)
		for a := 0; a < d; a++ {
			for c := 0; c < b; c++ {
				rhs[a*m+j*b+c] -= blk[a*b+c]
			}
		}
	}
	for i := 0; i < n; i++ {
		for k := q.RowPtr[i]; k < q.RowPtr[i+1]; k++ {
			if i != 0 && q.ColIdx[k] != 0 {
				continue
			}
			blk := q.Block(k)
			clear(blk)
			if i == 0 && q.ColIdx[k] == 0 {
				for a := 0; a < b; a++ {
					blk[a*b+a] = s
				}
			}
		}
	}
	return rhs
}

// blockPerm expands an order of n blocks into the scalar permutation that
// keeps each block's b scalars together and in order.
func blockPerm(order []int, b int) []int {
	perm := make([]int, 0, len(order)*b)
	for _, i := range order {
		for c := 0; c < b; c++ {
			perm = append(perm, i*b+c)
		}
	}
	return perm
}

// Odometry returns the spanning-tree initialization: a breadth-first tree
// from the anchor pose, along which the measured rotations are composed
// (R_j = R_i Rt_e across edge e = (i, j), R_i = R_j Rt_e^T against it). At
// each pose the edges are tried odometry first (consecutive ids), then by
// decreasing kappa, so the tree follows the trajectory and the most precise
// measurements. Translations are then recovered exactly for these rotations
// (RecoverTranslations; composing the translations along the tree too would
// only give a worse fit) and the result is put in the input's gauge.
func Odometry(g *posegraph.Graph) ([]posegraph.Pose, error) {
	if x, ok, err := aroundWorld(g, nil, false, func(h *posegraph.Graph, _ []int) ([]posegraph.Pose, error) { return Odometry(h) }); ok {
		return x, err // priors.go
	}
	poses, err := odometryRotations(g, posegraph.Poses)
	if err != nil {
		return nil, err
	}
	if err := RecoverTranslations(g, poses); err != nil {
		return nil, err
	}
	ToGauge(g, poses)
	return poses, nil
}

// OdometryRotations is Odometry for rotation synchronization: rotations
// composed along the tree, in the input's gauge, translations zero.
func OdometryRotations(g *posegraph.Graph) ([]posegraph.Pose, error) {
	if x, ok, err := aroundWorld(g, nil, true, func(h *posegraph.Graph, _ []int) ([]posegraph.Pose, error) { return OdometryRotations(h) }); ok {
		return x, err // priors.go
	}
	poses, err := odometryRotations(g, posegraph.Rotations)
	if err != nil {
		return nil, err
	}
	rotationGauge(g, poses)
	return poses, nil
}

func odometryRotations(g *posegraph.Graph, prob posegraph.Problem) ([]posegraph.Pose, error) {
	n, d := g.N(), g.D
	if err := g.ValidateFor(prob); err != nil {
		return nil, err
	}
	// Incident edges per pose, in compressed form, sorted by preference.
	start := make([]int, n+1)
	for _, e := range g.Edges {
		start[e.I+1]++
		start[e.J+1]++
	}
	for i := 0; i < n; i++ {
		start[i+1] += start[i]
	}
	inc := make([]int, start[n])
	fill := append([]int(nil), start[:n]...)
	for k, e := range g.Edges {
		inc[fill[e.I]] = k
		fill[e.I]++
		inc[fill[e.J]] = k
		fill[e.J]++
	}
	consecutive := func(k int) bool {
		e := &g.Edges[k]
		if e.I >= len(g.IDs) || e.J >= len(g.IDs) {
			return false
		}
		diff := g.IDs[e.I] - g.IDs[e.J]
		return diff == 1 || diff == -1
	}
	for i := 0; i < n; i++ {
		s := inc[start[i]:start[i+1]]
		sort.SliceStable(s, func(p, q int) bool {
			cp, cq := consecutive(s[p]), consecutive(s[q])
			if cp != cq {
				return cp
			}
			return g.Edges[s[p]].Kappa > g.Edges[s[q]].Kappa
		})
	}
	poses := make([]posegraph.Pose, n)
	seen := make([]bool, n)
	root := g.Anchor()
	poses[root] = posegraph.Identity(d)
	seen[root] = true
	queue := make([]int, 1, n)
	queue[0] = root
	for head := 0; head < len(queue); head++ {
		u := queue[head]
		for _, k := range inc[start[u]:start[u+1]] {
			e := &g.Edges[k]
			v := e.J
			if v == u {
				v = e.I
			}
			if seen[v] || g.IsLandmark(v) {
				continue // a landmark has no rotation to pass on
			}
			seen[v] = true
			queue = append(queue, v)
			ru, rv := &poses[u].R, &poses[v].R
			for a := 0; a < d; a++ {
				for c := 0; c < d; c++ {
					s := 0.0
					for t := 0; t < d; t++ {
						if v == e.J {
							s += ru[a*d+t] * e.R[t*d+c] // R_j = R_i Rt
						} else {
							s += ru[a*d+t] * e.R[c*d+t] // R_i = R_j Rt^T
						}
					}
					rv[a*d+c] = s
				}
			}
		}
	}
	for i := range poses {
		if g.IsLandmark(i) {
			poses[i].R = posegraph.Identity(d).R
			continue
		}
		if !seen[i] {
			return nil, fmt.Errorf("%s: odometry initialization: pose %d is linked to pose %d only through landmarks, "+
				"which carry no rotation; use the chordal initialization", source(g), g.IDs[i], g.IDs[root])
		}
		// Long products drift off SO(d) by rounding; one projection each fixes it.
		nearestRotation(poses[i].R[:d*d], poses[i].R[:d*d], d)
	}
	return poses, nil
}

// FromVertices returns the file's VERTEX estimates as they are. It is an
// error, naming the file and the first pose without one, if any pose has no
// estimate.
func FromVertices(g *posegraph.Graph) ([]posegraph.Pose, error) {
	n := g.N()
	if err := checkPoses(g, make([]posegraph.Pose, n)); err != nil {
		return nil, err
	}
	missing := 0
	first := -1
	for i := 0; i < n; i++ {
		if i >= len(g.HasInitial) || i >= len(g.Initial) || !g.HasInitial[i] {
			if first < 0 {
				first = i
			}
			missing++
		}
	}
	if missing > 0 {
		id := first
		if first < len(g.IDs) {
			id = g.IDs[first]
		}
		return nil, fmt.Errorf("%s: %d of %d poses have no VERTEX estimate (first: id %d); use another initialization", source(g), missing, n, id)
	}
	return append([]posegraph.Pose(nil), g.Initial...), nil
}

// Random returns poses with rotations drawn uniformly (Haar measure) from
// SO(d) and translations from a normal distribution whose spread is the mean
// measured translation length times sqrt(n), roughly the size of the
// trajectory. The same graph and seed give the same poses. It is meant for
// tests and for studying convergence from poor starts; it does not recover
// translations.
func Random(g *posegraph.Graph, seed uint64) []posegraph.Pose {
	n, d := g.N(), g.D
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	scale := 0.0
	for _, e := range g.Edges {
		s := 0.0
		for a := 0; a < d; a++ {
			s += e.T[a] * e.T[a]
		}
		scale += math.Sqrt(s)
	}
	if len(g.Edges) > 0 {
		scale /= float64(len(g.Edges))
	}
	if scale == 0 {
		scale = 1
	}
	scale *= math.Sqrt(float64(n))
	poses := make([]posegraph.Pose, n)
	for i := range poses {
		poses[i].R = RandomRotation(rng, d)
		for a := 0; a < d; a++ {
			poses[i].T[a] = scale * rng.NormFloat64()
		}
		if g.IsLandmark(i) {
			poses[i].R = posegraph.Identity(d).R
		}
	}
	return poses
}

// RandomRotation draws a rotation of SO(d), d = 2 or 3, from the uniform
// (Haar) distribution: a uniform angle in 2-D, a normalized Gaussian
// quaternion in 3-D.
func RandomRotation(rng *rand.Rand, d int) [9]float64 {
	var r [9]float64
	if d == 2 {
		th := 2 * math.Pi * rng.Float64()
		c, s := math.Cos(th), math.Sin(th)
		r[0], r[1], r[2], r[3] = c, -s, s, c
		return r
	}
	var w, x, y, z, nn float64
	for nn < 1e-12 {
		w, x, y, z = rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()
		nn = w*w + x*x + y*y + z*z
	}
	nn = math.Sqrt(nn)
	w, x, y, z = w/nn, x/nn, y/nn, z/nn
	r = [9]float64{
		1 - 2*(y*y+z*z), 2 * (x*y - w*z), 2 * (x*z + w*y),
		2 * (x*y + w*z), 1 - 2*(x*x+z*z), 2 * (y*z - w*x),
		2 * (x*z - w*y), 2 * (y*z + w*x), 1 - 2*(x*x+y*y),
	}
	return r
}
