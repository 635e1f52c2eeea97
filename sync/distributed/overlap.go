package distributed

import (
	"fmt"
	"slices"

	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/posegraph"
)

// Overlapping parts (issue 30, item 1, third pass). Block Gauss-Seidel
// between parts that share only their cut edges relaxes the coupling
// through the cut by a fixed fraction per round, however exactly each part
// is solved (docs/distributed.md, "Where the rounds go"). With overlap h
// an agent's update also moves its halo, the other parts' poses within h
// hops of its own, with the ring beyond it (h+1 hops) fixed, and then keeps
// only its own poses: the restricted Schwarz method with overlap, whose
// rate improves with the overlap's width (Cai and Sarkis, "A restricted
// additive Schwarz preconditioner for general sparse linear systems", SIAM
// J. Sci. Comput. 1999; Smith, Bjørstad and Gropp, "Domain Decomposition",
// 1996), as ROBO (arXiv 2603.03499) does for distributed pose-graph
// optimization. The agent then sees its neighbours' side of the cut, and a
// bending of the parts against each other is no longer invisible to it.
//
// The price: an agent reads the poses within h+1 hops of its own, so each
// agent publishes its poses within h+1 hops of another part's (not only
// those on a cut edge), and the agent graph of the colouring and of the
// commands' needs joins the parts within h+1 hops of each other. The
// agent's statistics, momentum, certificate and rounding are of its own
// poses, as without overlap: only the update sees the halo.

// overlapOf maps an option's overlap to the hops of a run in parts p of
// the graph whose pose adjacency is adj (poseAdjacency):
// positive is itself, negative none, and 0 the largest overlap, at least 1
// and up to maxAutoOverlap hops, at which every part's halo holds at most
// haloShare of as many poses as the part (autoOverlap).
func overlapOf(h int, adj [][]int, p *Partition) int {
	switch {
	case h == 0:
		return autoOverlap(adj, p)
	case h < 0:
		return 0
	}
	return h
}

// haloShare bounds the halo of the default overlap against its part's
// size: the update's work grows with it, and the rounds fall with it
// (docs/distributed.md has the rounds against the overlap).
const haloShare = 2.0 / 3

// autoOverlap is Options.Overlap's default (overlapOf).
func autoOverlap(adj [][]int, p *Partition) int {
	best := maxAutoOverlap
	for k := 0; k < p.K && best > 0; k++ {
		own := p.Owned(k)
		count := make([]int, best+1)
		for _, d := range hops(adj, own, best, nil) {
			if d > 0 {
				count[d]++
			}
		}
		halo := 0
		for h := 1; h <= best; h++ {
			halo += count[h]
			if float64(halo) > haloShare*float64(len(own)) {
				best = h - 1
				break
			}
		}
	}
	if p.K == 1 {
		return 0
	}
	// One hop at least: where parts are small or cut badly a one-hop halo
	// exceeds the share, and such parts gain the most from it
	// (docs/distributed.md).
	return max(best, 1)
}

// maxOverlap bounds the overlap: past a few hops the halo is a large part
// of the neighbours and the update's cost grows with it. maxAutoOverlap
// bounds the default's: past it the halos reach across whole neighbouring
// parts, and on the parking garage the rounds rose again
// (docs/distributed.md, "Overlapping parts").
const (
	maxOverlap     = 16
	maxAutoOverlap = 10
)

// overlapTag is what the overlap adds to the fingerprint that an agent
// compares with the coordinator's when it joins ("" without overlap, so
// that runs without it compare as before).
func overlapTag(h int) string {
	if h == 0 {
		return ""
	}
	return fmt.Sprintf("/overlap %d", h)
}

// hops returns the distance in adj from the poses in from (distance 0) to
// every pose within maxd hops, -1 beyond, walking only through poses for
// which through is true (nil: all).
func hops(adj [][]int, from []int, maxd int, through func(int) bool) []int {
	dist := make([]int, len(adj))
	for i := range dist {
		dist[i] = -1
	}
	queue := slices.Clone(from)
	for _, i := range from {
		dist[i] = 0
	}
	for h := 0; h < len(queue); h++ {
		i := queue[h]
		if dist[i] >= maxd {
			continue
		}
		for _, j := range adj[i] {
			if dist[j] < 0 && (through == nil || through(j)) {
				dist[j] = dist[i] + 1
				queue = append(queue, j)
			}
		}
	}
	return dist
}

