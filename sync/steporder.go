package sync

import (
	"github.com/bcmsync/bcmsync/internal/sparse"
	"github.com/bcmsync/bcmsync/rounding"
)

// stepOrder is the fill-reducing order an Incremental keeps from one step
// to the next (sparse.ReorderBlocks, iSAM2's reordering): the blocks the
// step's new edges reach and their ancestors in the last step's
// elimination tree are ordered afresh, with the new vertices; every
// other block keeps its place and its column of L. A fresh order
// (sparse.BlockOrder) is made only when the graph has grown by half
// since the last one (freshGrowth), and the cheaper of the two by
// sparse.BlockFactorCost is kept; between those checks the kept order
// drifts little (on city10000, 50 steps: its factor cost 1.03 times a
// fresh order's at the median, 1.16 at worst, without the checks), and
// a fresh order at every step cost more than that drift. Any order gives
// the same certified optimum; only the work of the factorizations
// depends on it.
type stepOrder struct {
	// Set by Incremental before the solve: the arrival index of each
	// vertex of the graph solved, and which of them the edges added
	// since the kept order reach (new vertices need no mark).
	solved  []int
	touched []bool
	// at is solved's inverse: the index in the graph solved of each
	// arrival index, -1 for none.
	at []int
	// The kept order: arrival indices in elimination order (postorder)
	// and the elimination tree by position, from the last solve's
	// analysis; freshAt is the number of blocks at the last fresh order.
	prev, parent []int
	freshAt      int
	// What the last solve did: a fresh order or not, the blocks
	// reordered, and whether keep took its analysis.
	fresh     bool
	reordered int
	kept      bool
	// plan holds the last solve's translation system, kept unreleased
	// so that the next solve's translation factor copies its unchanged
	// part (rounding.Plan.RefactorFrom, TranslationsOnly), planSolved
	// the arrival index of each of its graph's vertices, and reuse what
	// the last solve's copied.
	plan       *rounding.Plan
	planSolved []int
	reuse      rounding.Reuse
}

// freshGrowth is the growth of the graph since the last fresh order
// after which perm computes a fresh order again and compares. A 50-step
// replay's instructions (docs/online.md): city10000 36.39G at 1.25,
// 36.37G at 1.5, 36.66G with no checks; intel 4.102G, 4.058G, 4.056G.
const freshGrowth = 1.5

// perm returns the order of q, the Laplacian of the graph solved (its
// blocks the vertices of solved).
func (o *stepOrder) perm(q *sparse.BlockSym) []int {
	o.fresh, o.reordered = true, q.N
	if len(o.solved) != q.N || o.prev == nil {
		return o.freshOrder(q)
	}
	// The kept order in q's numbering; a vertex it holds that the graph
	// lacks (never, as the graph only grows) makes it useless.
	prev := make([]int, len(o.prev))
	for k, v := range o.prev {
		if v >= len(o.at) || o.at[v] < 0 {
			return o.freshOrder(q)
		}
		prev[k] = o.at[v]
	}
	kept, reordered, err := sparse.ReorderBlocks(q, prev, o.parent, o.touched)
	if err != nil {
		return o.freshOrder(q)
	}
	if float64(q.N) < freshGrowth*float64(o.freshAt) {
		o.fresh, o.reordered = false, reordered
		return kept
	}
	fresh := o.freshOrder(q)
	if factorCost(q, kept) < factorCost(q, fresh) {
		o.fresh, o.reordered = false, reordered
		return kept
	}
	return fresh
}

// freshOrder is BlockOrder, noted as the last fresh order.
func (o *stepOrder) freshOrder(q *sparse.BlockSym) []int {
	o.freshAt = q.N
	return sparse.BlockOrder(q, 0)
}

// factorCost is BlockOrder's model of the factorization's time.
func factorCost(q *sparse.BlockSym, perm []int) float64 {
	nnz, flops := sparse.BlockFactorCost(q, 0, perm)
	return flops + 100*float64(nnz)
}

// keep records the analysis made with the order perm returned: its
// postorder and tree are the next step's kept order.
func (o *stepOrder) keep(sym *sparse.BlockSymbolic) {
	o.kept = true
	if sym == nil {
		o.prev, o.parent = nil, nil
		return
	}
	order, parent := sym.Tree()
	if len(order) != len(o.solved) {
		o.prev, o.parent = nil, nil
		return
	}
	o.prev = o.prev[:0]
	for _, i := range order {
		o.prev = append(o.prev, o.solved[i])
	}
	o.parent = append(o.parent[:0], parent...)
}

// refactorFrom lets plan, the plan of the graph solved (n vertices, those
// of solved), copy the unchanged part of its translation factor from the
// last solve's plan. The translation system (the grounded tau-weighted
// Laplacian) changes only where the new edges are, and the kept order
// keeps the rest of the elimination tree, so most of its supernodes are
// the last step's (sparse.Cholesky.FactorizeBlocksFrom decides, by
// comparing the matrices, and computes whatever changed).
func (o *stepOrder) refactorFrom(plan *rounding.Plan, n int) {
	if !copyTranslationFactor {
		return
	}
	if o.plan == nil || len(o.solved) != n {
		// Nothing to copy now; plan keeps its system for the next step.
		plan.RefactorFrom(nil, nil)
		return
	}
	poseMap := make([]int, len(o.planSolved))
	for k, v := range o.planSolved {
		poseMap[k] = -1
		if v < len(o.at) {
			poseMap[k] = o.at[v]
		}
	}
	plan.RefactorFrom(o.plan, poseMap)
	// plan holds the last system until its own is made, then releases
	// it; the step need not keep it alive beyond that.
	o.plan = nil
}

// copyTranslationFactor switches refactorFrom on; the tests compare
// replays with and without it.
var copyTranslationFactor = true

// keepPlan keeps the translation system of plan, the plan of the solve
// that ends, for the next solve's refactorFrom (without the graph and the
// analysis), and releases the one it replaces (whose factor plan's has
// copied from, if it was made).
func (o *stepOrder) keepPlan(plan *rounding.Plan) {
	o.plan.Release()
	kept := plan.TranslationsOnly()
	o.plan, o.planSolved, o.reuse = kept, o.solved, kept.Reused()
}
