package covariance

import (
	"errors"
	"fmt"
	"math"

	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
)

// PoseDim is the dimension of a pose's perturbation in SE(d): 3 for
// d = 2 (x, y, theta), 6 for d = 3 (x, y, z, rx, ry, rz).
func PoseDim(d int) int { return d + d*(d-1)/2 }

// Gauge names the vertex whose pose is held fixed. The zero value is the
// graph's anchor (posegraph.Graph.Anchor); GaugeAt names another vertex.
type Gauge struct {
	vertex int // the vertex index plus one; 0 for the anchor
}

// GaugeAt returns the gauge that holds vertex i (an index into the graph's
// vertices, not a file id) fixed. It must be a pose: a landmark has no
// orientation to fix.
func GaugeAt(i int) Gauge { return Gauge{vertex: i + 1} }

// Vertex returns the index of the vertex the gauge holds fixed in g.
func (ga Gauge) Vertex(g *posegraph.Graph) int {
	if ga.vertex == 0 {
		return g.Anchor()
	}
	return ga.vertex - 1
}

// Options says what Compute computes besides every vertex's marginal.
type Options struct {
	// Gauge is the vertex held fixed (default: the graph's anchor).
	Gauge Gauge
	// Pairs lists pairs of distinct vertex indices whose joint covariance
	// is wanted (Covariances.Joints, in this order).
	Pairs [][2]int
}

// Covariances holds the marginal covariance of every vertex and the joint
// covariances of the pairs asked for. A pose's block is PoseDim(D) square,
// in the order (x, y, theta) or (x, y, z, rx, ry, rz), translation
// perturbed in the world frame and rotation on the right; a landmark's is
// D x D (x, y[, z]). Matrices are row-major.
type Covariances struct {
	D int
	// Gauge is the vertex held fixed; its covariance is zero.
	Gauge int
	// Joints holds one entry per Options.Pairs entry.
	Joints []Joint
	// FactorNNZ is the number of nonzeros of the information matrix's
	// Cholesky factor, Supernodes its supernodes, and PairSolves the
	// number of vertices whose columns of the inverse were computed by
	// triangular solves because a joint pair's cross block lay off the
	// factor's pattern (see the package documentation).
	FactorNNZ, Supernodes, PairSolves int

	size []int // per vertex: PoseDim(D) or D
	off  []int // per vertex: offset of its block in val
	val  []float64
}

// Joint is the joint covariance of two vertices I and J (indices): the
// (a+b) x (a+b) matrix [[C_II, C_IJ], [C_JI, C_JJ]], row-major, with a and
// b their block sizes (Size).
type Joint struct {
	I, J int
	Cov  []float64
}

// N is the number of vertices.
func (c *Covariances) N() int { return len(c.size) }

// Size is vertex i's block size: PoseDim(D) for a pose, D for a landmark.
func (c *Covariances) Size(i int) int { return c.size[i] }

// Marginal returns vertex i's Size(i) x Size(i) covariance, row-major. It
// aliases c's storage.
func (c *Covariances) Marginal(i int) []float64 {
	k := c.size[i]
	return c.val[c.off[i] : c.off[i]+k*k]
}

