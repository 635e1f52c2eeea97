package sync

import (
	"math"
	"slices"
	"sort"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/bcmsync/bcmsync/posegraph"
)

// The consistency stage of robust mode: loop closures are checked against
// cycles of trusted odometry and of the closures already accepted before
// any solve, so that GNC starts from few outliers.
//
// A closure from pose i to pose j measures Z ~ X_i^-1 X_j. Any path from i
// to j through edges believed correct predicts the same relative pose: the
// product T of the path's measurements, each oriented along the path. The
// cycle T^-1 Z is then the identity up to noise, and to first order its
// error is Exp(e) with e ~ N(0, C_T + C_Z), where C_T is the path's
// covariance propagated along it and C_Z the closure's. A closure whose
// Mahalanobis norm e^T (C_T + C_Z)^-1 e exceeds the chi-squared threshold
// c^2 of its dimension disagrees with the path.
//
// This is the pairwise test of pairwise consistency maximization (PCM:
// Mangelson, Dominic, Eustice and Vasudevan, "Pairwise Consistent
// Measurement Set Maximization for Robust Multi-robot Map Merging", ICRA
// 2018), where the path is the odometry between two closures' endpoints
// and one of the closures, generalized to any path of accepted edges, as
// in the loop constraints of Zach, Klopschitz and Pollefeys
// ("Disambiguating Visual Relations Using Loop Constraints", CVPR 2010).
// On one trajectory the generalization matters: a group of wrong closures
// that agree with each other (perceptual aliasing: datasets.AddAliasing)
// between two places visited hundreds of poses apart has no true closure
// near both of its ends, so PCM's odometry-only cycles are too long to
// test it, while a path through the true closures of the places in
// between is short.
//
// Closures are taken in order of the rotation variance of their odometry
// cycle, shortest first, so that the first ones are judged by odometry
// alone and later ones by the structure the first ones built; a wrong
// closure is tested before a group could support it only if its cycle is
// as short as a true one's. A closure with no path of accepted edges whose
// rotation variance is within cycleVarMax (the first-order model is good
// only while the path's rotation is uncertain by well under a radian, and a
// test with a looser path could not reject anything) waits for a later
// pass over the closures left, and closures still untested after a pass
// that decides nothing are left to GNC. Landmark observations, edges
// between segments that trusted odometry does not join, and every edge
// when odometry is not trusted, are left to GNC too.
//
// The stage only proposes: the final TLS check (SolveRobust) puts back
// every rejected edge whose term is within c^2 at the certified optimum.

// cycleVarMax is the largest rotation variance per axis (rad^2) of a path
// that judges a closure: a standard deviation of 0.5 rad.
const cycleVarMax = 0.25

// scaleCycles is how many of the shortest odometry cycles measure the noise
// scale, and minScaleCycles how many it takes at least; minScale keeps a
// noise-free graph, whose cycles close to rounding error, from a zero
// scale that would reject everything.
const (
	scaleCycles    = 200
	minScaleCycles = 10
	minScale       = 1e-6
	looseGate      = 10
	// looseGateRotations is looseGate for rotation synchronization. A
	// cycle of rotations has 1 or 3 degrees of freedom, not 3 or 6, and
	// a wrong closure's random rotation lands within a band of the gate
	// with a probability that grows with the band's width in radians: on
	// sphere2500 with 247 wrong closures (rotations only) a band of 10
	// left 23 of them to GNC, which then kept them and lost 40 true
	// closures; 3 left 5 kept, 2 one, 1.5 none (one run each).
	looseGateRotations = 2
)

// tangent is a vector of se(d) (or so(d)) in the order (omega, v): the
// rotation's d(d-1)/2 coordinates, then the translation's d (poses only).
type tangent [6]float64

// tcov is a covariance on the tangent space, dim x dim row-major.
type tcov [36]float64

// cycleAlgebra is the first-order algebra of the tests for one dimension
// and problem: adjoints, edge covariances, logarithms.
type cycleAlgebra struct {
	d, nr, dim int
}

func newCycleAlgebra(d int, prob posegraph.Problem) cycleAlgebra {
	a := cycleAlgebra{d: d, nr: d * (d - 1) / 2}
	a.dim = a.nr
	if prob == posegraph.Poses {
		a.dim += d
	}
	return a
}

