package plots

import (
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/bcmsync/bcmsync/posegraph"
)

// Viewer is what the interactive HTML page of WriteHTML shows: one pose
// graph, some estimates of its poses, and optionally the solve that made
// them.
type Viewer struct {
	// Title names the graph in the page's header and title, usually the
	// input file's base name. It is shown as text, never as markup.
	Title string
	Graph *posegraph.Graph
	// Problem says whether the estimates are poses (SE(d)) or rotations
	// only (SO(d)). For Rotations the page lays the poses out by
	// composing the edges' translations with each estimate's rotations
	// (see RotationLayout), since the estimate has no positions. A graph
	// with landmarks has no rotation-only page: rotation synchronization
	// has no use for points (sync.Solve refuses it the same way), and a
	// layout would place them only by their observations.
	Problem posegraph.Problem
	// Estimates are shown one at a time or overlaid, typically the
	// initial guess and the optimized estimate. The last one is the
	// estimate the page opens on and whose edge costs colour the view by
	// default. At least one is needed.
	Estimates []Trajectory
	// Run summarizes the solve; nil when the estimates come from files
	// alone, and the header then says so instead of a certificate status.
	Run *Run
	// Rejected lists edges of Graph (indices into Graph.Edges) that a
	// robust solve rejected. The page still draws them, but leaves their
	// terms out of each estimate's F, which is then the objective the
	// solve minimized (the Run's), and says how many it left out.
	Rejected []int
	// Ellipses, when set, are position covariances of the last
	// estimate's vertices, which the page draws as ellipses around them
	// behind a toggle (off at first).
	Ellipses *Ellipses
}

// Ellipses are the position uncertainties the page can draw around the
// vertices of the last estimate, as the ellipses that hold 95% of a
// Gaussian's mass, sqrt(5.991) standard deviations out along each axis,
// magnified by a factor the page chooses so that they show (and prints).
type Ellipses struct {
	// XY holds, per vertex, the covariance of its x and y as (xx, xy,
	// yy). In 3-D that is the marginal of x and y, the covariance's
	// projection on the horizontal plane, which the page draws at the
	// vertex's height. A vertex with zero covariance (the gauge, held
	// fixed) gets no ellipse.
	XY [][3]float64
	// Note says what the covariances are, for the side bar.
	Note string
}

// Run is the part of a solve's report the viewer shows: the certificate
// in the header and the history as a convergence chart.
type Run struct {
	Status    string
	Certified bool
	// Objective is F of the final estimate; DualBound and
	// SuboptimalityBound are nil unless a certificate proved them.
	Objective           float64
	RelaxationObjective float64
	DualBound           *float64
	SuboptimalityBound  *float64
	MinEigenvalue       float64
	Rank                int
	Init                string
	Seconds             float64
	History             []Step
	// Levels lists the staircase's ranks in order with their certificate
	// checks, so the chart can mark where each level ended.
	Levels []LevelCheck
}

// Step is one record of a solve's history.
type Step struct {
	Rank    int
	Phase   string // "bcm" or "rtr"
	Iter    int    // within the level
	Seconds float64
	F       float64
	RelGrad float64 // ||grad F|| / ||2 X Q||
}

// LevelCheck is the certificate check that ended one staircase level.
type LevelCheck struct {
	Rank      int
	Certified bool
}

// pageData is the JSON the page is built from; its field names are the
// page script's (plots/viewer/viewer.js).
type pageData struct {
	Title   string     `json:"title"`
	D       int        `json:"d"`
	Problem string     `json:"problem"`
	N       int        `json:"n"` // vertices: the poses, then the landmarks
	M       int        `json:"m"`
	IDs     []int      `json:"ids"`
	Edges   []int      `json:"edges"` // i0, j0, i1, j1, ...
	Loop    []int8     `json:"loop"`  // 1 for a loop closure: an edge between non-consecutive poses, not an observation
	Layout  string     `json:"layout,omitempty"`
	Est     []estimate `json:"estimates"`
	Run     *runData   `json:"run"`

	// Ell holds the position covariances (nil: none).
	Ell *ellData `json:"ellipses,omitempty"`

	// Rejected is how many edges (Viewer.Rejected) each estimate's Total
	// leaves out.
	Rejected int `json:"rejected"`

	// Landmarks is how many of the n vertices are landmarks; they are
	// the last ones (posegraph's order), so an edge into a vertex at
	// index >= n - landmarks is an observation. The page draws them as
	// triangles and their observations as their own class of edges.
	Landmarks int `json:"landmarks"`
}

