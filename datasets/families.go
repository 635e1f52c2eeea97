package datasets

import (
	"fmt"
	"math"
	"sort"

	"github.com/bcmsync/bcmsync/posegraph"
)

// Sphere returns a 3-D graph in the style of sphere2500: rings x perRing
// poses on circles of latitude of a sphere, visited ring after ring (the
// last pose of a ring steps to the first of the next), each pose facing
// along its ring with its z axis along the outward normal. Odometry links
// consecutive poses; pose k of ring r >= 1 has a candidate closure to pose
// k of ring r-1. The radius makes the equatorial step 1. With LoopProb 1,
// m = (n - 1) + (rings - 1) perRing; Sphere(50, 50, ...) has the shape of
// sphere2500 (n = 2500, m = 4949).
func Sphere(rings, perRing int, cfg Config) (*posegraph.Graph, []posegraph.Pose, error) {
	if err := cfg.check("Sphere"); err != nil {
		return nil, nil, err
	}
	if rings < 1 || perRing < 3 {
		return nil, nil, fmt.Errorf("datasets: Sphere: need rings >= 1 and perRing >= 3, have %d and %d", rings, perRing)
	}
	b := newBuilder(3, cfg, fmt.Sprintf("sphere(%dx%d)", rings, perRing))
	radius := float64(perRing) / (2 * math.Pi)
	b.truth = make([]posegraph.Pose, rings*perRing)
	for r := 0; r < rings; r++ {
		phi := math.Pi * float64(r+1) / float64(rings+1) // polar angle, poles excluded
		for k := 0; k < perRing; k++ {
			lam := 2 * math.Pi * float64(k) / float64(perRing)
			sp, cp := math.Sin(phi), math.Cos(phi)
			sl, cl := math.Sin(lam), math.Cos(lam)
			normal := [3]float64{sp * cl, sp * sl, cp}
			east := [3]float64{-sl, cl, 0}
			p := &b.truth[r*perRing+k]
			p.R = frame3(east, normal)
			p.T = [3]float64{radius * normal[0], radius * normal[1], radius * normal[2]}
		}
	}
	for j := 1; j < len(b.truth); j++ {
		b.odometry(j)
		if j >= perRing && b.keep() {
			b.measure(j-perRing, j)
		}
	}
	g, truth := b.graph()
	return g, truth, nil
}

// Torus returns a 3-D graph on a torus: rings x perRing poses, ring r a
// circle around the torus's axis at tube angle 2 pi r / rings, visited ring
// after ring, each pose facing along its ring with its z axis along the
// surface normal. Odometry links consecutive poses; pose k of ring r has a
// candidate closure to pose k of ring r-1, and the last ring also to the
// first, closing the tube. The major radius makes the outermost step 1,
// the tube radius is a third of it. With LoopProb 1 and rings >= 3,
// m = (n - 1) + n.
func Torus(rings, perRing int, cfg Config) (*posegraph.Graph, []posegraph.Pose, error) {
	if err := cfg.check("Torus"); err != nil {
		return nil, nil, err
	}
	if rings < 1 || perRing < 3 {
		return nil, nil, fmt.Errorf("datasets: Torus: need rings >= 1 and perRing >= 3, have %d and %d", rings, perRing)
	}
	b := newBuilder(3, cfg, fmt.Sprintf("torus(%dx%d)", rings, perRing))
	major := float64(perRing) / (2 * math.Pi) / (4.0 / 3)
	minor := major / 3
	n := rings * perRing
	b.truth = make([]posegraph.Pose, n)
	for r := 0; r < rings; r++ {
		v := 2 * math.Pi * float64(r) / float64(rings)
		sv, cv := math.Sin(v), math.Cos(v)
		for k := 0; k < perRing; k++ {
			u := 2 * math.Pi * float64(k) / float64(perRing)
			su, cu := math.Sin(u), math.Cos(u)
			normal := [3]float64{cv * cu, cv * su, sv}
			along := [3]float64{-su, cu, 0}
			rho := major + minor*cv
			p := &b.truth[r*perRing+k]
			p.R = frame3(along, normal)
			p.T = [3]float64{rho * cu, rho * su, minor * sv}
		}
	}
	for j := 1; j < n; j++ {
		b.odometry(j)
		if j >= perRing && b.keep() {
			b.measure(j-perRing, j)
		}
	}
	if rings >= 3 {
		// Close the tube: the last ring meets the first.
		for k := 0; k < perRing; k++ {
			if b.keep() {
				b.measure(k, n-perRing+k)
			}
		}
	}
	g, truth := b.graph()
	return g, truth, nil
}