// overlapSets returns part k's halo at overlap h, the other parts' poses
// within h hops of its own, and its ring, those h+1 hops away: the poses
// its update moves besides its own, and those it holds fixed. Both are
// sorted; at h = 0 the halo is empty and the ring is the neighbours'
// public poses.
func overlapSets(adj [][]int, p *Partition, k, h int) (halo, ring []int) {
	dist := hops(adj, p.Owned(k), h+1, nil)
	for i, di := range dist {
		switch {
		case di <= 0:
		case di <= h:
			halo = append(halo, i)
		default:
			ring = append(ring, i)
		}
	}
	return halo, ring
}

// publishedPoses returns part k's poses within h+1 hops of another part's
// (sorted): those another agent reads at overlap h, which k publishes. At
// h = 0 they are its poses on a cut edge.
func publishedPoses(adj [][]int, p *Partition, k, h int) []int {
	var start []int
	for _, i := range p.Owned(k) {
		for _, j := range adj[i] {
			if p.Part[j] != k {
				start = append(start, i)
				break
			}
		}
	}
	dist := hops(adj, start, h, func(i int) bool { return p.Part[i] == k })
	var out []int
	for i, di := range dist {
		if di >= 0 {
			out = append(out, i)
		}
	}
	return out
}

// overlapReads returns, for each part, the other parts' poses its agent
// reads at overlap h (its halo and ring, overlapSets).
func overlapReads(adj [][]int, p *Partition, h int) [][]int {
	reads := make([][]int, p.K)
	for k := range reads {
		halo, ring := overlapSets(adj, p, k, h)
		reads[k] = append(halo, ring...)
	}
	return reads
}

// readGraph returns, for each part, the sorted parts whose poses its
// agent reads at overlap h (reads, overlapReads): the agent graph of the
// commands' needs and of the colouring. At h = 0 it is AgentGraph.
func (p *Partition) readGraph(g *posegraph.Graph, h int, reads [][]int) [][]int {
	if h == 0 {
		return p.AgentGraph(g)
	}
	nb := make([][]int, p.K)
	for k := range nb {
		seen := map[int]bool{}
		for _, i := range reads[k] {
			seen[p.Part[i]] = true
		}
		for q := range seen {
			nb[k] = append(nb[k], q)
		}
		slices.Sort(nb[k])
	}
	return nb
}

// overlap is an agent's overlapping subproblem: its own poses and its halo
// free, the ring fixed (ext, on its own numbering), and the halo's poses
// as their owners last published them.
type overlap struct {
	ext     *local
	own     []int          // ext's index of each own pose
	halo    []int          // global index of each halo pose
	extHalo []int          // ext's index of each halo pose
	haloIdx map[int]int    // global index -> index in halo
	hx      *sparse.Blocks // the halo's published blocks
}

// overlapPlan is what an overlap takes from the pose adjacency: part k's
// halo and the poses it publishes at overlap h (overlapSets,
// publishedPoses). An agent finds them before it builds its rows, and lets
// the adjacency (the whole graph's) go first.
type overlapPlan struct{ halo, published []int }

func planOverlap(adj [][]int, p *Partition, k, h int) overlapPlan {
	halo, _ := overlapSets(adj, p, k, h)
	return overlapPlan{halo: halo, published: publishedPoses(adj, p, k, h)}
}

