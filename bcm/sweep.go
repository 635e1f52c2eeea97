package bcm

import (
	"math"
	"math/rand/v2"
	stdsync "sync"

	"github.com/bcmsync/bcmsync/internal/graphs"
	"github.com/bcmsync/bcmsync/internal/sparse"
)

// sweeper runs one sweep of a rule on a fixed X; all scratch is allocated
// once per Solve.
type sweeper struct {
	s       *Solver
	x       *sparse.Blocks
	threads int
	k       []*kernel // one per goroutine; k[0] for the serial rules
	old     []float64 // X_i before an update, for the scatter into N
	sum     *sumTree
	max     *maxTree
	onStep  func(i int, dec float64) // test hook, called after each update
}

func newSweeper(s *Solver, x *sparse.Blocks, threads int) *sweeper {
	sw := &sweeper{s: s, x: x, threads: threads, old: make([]float64, x.R*x.B)}
	for t := 0; t < threads; t++ {
		sw.k = append(sw.k, newKernel(x.R, s.d, s.b, s.pose))
	}
	return sw
}

func (sw *sweeper) update(k *kernel, i int) {
	q := sw.s.q
	k.gather(q, sw.x, i)
	_, dec := k.step(sw.x.Block(i), q.Block(q.Diag[i]), true)
	if sw.onStep != nil {
		sw.onStep(i, dec)
	}
}

func (sw *sweeper) cyclic() int64 {
	for i := 0; i < sw.x.N; i++ {
		sw.update(sw.k[0], i)
	}
	return int64(sw.x.N)
}

func (sw *sweeper) uniform(rng *rand.Rand) int64 {
	n := sw.x.N
	for u := 0; u < n; u++ {
		sw.update(sw.k[0], rng.IntN(n))
	}
	return int64(n)
}

// parallelMin is the smallest colour class split over goroutines; below it
// the start-up cost outweighs the work.
const parallelMin = 64

func (sw *sweeper) parallel() int64 {
	s := sw.s
	if s.classes == nil {
		s.classes = colour(s.q)
	}
	for _, cls := range s.classes {
		t := sw.threads
		if t > len(cls)/parallelMin {
			t = len(cls) / parallelMin
		}
		if t <= 1 {
			for _, i := range cls {
				sw.update(sw.k[0], i)
			}
			continue
		}
		// Blocks of one class share no edge: each update reads only
		// blocks outside the class, so the order within it is immaterial
		// and the result does not depend on t.
		var wg stdsync.WaitGroup
		for w := 0; w < t; w++ {
			lo, hi := len(cls)*w/t, len(cls)*(w+1)/t
			wg.Add(1)
			go func(k *kernel, part []int) {
				defer wg.Done()
				for _, i := range part {
					sw.update(k, i)
				}
			}(sw.k[w], cls[lo:hi])
		}
		wg.Wait()
	}
	return int64(sw.x.N)
}

// colour greedily colours the graph of q in index order (smallest colour not
// taken by an earlier neighbour) and returns the colour classes, each in
// increasing index order. It is deterministic.
func colour(q *sparse.BlockSym) [][]int {
	return graphs.GreedyColouring(q.N, func(i int) []int { return q.ColIdx[q.RowPtr[i]:q.RowPtr[i+1]] })
}

// updateN applies an update of block i to the maintained N = X Q:
// N_j += (X_i^new - X_i^old) Q_ij for every j in row i of Q (i included).
func (sw *sweeper) updateN(i int) {
	q, n := sw.s.q, sw.s.nq
	b := q.B
	xi := sw.x.Block(i)
	delta := sw.old
	for k := range delta {
		delta[k] = xi[k] - delta[k]
	}
	bb := b * b
	for p := q.RowPtr[i]; p < q.RowPtr[i+1]; p++ {
		qij := q.Val[p*bb : (p+1)*bb]
		nj := n.Block(q.ColIdx[p])
		for a := 0; a < len(delta); a += b {
			da := delta[a : a+b]
			for t, v := range da {
				if v == 0 {
					continue
				}
				qt := qij[t*b : (t+1)*b]
				for c := 0; c < b; c++ {
					nj[a+c] += v * qt[c]
				}
			}
		}
	}
}

// weight returns the sampling weight of block i from the maintained N:
// ||H_i||_* for Importance, the attainable decrease for Greedy.
//
// A block whose rotation part of Q_ii is zero (a landmark: no cost sees its
// Y) always has H = 0; its importance weight is instead the norm of its
// translation step's residual, sqrt(c dec) = ||c p + Y b + g_p||, which
// has the units of H and vanishes exactly at the block's optimum.
func (sw *sweeper) weight(i int, greedy bool) float64 {
	q, k := sw.s.q, sw.k[0]
	k.fromN(q, sw.x, sw.s.nq, i)
	qii := q.Block(q.Diag[i])
	nuc, dec := k.step(sw.x.Block(i), qii, false)
	if dec < 0 { // rounding at a block optimum
		dec = 0
	}
	if greedy {
		return dec
	}
	if nuc == 0 && k.pose && rotationFree(qii, k.d, k.b) {
		return math.Sqrt(qii[k.d*k.b+k.d] * dec)
	}
	return nuc
}

// rotationFree reports whether the rotation part of the diagonal block qii
// is zero, as for a landmark.
func rotationFree(qii []float64, d, b int) bool {
	for a := 0; a < d; a++ {
		for c := 0; c < d; c++ {
			if qii[a*b+c] != 0 {
				return false
			}
		}
	}
	return true
}

// updateFromN updates block i with G_i from N, keeps N current and refreshes
// the weights of i and its neighbours through set.
func (sw *sweeper) updateFromN(i int, greedy bool, set func(j int, w float64)) {
	q, k := sw.s.q, sw.k[0]
	xi := sw.x.Block(i)
	copy(sw.old, xi)
	k.fromN(q, sw.x, sw.s.nq, i)
	_, dec := k.step(xi, q.Block(q.Diag[i]), true)
	if sw.onStep != nil {
		sw.onStep(i, dec)
	}
	sw.updateN(i)
	for p := q.RowPtr[i]; p < q.RowPtr[i+1]; p++ {
		j := q.ColIdx[p]
		set(j, sw.weight(j, greedy))
	}
}

// importance runs n updates, block i sampled with probability proportional
// to ||H_i||_* (uniformly if all weights vanish). It relies on s.nq = X Q on
// entry, which Solve's per-sweep record leaves there.
func (sw *sweeper) importance(rng *rand.Rand) int64 {
	n := sw.x.N
	if sw.sum == nil {
		sw.sum = newSumTree(n)
	}
	t := sw.sum
	for i := 0; i < n; i++ {
		t.set(i, sw.weight(i, false))
	}
	for u := 0; u < n; u++ {
		var i int
		if tot := t.total(); tot > 0 {
			i = t.find(rng.Float64() * tot)
		} else {
			i = rng.IntN(n)
		}
		sw.updateFromN(i, false, t.set)
	}
	return int64(n)
}

// greedy runs up to n updates, each on the block with the largest
// attainable decrease; it stops early when no block can decrease F.
func (sw *sweeper) greedy() int64 {
	n := sw.x.N
	if sw.max == nil {
		sw.max = newMaxTree(n)
	}
	t := sw.max
	for i := 0; i < n; i++ {
		t.set(i, sw.weight(i, true))
	}
	var u int
	for u = 0; u < n; u++ {
		i, w := t.argmax()
		if w <= 0 {
			break
		}
		sw.updateFromN(i, true, t.set)
	}
	return int64(u)
}
