package sparse

import (
	"math/rand/v2"
	"runtime"
	stdsync "sync"
)

// NestedDissection orders the block graph of q (without its first drop
// blocks, as BlockAMD) by multilevel nested dissection and expands the
// order to scalars, keeping each block's variables together.
//
// Each piece of the graph larger than ndLeaf blocks is split by a small
// vertex separator, its two halves are ordered recursively and the
// separator is ordered last; disconnected pieces are split into their
// components first, and small pieces are ordered by minimum degree that
// counts their halo (the separator nodes next to them). A
// separator is found as METIS does: the piece is coarsened by heavy-edge
// matching to about ndCoarsest nodes, the coarse graph is bisected by greedy
// graph growing from several seeds (the smallest cut wins), the bisection
// is refined by Fiduccia-Mattheyses on every level while it is projected
// back, the cut edges are turned into a vertex separator (a minimum vertex
// cover of the cut's bipartite graph) and that separator is improved by
// node Fiduccia-Mattheyses moves. Random choices use seeds fixed by each
// piece's place in the order, so the result is deterministic.
//
// Dissection pays on large graphs whose loop closures tie distant parts of
// a 2-D or 3-D world together: on the 10^6-pose lattice of datasets.Cube
// the factor needs half the flops of BlockAMD's and 20% fewer nonzeros, on
// city10000 60% of the flops. On graphs that are mostly chains with local
// closures, and on small graphs, minimum degree is up to 22% better.
// BlockOrder chooses between the two.
func NestedDissection(q *BlockSym, drop int) []int {
	return nestedDissection(q, drop, ndLeaf)
}

// nestedDissection is NestedDissection with pieces of at most leaf blocks
// ordered by minimum degree (tests dissect small graphs with a small leaf).
func nestedDissection(q *BlockSym, drop, leaf int) []int {
	nb := q.N - drop
	if nb <= 0 {
		return []int{}
	}
	xadj, adj := blockGraph(q, drop)
	g := &ndGraph{xadj: xadj, adj: adj, ewgt: make([]int, len(adj)), vwgt: make([]int, nb)}
	for k := range g.ewgt {
		g.ewgt[k] = 1
	}
	for i := range g.vwgt {
		g.vwgt[i] = q.B
	}
	g.tw = nb * q.B
	label := make([]int, nb)
	for i := range label {
		label[i] = i
	}
	order := make([]int, nb)
	w := newNDWork(g, nb)
	w.leafSize = leaf
	// One token per extra goroutine that may dissect a half.
	w.tokens = make(chan struct{}, runtime.GOMAXPROCS(0)-1)
	w.dissect(g, label, order, 0)
	return expandBlockOrder(order, q.B)
}

const (
	// ndLeaf is the size (in blocks) at or below which a piece is
	// ordered by minimum degree, which orders small pieces as well as
	// dissection, and faster. Leaves of 100 to 1000 blocks gave flops
	// within 10% of each other on the suite and the lattices, 200 the
	// best overall.
	ndLeaf = 200
	// ndCoarsest is the size at which coarsening stops and the coarse
	// graph is bisected.
	ndCoarsest = 120
	// ndTries is the number of greedy growths from different seeds on the
	// coarsest graph.
	ndTries = 8
	// ndParallel is the size of a half above which it is dissected on
	// another goroutine, if one is free.
	ndParallel = 20000
	// ndImbalance bounds each half of a bisection to (1+ndImbalance)/2 of
	// the piece's weight. Nested dissection gains more from a small
	// separator than from exact balance; 0.1 and 0.4 gave the same flops
	// within 2% on the 10^6-pose lattice.
	ndImbalance = 0.2
)

// ndGraph is an undirected graph in compressed rows, without self loops,
// with node weights (scalar variables per node) and edge weights (fine
// edges per coarse edge).
type ndGraph struct {
	xadj, adj []int
	ewgt      []int
	vwgt      []int
	tw        int // total node weight
}

func (g *ndGraph) n() int { return len(g.xadj) - 1 }

