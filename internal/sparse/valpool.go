package sparse

import (
	"math/bits"
	gosync "sync"
)

// A factor's values are the largest allocation of a factorization (tens
// of megabytes on a city-sized graph), and a caller that solves one graph
// after another (sync.Incremental: a slightly larger graph at every step)
// made and zeroed a new one for every factor, then left it to the
// collector. Release gives a factor's values back; the next factorization
// of about the same size takes them instead of allocating. The sizes are
// rounded up to one of 8 to 16 classes per power of two, and new storage
// has room for an eighth more, so that a slightly larger factor finds the
// storage a smaller one left. The pools are sync.Pools: the collector
// empties them, so storage nobody asks for again is not held.
//
// Storage taken from a pool holds an earlier factor's values: every
// factorization writes each entry it reads (assembleNode clears the
// supernode it assembles; clearVal the whole), so the contents never
// matter and results are bit for bit those of fresh storage.

// minPooled is the smallest length kept: small factors cost nothing to
// allocate. maxPooled is the largest: a pool holds what it keeps until
// the second collection after, and storage of that size is better given
// back at once (a solve collects after dropping the trust region's
// factor so that the certificate's reuses its pages).
const (
	minPooled = 1 << 14
	maxPooled = 1 << 25
)

var valPools gosync.Map // class (a capacity) -> *gosync.Pool of *[]float64

// valClass is the capacity of the storage for n values.
func valClass(n int) int {
	if n < minPooled {
		return n
	}
	s := 1 << (bits.Len(uint(n)) - 4)
	return (n + s - 1) / s * s
}

// getVals returns storage for n values, with unspecified contents: a
// released storage of n's class or of a larger one up to n + n/4, else a new one with room for an eighth more, so that
// the storage a growing graph's factor releases serves the next few
// steps' (in a replay of city10000 the factor grows by about 4% a step).
func getVals(n int) []float64 {
	c := valClass(n)
	if n < minPooled || n > maxPooled {
		return make([]float64, n)
	}
	for ; c <= n+n/4; c = valClass(c + 1) {
		if p, ok := valPools.Load(c); ok {
			if v, ok := p.(*gosync.Pool).Get().(*[]float64); ok {
				return (*v)[:n]
			}
		}
	}
	return make([]float64, n, valClass(n+n/8))
}

// putVals keeps v for a later getVals. The caller must not use v again.
func putVals(v []float64) {
	c := cap(v)
	if c < minPooled || c > maxPooled || valClass(c) != c {
		return
	}
	p, ok := valPools.Load(c)
	if !ok {
		p, _ = valPools.LoadOrStore(c, new(gosync.Pool))
	}
	v = v[:c]
	p.(*gosync.Pool).Put(&v)
}

// Release lets a later factorization reuse c's numeric storage. c then
// holds no factor (Solve gives NaN, as after a failed factorization)
// until it is factored again, which takes new storage; a caller releases
// a factor it has finished with.
func (c *Cholesky) Release() {
	if c == nil {
		return
	}
	c.ok = false
	if c.sn != nil && c.sn.val != nil {
		putVals(c.sn.val)
		c.sn.val = nil
	}
}
