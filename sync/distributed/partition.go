package distributed

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/bcmsync/bcmsync/internal/graphs"
	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
)

// Partition assigns every pose of a graph to one of K agents (parts).
type Partition struct {
	K    int
	Part []int // Part[i] in [0, K) is the agent owning pose i
}

// Validate checks that every pose has a part in range and every part owns
// at least one pose.
func (p *Partition) Validate(n int) error {
	if p.K < 1 {
		return fmt.Errorf("partition: %d parts", p.K)
	}
	if len(p.Part) != n {
		return fmt.Errorf("partition: %d entries for %d poses", len(p.Part), n)
	}
	// Every part owns a pose, so K <= n; checked before K sizes anything,
	// since a partition may come from the wire.
	if p.K > n {
		return fmt.Errorf("partition: %d parts for %d poses", p.K, n)
	}
	count := make([]int, p.K)
	for i, k := range p.Part {
		if k < 0 || k >= p.K {
			return fmt.Errorf("partition: pose %d in part %d, outside [0, %d)", i, k, p.K)
		}
		count[k]++
	}
	for k, c := range count {
		if c == 0 {
			return fmt.Errorf("partition: part %d owns no pose", k)
		}
	}
	return nil
}

// Owned returns the sorted pose indices of part k.
func (p *Partition) Owned(k int) []int {
	var own []int
	for i, q := range p.Part {
		if q == k {
			own = append(own, i)
		}
	}
	return own
}

// robotShift is where a GTSAM Symbol key keeps its character: the
// multi-robot datasets (and DPGO's and Kimera-Multi's tools) name pose
// j of robot 'a' by the 64-bit key ('a' << 56) | j, so the file's vertex id
// is that key in decimal.
const robotShift = 56

// ByRobot splits g by the robot prefix of its ids: the high byte of a
// GTSAM Symbol key (ids >= 2^56, the byte a letter). Parts are numbered in
// the order of their letters. Graphs whose ids carry no such prefix are an
// error: use Contiguous, BFS or a partition file.
func ByRobot(g *posegraph.Graph) (*Partition, error) {
	letters := map[int]bool{}
	for i, id := range g.IDs {
		c := int(int64(id) >> robotShift) // int64: int may be 32 bits wide (no id has a prefix there)
		if id < 0 || c < 'A' || c > 'z' {
			return nil, fmt.Errorf("%s: pose id %d (pose %d) has no robot prefix (a GTSAM Symbol key, letter << 56 | index)", g.Source, id, i)
		}
		letters[c] = true
	}
	keys := make([]int, 0, len(letters))
	for c := range letters {
		keys = append(keys, c)
	}
	sort.Ints(keys)
	index := map[int]int{}
	for k, c := range keys {
		index[c] = k
	}
	p := &Partition{K: len(keys), Part: make([]int, g.N())}
	for i, id := range g.IDs {
		p.Part[i] = index[int(int64(id)>>robotShift)]
	}
	return p, nil
}

// Contiguous splits the poses, in index order, into K runs of equal size
// (to one pose): the split DPGO uses for single-robot benchmark graphs,
// whose poses follow the trajectory.
func Contiguous(n, k int) (*Partition, error) {
	if k < 1 || k > n {
		return nil, fmt.Errorf("partition: %d parts for %d poses", k, n)
	}
	p := &Partition{K: k, Part: make([]int, n)}
	for i := range p.Part {
		p.Part[i] = i * k / n
	}
	return p, nil
}