// ndWork holds the scratch space of one goroutine of a dissection, sized
// for the largest piece it will see and reused by every piece it
// processes.
type ndWork struct {
	leafSize int
	tokens   chan struct{} // shared: free slots for more goroutines
	root     *ndGraph      // the whole graph, for the halos of leaves
	rootMark []int         // per node of root, kept at -1 between uses
	mark     []int         // per node scratch
	queue    []int
	// Fiduccia-Mattheyses state, indexed by node of the current level.
	id, ed []int
	key    [2][]int
	pos    [2][]int // kept at -1 outside the refinements
	locked []bool
	moved  []int
	heaps  [2]ndHeap
}

// newNDWork returns the scratch space for pieces of up to n nodes of root.
func newNDWork(root *ndGraph, n int) *ndWork {
	w := &ndWork{
		root:     root,
		rootMark: make([]int, root.n()),
		mark:     make([]int, n),
		id:       make([]int, n),
		ed:       make([]int, n),
		locked:   make([]bool, n),
	}
	for i := range w.rootMark {
		w.rootMark[i] = -1
	}
	for s := range w.key {
		w.key[s] = make([]int, n)
		w.pos[s] = make([]int, n)
		for i := range w.pos[s] {
			w.pos[s][i] = -1
		}
	}
	return w
}

// shareHeaps makes both heaps use one key and position array, for
// refinements in which a node is in at most one heap.
func (w *ndWork) shareHeaps() {
	for s := range w.heaps {
		w.heaps[s].key, w.heaps[s].pos = w.key[0], w.pos[0]
	}
}

// splitHeaps gives each heap its own key and position array, for node
// refinement, in which a separator node is in both.
func (w *ndWork) splitHeaps() {
	for s := range w.heaps {
		w.heaps[s].key, w.heaps[s].pos = w.key[s], w.pos[s]
	}
}

// dissect writes the order of g's nodes, by their labels, into out
// (len(out) == g.n()). off is the place of out in the whole order; it seeds
// the random choices.
func (w *ndWork) dissect(g *ndGraph, label, out []int, off int) {
	n := g.n()
	if n <= w.leafSize {
		w.leaf(g, label, out)
		return
	}
	part, ncomp := w.components(g)
	if ncomp > 1 {
		// Components are independent: order them one after another.
		subs, labels := w.split(g, label, part, ncomp)
		for c := range subs {
			m := subs[c].n()
			w.dissect(subs[c], labels[c], out[:m], off)
			out, off = out[m:], off+m
		}
		return
	}
	rng := rand.New(rand.NewPCG(uint64(off), uint64(n)))
	where := w.separate(g, rng)
	var cnt [3]int
	for v, p := range where {
		cnt[p]++
		part[v] = int(p)
	}
	if cnt[2] == 0 || cnt[2] == n {
		// No separator found (cannot happen on a connected graph with a
		// proper bisection, but stay safe): minimum degree on the piece.
		w.leaf(g, label, out)
		return
	}
	subs, labels := w.split(g, label, part, 3)
	// The halves first, the separator last, in the order of its labels.
	// Each piece's result depends only on the piece and its offset, so
	// dissecting the first half on another goroutine changes nothing.
	copy(out[cnt[0]+cnt[1]:], labels[2])
	if cnt[0] > ndParallel && cnt[1] > ndParallel {
		select {
		case w.tokens <- struct{}{}:
			var wg stdsync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				w2 := newNDWork(w.root, cnt[0])
				w2.leafSize, w2.tokens = w.leafSize, w.tokens
				w2.dissect(subs[0], labels[0], out[:cnt[0]], off)
				<-w.tokens
			}()
			w.dissect(subs[1], labels[1], out[cnt[0]:cnt[0]+cnt[1]], off+cnt[0])
			wg.Wait()
			return
		default:
		}
	}
	w.dissect(subs[0], labels[0], out[:cnt[0]], off)
	w.dissect(subs[1], labels[1], out[cnt[0]:cnt[0]+cnt[1]], off+cnt[0])
}