// Cube returns a 3-D grid world in the style of smallGrid3D: a robot walks a
// snake path through every point of an nx x ny x nz lattice with unit
// spacing (rows along x alternate direction, layers along z alternate the
// row order, so each step moves to a lattice neighbour), facing its
// direction of travel. Odometry links consecutive poses; every other pair of
// lattice neighbours is a candidate closure. With LoopProb 1, m is the
// number of lattice-neighbour pairs, (nx-1) ny nz + nx (ny-1) nz +
// nx ny (nz-1).
func Cube(nx, ny, nz int, cfg Config) (*posegraph.Graph, []posegraph.Pose, error) {
	if err := cfg.check("Cube"); err != nil {
		return nil, nil, err
	}
	if nx < 1 || ny < 1 || nz < 1 || nx*ny*nz < 2 {
		return nil, nil, fmt.Errorf("datasets: Cube: need sizes >= 1 and at least 2 points, have %d x %d x %d", nx, ny, nz)
	}
	b := newBuilder(3, cfg, fmt.Sprintf("cube(%dx%dx%d)", nx, ny, nz))
	n := nx * ny * nz
	at := make([]int, n) // lattice point (x + nx (y + ny z)) -> pose index
	pts := make([][3]int, 0, n)
	row := 0
	for z := 0; z < nz; z++ {
		for yi := 0; yi < ny; yi++ {
			y := yi
			if z%2 == 1 {
				y = ny - 1 - yi
			}
			for xi := 0; xi < nx; xi++ {
				x := xi
				if row%2 == 1 {
					x = nx - 1 - xi
				}
				at[x+nx*(y+ny*z)] = len(pts)
				pts = append(pts, [3]int{x, y, z})
			}
			row++
		}
	}
	b.truth = make([]posegraph.Pose, n)
	for i, p := range pts {
		// Face the next step (the last pose keeps the previous heading).
		a, c := i, i+1
		if c == n {
			a, c = n-2, n-1
		}
		var dir [3]float64
		for k := range dir {
			dir[k] = float64(pts[c][k] - pts[a][k])
		}
		up := [3]float64{0, 0, 1}
		if dir[2] != 0 {
			// Climbing: keep the body level by pointing z along -x.
			up = [3]float64{-dir[2], 0, 0}
		}
		b.truth[i].R = frame3(dir, up)
		b.truth[i].T = [3]float64{float64(p[0]), float64(p[1]), float64(p[2])}
	}
	for j := 1; j < n; j++ {
		b.odometry(j)
		p := pts[j]
		// Earlier lattice neighbours other than the predecessor, in a
		// fixed order (-x, +x, -y, +y, -z, +z).
		for axis := 0; axis < 3; axis++ {
			for _, step := range [2]int{-1, 1} {
				q := p
				q[axis] += step
				if q[0] < 0 || q[0] >= nx || q[1] < 0 || q[1] >= ny || q[2] < 0 || q[2] >= nz {
					continue
				}
				i := at[q[0]+nx*(q[1]+ny*q[2])]
				if i >= j-1 {
					continue
				}
				if b.keep() {
					b.measure(i, j)
				}
			}
		}
	}
	g, truth := b.graph()
	return g, truth, nil
}

// Manhattan returns a 2-D grid world in the style of Olson's manhattan
// dataset: a robot takes n - 1 unit steps on the integer lattice inside a
// side x side square, turning left or right at random (probability 0.3 at
// each step, and whenever it would leave the square), facing its direction
// of travel. Whenever it comes back to a point it visited at least 10 poses
// earlier, each earlier visit is a candidate closure; of the kept
// candidates the two most recent are used, so the degree stays bounded on
// long walks. The walk does not depend on LoopProb.
func Manhattan(n, side int, cfg Config) (*posegraph.Graph, []posegraph.Pose, error) {
	if err := cfg.check("Manhattan"); err != nil {
		return nil, nil, err
	}
	if n < 2 || side < 2 {
		return nil, nil, fmt.Errorf("datasets: Manhattan: need n >= 2 and side >= 2, have %d and %d", n, side)
	}
	const (
		turnProb   = 0.3
		minGap     = 10
		maxClosure = 2
	)
	b := newBuilder(2, cfg, fmt.Sprintf("manhattan(n=%d,side=%d)", n, side))
	dirs := [4][2]int{{1, 0}, {0, 1}, {-1, 0}, {0, -1}}
	inside := func(x, y int) bool { return x >= 0 && x < side && y >= 0 && y < side }
	x, y, h := side/2, side/2, 0
	pos := make([][2]int, n)
	head := make([]int, n)
	pos[0] = [2]int{x, y}
	for i := 1; i < n; i++ {
		if b.rng.Float64() < turnProb {
			h = (h + 1 + 2*b.rng.IntN(2)) % 4 // left or right
		}
		if !inside(x+dirs[h][0], y+dirs[h][1]) {
			// Turn left or right at random; reverse only in a dead end,
			// which a square of side >= 2 never has.
			l, r := (h+1)%4, (h+3)%4
			if b.rng.IntN(2) == 1 {
				l, r = r, l
			}
			if inside(x+dirs[l][0], y+dirs[l][1]) {
				h = l
			} else if inside(x+dirs[r][0], y+dirs[r][1]) {
				h = r
			} else {
				h = (h + 2) % 4
			}
		}
		head[i-1] = h // the heading of the step leaving pose i-1
		x += dirs[h][0]
		y += dirs[h][1]
		pos[i] = [2]int{x, y}
	}
	head[n-1] = head[n-2]
	b.truth = make([]posegraph.Pose, n)
	for i := range b.truth {
		// Exact axis-aligned headings (cos(pi/2) is not 0 in floating point).
		c, s := float64(dirs[head[i]][0]), float64(dirs[head[i]][1])
		b.truth[i].R = [9]float64{c, -s, s, c}
		b.truth[i].T = [3]float64{float64(pos[i][0]), float64(pos[i][1])}
	}
	visits := map[[2]int][]int{}
	var kept []int
	for j := 0; j < n; j++ {
		if j > 0 {
			b.odometry(j)
		}
		kept = kept[:0]
		prior := visits[pos[j]]
		// Most recent first; every candidate draws its coin.
		for k := len(prior) - 1; k >= 0; k-- {
			if i := prior[k]; i <= j-minGap && b.keep() {
				kept = append(kept, i)
			}
		}
		if len(kept) > maxClosure {
			kept = kept[:maxClosure]
		}
		sort.Ints(kept)
		for _, i := range kept {
			b.measure(i, j)
		}
		visits[pos[j]] = append(prior, j)
	}
	g, truth := b.graph()
	return g, truth, nil
}

