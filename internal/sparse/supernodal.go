package sparse

import (
	"slices"
)

// supernodes is the supernodal layout of L: supernode s holds the
// consecutive columns first[s] .. first[s+1]-1, which share one row
// structure rows[rowPtr[s]:rowPtr[s+1]] (its own columns first, then the
// rows below, increasing). Its values are a dense nr x nc row-major block
// at val[valPtr[s]:], lower trapezoidal (the strict upper triangle of the
// top nc x nc block is not used).
//
// The factorization is left-looking: supernode s gathers the updates of
// every earlier supernode whose rows reach into its columns (each such
// descendant waits in a linked list headed by the next supernode it
// updates, as in CHOLMOD), as one dense product per descendant, then
// factors its own block with a blocked dense Cholesky. Large separators at
// the top of the elimination tree thus run in dense level-3 kernels.
//
// This file makes the layout from the symbolic analysis;
// supernodal_factor.go computes the factor, supernodal_solve.go solves
// with it, and solveschedule.go runs the solve's parts concurrently.
type supernodes struct {
	first  []int
	super  []int32 // column -> supernode (four bytes: see maxOrder)
	rowPtr []int
	rows   []int32 // four bytes: a factor's order is at most maxOrder
	valPtr []int
	val    []float64
	stored int

	// vmap sends entry p of A (in the analysed CSC order) to its place in
	// val: assembling A from a CSC is one scatter, and no copy of A's
	// pattern or values is kept (it would cost 24 bytes per entry of A).
	// The block analysis leaves it nil until a CSC is factored (ensureVmap).
	vmap []int
	// src and shift, while FactorizeBlocks runs: factorNode assembles
	// supernode s from src + shift I itself (assembleNode). With rowFn
	// (FactorizeRows) src is only the pattern, and each block row's
	// values are computed where a supernode needs them.
	src   *BlockSym
	rowFn *BlockRows
	shift float64

	// reuse, while FactorizeBlocksFrom runs: the supernode of from whose
	// values supernode s copies, or -1 where s is computed.
	reuse []int
	from  *supernodes
	// permAt[s], when not -1, is where rowPerm holds the local row of
	// each of the copied supernode's rows below its columns: the kept
	// order may have reordered them (they are affected ancestors).
	permAt, rowPerm []int

	// Independent subtrees [lo, hi) of supernodes, factored concurrently,
	// and the remaining supernodes, factored after them in order. This
	// split also fixes the order of every sum of the factorization (the
	// order in which the updates of each supernode are subtracted), on any
	// number of threads.
	tasks [][2]int
	top   []int
	// A finer split run instead on two threads or more, or nil: xtasks
	// and xtop (in refPos order) as tasks and top, with refPos[s] the
	// place of supernode s in the order the split above factors on one
	// thread (its tasks' supernodes task by task, then top). Where one
	// subtree holds most of the work (a sphere's or a torus's root
	// separator above two halves), that split leaves a single task and
	// the whole factorization on one goroutine; factorAssembled runs the
	// finer one and replays its updates in refPos order (splitTasks).
	xtasks [][2]int
	xtop   []int
	refPos []int32
	// replays counts the factorizations run on the finer split (tests
	// check that their cases reach it).
	replays int
	// splits counts the top supernodes whose updates two goroutines
	// shared (topsplit.go), thin the updates among them made by Dgemm
	// (tests check that their cases reach both).
	splits, thin int

	// Work space for the numeric factorization, made by it (and let go
	// after it with work, when large: maxKeptWork).
	head, next []int
	dpos       []int
	work       []*snWork
	errs       []error
	deferred   [][]int
	helper     *topHelper // while the top is factored (topsplit.go)
	topList    []int
	rowWork    []int
	pending    [][]pendingLink // factorReplay's deferred, with errPos
	pendAll    []pendingLink
	errPos     []int64

	// The schedule and buffers of the solve, built by the first one.
	sched *solveSchedule
}