// leaf orders the piece g by minimum degree on g plus its halo: the nodes
// outside g adjacent to it, all in separators that are ordered after g.
// Counting them in the degrees makes the nodes next to the separators go
// last within the piece, as in Pellegrini's halo minimum degree; ordering
// the piece alone instead gave the 10^5-pose lattice's factor 35% more
// nonzeros (98 against 73 per pose) and 17% more flops. Two heavy extra
// nodes, adjacent to the halo, keep the halo from being eliminated.
func (w *ndWork) leaf(g *ndGraph, label, out []int) {
	n := g.n()
	if n == 0 {
		return
	}
	root, in := w.root, w.rootMark
	for v := 0; v < n; v++ {
		in[label[v]] = v
	}
	// Halo nodes are numbered n, n+1, ... and hrow lists their piece
	// neighbours.
	var halo []int
	var hrow [][]int
	for v := 0; v < n; v++ {
		for _, u := range root.adj[root.xadj[label[v]]:root.xadj[label[v]+1]] {
			l := in[u]
			if l < 0 {
				l = n + len(halo)
				in[u] = l
				halo = append(halo, u)
				hrow = append(hrow, nil)
			}
			if l >= n {
				hrow[l-n] = append(hrow[l-n], v)
			}
		}
	}
	nh := len(halo)
	m := n
	if nh > 0 {
		m = n + nh + 2
	}
	xadj := make([]int, m+1)
	adj := make([]int, 0, len(g.adj)+4*nh+2)
	wt := make([]int, m)
	for v := 0; v < n; v++ {
		adj = append(adj, g.adj[g.xadj[v]:g.xadj[v+1]]...)
		for _, u := range root.adj[root.xadj[label[v]]:root.xadj[label[v]+1]] {
			if l := in[u]; l >= n {
				adj = append(adj, l)
			}
		}
		xadj[v+1] = len(adj)
		wt[v] = g.vwgt[v]
	}
	if nh > 0 {
		s1, s2 := n+nh, n+nh+1
		total := g.tw
		for h, u := range halo {
			adj = append(adj, hrow[h]...)
			adj = append(adj, s1)
			xadj[n+h+1] = len(adj)
			wt[n+h] = root.vwgt[u]
			total += root.vwgt[u]
		}
		for h := 0; h < nh; h++ {
			adj = append(adj, n+h)
		}
		adj = append(adj, s2)
		xadj[s1+1] = len(adj)
		adj = append(adj, s1)
		xadj[s2+1] = len(adj)
		// Heavier than everything else together: every piece node has a
		// smaller degree than any halo node.
		wt[s1], wt[s2] = total+1, total+1
	}
	k := 0
	for _, v := range minDegree(m, xadj, adj, wt) {
		if v < n {
			out[k] = label[v]
			k++
		}
	}
	for v := 0; v < n; v++ {
		in[label[v]] = -1
	}
	for _, u := range halo {
		in[u] = -1
	}
}

// components labels the connected components of g (comp[v] in
// [0, ncomp)) in order of their smallest node.
func (w *ndWork) components(g *ndGraph) (comp []int, ncomp int) {
	n := g.n()
	comp = make([]int, n)
	for i := range comp {
		comp[i] = -1
	}
	q := w.queue[:0]
	for s := 0; s < n; s++ {
		if comp[s] >= 0 {
			continue
		}
		comp[s] = ncomp
		q = append(q[:0], s)
		for h := 0; h < len(q); h++ {
			v := q[h]
			for _, u := range g.adj[g.xadj[v]:g.xadj[v+1]] {
				if comp[u] < 0 {
					comp[u] = ncomp
					q = append(q, u)
				}
			}
		}
		ncomp++
	}
	w.queue = q
	return comp, ncomp
}

// split returns the subgraphs induced by the node sets part[v] == p, p in
// [0, nparts), each renumbered in increasing order, and their labels, in
// one pass over g.
func (w *ndWork) split(g *ndGraph, label, part []int, nparts int) ([]*ndGraph, [][]int) {
	n := g.n()
	loc := w.mark[:n]
	subs := make([]*ndGraph, nparts)
	labels := make([][]int, nparts)
	nn := make([]int, nparts)
	na := make([]int, nparts)
	for v := 0; v < n; v++ {
		p := part[v]
		loc[v] = nn[p]
		nn[p]++
		for _, u := range g.adj[g.xadj[v]:g.xadj[v+1]] {
			if part[u] == p {
				na[p]++
			}
		}
	}
	for p := range subs {
		subs[p] = &ndGraph{
			xadj: make([]int, nn[p]+1),
			adj:  make([]int, 0, na[p]),
			ewgt: make([]int, 0, na[p]),
			vwgt: make([]int, 0, nn[p]),
		}
		labels[p] = make([]int, 0, nn[p])
	}
	for v := 0; v < n; v++ {
		p := part[v]
		s := subs[p]
		for k := g.xadj[v]; k < g.xadj[v+1]; k++ {
			if u := g.adj[k]; part[u] == p {
				s.adj = append(s.adj, loc[u])
				s.ewgt = append(s.ewgt, g.ewgt[k])
			}
		}
		s.vwgt = append(s.vwgt, g.vwgt[v])
		s.tw += g.vwgt[v]
		s.xadj[len(s.vwgt)] = len(s.adj)
		labels[p] = append(labels[p], label[v])
	}
	for v := range loc {
		loc[v] = -1
	}
	return subs, labels
}

