package sync

import "github.com/bcmsync/bcmsync/internal/sparse"

// Every sparse matrix a solve factors has the pose graph's block pattern
// (Q, the chordal system, the Hessian in tangent coordinates, S) and is
// ordered by Q's one fill-reducing order. The block-level part of their
// symbolic analysis (elimination tree, column counts, the structure of L
// in blocks) is therefore made once per solve (sparse.BlockSymbolic) and
// each analysis does only what grows with its block size (on a small graph
// the shared part was half of the analyses' cost: docs/tuning.md,
// "Tuning figures").

// analyzeWith is sparse.AnalyzeBlocks(m, perm), from sym when there is one
// (the block analysis of m's pattern in perm's block order): the same
// analysis, bit for bit.
func analyzeWith(sym *sparse.BlockSymbolic, m *sparse.BlockSym, perm []int) (*sparse.Cholesky, error) {
	if sym != nil {
		if c, err := sym.Analyze(m); err == nil {
			return c, nil
		}
	}
	return sparse.AnalyzeBlocks(m, perm)
}
