package sparse

// NestedDissectionLeaf is nestedDissection for the external tests, which
// dissect small graphs down to small leaves.
var NestedDissectionLeaf = nestedDissection

// BlockOrderFrom is BlockOrder trying dissection from a factor cost of
// worth (BlockOrder's own gate is ndWorthCost).
var BlockOrderFrom = blockOrder

// NDWorthCost is BlockOrder's gate.
const NDWorthCost = ndWorthCost