// separate returns a vertex separator of the connected graph g: where[v]
// is 0 or 1 for the two halves and 2 for the separator, with no edge
// between 0 and 1.
func (w *ndWork) separate(g *ndGraph, rng *rand.Rand) []uint8 {
	// Coarsen.
	levels := []*ndGraph{g}
	var cmaps [][]int
	for cur := g; cur.n() > ndCoarsest; {
		maxvw := max(1, 3*cur.tw/(2*ndCoarsest))
		cg, cmap := coarsen(cur, rng, maxvw)
		if 20*cg.n() > 19*cur.n() {
			break // matching stalls (a star, say): bisect this level
		}
		levels = append(levels, cg)
		cmaps = append(cmaps, cmap)
		cur = cg
	}
	maxw := int(float64(g.tw) * (1 + ndImbalance) / 2)
	where := w.initialBisection(levels[len(levels)-1], rng, maxw)
	for l := len(levels) - 2; l >= 0; l-- {
		fine := levels[l]
		cmap := cmaps[l]
		fw := make([]uint8, fine.n())
		for v := range fw {
			fw[v] = where[cmap[v]]
		}
		where = fw
		w.refineCut(fine, where, maxw)
	}
	w.coverCut(g, where)
	w.refineSeparator(g, where, maxw)
	return where
}

// coarsen contracts a heavy-edge matching of g (nodes visited in random
// order, pairs no heavier than maxvw) and returns the coarse graph and the
// map from g's nodes to coarse nodes.
func coarsen(g *ndGraph, rng *rand.Rand, maxvw int) (*ndGraph, []int) {
	n := g.n()
	match := make([]int, n)
	for i := range match {
		match[i] = -1
	}
	for _, u := range rng.Perm(n) {
		if match[u] >= 0 {
			continue
		}
		best, bw := u, 0
		for k := g.xadj[u]; k < g.xadj[u+1]; k++ {
			v := g.adj[k]
			if match[v] < 0 && g.ewgt[k] > bw && g.vwgt[u]+g.vwgt[v] <= maxvw {
				best, bw = v, g.ewgt[k]
			}
		}
		match[u], match[best] = best, u
	}
	cmap := make([]int, n)
	cn := 0
	for u := 0; u < n; u++ {
		if v := match[u]; v >= u {
			cmap[u], cmap[v] = cn, cn
			cn++
		}
	}
	cg := &ndGraph{xadj: make([]int, cn+1), vwgt: make([]int, cn), tw: g.tw}
	cg.adj = make([]int, 0, len(g.adj))
	cg.ewgt = make([]int, 0, len(g.adj))
	// at[c] is the position of coarse neighbour c in the row being built;
	// rows only grow, so at[c] >= start means c is in this row.
	at := make([]int, cn)
	for i := range at {
		at[i] = -1
	}
	for u := 0; u < n; u++ {
		v := match[u]
		if v < u {
			continue
		}
		c := cmap[u]
		start := len(cg.adj)
		for _, x := range [2]int{u, v} {
			for k := g.xadj[x]; k < g.xadj[x+1]; k++ {
				cv := cmap[g.adj[k]]
				if cv == c {
					continue
				}
				if p := at[cv]; p >= start {
					cg.ewgt[p] += g.ewgt[k]
					continue
				}
				at[cv] = len(cg.adj)
				cg.adj = append(cg.adj, cv)
				cg.ewgt = append(cg.ewgt, g.ewgt[k])
			}
			if v == u {
				break
			}
		}
		cg.vwgt[c] = g.vwgt[u]
		if v != u {
			cg.vwgt[c] += g.vwgt[v]
		}
		cg.xadj[c+1] = len(cg.adj)
	}
	return cg, cmap
}