// adjoint returns Ad_P, which maps a right perturbation of P to the left
// one: P Exp(xi) = Exp(Ad_P xi) P. In (omega, v) order it is
// [[R, 0], [[t]_x R, R]] (in 2-D, [[1, 0], [(t_y, -t_x)^T, R]]).
func (a cycleAlgebra) adjoint(p *posegraph.Pose) tcov {
	var m tcov
	d, dim := a.d, a.dim
	if d == 2 {
		m[0] = 1
		if dim == 3 {
			m[1*3+0], m[2*3+0] = p.T[1], -p.T[0]
			m[1*3+1], m[1*3+2] = p.R[0], p.R[1]
			m[2*3+1], m[2*3+2] = p.R[2], p.R[3]
		}
		return m
	}
	for r := 0; r < 3; r++ {
		for c := 0; c < 3; c++ {
			m[r*dim+c] = p.R[r*3+c]
		}
	}
	if dim == 6 {
		t := p.T
		skew := [9]float64{0, -t[2], t[1], t[2], 0, -t[0], -t[1], t[0], 0}
		for r := 0; r < 3; r++ {
			for c := 0; c < 3; c++ {
				s := 0.0
				for k := 0; k < 3; k++ {
					s += skew[r*3+k] * p.R[k*3+c]
				}
				m[(r+3)*6+c] = s
				m[(r+3)*6+c+3] = p.R[r*3+c]
			}
		}
	}
	return m
}

// transport returns A C A^T.
func (a cycleAlgebra) transport(am, c *tcov) tcov {
	n := a.dim
	var ac, out tcov
	for r := 0; r < n; r++ {
		for k := 0; k < n; k++ {
			if v := am[r*n+k]; v != 0 {
				for c2 := 0; c2 < n; c2++ {
					ac[r*n+c2] += v * c[k*n+c2]
				}
			}
		}
	}
	for r := 0; r < n; r++ {
		for c2 := 0; c2 <= r; c2++ {
			s := 0.0
			for k := 0; k < n; k++ {
				s += ac[r*n+k] * am[c2*n+k]
			}
			out[r*n+c2], out[c2*n+r] = s, s
		}
	}
	return out
}

// edgeCov returns the covariance of e's noise as a right perturbation of
// its measurement, diag(I/(2 kappa), I/tau): the noise model of package
// datasets, whose rotation error is about N(0, 1/(2 kappa)) per axis, and
// of F's terms. (The files' full information matrices, anisotropic and
// with cross terms, made the cycles' norms no closer to chi-squared on
// intel, sphere2500 and parking-garage.)
func (a cycleAlgebra) edgeCov(e *posegraph.Edge) tcov {
	var c tcov
	for k := 0; k < a.nr; k++ {
		c[k*a.dim+k] = 1 / (2 * e.Kappa)
	}
	for k := a.nr; k < a.dim; k++ {
		c[k*a.dim+k] = 1 / e.Tau
	}
	return c
}

// log returns the first-order coordinates of p: the rotation's angle
// (2-D) or rotation vector (3-D), then the translation.
func (a cycleAlgebra) log(p *posegraph.Pose) tangent {
	var v tangent
	if a.d == 2 {
		v[0] = math.Atan2(p.R[2], p.R[0])
	} else {
		r := &p.R
		cos := math.Max(-1, math.Min(1, (r[0]+r[4]+r[8]-1)/2))
		th := math.Acos(cos)
		w := [3]float64{r[7] - r[5], r[2] - r[6], r[3] - r[1]}
		switch s := math.Sin(th); {
		case th < 1e-6:
			for k := range w {
				v[k] = w[k] / 2
			}
		case s < 1e-6:
			// Near pi the skew part vanishes: the axis is the column of
			// (R + I)/2 = k k^T of largest diagonal entry.
			c := 0
			for k := 1; k < 3; k++ {
				if r[k*4] > r[c*4] {
					c = k
				}
			}
			n := math.Sqrt(math.Max(0, (r[c*4]+1)/2))
			for k := 0; k < 3; k++ {
				x := (r[k*3+c] + r[c*3+k]) / 4 / n
				if k == c {
					x = n
				}
				v[k] = th * x
			}
		default:
			for k := range w {
				v[k] = th / (2 * s) * w[k]
			}
		}
	}
	if a.dim > a.nr {
		for k := 0; k < a.d; k++ {
			v[a.nr+k] = p.T[k]
		}
	}
	return v
}

