package natsbus_test

import (
	"context"
	"testing"
	"time"

	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/internal/natstest"
	"github.com/bcmsync/bcmsync/posegraph"
	bsync "github.com/bcmsync/bcmsync/sync"
	"github.com/bcmsync/bcmsync/sync/distributed"
	"github.com/bcmsync/bcmsync/sync/distributed/natsbus"
	"github.com/nats-io/nats-server/v2/server"
)

// startServer runs an embedded NATS server on a free loopback port.
func startServer(t *testing.T) *server.Server { return natstest.StartPlain(t) }

// Over a real NATS server (embedded, loopback), 2-D and 3-D synthetic
// graphs in 2, 4 and 8 parts reach the central optimum and certificate,
// each agent on its own connection as separate processes would be.
func TestNATSSynthetic(t *testing.T) {
	s := startServer(t)
	cfg := datasets.Config{Kappa: 100, Tau: 10, LoopProb: 0.3, Seed: 5}
	g2, _, err := datasets.Manhattan(300, 15, cfg)
	if err != nil {
		t.Fatal(err)
	}
	g3, _, err := datasets.Cube(5, 5, 5, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []*posegraph.Graph{g2, g3} {
		central, err := bsync.Solve(context.Background(), g, bsync.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []int{2, 4, 8} {
			p, err := distributed.BFS(g, k)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			errs := make(chan error, k)
			for a := 0; a < k; a++ {
				bus, err := natsbus.DialNATS(s.ClientURL(), "agent")
				if err != nil {
					t.Fatal(err)
				}
				go func() {
					defer bus.Close()
					errs <- distributed.RunAgent(ctx, bus, g, p, a, distributed.AgentOptions{})
				}()
			}
			bus, err := natsbus.DialNATS(s.ClientURL(), "coordinator")
			if err != nil {
				t.Fatal(err)
			}
			res, st, err := distributed.Solve(ctx, bus, g, p, distributed.Options{Timeout: 20 * time.Second})
			bus.Close()
			if err != nil {
				t.Fatal(err)
			}
			for a := 0; a < k; a++ {
				if err := <-errs; err != nil {
					t.Errorf("agent: %v", err)
				}
			}
			cancel()
			rel := (res.Objective - central.Objective) / central.Objective
			t.Logf("d=%d K=%d rounds=%d requests=%d bytes=%d F=%.12g central %.12g rel %.1e %s",
				g.D, k, st.Rounds, st.Requests, st.RequestBytes, res.Objective, central.Objective, rel, res.Status)
			if rel > 1e-6 || rel < -1e-6 {
				t.Errorf("d=%d K=%d: F %.12g, central %.12g", g.D, k, res.Objective, central.Objective)
			}
			if !res.Certified || res.Status != central.Status {
				t.Errorf("d=%d K=%d: status %q, central %q", g.D, k, res.Status, central.Status)
			}
		}
	}
}
