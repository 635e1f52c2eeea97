package posegraph_test

import (
	"fmt"

	"github.com/bcmsync/bcmsync/posegraph"
)

// Validate (and so sync.Solve) refuses numbers that double precision
// cannot solve with, naming the record: here a loop whose third edge is
// 1e20 times heavier than the two that hold its poses to the rest.
func ExampleGraph_CheckScale() {
	g := &posegraph.Graph{D: 2, Source: "square.g2o", IDs: []int{0, 1, 2, 3}}
	for i := 0; i < 4; i++ {
		e := posegraph.Edge{I: i, J: (i + 1) % 4, R: posegraph.Identity(2).R, Kappa: 1, Tau: 1, Line: 10 + i}
		e.T[0] = 1
		g.Edges = append(g.Edges, e)
	}
	fmt.Println(g.Validate())
	g.Edges[2].Kappa = 1e20
	err := g.Validate()
	fmt.Println(err.Error()[:117])
	// Output:
	// <nil>
	// square.g2o:12: rotation precision kappa = 1e+20 here is 5e+19 times the total 2 of the edges that join its group of 2
}