// mahalanobis returns e^T C^-1 e by a Cholesky factorization of C, or +Inf
// when C is not positive definite.
func (a cycleAlgebra) mahalanobis(e *tangent, c *tcov) float64 {
	n := a.dim
	l := *c
	for j := 0; j < n; j++ {
		s := l[j*n+j]
		for k := 0; k < j; k++ {
			s -= l[j*n+k] * l[j*n+k]
		}
		if !(s > 0) {
			return math.Inf(1)
		}
		s = math.Sqrt(s)
		l[j*n+j] = s
		for i := j + 1; i < n; i++ {
			t := l[i*n+j]
			for k := 0; k < j; k++ {
				t -= l[i*n+k] * l[j*n+k]
			}
			l[i*n+j] = t / s
		}
	}
	m := 0.0
	var y tangent
	for i := 0; i < n; i++ {
		t := e[i]
		for k := 0; k < i; k++ {
			t -= l[i*n+k] * y[k]
		}
		y[i] = t / l[i*n+i]
		m += y[i] * y[i]
	}
	return m
}

// cycleChecker holds the graph the searches run on, whose vertices are
// the junctions, the poses some loop closure ends at, joined by the
// odometry between consecutive junctions of a segment (a run) and by the
// closures accepted so far. A run is composed in O(1) from the dead
// reckoning along its segment and the prefix sums of its steps'
// covariances, carried to the segment's frame (PCM's world-frame form):
// with P_k the dead-reckoned pose after step k, the steps from a to b
// multiply to P_a^-1 P_b with covariance, as a right perturbation at b,
// Ad_{P_b^-1} (C_b - C_a) Ad_{P_b^-1}^T, C_k = sum over steps l <= k of
// Ad_{P_l} Sigma_l Ad_{P_l}^T. So a search and a test cost in the number
// of junctions and closures on the path, not in its poses.
type cycleChecker struct {
	g   *posegraph.Graph
	alg cycleAlgebra
	vr  []float64 // each edge's rotation variance per axis, 1/(2 kappa)

	node  []int32          // the junction at each pose, or -1
	jpose []int32          // each junction's pose, ascending
	jseg  []int32          // its odometry segment
	rho   []float64        // the rotation variance per axis from its segment's start
	dr    []posegraph.Pose // the dead reckoning there, in the segment's frame
	cw    []tcov           // C there
	adj   [][]int32        // the accepted closures at each junction

	dist []float64  // search distances, valid where seen == stmp
	via  []int32    // how the search reached each junction (see arc)
	seen []uint32   // search stamp
	heap []distNode // the search's priority queue
	path []int32    // the last path found, as arcs from its end back
	stmp uint32
}

// Arcs of a path: a closure's edge index, or one of these runs.
const (
	runFromPrev = -2 // the run from the junction before
	runFromNext = -3 // the run from the junction after
)

type distNode struct {
	dist float64
	v    int32
}

// cycleVerdict is the consistency stage's verdict on a closure.
type cycleVerdict uint8

const (
	cycleUntested cycleVerdict = iota // not a candidate, or no path short enough
	// cycleConsistent: within the gate c^2 (times the noise scale); the
	// closure joins the paths later closures are tested along.
	cycleConsistent
	// cycleDoubtful: beyond the gate but within looseGate times it: real
	// cycles' errors have heavier tails than the chi-squared law (intel's
	// reach 18 times the gate), so such a closure is left to GNC.
	cycleDoubtful
	// cycleInconsistent: beyond looseGate times the gate, a gross error:
	// set aside until a TLS check finds it within c^2.
	cycleInconsistent
)