// BFS splits g into K connected-leaning parts of equal size: the poses in
// breadth-first order from pose 0, cut into K runs. On grids and maps
// that is a set of bands whose boundaries are level sets of the graph
// distance, so each part is connected and its boundary short; it needs
// no file order.
func BFS(g *posegraph.Graph, k int) (*Partition, error) {
	n := g.N()
	if k < 1 || k > n {
		return nil, fmt.Errorf("partition: %d parts for %d poses", k, n)
	}
	adj := make([][]int, n)
	for _, e := range g.Edges {
		adj[e.I] = append(adj[e.I], e.J)
		adj[e.J] = append(adj[e.J], e.I)
	}
	order := make([]int, 0, n)
	seen := make([]bool, n)
	for s := 0; s < n; s++ {
		if seen[s] {
			continue
		}
		seen[s] = true
		order = append(order, s)
		for h := len(order) - 1; h < len(order); h++ {
			for _, j := range adj[order[h]] {
				if !seen[j] {
					seen[j] = true
					order = append(order, j)
				}
			}
		}
	}
	p := &Partition{K: k, Part: make([]int, n)}
	for pos, i := range order {
		p.Part[i] = pos * k / n
	}
	return p, nil
}

// Spectral splits g into K parts of equal size by recursive spectral
// bisection: each piece is cut at the median of its Fiedler vector, the
// eigenvector of the second smallest eigenvalue of its graph Laplacian (one
// per pair of poses joined by an edge), into parts for floor(K/2) and
// ceil(K/2) agents. The Fiedler vector is the smoothest
// non-constant function on the graph, so its level set cuts where the graph
// is thinnest relative to the sizes of the two sides (Fiedler 1973;
// Pothen, Simon and Liou 1990): where the parts are weakly coupled, which
// is what the rounds need (docs/distributed.md, "Where the rounds go").
// It is computed by LOBPCG preconditioned by a sparse Cholesky factor of
// the shifted Laplacian. The coordinator sends its partition to the agents
// (RunAgent with no partition), so only one process computes it.
func Spectral(g *posegraph.Graph, k int) (*Partition, error) {
	n := g.N()
	if k < 1 || k > n {
		return nil, fmt.Errorf("partition: %d parts for %d poses", k, n)
	}
	adj := poseAdjacency(g)
	p := &Partition{K: k, Part: make([]int, n)}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	local := make([]int, n) // pose -> index in the current piece, -1 outside
	for i := range local {
		local[i] = -1
	}
	var split func(nodes []int, first, parts int) error
	split = func(nodes []int, first, parts int) error {
		if parts == 1 {
			for _, i := range nodes {
				p.Part[i] = first
			}
			return nil
		}
		for li, i := range nodes {
			local[i] = li
		}
		f, err := fiedler(nodes, adj, local)
		for _, i := range nodes {
			local[i] = -1
		}
		if err != nil {
			return err
		}
		order := make([]int, len(nodes))
		for li := range order {
			order[li] = li
		}
		sort.SliceStable(order, func(a, b int) bool { return f[order[a]] < f[order[b]] })
		k0 := parts / 2
		cut := len(nodes) * k0 / parts
		a, b := make([]int, 0, cut), make([]int, 0, len(nodes)-cut)
		for _, li := range order[:cut] {
			a = append(a, nodes[li])
		}
		for _, li := range order[cut:] {
			b = append(b, nodes[li])
		}
		sort.Ints(a)
		sort.Ints(b)
		if err := split(a, first, k0); err != nil {
			return err
		}
		return split(b, first+k0, parts-k0)
	}
	if err := split(all, 0, k); err != nil {
		return nil, err
	}
	return p, nil
}

// poseAdjacency lists each pose's neighbours in g, sorted, once each.
func poseAdjacency(g *posegraph.Graph) [][]int {
	adj := make([][]int, g.N())
	for _, e := range g.Edges {
		if e.I != e.J {
			adj[e.I] = append(adj[e.I], e.J)
			adj[e.J] = append(adj[e.J], e.I)
		}
	}
	for i := range adj {
		sort.Ints(adj[i])
		adj[i] = slices.Compact(adj[i])
	}
	return adj
}