// Compute returns the covariances of the vertices of g at the poses x
// (indexed like g's vertices; a landmark's position in T), with the noise
// model of F and the method of the package documentation. The graph must
// be a valid connected pose graph (posegraph.Graph.Validate) with poses in
// SE(d): rotation-only estimates have no translation covariance. An
// information matrix that is singular, where the measurements leave some
// vertex's pose undetermined (a 3-D landmark seen along one ray only, a
// pose joined to the rest by a single landmark), is an error naming the
// vertex.
func Compute(g *posegraph.Graph, x []posegraph.Pose, opts Options) (*Covariances, error) {
	if g == nil {
		return nil, errors.New("covariance: nil graph")
	}
	if err := g.Validate(); err != nil {
		return nil, fmt.Errorf("covariance: %w", err)
	}
	d, n := g.D, g.N()
	if len(x) != n {
		return nil, fmt.Errorf("covariance: %d poses for a graph of %d vertices", len(x), n)
	}
	for i := range x {
		if !finite(x[i].R[:d*d]) || !finite(x[i].T[:d]) {
			return nil, fmt.Errorf("covariance: vertex %d: the pose is not finite", g.IDs[i])
		}
	}
	gauge := opts.Gauge.Vertex(g)
	if gauge < 0 || gauge >= n {
		return nil, fmt.Errorf("covariance: gauge vertex %d is outside 0..%d", gauge, n-1)
	}
	if g.IsLandmark(gauge) {
		return nil, fmt.Errorf("covariance: the gauge, vertex %d, is a landmark, which has no orientation to hold fixed", g.IDs[gauge])
	}
	for k, pr := range opts.Pairs {
		if pr[0] < 0 || pr[0] >= n || pr[1] < 0 || pr[1] >= n {
			return nil, fmt.Errorf("covariance: pair %d (%d, %d) names a vertex outside 0..%d", k, pr[0], pr[1], n-1)
		}
		if pr[0] == pr[1] {
			return nil, fmt.Errorf("covariance: pair %d names vertex %d twice", k, g.IDs[pr[0]])
		}
	}

	p := PoseDim(d)
	c := &Covariances{D: d, Gauge: gauge, size: make([]int, n), off: make([]int, n)}
	total := 0
	for i := range c.size {
		c.size[i] = p
		if g.IsLandmark(i) {
			c.size[i] = d
		}
		c.off[i] = total
		total += c.size[i] * c.size[i]
	}
	c.val = make([]float64, total)
	if n == 1 {
		c.Joints = make([]Joint, len(opts.Pairs))
		return c, nil
	}

	info, block := information(g, x, gauge)
	scale, err := unitDiagonal(info)
	if err != nil {
		return nil, singularError(g, block, p, err.(*sparse.NotPositiveDefiniteError).Column)
	}
	chol, err := sparse.AnalyzeBlocks(info, sparse.BlockOrder(info, 0))
	if err != nil {
		return nil, fmt.Errorf("covariance: %w", err)
	}
	if err := chol.FactorizeBlocks(info, 0); err != nil {
		var npd *sparse.NotPositiveDefiniteError
		if errors.As(err, &npd) {
			return nil, singularError(g, block, p, npd.Column)
		}
		return nil, fmt.Errorf("covariance: %w", err)
	}
	c.FactorNNZ, c.Supernodes = chol.NNZ(), chol.Supernodes()
	inv, err := chol.SelectedInverse()
	if err != nil {
		return nil, fmt.Errorf("covariance: %w", err)
	}

	idx := make([]int, p)
	for i := 0; i < n; i++ {
		b := block[i]
		if b < 0 {
			continue // the gauge: zero
		}
		k := c.size[i]
		for a := range idx[:k] {
			idx[a] = b*p + a
		}
		m := c.Marginal(i)
		if !inv.Submatrix(m, idx[:k]) {
			return nil, errors.New("covariance: internal error: a diagonal block is off the factor's pattern")
		}
		for a := 0; a < k; a++ {
			for q := 0; q < k; q++ {
				m[a*k+q] *= scale[b*p+a] * scale[b*p+q]
			}
		}
	}
	c.Joints, c.PairSolves = joints(c, opts.Pairs, block, p, inv, chol, scale)
	return c, nil
}

func finite(v []float64) bool {
	for _, a := range v {
		if math.IsNaN(a) || math.IsInf(a, 0) {
			return false
		}
	}
	return true
}

