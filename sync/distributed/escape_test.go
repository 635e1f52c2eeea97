package distributed

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/bcmsync/bcmsync/posegraph"
	bsync "github.com/bcmsync/bcmsync/sync"
)

// TestEscapeByParts: on the noisy rotation graph of TestDistributedStaircase
// (the central solver climbs to rank 4) the agents find the saddle's
// eigenvector by inverse iteration through their factors and take the
// escape themselves (Stats.Escapes), and the run is the one the
// coordinator's central test and escape of the gathered point make
// (Options.Central): the same first saddle's eigenvalue to the central
// eigensolver's tolerance, the same escape decrease and next level's F
// to its accuracy, the same ranks, the same certified optimum.
func TestEscapeByParts(t *testing.T) {
	g := climbingGraph(t)
	var err error
	kind := posegraph.Rotations
	for _, k := range []int{2, 4} {
		p, _ := BFS(g, k)
		var res [2]*bsync.Result
		var st [2]*Stats
		for v, central := range []bool{true, false} {
			opts := Options{Sync: bsync.Options{Problem: kind}, Timeout: 20 * time.Second, Central: central}
			res[v], st[v], err = SolveOn(context.Background(), NewMemBus(), g, p, opts, AgentOptions{})
			if err != nil {
				t.Fatal(err)
			}
		}
		c, d := res[0], res[1]
		t.Logf("K=%d: by parts %s rank %d F %.12g, %d escapes by parts (%d factorizations, %d bytes); central %s rank %d F %.12g",
			k, d.Status, d.Rank, d.Objective, st[1].Escapes, st[1].EscapeFactorizations, st[1].EscapeBytes, c.Status, c.Rank, c.Objective)
		if !d.Certified || !c.Certified || math.Abs(d.Objective-c.Objective) > 1e-9*c.Objective || d.Rank != c.Rank {
			t.Fatalf("K=%d: by parts %s rank %d F %.12g, central %s rank %d F %.12g", k, d.Status, d.Rank, d.Objective, c.Status, c.Rank, c.Objective)
		}
		if len(d.Levels) < 2 || st[1].Escapes != len(d.Levels)-1 || st[0].Escapes != 0 || st[1].EscapeFactorizations == 0 {
			t.Fatalf("K=%d: %d levels, %d escapes by parts (%d with Central)", k, len(d.Levels), st[1].Escapes, st[0].Escapes)
		}
		for l := range d.Levels[:len(d.Levels)-1] {
			lc, ld := c.Levels[l], d.Levels[l]
			t.Logf("K=%d level %d (rank %d): min eig %.12g by parts (%s), %.12g central (%s); escape %.12g, %.12g; F %.12g, %.12g",
				k, l, ld.Rank, ld.MinEigenvalue, ld.EigMethod, lc.MinEigenvalue, lc.EigMethod, ld.EscapeDecrease, lc.EscapeDecrease, ld.F, lc.F)
			if ld.EigMethod != bsync.MethodEigParts || ld.EscapeDecrease <= 0 {
				t.Errorf("K=%d level %d: method %s, escape decrease %g", k, l, ld.EigMethod, ld.EscapeDecrease)
			}
		}
		// The first level's point is the same in both runs (the same
		// rounds; F is summed from the agents' replies in the order they
		// come, so to rounding): the same saddle, the same escape, the
		// same next F.
		lc, ld := c.Levels[0], d.Levels[0]
		if math.Abs(ld.F-lc.F) > 1e-12*lc.F || math.Abs(ld.MinEigenvalue-lc.MinEigenvalue) > 1e-6*math.Abs(lc.MinEigenvalue) ||
			math.Abs(ld.EscapeDecrease-lc.EscapeDecrease) > 1e-6*lc.F {
			t.Errorf("K=%d: first saddle F %.15g min eig %.12g escape %.12g by parts, F %.15g %.12g %.12g central",
				k, ld.F, ld.MinEigenvalue, ld.EscapeDecrease, lc.F, lc.MinEigenvalue, lc.EscapeDecrease)
		}
		if n1, c1 := d.Levels[1], c.Levels[1]; math.Abs(n1.F-c1.F) > 1e-6*c1.F {
			t.Errorf("K=%d: the next level's F %.12g by parts, %.12g central", k, n1.F, c1.F)
		}
	}
}

// twiceBus delivers every request to one subject (every subject when
// empty) twice and returns the second reply, as when a coordinator resends
// a command whose reply was lost: that agent has run it once already, the
// others once.
type twiceBus struct {
	Bus
	subject string
}

func (b twiceBus) Request(ctx context.Context, subject string, data []byte) ([]byte, error) {
	if b.subject != "" && subject != b.subject {
		return b.Bus.Request(ctx, subject, data)
	}
	if _, err := b.Bus.Request(ctx, subject, data); err != nil {
		return nil, err
	}
	return b.Bus.Request(ctx, subject, data)
}

// TestEscapeByPartsResent: every command to one agent, or to all, of a
// run by parts resent after the agents ran it leaves the run as it was:
// the escape's scalings set a multiple of the iteration's vector instead
// of scaling it again, a resent commit answers with the step it took, and
// the rounding's reduce finishes the projected poses afresh. Before, a
// second scaling on one agent made the parts' vector no vector at all (a
// wrong eigenvalue), a second commit failed ("escape at rank 2, agent at
// 3") and fell back to the gathered point, and a second reduce reflected
// the poses back (the rounding then ended 3 times above the optimum).
func TestEscapeByPartsResent(t *testing.T) {
	g := climbingGraph(t)
	p, _ := BFS(g, 2)
	opts := Options{Sync: bsync.Options{Problem: posegraph.Rotations}, Timeout: 20 * time.Second}
	want, wst, err := SolveOn(context.Background(), NewMemBus(), g, p, opts, AgentOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, subject := range []string{agentSubject("bcmsync", 0), ""} {
		got, st, err := SolveOn(context.Background(), twiceBus{NewMemBus(), subject}, g, p, opts, AgentOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !got.Certified || got.Rank != want.Rank || math.Abs(got.Objective-want.Objective) > 1e-9*want.Objective {
			t.Fatalf("resent to %q: %s rank %d F %.12g; once: %s rank %d F %.12g", subject, got.Status, got.Rank, got.Objective, want.Status, want.Rank, want.Objective)
		}
		if st.Escapes != wst.Escapes || st.Escapes != len(got.Levels)-1 {
			t.Fatalf("resent to %q: %d escapes by parts over %d levels; once: %d", subject, st.Escapes, len(got.Levels), wst.Escapes)
		}
		for l := range got.Levels[:len(got.Levels)-1] {
			lg, lw := got.Levels[l], want.Levels[l]
			if lg.EigMethod != bsync.MethodEigParts || math.Abs(lg.MinEigenvalue-lw.MinEigenvalue) > 1e-6*math.Abs(lw.MinEigenvalue) {
				t.Errorf("resent to %q, level %d: %s min eig %.12g, once %s %.12g", subject, l, lg.EigMethod, lg.MinEigenvalue, lw.EigMethod, lw.MinEigenvalue)
			}
		}
	}
}
