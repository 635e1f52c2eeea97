package bcm

import "math"

// sumTree keeps n nonnegative weights in the leaves of a complete binary
// tree whose inner nodes hold subtree sums: O(log n) to change a weight and
// to sample an index with probability proportional to its weight. Inner
// sums are recomputed from their children, never adjusted by differences,
// so rounding does not accumulate.
type sumTree struct {
	size int // leaves, a power of two >= n
	node []float64
}

func newSumTree(n int) *sumTree {
	size := 1
	for size < n {
		size *= 2
	}
	return &sumTree{size: size, node: make([]float64, 2*size)}
}

func (t *sumTree) set(i int, w float64) {
	p := t.size + i
	t.node[p] = w
	for p /= 2; p >= 1; p /= 2 {
		t.node[p] = t.node[2*p] + t.node[2*p+1]
	}
}

func (t *sumTree) total() float64 { return t.node[1] }

// find returns the leaf where the running sum of weights passes u, 0 <= u <
// total(). A subtree of zero weight is never entered, so a zero-weight
// index is never returned even when rounding puts u at the edge.
func (t *sumTree) find(u float64) int {
	p := 1
	for p < t.size {
		l := t.node[2*p]
		if u < l || t.node[2*p+1] == 0 {
			p = 2 * p
		} else {
			u -= l
			p = 2*p + 1
		}
	}
	return p - t.size
}

// maxTree is a tournament tree: each inner node holds the index of the
// largest weight below it (smallest index on ties), for O(log n) updates
// and O(1) argmax.
type maxTree struct {
	size int
	w    []float64
	best []int32
}

func newMaxTree(n int) *maxTree {
	size := 1
	for size < n {
		size *= 2
	}
	t := &maxTree{size: size, w: make([]float64, size), best: make([]int32, 2*size)}
	for i := range t.w {
		t.w[i] = math.Inf(-1)
		t.best[size+i] = int32(i)
	}
	for p := size - 1; p >= 1; p-- {
		t.best[p] = t.best[2*p]
	}
	return t
}

func (t *maxTree) set(i int, w float64) {
	t.w[i] = w
	for p := (t.size + i) / 2; p >= 1; p /= 2 {
		l, r := t.best[2*p], t.best[2*p+1]
		if t.w[r] > t.w[l] {
			l = r
		}
		t.best[p] = l
	}
}

func (t *maxTree) argmax() (int, float64) {
	i := int(t.best[1])
	return i, t.w[i]
}
