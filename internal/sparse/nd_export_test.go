package sparse

// NestedDissectionLeaf is nestedDissection for the external tests, which
// dissect small graphs down to small leaves.
var NestedDissectionLeaf = nestedDissection

// BlockOrderFrom is BlockOrder trying dissection from a factor cost of
// worth (BlockOrder's own gate is ndWorthCost).
var BlockOrderFrom = blockOrder

// NDWorthCost is BlockOrder's gate.
const NDWorthCost = ndWorthCost

// FactorStorage is the storage of c's supernodal values, for the tests of
// Release.
func FactorStorage(c *Cholesky) []float64 {
	if c.sn == nil {
		return nil
	}
	return c.sn.val
}

// ValClass is the capacity a factor's storage of n values gets.
var ValClass = valClass

// FreeStorages counts the factor storages kept for reuse.
func FreeStorages() int {
	free.mu.Lock()
	defer free.mu.Unlock()
	return len(free.list)
}