// initialBisection bisects the (small) coarsest graph: from each of
// ndTries random seeds it grows side 0 greedily (the node that adds the
// least to the cut first) to half the weight, refines by
// Fiduccia-Mattheyses, and keeps the smallest balanced cut.
func (w *ndWork) initialBisection(g *ndGraph, rng *rand.Rand, maxw int) []uint8 {
	n := g.n()
	best := make([]uint8, n)
	bestCut := -1
	where := make([]uint8, n)
	w.shareHeaps()
	h := &w.heaps[0]
	for t := 0; t < ndTries; t++ {
		for v := range where {
			where[v] = 1
		}
		// The heap holds the side-1 nodes touching side 0, keyed by the
		// weight of their edges to side 0 minus those to side 1 (the cut
		// decrease if they moved).
		w0 := 0
		next := rng.IntN(n)
		for 2*w0 < g.tw {
			v := next
			if h.len() > 0 {
				v = h.pop()
			}
			if w0+g.vwgt[v] > maxw {
				break
			}
			where[v] = 0
			w0 += g.vwgt[v]
			for k := g.xadj[v]; k < g.xadj[v+1]; k++ {
				u := g.adj[k]
				if where[u] != 1 {
					continue
				}
				if h.pos[u] >= 0 {
					h.update(u, h.key[u]+2*g.ewgt[k])
				} else {
					h.push(u, 2*g.ewgt[k]-w.degW(g, u))
				}
			}
			if h.len() == 0 {
				// Side 0 has no side-1 neighbours left: continue from the
				// next side-1 node in index order.
				for next = 0; next < n && where[next] != 1; next++ {
				}
				if next == n {
					break
				}
			}
		}
		h.reset()
		w.refineCut(g, where, maxw)
		cut, pw0 := 0, 0
		for v := 0; v < n; v++ {
			if where[v] == 0 {
				pw0 += g.vwgt[v]
			}
			for k := g.xadj[v]; k < g.xadj[v+1]; k++ {
				if where[g.adj[k]] != where[v] {
					cut += g.ewgt[k]
				}
			}
		}
		if pw0 == 0 || pw0 == g.tw {
			continue
		}
		if bestCut < 0 || cut < bestCut {
			bestCut = cut
			copy(best, where)
		}
	}
	if bestCut < 0 {
		// Every try put all weight on one side (a graph of one or two
		// heavy nodes): split by index.
		for v := range best {
			best[v] = uint8(2 * v / n)
		}
	}
	return best
}

// degW is the total weight of u's edges.
func (w *ndWork) degW(g *ndGraph, u int) int {
	s := 0
	for k := g.xadj[u]; k < g.xadj[u+1]; k++ {
		s += g.ewgt[k]
	}
	return s
}