type estimate struct {
	Label string `json:"label"`
	// Pos holds d coordinates per pose, Head the heading: the angle of
	// R e_1 in 2-D, the unit vector R e_1 in 3-D.
	Pos  numbers `json:"pos"`
	Head numbers `json:"head"`
	// Cost is each edge's term of F, Total their sum over the edges not
	// rejected.
	Cost  numbers `json:"cost"`
	Total float64 `json:"total"`
}

type ellData struct {
	XY   numbers `json:"xy"` // xx, xy, yy per vertex
	Note string  `json:"note"`
}

type runData struct {
	Status        string    `json:"status"`
	Certified     bool      `json:"certified"`
	Objective     float64   `json:"objective"`
	Relaxation    float64   `json:"relaxation"`
	DualBound     *float64  `json:"dual_bound"`
	Gap           *float64  `json:"gap"`
	MinEigenvalue float64   `json:"min_eigenvalue"`
	Rank          int       `json:"rank"`
	Init          string    `json:"init"`
	Seconds       float64   `json:"seconds"`
	Hist          histData  `json:"history"`
	Levels        []lvlData `json:"levels"`
}

type histData struct {
	Rank    []int   `json:"rank"`
	BCM     []int8  `json:"bcm"` // 1 for a BCM sweep, 0 for a trust-region step
	Iter    []int   `json:"iter"`
	Seconds numbers `json:"t"`
	F       numbers `json:"f"`
	RelGrad numbers `json:"rel"`
}

type lvlData struct {
	Rank      int  `json:"rank"`
	Certified bool `json:"certified"`
}

// numbers is a float slice written to JSON with prec significant digits,
// which keeps a 10^5-pose page to a few megabytes (positions take
// posDigits digits).
type numbers struct {
	v    []float64
	prec int
}

func (x numbers) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 2+len(x.v)*(x.prec+6))
	b = append(b, '[')
	for k, v := range x.v {
		if k > 0 {
			b = append(b, ',')
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("value %d is %v, which JSON cannot hold", k, v)
		}
		b = strconv.AppendFloat(b, v, 'g', x.prec, 64)
	}
	return append(b, ']'), nil
}

// posDigits returns the significant digits that resolve the positions pos
// (d per pose) to 1e-7 of the trajectory's extent, far below a pixel at
// any zoom the page offers: 7 for a trajectory about the origin, more for
// one far from it, such as a georeferenced one whose coordinates are
// millions of metres but whose steps are centimetres.
func posDigits(pos []float64, d int) int {
	const digits = 7
	extent, mag := 0.0, 0.0
	for a := 0; a < d; a++ {
		lo, hi := math.Inf(1), math.Inf(-1)
		for k := a; k < len(pos); k += d {
			lo, hi = math.Min(lo, pos[k]), math.Max(hi, pos[k])
			mag = math.Max(mag, math.Abs(pos[k]))
		}
		extent = math.Max(extent, hi-lo)
	}
	if !(extent > 0) || !(mag > extent) {
		return digits
	}
	return min(17, digits+int(math.Ceil(math.Log10(mag/extent))))
}

