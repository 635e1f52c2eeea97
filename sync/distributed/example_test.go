package distributed_test

import (
	"context"
	"fmt"

	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/sync/distributed"
)

// Four agents, in this process, solve a 2-D graph split into bands of a
// breadth-first order and certify the result. Between processes or
// machines, natsbus.DialNATS gives the bus, and each agent runs RunAgent.
func Example() {
	g, _, err := datasets.Manhattan(200, 10, datasets.Config{Kappa: 100, Tau: 10, LoopProb: 0.3, Seed: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	p, err := distributed.BFS(g, 4)
	if err != nil {
		fmt.Println(err)
		return
	}
	res, _, err := distributed.SolveOn(context.Background(), distributed.NewMemBus(), g, p, distributed.Options{}, distributed.AgentOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Status, "at rank", res.Rank)
	// Output: certified at rank 2
}