// fiedler returns the Fiedler vector of the subgraph of g's poses nodes
// (local[i] is pose i's index among them): the eigenvector of the
// smallest eigenvalue of L + s 11^T/m, s above L's second eigenvalue, with
// the vector's sign fixed by its first nonzero entry.
func fiedler(nodes []int, adj [][]int, local []int) ([]float64, error) {
	m := len(nodes)
	bb := sparse.NewBlockBuilder(m, 1)
	one := []float64{0}
	maxDeg := 0.0
	for li, i := range nodes {
		deg := 0.0
		for _, j := range adj[i] {
			lj := local[j]
			if lj < 0 {
				continue
			}
			deg++
			if lj > li {
				one[0] = -1
				bb.AddOff(li, lj, one)
			}
		}
		// The shift makes the factor positive definite; it is small
		// against the Laplacian's scale, so the factor is a good
		// preconditioner for the low end of the spectrum.
		one[0] = deg + 1e-3
		bb.AddDiag(li, one)
		maxDeg = max(maxDeg, deg)
	}
	lap := bb.Build()
	chol, err := sparse.AnalyzeBlocks(lap, nil)
	if err == nil {
		err = chol.FactorizeBlocks(lap, 0)
	}
	if err != nil {
		return nil, fmt.Errorf("partition: factoring a graph Laplacian: %w", err)
	}
	op := &deflated{lap: lap, s: 2*maxDeg + 1}
	x0 := make([]float64, m)
	for li := range x0 {
		// A smooth start: the index order, centred.
		x0[li] = float64(li) - float64(m-1)/2
	}
	// At most 200 iterations: where the second eigenvalue is nearly
	// repeated (a cube's three directions) LOBPCG creeps, but any vector of
	// the near-eigenspace is a smooth function whose median cuts as well,
	// and the bisections of a 10^5-pose lattice took minutes with 500.
	res, err := sparse.SmallestEig(op, sparse.EigOptions{Tol: 1e-6, MaxIter: fiedlerIterations, Precond: chol, X0: x0, Method: sparse.EigLOBPCG})
	if err != nil {
		return nil, fmt.Errorf("partition: %w", err)
	}
	v := res.Vector
	for _, x := range v {
		if x != 0 {
			if x < 0 {
				for li := range v {
					v[li] = -v[li]
				}
			}
			break
		}
	}
	return v, nil
}

// fiedlerIterations bounds fiedler's LOBPCG iterations; the benchmark
// graphs' bisections converge within it (intel's first takes 177).
const fiedlerIterations = 200

// deflated is L + s 11^T/m for the Laplacian L (stored with a small shift
// on its diagonal, which MulVec leaves out): its smallest eigenpair is
// L's second when s exceeds L's second eigenvalue.
type deflated struct {
	lap *sparse.BlockSym
	s   float64
}

func (d *deflated) Dim() int { return d.lap.N }

func (d *deflated) MulVec(dst, x []float64) {
	d.lap.MulVec(dst, x)
	mean := 0.0
	for _, v := range x {
		mean += v
	}
	mean /= float64(len(x))
	for i := range dst {
		dst[i] += d.s*mean - 1e-3*x[i]
	}
}