// checkCycles runs the consistency stage on g and returns its verdict on
// each edge. trusted marks the odometry it starts
// from (nil or all false: the stage does nothing); c2 is the gate on a
// cycle's Mahalanobis norm (before the noise scale).
func checkCycles(g *posegraph.Graph, trusted []bool, prob posegraph.Problem, c2 float64) ([]cycleVerdict, ConsistencyStats) {
	var st ConsistencyStats
	verdict := make([]cycleVerdict, g.M())
	if !slices.Contains(trusted, true) {
		return verdict, st
	}
	var cands []int
	for k := range g.Edges {
		e := &g.Edges[k]
		if !trusted[k] && !g.IsObservation(e) && !g.IsLandmark(e.I) && e.Kappa > 0 {
			cands = append(cands, k)
		}
	}
	if len(cands) == 0 {
		return verdict, st
	}
	cc := newCycleChecker(g, prob, trusted, cands)
	// Closures in order of their odometry cycle's rotation variance,
	// shortest first; closures between segments last.
	key := func(k int) float64 {
		a, b := cc.node[g.Edges[k].I], cc.node[g.Edges[k].J]
		if cc.jseg[a] != cc.jseg[b] {
			return math.Inf(1)
		}
		return math.Abs(cc.rho[a] - cc.rho[b])
	}
	sort.SliceStable(cands, func(a, b int) bool { return key(cands[a]) < key(cands[b]) })
	st.Candidates = len(cands)

	// The noise scale: the median Mahalanobis norm of the shortest
	// odometry cycles over the chi-squared median.
	var norms []float64
	for _, k := range cands {
		if len(norms) == scaleCycles || math.IsInf(key(k), 1) {
			break
		}
		e := &g.Edges[k]
		cc.path = append(cc.path[:0], cc.runArc(cc.node[e.J], cc.node[e.I])...)
		norms = append(norms, cc.norm(k))
	}
	scale := 1.0
	if len(norms) >= minScaleCycles {
		// Wrong closures with short cycles inflate the median; the scale
		// is re-measured on the cycles within the loose gate of the last
		// one until it settles (a few rounds: the trimmed median
		// only falls, and not below the inliers' own).
		sort.Float64s(norms)
		med := distuv.ChiSquared{K: float64(cc.alg.dim)}.Quantile(0.5)
		scale = math.Max(norms[len(norms)/2]/med, minScale)
		for range 10 {
			n := sort.SearchFloat64s(norms, c2*scale*looseGate*(1+1e-12))
			if n < minScaleCycles {
				break
			}
			next := math.Max(norms[n/2]/med, minScale)
			if next >= scale {
				break
			}
			scale = next
		}
	}
	st.Scale = scale
	gate, bound := c2*scale, cycleVarMax/scale
	loose := float64(looseGate)
	if prob == posegraph.Rotations {
		loose = looseGateRotations
	}
	pending := cands
	for len(pending) > 0 {
		st.Passes++
		decided := 0
		next := pending[:0]
		for _, k := range pending {
			e := &g.Edges[k]
			if !cc.search(int(cc.node[e.I]), int(cc.node[e.J]), bound) {
				next = append(next, k)
				continue
			}
			switch nm := cc.norm(k); {
			case nm <= gate:
				cc.accept(k)
				verdict[k] = cycleConsistent
				st.Accepted++
			case nm <= gate*loose:
				verdict[k] = cycleDoubtful
				st.Doubtful++
			default:
				verdict[k] = cycleInconsistent
				st.Rejected++
			}
			decided++
		}
		pending = next
		if decided == 0 {
			break
		}
	}
	st.Untested = len(pending)
	return verdict, st
}

