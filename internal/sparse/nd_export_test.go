package sparse

// NestedDissectionLeaf is nestedDissection for the external tests, which
// dissect small graphs down to small leaves.
var NestedDissectionLeaf = nestedDissection
