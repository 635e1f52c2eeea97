package sync_test

import (
	"context"
	"fmt"
	"log"
	"math"
	"strings"

	"github.com/bcmsync/bcmsync/g2o"
	bsync "github.com/bcmsync/bcmsync/sync"
)

// Solve a graph with GPS-like priors: three poses on odometry edges, two
// of them with a position prior. The priors are edges from the graph's
// world vertex, the gauge anchor, so the certified estimate comes out in
// the priors' world frame, the world vertex at the identity.
func ExampleSolve_priors() {
	const file = `VERTEX_SE2 0 0 0 0
VERTEX_SE2 1 0 0 0
VERTEX_SE2 2 0 0 0
EDGE_SE2 0 1 1 0 1.5707963 100 0 0 100 0 100
EDGE_SE2 1 2 1 0 0 100 0 0 100 0 100
EDGE_PRIOR_SE2_XY 0 10 20 1 0 1
EDGE_PRIOR_SE2_XY 2 11.1 20.9 1 0 1
`
	g, err := g2o.Read(strings.NewReader(file), "gps.g2o", g2o.ReadOptions{})
	if err != nil {
		log.Fatal(err)
	}
	w := g.World()
	fmt.Printf("%d poses, %d priors, world vertex %d (id %d)\n", g.N()-1, len(g.Priors()), w, g.IDs[w])
	res, err := bsync.Solve(context.Background(), g, bsync.DefaultOptions())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Status, "F =", fmt.Sprintf("%.6f", res.Objective))
	for i := 0; i < 3; i++ {
		fmt.Printf("vertex %d: t=%.3f\n", g.IDs[i], res.Poses[i].T[:2])
	}
	x := res.Poses[w]
	fmt.Println("world vertex at the identity:", math.Abs(x.R[0]-1)+math.Abs(x.R[2])+math.Abs(x.T[0])+math.Abs(x.T[1]) < 1e-12)
	// Output:
	// 3 poses, 2 priors, world vertex 3 (id 3)
	// certified F = 0.000025
	// vertex 0: t=[10.003 20.002]
	// vertex 1: t=[10.998 19.903]
	// vertex 2: t=[11.097 20.898]
	// world vertex at the identity: true
}
