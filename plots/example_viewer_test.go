package plots_test

import (
	"bytes"
	"fmt"
	"log"
	"regexp"

	"github.com/bcmsync/bcmsync/plots"
	"github.com/bcmsync/bcmsync/posegraph"
)

// A page for three poses on a line with one loop closure: the page is one
// self-contained HTML file whose header names the graph.
func ExampleWriteHTML() {
	g := &posegraph.Graph{D: 2, IDs: []int{0, 1, 2}}
	est := make([]posegraph.Pose, 3)
	for i := range est {
		est[i] = posegraph.Identity(2)
		est[i].T[0] = float64(i)
	}
	for _, e := range [][2]int{{0, 1}, {1, 2}, {0, 2}} {
		t := posegraph.Identity(2)
		g.Edges = append(g.Edges, posegraph.Edge{I: e[0], J: e[1], R: t.R, T: [3]float64{float64(e[1] - e[0])}, Kappa: 1, Tau: 1})
	}
	var page bytes.Buffer
	err := plots.WriteHTML(&page, plots.Viewer{
		Title:     "line.g2o",
		Graph:     g,
		Estimates: []plots.Trajectory{{Label: "estimate", Poses: est}},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(regexp.MustCompile(`<title>.*</title>`).FindString(page.String()))
	fmt.Println(bytes.Contains(page.Bytes(), []byte(`"loop":[0,0,1]`)))
	// Output:
	// <title>line.g2o — bcmsync view</title>
	// true
}