// refineCut improves the edge cut of the bisection where (0/1 per node) by
// passes of Fiduccia-Mattheyses: boundary nodes move, best gain first, to
// the other side if it stays within maxw; each pass keeps its best prefix
// of moves. A pass may move nodes uphill (a bounded number of moves
// without improvement), which lets it cross small barriers.
func (w *ndWork) refineCut(g *ndGraph, where []uint8, maxw int) {
	n := g.n()
	id, ed := w.id[:n], w.ed[:n]
	var pw [2]int
	cut := 0
	for v := 0; v < n; v++ {
		pw[where[v]] += g.vwgt[v]
		a, b := 0, 0
		for k := g.xadj[v]; k < g.xadj[v+1]; k++ {
			if where[g.adj[k]] == where[v] {
				a += g.ewgt[k]
			} else {
				b += g.ewgt[k]
			}
		}
		id[v], ed[v] = a, b
		cut += b
	}
	cut /= 2
	limit := min(max(n/100, 25), 150)
	w.shareHeaps()
	for pass := 0; pass < 8; pass++ {
		for h := range w.heaps {
			w.heaps[h].reset()
		}
		for v := 0; v < n; v++ {
			if ed[v] > 0 {
				w.heaps[where[v]].push(v, ed[v]-id[v])
			}
		}
		moved := w.moved[:0]
		bestCut, bestLen := cut, 0
		bestBal := max(pw[0], pw[1])
		for {
			// The better allowed top of the two heaps.
			v, from := -1, 0
			for s := 0; s < 2; s++ {
				h := &w.heaps[s]
				if h.len() == 0 {
					continue
				}
				u := h.top()
				if pw[1-s]+g.vwgt[u] > maxw {
					continue
				}
				if v < 0 || h.key[u] > w.heaps[from].key[v] || (h.key[u] == w.heaps[from].key[v] && pw[s] > pw[from]) {
					v, from = u, s
				}
			}
			if v < 0 {
				break
			}
			w.heaps[from].pop()
			w.locked[v] = true
			to := 1 - from
			cut -= ed[v] - id[v]
			pw[from] -= g.vwgt[v]
			pw[to] += g.vwgt[v]
			where[v] = uint8(to)
			id[v], ed[v] = ed[v], id[v]
			moved = append(moved, v)
			w.moveNeighbours(g, where, v, to)
			if bal := max(pw[0], pw[1]); cut < bestCut || (cut == bestCut && bal < bestBal) {
				bestCut, bestLen, bestBal = cut, len(moved), bal
			} else if len(moved)-bestLen > limit {
				break
			}
		}
		// Undo the moves after the best prefix.
		for i := len(moved) - 1; i >= bestLen; i-- {
			v := moved[i]
			from := int(where[v])
			to := 1 - from
			pw[from] -= g.vwgt[v]
			pw[to] += g.vwgt[v]
			where[v] = uint8(to)
			id[v], ed[v] = ed[v], id[v]
			for k := g.xadj[v]; k < g.xadj[v+1]; k++ {
				u := g.adj[k]
				if int(where[u]) == to {
					id[u] += g.ewgt[k]
					ed[u] -= g.ewgt[k]
				} else {
					id[u] -= g.ewgt[k]
					ed[u] += g.ewgt[k]
				}
			}
		}
		for _, v := range moved {
			w.locked[v] = false
		}
		w.moved = moved
		improved := bestLen > 0
		cut = bestCut
		if !improved {
			break
		}
	}
	for h := range w.heaps {
		w.heaps[h].reset()
	}
}

// moveNeighbours updates the degrees and heap entries of v's neighbours
// after v moved to side to.
func (w *ndWork) moveNeighbours(g *ndGraph, where []uint8, v, to int) {
	id, ed := w.id, w.ed
	for k := g.xadj[v]; k < g.xadj[v+1]; k++ {
		u := g.adj[k]
		ew := g.ewgt[k]
		if int(where[u]) == to {
			id[u] += ew
			ed[u] -= ew
		} else {
			id[u] -= ew
			ed[u] += ew
		}
		if w.locked[u] {
			continue
		}
		h := &w.heaps[where[u]]
		switch {
		case h.pos[u] >= 0 && ed[u] > 0:
			h.update(u, ed[u]-id[u])
		case h.pos[u] >= 0:
			h.remove(u)
		case ed[u] > 0:
			h.push(u, ed[u]-id[u])
		}
	}
}

