package graphs

// UnionFind keeps a partition of the vertices 0..n-1 into disjoint sets.
// The representative of a set is always its smallest vertex, so a set's
// root is where it first appears in index order: callers use it as the set's
// anchor (the pose whose translation a Laplacian system keeps) and to list
// components in order of their first vertex. Find halves paths as it goes.
type UnionFind struct {
	parent []int
}

// NewUnionFind returns n singleton sets.
func NewUnionFind(n int) *UnionFind {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	return &UnionFind{parent: p}
}

// Find returns the smallest vertex of i's set.
func (u *UnionFind) Find(i int) int {
	p := u.parent
	for p[i] != i {
		p[i] = p[p[i]]
		i = p[i]
	}
	return i
}

// Union merges the sets of i and j and reports whether they were apart.
func (u *UnionFind) Union(i, j int) bool {
	a, b := u.Find(i), u.Find(j)
	switch {
	case a == b:
		return false
	case a < b:
		u.parent[b] = a
	default:
		u.parent[a] = b
	}
	return true
}