// Geometric returns a random geometric pose graph in dimension d: n poses
// with Haar-random orientations at positions uniform in a cube of side
// n^(1/d) (unit density), ordered along a greedy nearest-neighbour tour from
// the first so that the odometry chain, which keeps the graph connected,
// takes short steps. Every other pair closer than radius is a candidate
// closure. The expected number of candidates is about n/2 times the volume
// of the d-ball of that radius.
func Geometric(d, n int, radius float64, cfg Config) (*posegraph.Graph, []posegraph.Pose, error) {
	if err := cfg.check("Geometric"); err != nil {
		return nil, nil, err
	}
	if d != 2 && d != 3 {
		return nil, nil, fmt.Errorf("datasets: Geometric: dimension %d is not 2 or 3", d)
	}
	if n < 2 || !(radius > 0) || math.IsInf(radius, 0) {
		return nil, nil, fmt.Errorf("datasets: Geometric: need n >= 2 and a positive finite radius, have %d and %g", n, radius)
	}
	b := newBuilder(d, cfg, fmt.Sprintf("geometric%dd(n=%d,r=%g)", d, n, radius))
	side := math.Pow(float64(n), 1/float64(d))
	raw := make([][3]float64, n)
	for i := range raw {
		for k := 0; k < d; k++ {
			raw[i][k] = side * b.rng.Float64()
		}
	}
	order := greedyTour(raw)
	b.truth = make([]posegraph.Pose, n)
	for i, k := range order {
		b.truth[i].T = raw[k]
		b.truth[i].R = randomRotation(b.rng, d)
	}
	// Bucket the points in cells of size radius; neighbours are in the
	// 3^d surrounding cells.
	cell := func(t [3]float64) [3]int {
		var c [3]int
		for k := 0; k < d; k++ {
			c[k] = int(math.Floor(t[k] / radius))
		}
		return c
	}
	grid := map[[3]int][]int{}
	r2 := radius * radius
	var near []int
	for j := 0; j < n; j++ {
		if j > 0 {
			b.odometry(j)
		}
		c := cell(b.truth[j].T)
		near = near[:0]
		zr := 1 // the third coordinate is 0 in 2-D
		if d == 2 {
			zr = 0
		}
		for dx := -1; dx <= 1; dx++ {
			for dy := -1; dy <= 1; dy++ {
				for dz := -zr; dz <= zr; dz++ {
					for _, i := range grid[[3]int{c[0] + dx, c[1] + dy, c[2] + dz}] {
						if i < j-1 && dist2(b.truth[i].T, b.truth[j].T) < r2 {
							near = append(near, i)
						}
					}
				}
			}
		}
		sort.Ints(near)
		for _, i := range near {
			if b.keep() {
				b.measure(i, j)
			}
		}
		grid[c] = append(grid[c], j)
	}
	g, truth := b.graph()
	return g, truth, nil
}

func dist2(a, b [3]float64) float64 {
	s := 0.0
	for k := range a {
		s += (a[k] - b[k]) * (a[k] - b[k])
	}
	return s
}

// greedyTour orders the points by repeatedly moving to the nearest unvisited
// one, starting at the first: O(n^2), which is fine for the sizes a
// benchmark generates (n = 10^4 takes well under a second).
func greedyTour(pts [][3]float64) []int {
	n := len(pts)
	order := make([]int, 0, n)
	left := make([]int, n)
	for i := range left {
		left[i] = i
	}
	cur := 0
	left[0] = left[n-1]
	left = left[:n-1]
	order = append(order, 0)
	for len(left) > 0 {
		best, bk := math.Inf(1), -1
		for k, i := range left {
			if s := dist2(pts[cur], pts[i]); s < best {
				best, bk = s, k
			}
		}
		cur = left[bk]
		order = append(order, cur)
		left[bk] = left[len(left)-1]
		left = left[:len(left)-1]
	}
	return order
}