// coverCut turns the edge cut of the bisection where into a vertex
// separator (where[v] = 2): a minimum vertex cover of the bipartite graph
// of cut edges, found from a maximum matching (Konig's theorem).
func (w *ndWork) coverCut(g *ndGraph, where []uint8) {
	n := g.n()
	// Boundary nodes of side 0 are the left vertices; mate links matched
	// pairs.
	var left []int
	mate := w.id[:n]
	for v := 0; v < n; v++ {
		mate[v] = -1
		if where[v] != 0 {
			continue
		}
		for _, u := range g.adj[g.xadj[v]:g.xadj[v+1]] {
			if where[u] == 1 {
				left = append(left, v)
				break
			}
		}
	}
	// Greedy matching, then augmenting paths (Kuhn), one search per free
	// left vertex; visited right vertices are stamped in mark.
	for _, v := range left {
		for _, u := range g.adj[g.xadj[v]:g.xadj[v+1]] {
			if where[u] == 1 && mate[u] < 0 {
				mate[v], mate[u] = u, v
				break
			}
		}
	}
	visit := w.ed[:n] // stamp of the last search that reached a node
	for v := range visit {
		visit[v] = -1
	}
	parent := w.key[0][:n]
	stack := w.queue[:0]
	for si, s := range left {
		if mate[s] >= 0 {
			continue
		}
		// Depth-first search for an augmenting path from s.
		stack = append(stack[:0], s)
		visit[s] = si
		found := -1
		for len(stack) > 0 && found < 0 {
			v := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for _, u := range g.adj[g.xadj[v]:g.xadj[v+1]] {
				if where[u] != 1 || visit[u] == si {
					continue
				}
				visit[u] = si
				parent[u] = v
				if mate[u] < 0 {
					found = u
					break
				}
				x := mate[u]
				visit[x] = si
				stack = append(stack, x)
			}
		}
		// Flip the path: u <- parent[u] = v, v's old mate is the next
		// right vertex up.
		for u := found; u >= 0; {
			v := parent[u]
			next := mate[v]
			mate[v], mate[u] = u, v
			u = next
		}
	}
	// Konig: Z = nodes reachable from free left vertices by alternating
	// paths; the cover is (left \ Z) + (right & Z).
	const z = -2
	stack = stack[:0]
	for _, v := range left {
		if mate[v] < 0 {
			visit[v] = z
			stack = append(stack, v)
		}
	}
	for len(stack) > 0 {
		v := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, u := range g.adj[g.xadj[v]:g.xadj[v+1]] {
			if where[u] != 1 || visit[u] == z {
				continue
			}
			visit[u] = z
			if x := mate[u]; x >= 0 && visit[x] != z {
				visit[x] = z
				stack = append(stack, x)
			}
		}
	}
	for _, v := range left {
		if visit[v] != z {
			where[v] = 2
		}
	}
	for v := 0; v < n; v++ {
		if where[v] == 1 && visit[v] == z && mate[v] >= 0 {
			where[v] = 2
		}
	}
	w.queue = stack
}

// refineSeparator improves the vertex separator of where (2 marks it) by
// node Fiduccia-Mattheyses passes: a separator node moves to a side and
// its neighbours on the other side join the separator; the gain of the
// move is the separator weight it saves. Moves go best gain first, into a
// side that stays within maxw, uphill for a bounded number of moves; each
// pass keeps its best prefix.
func (w *ndWork) refineSeparator(g *ndGraph, where []uint8, maxw int) {
	n := g.n()
	var pw [3]int
	for v := 0; v < n; v++ {
		pw[where[v]] += g.vwgt[v]
	}
	w.splitHeaps()
	// log records (node, previous side) of every change in a pass.
	var log [][2]int
	limit := min(max(n/100, 25), 150)
	for pass := 0; pass < 8; pass++ {
		for v := 0; v < n; v++ {
			if where[v] == 2 {
				w.pushSep(g, where, v)
			}
		}
		log = log[:0]
		bestSep, bestLen := pw[2], 0
		bestBal := max(pw[0], pw[1])
		moves, sinceBest := 0, 0
		for {
			v, to := -1, 0
			for s := 0; s < 2; s++ {
				h := &w.heaps[s]
				if h.len() == 0 {
					continue
				}
				u := h.top()
				if pw[s]+g.vwgt[u] > maxw {
					continue
				}
				if v < 0 || h.key[u] > w.heaps[to].key[v] || (h.key[u] == w.heaps[to].key[v] && pw[s] < pw[to]) {
					v, to = u, s
				}
			}
			if v < 0 {
				break
			}
			other := 1 - to
			for s := range w.heaps {
				if w.heaps[s].pos[v] >= 0 {
					w.heaps[s].remove(v)
				}
			}
			w.locked[v] = true
			log = append(log, [2]int{v, 2})
			where[v] = uint8(to)
			pw[2] -= g.vwgt[v]
			pw[to] += g.vwgt[v]
			// Separator neighbours of v now have one more neighbour on
			// side to, which a move to other would pull in.
			for _, u := range g.adj[g.xadj[v]:g.xadj[v+1]] {
				if where[u] == 2 && w.heaps[other].pos[u] >= 0 {
					w.heaps[other].update(u, w.heaps[other].key[u]-g.vwgt[v])
				}
			}
			// Neighbours on the other side join the separator.
			for _, u := range g.adj[g.xadj[v]:g.xadj[v+1]] {
				if int(where[u]) != other {
					continue
				}
				log = append(log, [2]int{u, other})
				where[u] = 2
				pw[other] -= g.vwgt[u]
				pw[2] += g.vwgt[u]
				for _, x := range g.adj[g.xadj[u]:g.xadj[u+1]] {
					if where[x] == 2 && w.heaps[to].pos[x] >= 0 {
						w.heaps[to].update(x, w.heaps[to].key[x]+g.vwgt[u])
					}
				}
				if !w.locked[u] {
					w.pushSep(g, where, u)
				}
			}
			moves++
			sinceBest++
			feasible := pw[0] <= maxw && pw[1] <= maxw
			if bal := max(pw[0], pw[1]); feasible && (pw[2] < bestSep || (pw[2] == bestSep && bal < bestBal)) {
				bestSep, bestLen, bestBal = pw[2], len(log), bal
				sinceBest = 0
			} else if sinceBest > limit {
				break
			}
		}
		for i := len(log) - 1; i >= bestLen; i-- {
			v, prev := log[i][0], log[i][1]
			pw[where[v]] -= g.vwgt[v]
			pw[prev] += g.vwgt[v]
			where[v] = uint8(prev)
		}
		for _, e := range log {
			w.locked[e[0]] = false
		}
		for s := range w.heaps {
			w.heaps[s].reset()
		}
		if bestLen == 0 {
			break
		}
	}
}

