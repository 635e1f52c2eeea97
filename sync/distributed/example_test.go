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

// A run that keeps checkpoints, and a second coordinator that resumes from
// the last one (here in memory; bcmsync distributed --checkpoint FILE
// writes them with Checkpoint.WriteTo, and --resume FILE reads one with
// ReadCheckpoint).
func ExampleOptions_resume() {
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
	var last *distributed.Checkpoint
	ctx, cancel := context.WithCancel(context.Background())
	opts := distributed.Options{CheckpointRounds: 10}
	opts.Checkpoint = func(ck *distributed.Checkpoint) error {
		last = ck
		if ck.Rounds >= 20 {
			cancel() // the first coordinator stops here
		}
		return nil
	}
	res, _, err := distributed.SolveOn(ctx, distributed.NewMemBus(), g, p, opts, distributed.AgentOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("first run:", res.Status, "after", last.Rounds, "rounds")
	res, st, err := distributed.SolveOn(context.Background(), distributed.NewMemBus(), g, p, distributed.Options{Resume: last}, distributed.AgentOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("resumed:", res.Status, "from", res.Options.Init, "after", st.ResumedRounds, "rounds")
	// Output:
	// first run: cancelled after 20 rounds
	// resumed: certified from checkpoint after 20 rounds
}