// singularError names the vertex of the information matrix's column col
// (block coordinates) where the factorization broke down.
func singularError(g *posegraph.Graph, block []int, p, col int) error {
	b, a := col/p, col%p
	for i, bi := range block {
		if bi == b {
			kind, coord := "pose", coordName(g.D, a)
			if g.IsLandmark(i) {
				kind = "landmark"
			}
			return fmt.Errorf("covariance: the information matrix is singular at %s %d (coordinate %s): "+
				"the measurements do not determine it, so it has no finite covariance", kind, g.IDs[i], coord)
		}
	}
	return fmt.Errorf("covariance: the information matrix is singular (column %d)", col)
}

// coordName names coordinate a of a pose block in dimension d.
func coordName(d, a int) string {
	if d == 2 {
		return [3]string{"x", "y", "theta"}[a]
	}
	return [6]string{"x", "y", "z", "rx", "ry", "rz"}[a]
}

// joints assembles the joint covariance of each pair from the marginals
// and the cross block: from the selected inverse where it lies on the
// factor's pattern, else from solves with the factor, one set of p
// right-hand sides per distinct second vertex. It returns the joints and
// the number of such vertices.
func joints(c *Covariances, pairs [][2]int, block []int, p int, inv *sparse.SelectedInverse, chol *sparse.Cholesky, scale []float64) ([]Joint, int) {
	out := make([]Joint, len(pairs))
	cross := make([][]float64, len(pairs)) // C_IJ, a x b, scaled back
	need := map[int][]int{}                // block of J -> pairs whose cross block needs solves
	var order []int
	idx := make([]int, 2*p)
	for k, pr := range pairs {
		i, j := pr[0], pr[1]
		a, b := c.size[i], c.size[j]
		cross[k] = make([]float64, a*b)
		if block[i] < 0 || block[j] < 0 {
			continue // the gauge is fixed: no covariance with anything
		}
		for q := 0; q < a; q++ {
			idx[q] = block[i]*p + q
		}
		for q := 0; q < b; q++ {
			idx[a+q] = block[j]*p + q
		}
		sub := make([]float64, (a+b)*(a+b))
		if inv.Submatrix(sub, idx[:a+b]) {
			for r := 0; r < a; r++ {
				for q := 0; q < b; q++ {
					cross[k][r*b+q] = sub[r*(a+b)+a+q] * scale[idx[r]] * scale[idx[a+q]]
				}
			}
			continue
		}
		if _, ok := need[block[j]]; !ok {
			order = append(order, block[j])
		}
		need[block[j]] = append(need[block[j]], k)
	}
	if len(order) > 0 {
		dim := chol.N()
		rhs := make([]float64, dim*p)
		sol := make([]float64, dim*p)
		for _, bj := range order {
			clear(rhs)
			for q := 0; q < p; q++ {
				rhs[q*dim+bj*p+q] = 1
			}
			chol.SolveMany(sol, rhs, p)
			for _, k := range need[bj] {
				i, j := pairs[k][0], pairs[k][1]
				a, b := c.size[i], c.size[j]
				for r := 0; r < a; r++ {
					ri := block[i]*p + r
					for q := 0; q < b; q++ {
						cross[k][r*b+q] = sol[q*dim+ri] * scale[ri] * scale[bj*p+q]
					}
				}
			}
		}
	}
	for k, pr := range pairs {
		i, j := pr[0], pr[1]
		a, b := c.size[i], c.size[j]
		w := a + b
		m := make([]float64, w*w)
		ci, cj := c.Marginal(i), c.Marginal(j)
		for r := 0; r < a; r++ {
			copy(m[r*w:r*w+a], ci[r*a:r*a+a])
			for q := 0; q < b; q++ {
				m[r*w+a+q] = cross[k][r*b+q]
				m[(a+q)*w+r] = cross[k][r*b+q]
			}
		}
		for r := 0; r < b; r++ {
			copy(m[(a+r)*w+a:(a+r)*w+w], cj[r*b:r*b+b])
		}
		out[k] = Joint{I: i, J: j, Cov: m}
	}
	return out, len(order)
}