// ReadPartition reads a partition file for g: one "id part" pair per line
// (the id as in the graph's file, the part a non-negative integer), '#'
// comments and blank lines allowed. Every pose must be listed once; parts
// are renumbered densely in increasing order. name is used in messages.
func ReadPartition(r io.Reader, name string, g *posegraph.Graph) (*Partition, error) {
	index := make(map[int]int, g.N())
	for i, id := range g.IDs {
		index[id] = i
	}
	part := make([]int, g.N())
	for i := range part {
		part[i] = -1
	}
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		if h := strings.IndexByte(text, '#'); h >= 0 {
			text = text[:h]
		}
		f := strings.Fields(text)
		if len(f) == 0 {
			continue
		}
		if len(f) != 2 {
			return nil, fmt.Errorf("%s:%d: want \"id part\", got %d fields", name, line, len(f))
		}
		id, err := strconv.Atoi(f[0])
		if err != nil {
			return nil, fmt.Errorf("%s:%d: pose id %q is not an integer", name, line, f[0])
		}
		k, err := strconv.Atoi(f[1])
		if err != nil || k < 0 {
			return nil, fmt.Errorf("%s:%d: part %q is not a non-negative integer", name, line, f[1])
		}
		i, ok := index[id]
		if !ok {
			return nil, fmt.Errorf("%s:%d: pose id %d is not in %s", name, line, id, g.Source)
		}
		if part[i] >= 0 {
			return nil, fmt.Errorf("%s:%d: pose id %d listed twice", name, line, id)
		}
		part[i] = k
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	used := map[int]bool{}
	for i, k := range part {
		if k < 0 {
			return nil, fmt.Errorf("%s: pose id %d has no part", name, g.IDs[i])
		}
		used[k] = true
	}
	keys := make([]int, 0, len(used))
	for k := range used {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	dense := map[int]int{}
	for n, k := range keys {
		dense[k] = n
	}
	for i := range part {
		part[i] = dense[part[i]]
	}
	return &Partition{K: len(keys), Part: part}, nil
}

// AgentGraph returns, for each part, the sorted list of parts it shares an
// edge with.
func (p *Partition) AgentGraph(g *posegraph.Graph) [][]int {
	set := make([]map[int]bool, p.K)
	for k := range set {
		set[k] = map[int]bool{}
	}
	for _, e := range g.Edges {
		a, b := p.Part[e.I], p.Part[e.J]
		if a != b {
			set[a][b], set[b][a] = true, true
		}
	}
	nb := make([][]int, p.K)
	for k, s := range set {
		for q := range s {
			nb[k] = append(nb[k], q)
		}
		sort.Ints(nb[k])
	}
	return nb
}

// Boundary returns the partition's boundary in g: the poses with an edge
// to another part (the public poses the agents publish) and the edges
// between parts. A round's traffic is proportional to the first.
func (p *Partition) Boundary(g *posegraph.Graph) (poses, edges int) {
	public := make([]bool, len(p.Part))
	for _, e := range g.Edges {
		if p.Part[e.I] != p.Part[e.J] {
			edges++
			public[e.I], public[e.J] = true, true
		}
	}
	for _, b := range public {
		if b {
			poses++
		}
	}
	return poses, edges
}

// Colors colours the agent graph greedily (parts in order, smallest free
// colour): agents of one colour share no edge, so they can update at the
// same time without changing each other's data. It returns the classes.
func Colors(nb [][]int) [][]int {
	return graphs.GreedyColouring(len(nb), func(k int) []int { return nb[k] })
}

// fingerprint hashes what the coordinator and every agent must agree on:
// the problem kind, the graph's size, its edges with their weights and
// measurements, and the partition.
func fingerprint(g *posegraph.Graph, p *Partition, kind posegraph.Problem) string {
	// The bytes go to the hash in pieces (the same stream, so the same
	// hash): one buffer of them all was 13 MB at 10^5 poses.
	h := fnv.New64a()
	var buf []byte
	buf = binary.LittleEndian.AppendUint64(buf, uint64(kind))
	buf = binary.LittleEndian.AppendUint64(buf, uint64(g.D))
	buf = binary.LittleEndian.AppendUint64(buf, uint64(g.N()))
	buf = binary.LittleEndian.AppendUint64(buf, uint64(p.K))
	for _, k := range p.Part {
		buf = binary.LittleEndian.AppendUint32(buf, uint32(k))
		if len(buf) >= 4096 {
			h.Write(buf)
			buf = buf[:0]
		}
	}
	for _, e := range g.Edges {
		if len(buf) >= 4096 {
			h.Write(buf)
			buf = buf[:0]
		}
		buf = binary.LittleEndian.AppendUint32(buf, uint32(e.I))
		buf = binary.LittleEndian.AppendUint32(buf, uint32(e.J))
		buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(e.Kappa))
		buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(e.Tau))
		// The measurements too: an agent or a checkpoint of a graph whose
		// measurements were edited is another problem.
		for _, v := range e.R {
			buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(v))
		}
		for _, v := range e.T {
			buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(v))
		}
	}
	h.Write(buf)
	return fmt.Sprintf("%016x", h.Sum64())
}
