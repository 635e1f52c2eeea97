package distributed

import (
	"context"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/posegraph"
	bsync "github.com/bcmsync/bcmsync/sync"
)

// compare solves g centrally and distributed over k parts and checks the
// distributed answer against the central one.
func compare(t *testing.T, g *posegraph.Graph, p *Partition, kind posegraph.Problem) (*bsync.Result, *Stats) {
	t.Helper()
	ctx := context.Background()
	central, err := bsync.Solve(ctx, g, bsync.Options{Problem: kind})
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Sync: bsync.Options{Problem: kind}, Timeout: 20 * time.Second}
	res, st, err := SolveOn(ctx, NewMemBus(), g, p, opts, AgentOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rel := math.Abs(res.Objective-central.Objective) / math.Abs(central.Objective)
	t.Logf("K=%d colours=%d rounds=%d F=%.12g central %.12g rel %.2e status %q (central %q) levels %d requests %d bytes %d",
		p.K, st.Colors, st.Rounds, res.Objective, central.Objective, rel, res.Status, central.Status, len(res.Levels), st.Requests, st.RequestBytes)
	if rel > 1e-6 {
		t.Errorf("objective %.12g, central %.12g: relative difference %.2e > 1e-6", res.Objective, central.Objective, rel)
	}
	if res.Status != central.Status || !res.Certified {
		t.Errorf("status %q, central %q", res.Status, central.Status)
	}
	return res, st
}

func TestSyntheticParts(t *testing.T) {
	cfg := datasets.Config{Kappa: 100, Tau: 10, LoopProb: 0.3, Seed: 3}
	g2, _, err := datasets.Manhattan(400, 20, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []int{1, 2, 4, 8} {
		p, err := BFS(g2, k)
		if err != nil {
			t.Fatal(err)
		}
		compare(t, g2, p, posegraph.Poses)
	}
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