// pushSep puts separator node v into both heaps, keyed by the separator
// weight that moving it to each side would save.
func (w *ndWork) pushSep(g *ndGraph, where []uint8, v int) {
	var pull [2]int // weight of v's neighbours on each side
	for _, u := range g.adj[g.xadj[v]:g.xadj[v+1]] {
		if p := where[u]; p < 2 {
			pull[p] += g.vwgt[u]
		}
	}
	for s := range w.heaps {
		// Moving v to side s pulls its neighbours on side 1-s in.
		w.heaps[s].push(v, g.vwgt[v]-pull[1-s])
	}
}

// ndHeap is a max-heap of nodes keyed by key[v], with pos[v] the node's
// place in the heap (-1 if absent). The key and pos arrays are shared by
// the two heaps of a bisection; a node is in at most one.
type ndHeap struct {
	h        []int
	key, pos []int
}

func (h *ndHeap) len() int { return len(h.h) }
func (h *ndHeap) top() int { return h.h[0] }

func (h *ndHeap) reset() {
	for _, v := range h.h {
		h.pos[v] = -1
	}
	h.h = h.h[:0]
}

func (h *ndHeap) push(v, k int) {
	h.key[v] = k
	h.pos[v] = len(h.h)
	h.h = append(h.h, v)
	h.up(len(h.h) - 1)
}

func (h *ndHeap) pop() int {
	v := h.h[0]
	h.remove(v)
	return v
}

func (h *ndHeap) remove(v int) {
	i := h.pos[v]
	last := len(h.h) - 1
	h.pos[v] = -1
	if i != last {
		u := h.h[last]
		h.h[i] = u
		h.pos[u] = i
		h.h = h.h[:last]
		h.down(i)
		h.up(h.pos[u])
		return
	}
	h.h = h.h[:last]
}

func (h *ndHeap) update(v, k int) {
	old := h.key[v]
	h.key[v] = k
	if k > old {
		h.up(h.pos[v])
	} else {
		h.down(h.pos[v])
	}
}

func (h *ndHeap) up(i int) {
	v := h.h[i]
	for i > 0 {
		p := (i - 1) / 2
		u := h.h[p]
		if h.key[u] >= h.key[v] {
			break
		}
		h.h[i] = u
		h.pos[u] = i
		i = p
	}
	h.h[i] = v
	h.pos[v] = i
}

func (h *ndHeap) down(i int) {
	v := h.h[i]
	n := len(h.h)
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if c+1 < n && h.key[h.h[c+1]] > h.key[h.h[c]] {
			c++
		}
		u := h.h[c]
		if h.key[u] <= h.key[v] {
			break
		}
		h.h[i] = u
		h.pos[u] = i
		i = c
	}
	h.h[i] = v
	h.pos[v] = i
}