// newOverlapOf builds agent k's overlapping subproblem from its plan
// (planOverlap, at overlap h >= 1) and the list of its own poses it
// publishes (local indices of l).
func newOverlapOf(g *posegraph.Graph, p *Partition, l *local, plan overlapPlan) (*overlap, []int, error) {
	k, halo := l.part, plan.halo
	in := make(map[int]bool, len(l.own)+len(halo))
	for _, i := range l.own {
		in[i] = true
	}
	for _, i := range halo {
		in[i] = true
	}
	set := append(slices.Clone(l.own), halo...)
	slices.Sort(set)
	ext, err := newLocalOf(g, p, k, set, func(i int) bool { return in[i] }, l.kind, l.x.R, true)
	if err != nil {
		return nil, nil, err
	}
	o := &overlap{ext: ext, halo: halo, haloIdx: make(map[int]int, len(halo)),
		own: make([]int, len(l.own)), extHalo: make([]int, len(halo)), hx: sparse.NewBlocks(l.x.R, l.b, len(halo))}
	for li, gi := range l.own {
		o.own[li] = ext.globalToLocal[gi]
	}
	for j, gi := range halo {
		o.extHalo[j] = ext.globalToLocal[gi]
		o.haloIdx[gi] = j
	}
	var pub []int
	for _, gi := range plan.published {
		pub = append(pub, l.globalToLocal[gi])
	}
	return o, pub, nil
}

// store copies a published or given block of pose gi into the overlap's
// copies (halo or ring); it reports whether the pose is one of them.
func (o *overlap) store(gi int, blk []float64) bool {
	if j, ok := o.haloIdx[gi]; ok {
		copy(o.hx.Block(j), blk)
		return true
	}
	if ei, ok := o.ext.globalToLocal[gi]; ok && ei >= len(o.ext.own) {
		copy(o.ext.x.Block(ei), blk)
		return true
	}
	return false
}

// setRank changes the overlap's rank with the agent's.
func (o *overlap) setRank(r int) {
	o.ext.setRank(r)
	if o.hx.R != r {
		nx := sparse.NewBlocks(r, o.hx.B, o.hx.N)
		rows := min(r, o.hx.R)
		for i := 0; i < o.hx.N; i++ {
			copy(nx.Block(i)[:rows*o.hx.B], o.hx.Block(i)[:rows*o.hx.B])
		}
		o.hx = nx
	}
}

// improve lowers F over the own poses and the halo together, the ring
// fixed, from the own poses in l and the halo as published, and keeps the
// own poses' result in l (the restricted Schwarz step; the halo's moves
// are its owners' to make).
func (o *overlap) improve(l *local, sweeps, newtonSteps int) error {
	e := o.ext
	for li, ei := range o.own {
		copy(e.x.Block(ei), l.x.Block(li))
	}
	for j, ei := range o.extHalo {
		copy(e.x.Block(ei), o.hx.Block(j))
	}
	e.maxInner = l.maxInner
	if err := e.improve(sweeps, newtonSteps); err != nil {
		return err
	}
	for li, ei := range o.own {
		copy(l.x.Block(li), e.x.Block(ei))
	}
	return nil
}

// knows reports whether pose gi is in the halo or the ring.
func (o *overlap) knows(gi int) bool {
	if _, ok := o.haloIdx[gi]; ok {
		return true
	}
	ei, ok := o.ext.globalToLocal[gi]
	return ok && ei >= len(o.ext.own)
}

// outsideBytes is the memory the agent holds for poses outside its part,
// its boundary in the "1/K plus the boundary": the rows of Q at
// those poses (the rows of its neighbours' public poses, and with an
// overlap the halo's and the ring's rows of the overlapping subproblem)
// and its copies of their blocks of the variable. It leaves out what
// scales with the halo inside the overlap's own structures (the steps'
// factor, the trust region's blocks): those are the overlap's price in
// the rounds' work as much as in memory.
func (l *local) outsideBytes() int {
	blk := l.x.R * l.b * 8
	n := len(l.pub)*blk + rowBytes(l.q, len(l.own), l.q.N)
	if o := l.ov; o != nil {
		e := o.ext
		n += (e.x.N-len(o.own))*blk + o.hx.N*blk + rowBytes(e.q, len(e.own), e.q.N)
		for _, ei := range o.extHalo {
			n += rowBytes(e.q, ei, ei+1)
		}
	}
	return n
}

// rowBytes is the memory of rows lo..hi-1 of q: their blocks, column
// indices, row pointers and diagonal positions.
func rowBytes(q *sparse.BlockSym, lo, hi int) int {
	return (q.RowPtr[hi]-q.RowPtr[lo])*(q.B*q.B*8+8) + (hi-lo)*16
}