// newCycleChecker returns a checker of g's cycles with the junctions of
// the closures cands, the odometry trusted, and no closure accepted.
func newCycleChecker(g *posegraph.Graph, prob posegraph.Problem, trusted []bool, cands []int) *cycleChecker {
	n, m := g.N(), g.M()
	cc := &cycleChecker{g: g, alg: newCycleAlgebra(g.D, prob), vr: make([]float64, m), node: make([]int32, n)}
	for k := range g.Edges {
		if e := &g.Edges[k]; e.Kappa > 0 {
			cc.vr[k] = 1 / (2 * e.Kappa)
		}
	}
	for i := range cc.node {
		cc.node[i] = -1
	}
	for _, k := range cands {
		cc.node[g.Edges[k].I], cc.node[g.Edges[k].J] = 0, 0
	}
	odo := make([]int, n) // a trusted edge between i-1 and i, or -1
	for i := range odo {
		odo[i] = -1
	}
	for k, e := range g.Edges {
		if trusted[k] && odo[max(e.I, e.J)] < 0 {
			odo[max(e.I, e.J)] = k
		}
	}
	// Walk the odometry, recording the dead reckoning, C and rho at each
	// junction.
	d, alg := g.D, cc.alg
	seg := int32(0)
	p := posegraph.Identity(d)
	var c tcov
	rho := 0.0
	for i := 0; i < n; i++ {
		if k := odo[i]; i > 0 && k >= 0 {
			e := &g.Edges[k]
			z, ce := e.Measurement(), alg.edgeCov(e)
			if e.J != i { // stored from i to i-1: the step is its inverse
				adj := alg.adjoint(&z)
				ce = alg.transport(&adj, &ce)
				z = posegraph.Inverse(&z, d)
			}
			p = posegraph.Compose(&p, &z, d)
			adj := alg.adjoint(&p)
			ce = alg.transport(&adj, &ce)
			for t := range c {
				c[t] += ce[t]
			}
			rho += cc.vr[k]
		} else if i > 0 {
			seg++
			p, c, rho = posegraph.Identity(d), tcov{}, 0
		}
		if cc.node[i] == 0 {
			cc.node[i] = int32(len(cc.jpose))
			cc.jpose = append(cc.jpose, int32(i))
			cc.jseg = append(cc.jseg, seg)
			cc.rho = append(cc.rho, rho)
			cc.dr = append(cc.dr, p)
			cc.cw = append(cc.cw, c)
		}
	}
	nj := len(cc.jpose)
	cc.adj = make([][]int32, nj)
	cc.dist, cc.via, cc.seen = make([]float64, nj), make([]int32, nj), make([]uint32, nj)
	return cc
}

// accept adds closure k to the graph of accepted edges.
func (cc *cycleChecker) accept(k int) {
	e := &cc.g.Edges[k]
	a, b := cc.node[e.I], cc.node[e.J]
	cc.adj[a] = append(cc.adj[a], int32(k))
	cc.adj[b] = append(cc.adj[b], int32(k))
}

// runArc returns the arcs of the odometry from junction s to junction t of
// the same segment, from t back to s, as a search leaves them.
func (cc *cycleChecker) runArc(t, s int32) []int32 {
	var arcs []int32
	for v := t; v != s; {
		if v > s {
			arcs = append(arcs, runFromPrev)
			v--
		} else {
			arcs = append(arcs, runFromNext)
			v++
		}
	}
	return arcs
}

// norm returns the Mahalanobis norm of the cycle closure k makes with the
// path the last search left, under the covariances the weights claim.
func (cc *cycleChecker) norm(k int) float64 {
	v, c := cc.cycle(k)
	return cc.alg.mahalanobis(&v, &c)
}

