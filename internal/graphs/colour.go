package graphs

// GreedyColouring colours the vertices 0..n-1 in index order, each with the
// smallest colour that no earlier neighbour has, and returns the colour
// classes, each in increasing vertex order. Vertices of one class share no
// edge, so their updates can run at the same time; the order makes the
// result deterministic. neighbours(i) lists i's neighbours (in any order;
// i itself and later vertices are ignored); it may return a view of the
// caller's storage.
func GreedyColouring(n int, neighbours func(i int) []int) [][]int {
	col := make([]int, n)
	taken := make([]int, n+1) // taken[c] == i+1: an earlier neighbour of i has colour c
	var classes [][]int
	for i := 0; i < n; i++ {
		for _, j := range neighbours(i) {
			if j < i {
				taken[col[j]] = i + 1
			}
		}
		c := 0
		for taken[c] == i+1 {
			c++
		}
		col[i] = c
		if c == len(classes) {
			classes = append(classes, nil)
		}
		classes[c] = append(classes[c], i)
	}
	return classes
}
