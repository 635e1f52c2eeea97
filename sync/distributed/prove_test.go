package distributed

import (
	"context"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/g2o"
	bsync "github.com/bcmsync/bcmsync/sync"
)

// TestCertificateAndRoundingByParts: with 4 agents on intel and
// sphere2500 the agents and the coordinator certify and round by parts
// (each agent its Schur complements, its projections and votes, the
// coordinator the boundary systems and U_d), and the result is the one
// the coordinator's central test and rounding of the gathered point give
// (Options.Central): the same status, the same estimate to 1e-9, and the
// same bound to rounding (the two anchors differ, so the shift's cost may
// differ within the allowance).
func TestCertificateAndRoundingByParts(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	dir := datasets.SuiteOrSkip(t)
	for _, name := range []string{"intel.g2o", "sphere2500.g2o"} {
		g, err := g2o.ReadFile(filepath.Join(dir, name), g2o.ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p, err := Contiguous(g.N(), 4)
		if err != nil {
			t.Fatal(err)
		}
		var res [2]*bsync.Result
		var st [2]*Stats
		for v, central := range []bool{true, false} {
			opts := Options{Timeout: 20 * time.Second, Central: central}
			res[v], st[v], err = SolveOn(context.Background(), NewMemBus(), g, p, opts, AgentOptions{})
			if err != nil {
				t.Fatal(err)
			}
		}
		c, d := res[0], res[1]
		last := d.Levels[len(d.Levels)-1]
		t.Logf("%s: by parts %s (%s, %d boundary poses, %d factorizations, %d proof bytes of %d), bound %.12g; central %s (%s), bound %.12g",
			name, d.Status, last.EigMethod, st[1].ProofBoundaryPoses, st[1].ProofFactorizations, st[1].ProofBytes, st[1].RequestBytes,
			d.DualBound, c.Status, c.Levels[len(c.Levels)-1].EigMethod, c.DualBound)
		if st[1].Certificate != "parts" || st[0].Certificate != "central" || st[1].ProofFallbacks != 0 {
			t.Errorf("%s: certificates %q and %q, %d fallbacks", name, st[0].Certificate, st[1].Certificate, st[1].ProofFallbacks)
		}
		if d.Status != bsync.Certified || c.Status != bsync.Certified || last.EigMethod != bsync.MethodCholeskyParts {
			t.Fatalf("%s: by parts %s (%s), central %s", name, d.Status, last.EigMethod, c.Status)
		}
		if st[1].ProofBoundaryPoses == 0 || st[1].ProofBoundaryPoses > st[1].BoundaryPoses || st[1].ProofBytes == 0 {
			t.Errorf("%s: boundary system of %d poses (partition boundary %d), %d bytes", name, st[1].ProofBoundaryPoses, st[1].BoundaryPoses, st[1].ProofBytes)
		}
		if st[1].Roundings == 0 || st[0].Roundings != 0 {
			t.Errorf("%s: %d roundings by parts, %d with Central", name, st[1].Roundings, st[0].Roundings)
		}
		worst := 0.0
		for i := range d.Poses {
			for k := 0; k < 9; k++ {
				worst = math.Max(worst, math.Abs(d.Poses[i].R[k]-c.Poses[i].R[k]))
			}
			for k := 0; k < 3; k++ {
				worst = math.Max(worst, math.Abs(d.Poses[i].T[k]-c.Poses[i].T[k])/(1+math.Abs(c.Poses[i].T[k])))
			}
		}
		t.Logf("%s: estimate by parts within %.2e of the central rounding; %d roundings, %d bytes", name, worst, st[1].Roundings, st[1].RoundingBytes)
		if worst > 1e-9 {
			t.Errorf("%s: the estimate by parts differs from the central one by %.2e", name, worst)
		}
		if math.Abs(d.Objective-c.Objective) > 1e-9*c.Objective ||
			math.Abs(d.DualBound-c.DualBound) > d.GapAllowed || d.Objective-d.DualBound > d.GapAllowed {
			t.Errorf("%s: F %.12g bound %.12g by parts, F %.12g bound %.12g central, allowed %.3g", name, d.Objective, d.DualBound, c.Objective, c.DualBound, d.GapAllowed)
		}
	}
}

// refusing is a bus on which agent 1 never receives the certificate's
// commands from op first on: as if it were gone just for them.
type refusing struct {
	Bus
	first uint8
}

func (b refusing) Request(ctx context.Context, subject string, data []byte) ([]byte, error) {
	if m, err := decode(data); err == nil && subject == agentSubject("bcmsync", 1) && m.Op >= b.first && m.Op <= opProveFactor {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return b.Bus.Request(ctx, subject, data)
}

// A certificate the agents cannot make (agent 1 does not answer its
// commands) is made on the gathered point in the agents' order, counted as
// a fallback: the run still certifies the central optimum; or, when the
// set-up itself fails, the coordinator certifies centrally from the start.
func TestCertificateByPartsFallsBack(t *testing.T) {
	for _, first := range []uint8{opProveSetup, opProveLambda} {
		certificateFallback(t, first)
	}
}

// solveRefusing solves the 200-pose test lattice with 4 agents on the bus
// wrap makes of an in-memory one, and returns the run and the central
// solve's result.
func solveRefusing(t *testing.T, wrap func(Bus) Bus) (*bsync.Result, *Stats, *bsync.Result) {
	t.Helper()
	g, central, p := lattice(t, 200, 10, 13, 4)
	bus := wrap(NewMemBus())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for k := 0; k < p.K; k++ {
		go RunAgent(ctx, bus, g, p, k, AgentOptions{})
	}
	res, st, err := Solve(ctx, bus, g, p, Options{Timeout: time.Second, Try: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return res, st, central
}

func certificateFallback(t *testing.T, first uint8) {
	res, st, central := solveRefusing(t, func(b Bus) Bus { return refusing{b, first} })
	last := res.Levels[len(res.Levels)-1]
	t.Logf("%s, F %.12g (central %.12g), certificate %q by %s, %d fallbacks, %d roundings by parts",
		res.Status, res.Objective, central.Objective, st.Certificate, last.EigMethod, st.ProofFallbacks, st.Roundings)
	if !res.Certified || math.Abs(res.Objective-central.Objective) > 1e-6*central.Objective {
		t.Errorf("%s with F %.12g, central %.12g", res.Status, res.Objective, central.Objective)
	}
	if first == opProveSetup && (st.Certificate != "central" || last.EigMethod != "cholesky" || st.Roundings == 0) {
		t.Errorf("certificate %q by %s, %d roundings by parts: want the central test after a failed set-up, the rounding by parts", st.Certificate, last.EigMethod, st.Roundings)
	}
	if first == opProveLambda && (st.Certificate != "parts" || last.EigMethod != bsync.MethodCholeskyDD || st.ProofFallbacks == 0) {
		t.Errorf("certificate %q by %s, %d fallbacks: want the gathered point's test in the agents' order", st.Certificate, last.EigMethod, st.ProofFallbacks)
	}
}

// refusingRound is a bus on which agent 1 does not answer the rounding's
// Gram command.
type refusingRound struct{ Bus }

func (b refusingRound) Request(ctx context.Context, subject string, data []byte) ([]byte, error) {
	if m, err := decode(data); err == nil && subject == agentSubject("bcmsync", 1) && m.Op == opRoundGram {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return b.Bus.Request(ctx, subject, data)
}

// A rounding the agents cannot make (agent 1 does not answer) is made by
// the staircase on the gathered point, with the analysis of Q it makes
// only then (the coordinator certifies and rounds by parts, so it makes
// none on the common path): the run still certifies the central optimum,
// with no rounding by parts counted.
func TestRoundingByPartsFallsBack(t *testing.T) {
	res, st, central := solveRefusing(t, func(b Bus) Bus { return refusingRound{b} })
	t.Logf("%s, F %.12g (central %.12g), certificate %q, %d roundings by parts", res.Status, res.Objective, central.Objective, st.Certificate, st.Roundings)
	if !res.Certified || math.Abs(res.Objective-central.Objective) > 1e-6*central.Objective {
		t.Errorf("%s with F %.12g, central %.12g", res.Status, res.Objective, central.Objective)
	}
	if st.Certificate != "parts" || st.Roundings != 0 {
		t.Errorf("certificate %q, %d roundings by parts: want the certificate by parts and the gathered rounding", st.Certificate, st.Roundings)
	}
}
