package distributed

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bcmsync/bcmsync/datasets"
	bsync "github.com/bcmsync/bcmsync/sync"
)

// benchSide is the side of the lattice of BenchmarkDistributedGrid: 22
// gives 10^4 poses (the default), 46 about 10^5:
//
//	go test ./sync/distributed -run '^$' -bench DistributedGrid -benchtime 1x -bcmsync.dist.side 46
var benchSide = flag.Int("bcmsync.dist.side", 22, "lattice side of BenchmarkDistributedGrid (46: 10^5 poses)")

// benchAgents lists the numbers of agents of BenchmarkDistributedGrid.
var benchAgents = flag.String("bcmsync.dist.k", "1,2,4,8", "comma-separated numbers of agents of BenchmarkDistributedGrid")

// benchSplit is the partition of BenchmarkDistributedGrid: spectral (the
// command's default) or bfs.
var benchSplit = flag.String("bcmsync.dist.split", "spectral", "partition of BenchmarkDistributedGrid: spectral or bfs")

// benchOverlap is the agents' overlap in BenchmarkDistributedGrid
// (Options.Overlap: 0 the default, -1 none).
var benchOverlap = flag.Int("bcmsync.dist.overlap", 0, "overlap of BenchmarkDistributedGrid in hops (0: the default, -1: none)")

// benchKey authenticates BenchmarkDistributedGrid's messages (Options.Key).
var benchKey = flag.Bool("bcmsync.dist.key", false, "authenticate the messages of BenchmarkDistributedGrid (HMAC-SHA256)")

// BenchmarkDistributedGrid solves the 3-D lattice of the scaling benchmark
// (datasets.Cube, loop closures 0.05, kappa 200, tau 100) centrally and
// with K = 1, 2, 4, 8 agents over an in-process bus, to a certificate. Per
// solve it reports the rounds, the messages and payload bytes of the whole
// run and per round (the coordinator's requests and replies and the
// agents' pose publications, as sent; a NATS server adds its protocol
// framing and fans each publication out to the subscribed neighbours),
// and, for the central solve, its time alone. Wall time is ns/op.
func BenchmarkDistributedGrid(b *testing.B) {
	cfg := datasets.Config{Kappa: 200, Tau: 100, LoopProb: 0.05, Seed: 1}
	side := *benchSide
	g, _, err := datasets.Cube(side, side, side, cfg)
	if err != nil {
		b.Fatal(err)
	}
	var fStar float64
	b.Run(fmt.Sprintf("n=%d/central", g.N()), func(b *testing.B) {
		for b.Loop() {
			res, err := bsync.Solve(context.Background(), g, bsync.Options{})
			if err != nil {
				b.Fatal(err)
			}
			if !res.Certified {
				b.Fatalf("central: %s", res.Status)
			}
			fStar = res.Objective
		}
	})
	var ks []int
	for _, f := range strings.Split(*benchAgents, ",") {
		k, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || k < 1 {
			b.Fatalf("-bcmsync.dist.k: %q is not a number of agents", f)
		}
		ks = append(ks, k)
	}
	for _, k := range ks {
		p, err := Spectral(g, k)
		if *benchSplit == "bfs" {
			p, err = BFS(g, k)
		}
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("n=%d/K=%d", g.N(), k), func(b *testing.B) {
			var st *Stats
			var bus *Counter
			for b.Loop() {
				bus = &Counter{Bus: NewMemBus()}
				opts := Options{Timeout: time.Minute, Overlap: *benchOverlap}
				if *benchKey {
					opts.Key = testKey
				}
				res, s, err := SolveOn(context.Background(), bus, g, p, opts, AgentOptions{})
				if err != nil {
					b.Fatal(err)
				}
				if !res.Certified {
					b.Fatalf("K=%d: %s", k, res.Status)
				}
				if fStar != 0 && (res.Objective-fStar) > 1e-6*fStar {
					b.Fatalf("K=%d: F %.12g, central %.12g", k, res.Objective, fStar)
				}
				st = s
			}
			rounds := float64(max(st.Rounds, 1))
			b.ReportMetric(float64(st.Rounds), "rounds")
			b.ReportMetric(float64(bus.Messages.Load()), "msgs")
			b.ReportMetric(float64(bus.Bytes.Load()), "bytes")
			b.ReportMetric(float64(bus.Messages.Load())/rounds, "msgs/round")
			b.ReportMetric(float64(bus.Bytes.Load())/rounds, "bytes/round")
			b.ReportMetric(float64(st.ProofBytes), "cert-bytes")
			b.ReportMetric(float64(st.ProofBoundaryPoses), "cert-boundary")
			b.ReportMetric(float64(st.RoundingBytes), "round-bytes")
		})
	}
}