// Relaxed amalgamation (CHOLMOD's defaults): a column joins the supernode
// of its child when the merged supernode stays small or has few explicit
// zeros. Dense blocks with a few zeros run much faster than many thin ones.
func relaxOK(nc int, zfrac float64) bool {
	return zfrac == 0 || nc <= 4 || (nc <= 16 && zfrac < 0.8) || (nc <= 48 && zfrac < 0.1) || zfrac < 0.05
}

// partitionSupernodes groups the columns of L into relaxed supernodes
// from the elimination tree and the column counts alone (so that the
// scalar and the block analysis, which compute those differently, agree):
// column j+1 joins the current supernode f..j when it is the parent of j
// (then the structure of every column of the merged supernode is inside
// {f..j+1} plus the structure of column j+1) and relaxOK allows it.
//
// A factor whose relaxed supernodes would take relaxedMaxVals values or
// more is partitioned again with strictOK instead.
func partitionSupernodes(c *Cholesky) *supernodes {
	n := c.n
	sn := &supernodes{super: make([]int32, n)}
	if partitionWith(c, sn, relaxOK) >= relaxedMaxVals {
		partitionWith(c, sn, strictOK)
	}
	ns := len(sn.first) - 1
	for s := 0; s < ns; s++ {
		for j := sn.first[s]; j < sn.first[s+1]; j++ {
			sn.super[j] = int32(s)
		}
	}
	return sn
}

// relaxedMaxVals is the size of a factor's storage (values, the dense
// nr x nc block of every supernode) from which its supernodes are not
// relaxed (strictOK). The explicit zeros that relaxOK admits, with the
// unused upper triangles of the wider diagonal blocks it makes, are about
// a quarter of such a factor: on the lattices of a few hundred thousand
// poses and more, where the Hessian's factor is the solve's peak memory,
// strict supernodes store that much less, and the factorization and its
// solves, which compute and read fewer zeros, take no more time for
// their smaller dense products (docs/tuning.md, "Scale"). Smaller factors
// keep CHOLMOD's relaxation, and their results bit for bit.
var relaxedMaxVals = 1 << 25 // a variable for tests

// strictOK merges a column into its child's supernode only when that adds
// no explicit zero, or while the supernode has at most 4 columns (a pose
// block's columns always share a structure: they merge either way).
func strictOK(nc int, zfrac float64) bool {
	return zfrac == 0 || nc <= 4
}

// partitionWith sets sn.first to the supernodes that ok admits (see
// partitionSupernodes) and returns their storage in values.
func partitionWith(c *Cholesky, sn *supernodes, ok func(nc int, zfrac float64) bool) int {
	n := c.n
	sn.first = append(sn.first[:0], 0)
	f, real, vals := 0, 0, 0
	for j := 0; j < n; j++ {
		cj := c.count(j)
		real += cj
		if j+1 < n && c.parentOf(j) == j+1 {
			nc := j + 2 - f
			next := c.count(j + 1)
			stored := nc*(nc+1)/2 + nc*(next-1)
			r := real + next
			if ok(nc, float64(stored-r)/float64(stored)) {
				continue
			}
		}
		nc := j + 1 - f
		vals += nc * (nc + cj - 1)
		sn.first = append(sn.first, j+1)
		f, real = j+1, 0
	}
	return vals
}

// supernodeTree returns the supernodal elimination tree: sparent[s] (-1
// for a root) and the children of each supernode as linked lists (chead,
// cnext), children in increasing order.
func supernodeTree(c *Cholesky, sn *supernodes) (sparent, chead, cnext []int) {
	ns := len(sn.first) - 1
	sparent = make([]int, ns)
	chead = make([]int, ns)
	cnext = make([]int, ns)
	for s := range chead {
		chead[s] = -1
	}
	for s := ns - 1; s >= 0; s-- {
		sparent[s] = -1
		if p := c.parentOf(sn.first[s+1] - 1); p != -1 {
			sparent[s] = int(sn.super[p])
			cnext[s] = chead[sparent[s]]
			chead[sparent[s]] = s
		}
	}
	return sparent, chead, cnext
}