// buildPage checks v and turns it into the page's data.
func buildPage(v Viewer) (*pageData, error) {
	g := v.Graph
	if g == nil {
		return nil, errors.New("no graph")
	}
	if err := checkTrajectories(g, v.Estimates); err != nil {
		return nil, err
	}
	nl, err := checkLandmarks(g)
	if err != nil {
		return nil, err
	}
	if nl > 0 && v.Problem == posegraph.Rotations {
		return nil, fmt.Errorf("a rotation-only (SO(%d)) page has no use for the graph's %d landmarks, which carry no rotation; "+
			"show the pose problem", g.D, nl)
	}
	d, n := g.D, g.N()
	pd := &pageData{
		Title: v.Title, D: d, N: n, M: g.M(), IDs: g.IDs, Landmarks: nl,
		Problem: fmt.Sprintf("SE(%d)", d),
		Edges:   make([]int, 0, 2*g.M()),
		Loop:    make([]int8, g.M()),
	}
	if v.Problem == posegraph.Rotations {
		pd.Problem = fmt.Sprintf("SO(%d)", d)
	}
	if pd.IDs == nil {
		pd.IDs = []int{}
	}
	for k, e := range g.Edges {
		pd.Edges = append(pd.Edges, e.I, e.J)
		if e.J != e.I+1 && e.I != e.J+1 && !g.IsLandmark(e.J) {
			pd.Loop[k] = 1
		}
	}
	rejected := make([]bool, g.M())
	for _, k := range v.Rejected {
		if k < 0 || k >= g.M() || rejected[k] {
			return nil, fmt.Errorf("rejected edge %d: not an edge of the graph's %d, or listed twice", k, g.M())
		}
		rejected[k] = true
	}
	pd.Rejected = len(v.Rejected)
	for k, tr := range v.Estimates {
		for i, p := range tr.Poses {
			for _, r := range p.R[:d*d] {
				if math.IsNaN(r) || math.IsInf(r, 0) {
					return nil, fmt.Errorf("estimate %d (%q): pose %d has a non-finite rotation", k, tr.Label, i)
				}
			}
		}
		cost, err := EdgeCosts(nil, g, tr.Poses, v.Problem)
		if err != nil {
			return nil, err
		}
		total := 0.0
		for j, c := range cost {
			if !rejected[j] {
				total += c
			}
		}
		pos := make([]float64, 0, d*n)
		if v.Problem == posegraph.Rotations {
			lay, how := RotationLayout(g, tr.Poses)
			pd.Layout = how
			for _, t := range lay {
				pos = append(pos, t[:d]...)
			}
		} else {
			for _, p := range tr.Poses {
				pos = append(pos, p.T[:d]...)
			}
		}
		head := make([]float64, 0, (d-1)*n)
		for _, p := range tr.Poses {
			if d == 2 {
				head = append(head, math.Atan2(p.R[2], p.R[0]))
			} else {
				head = append(head, p.R[0], p.R[3], p.R[6])
			}
		}
		pd.Est = append(pd.Est, estimate{
			Label: tr.Label, Total: total,
			Pos:  numbers{pos, posDigits(pos, d)},
			Head: numbers{head, 4},
			Cost: numbers{cost, 4},
		})
	}
	if v.Ellipses != nil {
		ell, err := ellipseData(v.Ellipses, n)
		if err != nil {
			return nil, err
		}
		pd.Ell = ell
	}
	if r := v.Run; r != nil {
		rd := &runData{
			Status: r.Status, Certified: r.Certified, Objective: r.Objective, Relaxation: r.RelaxationObjective,
			DualBound: r.DualBound, Gap: r.SuboptimalityBound, MinEigenvalue: r.MinEigenvalue,
			Rank: r.Rank, Init: r.Init, Seconds: r.Seconds, Levels: []lvlData{},
		}
		h := &rd.Hist
		h.Rank, h.BCM, h.Iter = []int{}, []int8{}, []int{}
		h.Seconds, h.F, h.RelGrad = numbers{prec: 8}, numbers{prec: 17}, numbers{prec: 6}
		for _, s := range r.History {
			if math.IsNaN(s.F) || math.IsInf(s.F, 0) {
				continue // a failed step's record: nothing to draw
			}
			h.Rank = append(h.Rank, s.Rank)
			var b int8
			if s.Phase == "bcm" {
				b = 1
			}
			h.BCM = append(h.BCM, b)
			h.Iter = append(h.Iter, s.Iter)
			h.Seconds.v = append(h.Seconds.v, finiteOr0(s.Seconds))
			h.F.v = append(h.F.v, s.F)
			h.RelGrad.v = append(h.RelGrad.v, finiteOr0(s.RelGrad))
		}
		for _, l := range r.Levels {
			rd.Levels = append(rd.Levels, lvlData(l))
		}
		for _, p := range []*float64{&rd.Objective, &rd.Relaxation, &rd.MinEigenvalue, &rd.Seconds} {
			*p = finiteOr0(*p)
		}
		pd.Run = rd
	}
	return pd, nil
}

// ellipseData checks the covariances (one per vertex, finite, positive
// semidefinite to rounding) and packs them for the page.
func ellipseData(e *Ellipses, n int) (*ellData, error) {
	if len(e.XY) != n {
		return nil, fmt.Errorf("ellipses: %d covariances for %d vertices", len(e.XY), n)
	}
	xy := make([]float64, 0, 3*n)
	for i, c := range e.XY {
		xx, xy0, yy := c[0], c[1], c[2]
		for _, v := range c {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("ellipses: vertex %d has a non-finite covariance", i)
			}
		}
		if xx < 0 || yy < 0 || xy0*xy0 > xx*yy*(1+1e-9)+1e-300 {
			return nil, fmt.Errorf("ellipses: vertex %d's covariance (%g, %g, %g) is not positive semidefinite", i, xx, xy0, yy)
		}
		xy = append(xy, xx, xy0, yy)
	}
	return &ellData{XY: numbers{xy, 6}, Note: e.Note}, nil
}

