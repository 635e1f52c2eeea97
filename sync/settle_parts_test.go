package sync

import (
	"context"
	"encoding/json"
	"math"
	"testing"

	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/posegraph"
	"github.com/bcmsync/bcmsync/posegraph/blockmat"
)

// When settle proves the estimate itself by parts (the relaxation's bound
// missed the allowance), the proof estimates no lambda_min(S): the result
// keeps a number, and its report encodes (a NaN made json.Marshal fail, so
// a certified distributed run wrote no report; review of issue 30).
func TestSettleByPartsReportEncodes(t *testing.T) {
	g, _, err := datasets.Manhattan(120, 8, datasets.Config{Kappa: 50, Tau: 5, LoopProb: 0.3, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	opts := DefaultOptions()
	res, err := Solve(context.Background(), g, opts)
	if err != nil || res.Status != Certified {
		t.Fatal(err, res.Status)
	}
	d := g.D
	q := g.Laplacian(posegraph.Poses)
	o := res.Options
	ref := newCertifier(q, d, o.GapTol, o.GapAbs, o.EigTol, nil, o.Seed)
	ref.ddPart = runsPartition(q.N, 3)
	if err := ref.analyze(); err != nil {
		t.Fatal(err)
	}
	lp := newLocalParts(t, q, ref.ddPart, ref.anchor)
	c := newCertifier(q, d, o.GapTol, o.GapAbs, o.EigTol, nil, o.Seed)
	c.usePartsProver(lp)
	r2 := *res
	r2.Rank = d
	r2.DualBound = res.Objective - 10*res.GapAllowed // the relaxation's bound misses the allowance
	if err := settle(&r2, nil, g, c, o, Certified, "", true, false); err != nil {
		t.Fatal(err)
	}
	if r2.Status != Certified {
		t.Errorf("status %s, bound %v: the estimate's proof by parts should certify it", r2.Status, r2.DualBound)
	}
	if math.IsNaN(r2.MinEigenvalue) {
		t.Errorf("MinEigenvalue NaN after settle's check by parts")
	}
	if _, err := json.Marshal(NewReport("x.g2o", &r2)); err != nil {
		t.Errorf("report: %v", err)
	}
}

// inflatedParts is a prover whose parts overstate tr(Lambda), which would
// raise the bound by as much.
type inflatedParts struct{ *localParts }

func (p inflatedParts) ProveLambda(x *blockmat.Blocks) (float64, error) {
	tr, err := p.localParts.ProveLambda(x)
	return tr + 1, err
}

// A misreported tr(Lambda) does not reach the bound: the test is made on
// the point itself, as when a part cannot answer.
func TestPartsTraceChecked(t *testing.T) {
	g, _, err := datasets.Manhattan(120, 8, datasets.Config{Kappa: 50, Tau: 5, LoopProb: 0.3, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Solve(context.Background(), g, DefaultOptions())
	if err != nil || res.Status != Certified {
		t.Fatal(err, res.Status)
	}
	d, o := g.D, res.Options
	q := g.Laplacian(posegraph.Poses)
	ref := newCertifier(q, d, o.GapTol, o.GapAbs, o.EigTol, nil, o.Seed)
	ref.ddPart = runsPartition(q.N, 3)
	if err := ref.analyze(); err != nil {
		t.Fatal(err)
	}
	x := g.Lift(centered(res.Poses, d), posegraph.Poses, d)
	m := newManifold(q, d, d, 1)
	for _, inflate := range []bool{false, true} {
		var p PartsProver = newLocalParts(t, q, ref.ddPart, ref.anchor)
		if inflate {
			p = inflatedParts{p.(*localParts)}
		}
		c := newCertifier(q, d, o.GapTol, o.GapAbs, o.EigTol, nil, o.Seed)
		c.usePartsProver(p)
		cert, err := c.check(m, x)
		if err != nil {
			t.Fatal(err)
		}
		byParts := cert.method == MethodCholeskyParts
		if byParts == inflate || !cert.psd {
			t.Errorf("inflated %v: method %s, psd %v", inflate, cert.method, cert.psd)
		}
		if math.Abs(cert.trLambda-res.Objective) > 1e-6*res.Objective {
			t.Errorf("inflated %v: tr(Lambda) %.12g, F %.12g", inflate, cert.trLambda, res.Objective)
		}
	}
}