// finish computes the sizes that follow from the row structures and
// prepares the factorization's schedule and work space.
func (sn *supernodes) finish(sparent, chead, cnext []int) {
	ns := len(sn.first) - 1
	sn.stored = 0
	for s := 0; s < ns; s++ {
		nc := sn.first[s+1] - sn.first[s]
		nr := sn.rowPtr[s+1] - sn.rowPtr[s]
		sn.stored += nc*(nc+1)/2 + (nr-nc)*nc
	}
	// val is allocated by the first factorization, so that Analyze alone
	// (to compare orderings by Flops, say) stays cheap.
	sn.splitTasks(chead, cnext, sparent)
}

func newSupernodes(c *Cholesky, a *CSC) *supernodes {
	n := c.n
	sn := partitionSupernodes(c)
	ns := len(sn.first) - 1
	// Lower triangle of C by columns: the transpose of C's upper pattern
	// (needed only while the structures and vmap are built).
	lp := make([]int, n+1)
	for k := 0; k < n; k++ {
		for p := c.cp[k]; p < c.cp[k+1]; p++ {
			lp[c.ci[p]+1]++
		}
	}
	for k := 0; k < n; k++ {
		lp[k+1] += lp[k]
	}
	next := append([]int(nil), lp[:n]...)
	li := make([]int, len(c.ci))
	cmap := make([]int, len(c.ci)) // C entry -> lower entry
	for k := 0; k < n; k++ {
		for p := c.cp[k]; p < c.cp[k+1]; p++ {
			i := c.ci[p]
			q := next[i]
			next[i]++
			li[q] = k
			cmap[p] = q
		}
	}
	// Row structures from the leaves up: the rows of s below its columns
	// are those of A's columns and of its children's structures that lie
	// below s.
	sparent, chead, cnext := supernodeTree(c, sn)
	mark := make([]int, n)
	for i := range mark {
		mark[i] = -1
	}
	sn.rowPtr = make([]int, ns+1)
	sn.valPtr = make([]int, ns+1)
	for s := 0; s < ns; s++ {
		f, l := sn.first[s], sn.first[s+1]-1
		start := len(sn.rows)
		for j := f; j <= l; j++ {
			sn.rows = append(sn.rows, int32(j))
			mark[j] = s
		}
		for j := f; j <= l; j++ {
			for p := lp[j]; p < lp[j+1]; p++ {
				if i := li[p]; i > l && mark[i] != s {
					mark[i] = s
					sn.rows = append(sn.rows, int32(i))
				}
			}
		}
		for ch := chead[s]; ch != -1; ch = cnext[ch] {
			nc := sn.first[ch+1] - sn.first[ch]
			for _, i := range sn.rows[sn.rowPtr[ch]+nc : sn.rowPtr[ch+1]] {
				if int(i) > l && mark[i] != s {
					mark[i] = s
					sn.rows = append(sn.rows, i)
				}
			}
		}
		nc := l - f + 1
		slices.Sort(sn.rows[start+nc:])
		nr := len(sn.rows) - start
		if nr != nc+c.count(l)-1 {
			panic("sparse: supernode structure disagrees with the column counts")
		}
		sn.rowPtr[s+1] = len(sn.rows)
		sn.valPtr[s+1] = sn.valPtr[s] + nr*nc
		// Where each lower entry of columns f..l lands in val (li is
		// overwritten: entry p's row becomes its value offset).
		for r, i := range sn.rows[start:] {
			next[i] = r // next is free scratch now
		}
		for j := f; j <= l; j++ {
			for p := lp[j]; p < lp[j+1]; p++ {
				li[p] = sn.valPtr[s] + next[li[p]]*nc + j - f
			}
		}
	}
	// A's entry p is C's entry amap[p], the lower entry cmap[amap[p]],
	// whose offset li now holds. amap becomes vmap in place.
	sn.vmap = c.amap
	for p, q := range sn.vmap {
		sn.vmap[p] = li[cmap[q]]
	}
	sn.finish(sparent, chead, cnext)
	return sn
}

// n is the order of L.
func (sn *supernodes) n() int { return len(sn.super) }
