package distributed

import (
	"context"
	"errors"
	stdsync "sync"

	"github.com/bcmsync/bcmsync/posegraph"
	bsync "github.com/bcmsync/bcmsync/sync"
)

// SolveOn runs a whole distributed solve on bus from one process: K agents
// as goroutines and the coordinator. The agents use the coordinator's
// Problem, Subject, Key and Overlap. With a MemBus nothing leaves the process; with a
// NATS bus every message goes through the server, as between machines.
func SolveOn(ctx context.Context, bus Bus, g *posegraph.Graph, p *Partition, opts Options, aopts AgentOptions) (*bsync.Result, *Stats, error) {
	opts.defaults()
	aopts.Problem, aopts.Subject, aopts.Key, aopts.Overlap = opts.Sync.Problem, opts.Subject, opts.Key, opts.Overlap
	if err := p.Validate(g.N()); err != nil {
		return nil, nil, err
	}
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, p.K)
	var wg stdsync.WaitGroup
	for k := 0; k < p.K; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[k] = RunAgent(actx, bus, g, p, k, aopts)
		}()
	}
	res, st, err := Solve(ctx, bus, g, p, opts)
	cancel()
	wg.Wait()
	if err != nil {
		for _, e := range errs {
			if e != nil && !errors.Is(e, context.Canceled) {
				err = errors.Join(err, e)
			}
		}
		return nil, st, err
	}
	return res, st, nil
}
