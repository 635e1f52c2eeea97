package graphs

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// randomGraph returns the adjacency lists of a random graph on n vertices
// with m edges (repeats and both directions included).
func randomGraph(rng *rand.Rand, n, m int) [][]int {
	adj := make([][]int, n)
	for k := 0; k < m; k++ {
		i, j := rng.IntN(n), rng.IntN(n)
		if i != j {
			adj[i] = append(adj[i], j)
			adj[j] = append(adj[j], i)
		}
	}
	return adj
}

// components labels each vertex with the smallest vertex reachable from
// it, by breadth-first search: the oracle of UnionFind.
func components(adj [][]int) []int {
	label := make([]int, len(adj))
	for i := range label {
		label[i] = -1
	}
	for s := range adj {
		if label[s] >= 0 {
			continue
		}
		queue := []int{s}
		label[s] = s
		for h := 0; h < len(queue); h++ {
			for _, j := range adj[queue[h]] {
				if label[j] < 0 {
					label[j] = s
					queue = append(queue, j)
				}
			}
		}
	}
	return label
}

func TestUnionFind(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, size := range [][2]int{{1, 0}, {2, 1}, {50, 20}, {200, 150}, {300, 1000}} {
		n, m := size[0], size[1]
		adj := randomGraph(rng, n, m)
		u := NewUnionFind(n)
		merges := 0
		for i, nb := range adj {
			for _, j := range nb {
				if u.Union(i, j) {
					merges++
				}
			}
		}
		want := components(adj)
		roots := 0
		for i := 0; i < n; i++ {
			if got := u.Find(i); got != want[i] {
				t.Fatalf("n=%d m=%d: Find(%d) = %d, want the smallest vertex of its component %d", n, m, i, got, want[i])
			}
			if want[i] == i {
				roots++
			}
		}
		if merges != n-roots {
			t.Errorf("n=%d m=%d: %d merges reported, want n - components = %d", n, m, merges, n-roots)
		}
	}
}

func TestGreedyColouring(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, size := range [][2]int{{1, 0}, {10, 30}, {100, 300}, {60, 1500}} {
		n, m := size[0], size[1]
		adj := randomGraph(rng, n, m)
		classes := GreedyColouring(n, func(i int) []int { return adj[i] })
		col := make([]int, n)
		seen := 0
		for c, cls := range classes {
			if len(cls) == 0 || !slices.IsSorted(cls) {
				t.Fatalf("n=%d: class %d is empty or unsorted: %v", n, c, cls)
			}
			for _, i := range cls {
				col[i] = c
				seen++
			}
		}
		if seen != n {
			t.Fatalf("n=%d: %d vertices coloured", n, seen)
		}
		for i, nb := range adj {
			used := map[int]bool{}
			for _, j := range nb {
				if col[j] == col[i] {
					t.Fatalf("n=%d: neighbours %d and %d share colour %d", n, i, j, col[i])
				}
				if j < i {
					used[col[j]] = true
				}
			}
			// Greedy: every smaller colour is taken by an earlier neighbour.
			for c := 0; c < col[i]; c++ {
				if !used[c] {
					t.Fatalf("n=%d: vertex %d has colour %d though %d was free", n, i, col[i], c)
				}
			}
		}
	}
}

func TestNumberParts(t *testing.T) {
	index, local, err := NumberParts([][]int{{7, 3}, {}, {5}})
	if err != nil {
		t.Fatal(err)
	}
	if len(index) != 3 || index[7] != 0 || index[3] != 1 || index[5] != 2 {
		t.Errorf("index %v", index)
	}
	if len(local) != 3 || len(local[0]) != 2 || local[0][0] != 0 || local[0][1] != 1 || len(local[1]) != 0 || local[2][0] != 2 {
		t.Errorf("local %v", local)
	}
	if _, _, err := NumberParts([][]int{{1, 2}, {2}}); err == nil {
		t.Error("a vertex in two parts was accepted")
	}
}