// cycle returns the first-order error of the cycle closure k makes with
// the path the last search left in cc.path, and its covariance.
func (cc *cycleChecker) cycle(k int) (tangent, tcov) {
	e := &cc.g.Edges[k]
	// Compose the path from e.I to e.J with its covariance, a right
	// perturbation of the running product T: a step by Z (noise
	// Exp(zeta), covariance C_Z) gives T Z with covariance
	// Ad_{Z^-1} C Ad_{Z^-1}^T + C_Z; a step against an edge's direction
	// uses Z^-1, whose noise as a right perturbation has covariance
	// Ad_Z C_Z Ad_Z^T.
	alg, d := cc.alg, cc.g.D
	t := posegraph.Identity(d)
	var c tcov
	at := cc.node[e.I]
	step := func(z *posegraph.Pose, cz *tcov) {
		zi := posegraph.Inverse(z, d)
		adj := alg.adjoint(&zi)
		c = alg.transport(&adj, &c)
		for i := range c {
			c[i] += cz[i]
		}
		t = posegraph.Compose(&t, z, d)
	}
	for p := len(cc.path) - 1; p >= 0; p-- {
		switch arc := cc.path[p]; arc {
		case runFromPrev, runFromNext:
			to := at + 1
			if arc == runFromNext {
				to = at - 1
			}
			lo, hi := min(at, to), max(at, to)
			z := posegraph.Between(&cc.dr[at], &cc.dr[to], d)
			var cz tcov
			for i := range cz {
				cz[i] = cc.cw[hi][i] - cc.cw[lo][i]
			}
			back := posegraph.Inverse(&cc.dr[to], d)
			adj := alg.adjoint(&back)
			cz = alg.transport(&adj, &cz)
			step(&z, &cz)
			at = to
		default:
			pe := &cc.g.Edges[arc]
			z, cz := pe.Measurement(), alg.edgeCov(pe)
			if cc.node[pe.I] == at {
				at = cc.node[pe.J]
			} else {
				adj := alg.adjoint(&z)
				cz = alg.transport(&adj, &cz)
				z = posegraph.Inverse(&z, d)
				at = cc.node[pe.I]
			}
			step(&z, &cz)
		}
	}
	ce := alg.edgeCov(e)
	for i := range c {
		c[i] += ce[i]
	}
	z := e.Measurement()
	cyc := posegraph.Between(&t, &z, d)
	return alg.log(&cyc), c
}

// search finds the path from junction s to junction t of least rotation
// variance, over odometry runs and accepted closures, if that is within
// bound, and leaves its arcs, from t back to s, in cc.path.
func (cc *cycleChecker) search(s, t int, bound float64) bool {
	cc.stmp++
	if cc.stmp == 0 { // wrapped: clear the stamps
		clear(cc.seen)
		cc.stmp = 1
	}
	stamp := cc.stmp
	cc.seen[s], cc.dist[s], cc.via[s] = stamp, 0, -1
	h := heapPush(cc.heap[:0], distNode{0, int32(s)})
	relax := func(w int, nd float64, arc int32) {
		if nd <= bound && (cc.seen[w] != stamp || nd < cc.dist[w]) {
			cc.seen[w], cc.dist[w], cc.via[w] = stamp, nd, arc
			h = heapPush(h, distNode{nd, int32(w)})
		}
	}
	found := false
	for len(h) > 0 {
		var top distNode
		h, top = heapPop(h)
		u := int(top.v)
		if top.dist > cc.dist[u] {
			continue // stale
		}
		if u == t {
			found = true
			break
		}
		if u > 0 && cc.jseg[u-1] == cc.jseg[u] {
			relax(u-1, top.dist+cc.rho[u]-cc.rho[u-1], runFromNext)
		}
		if u+1 < len(cc.jpose) && cc.jseg[u+1] == cc.jseg[u] {
			relax(u+1, top.dist+cc.rho[u+1]-cc.rho[u], runFromPrev)
		}
		for _, k := range cc.adj[u] {
			e := &cc.g.Edges[k]
			w := int(cc.node[e.I])
			if w == u {
				w = int(cc.node[e.J])
			}
			relax(w, top.dist+cc.vr[k], k)
		}
	}
	cc.heap = h[:0]
	if !found {
		return false
	}
	cc.path = cc.path[:0]
	for v := int32(t); v != int32(s); {
		arc := cc.via[v]
		cc.path = append(cc.path, arc)
		switch arc {
		case runFromPrev:
			v--
		case runFromNext:
			v++
		default:
			e := &cc.g.Edges[arc]
			if cc.node[e.I] == v {
				v = cc.node[e.J]
			} else {
				v = cc.node[e.I]
			}
		}
	}
	return true
}

// heapPush and heapPop keep a binary min-heap of distNode by dist.
func heapPush(h []distNode, x distNode) []distNode {
	h = append(h, x)
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if h[p].dist <= h[i].dist {
			break
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
	return h
}

func heapPop(h []distNode) ([]distNode, distNode) {
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for i := 0; ; {
		l, r, s := 2*i+1, 2*i+2, i
		if l < len(h) && h[l].dist < h[s].dist {
			s = l
		}
		if r < len(h) && h[r].dist < h[s].dist {
			s = r
		}
		if s == i {
			break
		}
		h[s], h[i] = h[i], h[s]
		i = s
	}
	return h, top
}