// checkLandmarks checks what the page assumes of g's landmarks and returns
// their number: the mask covers every vertex, the landmarks follow all
// poses, and an edge touching a landmark goes from a pose to it. The
// graph need not have passed Validate (a page may show a disconnected
// file), so this is checked here rather than assumed.
func checkLandmarks(g *posegraph.Graph) (int, error) {
	n := g.N()
	if len(g.Landmark) == 0 {
		return 0, nil
	}
	if len(g.Landmark) != n {
		return 0, fmt.Errorf("landmark mask has %d entries for %d vertices", len(g.Landmark), n)
	}
	nl := 0
	for i, l := range g.Landmark {
		if l {
			nl++
		} else if nl > 0 {
			return 0, fmt.Errorf("pose %d comes after a landmark (landmarks must follow all poses)", g.IDs[i])
		}
	}
	for _, e := range g.Edges {
		if g.IsLandmark(e.I) {
			return 0, fmt.Errorf("edge (%d, %d) starts at landmark %d; an observation goes from a pose to a landmark",
				g.IDs[e.I], g.IDs[e.J], g.IDs[e.I])
		}
	}
	return nl, nil
}

func finiteOr0(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return v
}

// RotationLayout places the poses of a rotation-only estimate so a viewer
// can draw it: starting from the anchor at its input position (or the
// origin), each pose reached along a breadth-first spanning tree gets
// t_j = t_i + R_i tt_e (t_i = t_j - R_i tt_e against the edge's
// direction), with the estimate's rotations R. Good rotations make a
// layout that looks like the trajectory; bad ones bend it, so the layout
// shows what the rotations imply. When no edge has a translation, the
// input's VERTEX positions are used if every pose has one, else a circle.
// The string says which layout was made, for the page to print.
func RotationLayout(g *posegraph.Graph, x []posegraph.Pose) ([][3]float64, string) {
	n, d := g.N(), g.D
	pos := make([][3]float64, n)
	anyT := false
	for _, e := range g.Edges {
		for _, v := range e.T[:d] {
			anyT = anyT || v != 0
		}
	}
	if !anyT {
		all := len(g.HasInitial) == n
		for _, h := range g.HasInitial {
			all = all && h
		}
		if all {
			for i := range pos {
				pos[i] = g.Initial[i].T
			}
			return pos, "positions: the input's VERTEX estimates (the edges carry no translations)"
		}
		for i := range pos {
			a := 2 * math.Pi * float64(i) / float64(n)
			pos[i] = [3]float64{math.Cos(a), math.Sin(a), 0}
		}
		return pos, "positions: a circle in pose order (no translations to compose)"
	}
	adj := make([][]int32, n) // edge indices at each pose
	for k, e := range g.Edges {
		adj[e.I] = append(adj[e.I], int32(k))
		adj[e.J] = append(adj[e.J], int32(k))
	}
	seen := make([]bool, n)
	queue := make([]int, 0, n)
	start := func(root int, at [3]float64) {
		pos[root], seen[root] = at, true
		queue = append(queue[:0], root)
		for len(queue) > 0 {
			i := queue[0]
			queue = queue[1:]
			for _, k := range adj[i] {
				e := &g.Edges[k]
				j, sign := e.J, 1.0
				if j == i {
					j, sign = e.I, -1
				}
				if seen[j] {
					continue
				}
				// The edge's own tail rotates its measurement.
				r := &x[e.I].R
				for a := 0; a < d; a++ {
					v := 0.0
					for c := 0; c < d; c++ {
						v += r[a*d+c] * e.T[c]
					}
					pos[j][a] = pos[i][a] + sign*v
				}
				seen[j] = true
				queue = append(queue, j)
			}
		}
	}
	anchor := g.Anchor()
	var at [3]float64
	if anchor < len(g.HasInitial) && g.HasInitial[anchor] {
		at = g.Initial[anchor].T
	}
	start(anchor, at)
	for i := range seen {
		if !seen[i] {
			start(i, [3]float64{})
		}
	}
	return pos, "positions: the edges' translations composed along a spanning tree with each estimate's rotations"
}
