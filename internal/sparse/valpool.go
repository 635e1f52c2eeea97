package sparse

import (
	"math/bits"
	"runtime"
	gosync "sync"
)

// A factor's values are the largest allocation of a factorization (tens
// of megabytes on a city-sized graph), and a caller that solves one graph
// after another (sync.Incremental: a slightly larger graph at every step)
// made and zeroed a new one for every factor, then left it to the
// collector. Release gives a factor's values back; the next factorization
// of about the same size takes them instead of allocating. New storage is
// rounded up to one of 8 to 16 classes per power of two with room for an
// eighth more, and released storage serves any factor up to a quarter
// smaller, so that the storage a growing graph's factor releases serves the
// next few steps' (in a replay of city10000 the factor grows by about 4% a
// step).
//
// The free list is one list under a lock, not a sync.Pool: a Pool's Get
// does not see what a Put on another thread left in that thread's private
// slot, and the replay's solves move between threads. Like a Pool's, what
// it holds expires: storage not taken again within maxAge collections is
// let go.
//
// Storage taken from the list holds an earlier factor's values: every
// factorization writes each entry it reads (assembleNode clears the
// supernode it assembles; clearVal the whole), so the contents never
// matter and results are bit for bit those of fresh storage.

// minPooled is the smallest length kept: small factors cost nothing to
// allocate. maxPooled is the largest: storage of that size is better given
// back at once (a solve collects after dropping the trust region's factor
// so that the certificate's reuses its pages).
const (
	minPooled = 1 << 14
	maxPooled = 1 << 25
	maxFree   = 8 // storages kept at most
	maxAge    = 3 // collections a kept storage survives
)

var free struct {
	mu    gosync.Mutex
	list  [][]float64
	age   []int
	armed bool
}

// valClass is the capacity of the storage for n values.
func valClass(n int) int {
	if n < minPooled {
		return n
	}
	s := 1 << (bits.Len(uint(n)) - 4)
	return (n + s - 1) / s * s
}

// getVals returns storage for n values, with unspecified contents: the
// smallest released storage of between n and n + n/4 values, else a new
// one.
func getVals(n int) []float64 {
	if n < minPooled || n > maxPooled {
		return make([]float64, n)
	}
	free.mu.Lock()
	best := -1
	for k, v := range free.list {
		if c := cap(v); c >= n && c <= n+n/4 && (best < 0 || c < cap(free.list[best])) {
			best = k
		}
	}
	if best >= 0 {
		v := free.list[best]
		free.list = append(free.list[:best], free.list[best+1:]...)
		free.age = append(free.age[:best], free.age[best+1:]...)
		free.mu.Unlock()
		return v[:n]
	}
	free.mu.Unlock()
	return make([]float64, n, valClass(n+n/8))
}

// putVals keeps v for a later getVals. The caller must not use v again.
func putVals(v []float64) {
	if c := cap(v); c < minPooled || c > maxPooled {
		return
	}
	free.mu.Lock()
	defer free.mu.Unlock()
	if len(free.list) == maxFree {
		free.list, free.age = free.list[1:], free.age[1:] // the oldest goes
	}
	free.list = append(free.list, v[:cap(v)])
	free.age = append(free.age, 0)
	if !free.armed {
		free.armed = true
		armExpiry()
	}
}

// expirySentinel is garbage from the moment it is made: its cleanup runs
// after the next collection.
type expirySentinel struct{ _ *int }

// armExpiry ages the kept storage at the next collection, and again at
// every later one while any is kept.
func armExpiry() {
	runtime.AddCleanup(&expirySentinel{}, func(struct{}) {
		free.mu.Lock()
		defer free.mu.Unlock()
		k := 0
		for i, v := range free.list {
			if free.age[i]++; free.age[i] < maxAge {
				free.list[k], free.age[k] = v, free.age[i]
				k++
			}
		}
		clear(free.list[k:])
		free.list, free.age = free.list[:k], free.age[:k]
		if free.armed = k > 0; free.armed {
			armExpiry()
		}
	}, struct{}{})
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
	c.last = factoredFrom{}
	if c.sn != nil && c.sn.val != nil {
		putVals(c.sn.val)
		c.sn.val = nil
	}
}
