package sparse

// NestedDissectionLeaf is nestedDissection for the external tests, which
// dissect small graphs down to small leaves.
var NestedDissectionLeaf = nestedDissection

// BlockOrderFrom is BlockOrder trying dissection from a factor cost of
// worth (BlockOrder's own gate is ndWorthCost).
var BlockOrderFrom = blockOrder

// NDWorthCost is BlockOrder's gate.
const NDWorthCost = ndWorthCost

// SetMulParallelMin sets the row count from which MulBlocksParallel splits
// (tests split small matrices) and returns a function that restores it.
func SetMulParallelMin(n int) func() {
	old := mulParallelMin
	mulParallelMin = n
	return func() { mulParallelMin = old }
}
