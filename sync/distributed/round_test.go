package distributed

import (
	"context"
	"testing"
)

// serveAgents starts k agents on bus, each made by build before it
// serves (as RunAgent does), and returns them, so that a test can look at
// their state after a run (SolveOn keeps them to itself).
func serveAgents(t *testing.T, bus Bus, k int, build func(k int) (*agent, error)) []*agent {
	t.Helper()
	agents := make([]*agent, k)
	for q := range agents {
		a, err := build(q)
		if err != nil {
			t.Fatal(err)
		}
		stop, err := bus.Serve(agentSubject(a.opts.Subject, q), a.onCommand)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stop)
		agents[q] = a
	}
	return agents
}

// The rounding by parts lets go of the certificate's rows and interior
// factor (PartCertifier.Release): at the end of a run they sat under the
// rounding's own translation factor, an agent's last peak. After a
// certified run rounded by parts, every agent's certificate holds no
// rows, and the run is certified at the central optimum (the next test
// would make them again, bit for bit: TestPartCertifierRelease). (The
// rounding lets go of the steps' factor too, which matters only where it
// follows updates without a test between; this run's test let it go
// already, so that is not checked here.)
func TestRoundingReleasesCertificate(t *testing.T) {
	g, central, p := lattice(t, 200, 10, 13, 4)
	bus := NewMemBus()
	opts := Options{}
	opts.defaults()
	agents := serveAgents(t, bus, p.K, func(k int) (*agent, error) {
		ao := AgentOptions{Problem: opts.Sync.Problem, Subject: opts.Subject, Overlap: opts.Overlap}
		ao.defaults()
		return newAgent(bus, g, p, k, ao)
	})
	res, st, err := Solve(context.Background(), bus, g, p, opts)
	if err != nil || !res.Certified {
		t.Fatalf("%v", err)
	}
	if st.Certificate != "parts" || st.ProofFactorizations == 0 || st.Roundings == 0 {
		t.Fatalf("certificate %q, %d factorizations, %d roundings by parts: nothing to release", st.Certificate, st.ProofFactorizations, st.Roundings)
	}
	if d := res.Objective - central.Objective; d > 1e-7*central.Objective || d < -1e-7*central.Objective {
		t.Errorf("F %.12g, central %.12g", res.Objective, central.Objective)
	}
	for k, a := range agents {
		a.mu.Lock()
		pc, trans := a.proof, a.round.trans
		a.mu.Unlock()
		if pc == nil || trans == nil {
			t.Fatalf("agent %d took no part in the certificate or the rounding", k)
		}
		if stored, dense := pc.WSize(); stored != 0 || dense != 0 {
			t.Errorf("agent %d: the certificate's rows held after the rounding (W of %d values, %d dense)", k, stored, dense)
		}
	}
}
