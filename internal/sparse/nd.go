package sparse

// NestedDissection orders the block graph of q (without its first drop
// blocks, as BlockAMD) by recursive vertex separators and expands the
// order to scalars. Separators come from breadth-first level structures
// rooted at a pseudo-peripheral block: the smallest level that leaves
// between 30% and 70% of the blocks on either side. Small pieces are
// ordered by minimum degree. On lattice-like 3-D graphs this gives less fill
// and far fewer flops than minimum degree; on pose graphs that are mostly
// long chains AMD is better, so compare Analyze results (Flops) when in
// doubt.
func NestedDissection(q *BlockSym, drop int) []int {
	nb := q.N - drop
	if nb <= 0 {
		return []int{}
	}
	xadj, adj := blockGraph(q, drop)
	st := &ndState{xadj: xadj, adj: adj, mark: make([]int, nb), level: make([]int, nb), local: make([]int, nb)}
	for i := range st.mark {
		st.mark[i] = -1
	}
	all := make([]int, nb)
	for i := range all {
		all[i] = i
	}
	st.dissect(all)
	return expandBlockOrder(st.order, q.B)
}

// ndLeaf is the size below which a piece is ordered by minimum degree.
const ndLeaf = 128

type ndState struct {
	xadj, adj []int
	mark      []int // set label of each node (the stamp of its current piece)
	level     []int
	local     []int // node -> index within the current piece
	stamp     int
	order     []int
	queue     []int
}

// label marks nodes as the current piece and returns its stamp.
func (st *ndState) label(nodes []int) int {
	st.stamp++
	for _, v := range nodes {
		st.mark[v] = st.stamp
	}
	return st.stamp
}

// bfs runs a breadth-first search from root inside the piece labelled s,
// filling level and returning the visited nodes in order.
func (st *ndState) bfs(root, s int) []int {
	q := st.queue[:0]
	st.stamp++
	seen := st.stamp
	// Use level as visited marker via a separate stamp: mark visited nodes
	// by setting mark to seen, then restore to s afterwards.
	st.mark[root] = seen
	st.level[root] = 0
	q = append(q, root)
	for h := 0; h < len(q); h++ {
		v := q[h]
		for _, w := range st.adj[st.xadj[v]:st.xadj[v+1]] {
			if st.mark[w] == s {
				st.mark[w] = seen
				st.level[w] = st.level[v] + 1
				q = append(q, w)
			}
		}
	}
	for _, v := range q {
		st.mark[v] = s
	}
	st.queue = q
	return q
}

func (st *ndState) dissect(nodes []int) {
	if len(nodes) <= ndLeaf {
		st.leaf(nodes)
		return
	}
	s := st.label(nodes)
	reach := st.bfs(nodes[0], s)
	if len(reach) < len(nodes) {
		// Disconnected: order the component, then the rest.
		comp := append([]int(nil), reach...)
		in := st.label(comp)
		var rest []int
		for _, v := range nodes {
			if st.mark[v] != in {
				rest = append(rest, v)
			}
		}
		st.dissect(comp)
		st.dissect(rest)
		return
	}
	// Pseudo-peripheral root: restart from the farthest node while the
	// eccentricity grows (a few sweeps).
	root := reach[len(reach)-1]
	ecc := st.level[root]
	for sweep := 0; sweep < 4; sweep++ {
		r := st.bfs(root, s)
		far := r[len(r)-1]
		if st.level[far] <= ecc {
			break
		}
		ecc = st.level[far]
		root = far
	}
	order := append([]int(nil), st.bfs(root, s)...)
	nlev := st.level[order[len(order)-1]] + 1
	count := make([]int, nlev)
	for _, v := range order {
		count[st.level[v]]++
	}
	n := len(nodes)
	best, bestSize := -1, n+1
	before := 0
	for m := 0; m < nlev; m++ {
		after := n - before - count[m]
		if 10*before >= 3*n && 10*after >= 3*n && count[m] < bestSize {
			best, bestSize = m, count[m]
		}
		before += count[m]
	}
	if best < 0 {
		st.leaf(nodes)
		return
	}
	var a, b, sep []int
	for _, v := range order {
		switch l := st.level[v]; {
		case l < best:
			a = append(a, v)
		case l > best:
			b = append(b, v)
		default:
			sep = append(sep, v)
		}
	}
	// Separator nodes with no neighbour beyond the separator belong with
	// the near side.
	kept := sep[:0]
	for _, v := range sep {
		touchesB := false
		for _, w := range st.adj[st.xadj[v]:st.xadj[v+1]] {
			if st.mark[w] == s && st.level[w] > best {
				touchesB = true
				break
			}
		}
		if touchesB {
			kept = append(kept, v)
		} else {
			a = append(a, v)
		}
	}
	sep = append([]int(nil), kept...)
	st.dissect(a)
	st.dissect(b)
	st.order = append(st.order, sep...)
}

// leaf orders a small piece by minimum degree on its induced subgraph.
func (st *ndState) leaf(nodes []int) {
	if len(nodes) == 0 {
		return
	}
	s := st.label(nodes)
	for k, v := range nodes {
		st.local[v] = k
	}
	xadj := make([]int, len(nodes)+1)
	var adj []int
	for k, v := range nodes {
		for _, w := range st.adj[st.xadj[v]:st.xadj[v+1]] {
			if st.mark[w] == s {
				adj = append(adj, st.local[w])
			}
		}
		xadj[k+1] = len(adj)
	}
	w := make([]int, len(nodes))
	for i := range w {
		w[i] = 1
	}
	for _, k := range minDegree(len(nodes), xadj, adj, w) {
		st.order = append(st.order, nodes[k])
	}
}
