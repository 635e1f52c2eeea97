package datasets

import (
	"bytes"
	"flag"
	"math"
	"os"
	"testing"

	"github.com/bcmsync/bcmsync/g2o"
	"github.com/bcmsync/bcmsync/posegraph"
)

var update = flag.Bool("update", false, "rewrite demo.g2o and the landmark examples in testdata from the generators")

// TestDemoFile regenerates the demo graph and checks that the committed
// demo.g2o is exactly what the generator and g2o.Write produce (go
// generate, or go test -run TestDemoFile -update, rewrites it). The
// comparison is byte for byte: the generator is seeded and deterministic.
// (A platform whose compiler fuses multiply-adds, such as arm64, may round
// the last digit of a few numbers differently; rewrite the file only on
// amd64.)
func TestDemoFile(t *testing.T) {
	g, _, err := demoGraph()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := g2o.Write(&buf, g, nil); err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("demo.g2o", buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !bytes.Equal(buf.Bytes(), demoG2O) {
		got, want := bytes.Split(buf.Bytes(), []byte("\n")), bytes.Split(demoG2O, []byte("\n"))
		for k := 0; k < len(got) && k < len(want); k++ {
			if !bytes.Equal(got[k], want[k]) {
				t.Fatalf("demo.g2o:%d differs from the generator:\n file: %s\n  gen: %s\n(go generate ./datasets rewrites it)", k+1, want[k], got[k])
			}
		}
		t.Fatalf("demo.g2o has %d lines, the generator %d (go generate ./datasets rewrites it)", len(want), len(got))
	}
}

func TestDemo(t *testing.T) {
	g, err := Demo()
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Validate(); err != nil {
		t.Fatal(err)
	}
	if g.D != 2 || g.N() != 250 || g.M() != 394 || g.Source != DemoName {
		t.Fatalf("demo: d=%d n=%d m=%d source %q", g.D, g.N(), g.M(), g.Source)
	}
	gen, truth, err := demoGraph()
	if err != nil {
		t.Fatal(err)
	}
	// The parsed graph is the generated one, up to the angle round trip of
	// the 2-D format.
	for k, e := range g.Edges {
		f := gen.Edges[k]
		if e.I != f.I || e.J != f.J || e.Kappa != f.Kappa || e.Tau != f.Tau {
			t.Fatalf("edge %d: (%d, %d, %g, %g), generated (%d, %d, %g, %g)", k, e.I, e.J, e.Kappa, e.Tau, f.I, f.J, f.Kappa, f.Tau)
		}
		for a := 0; a < 4; a++ {
			if math.Abs(e.R[a]-f.R[a]) > 1e-15 {
				t.Fatalf("edge %d: rotation %v, generated %v", k, e.R[:4], f.R[:4])
			}
		}
		if e.T != f.T {
			t.Fatalf("edge %d: translation %v, generated %v", k, e.T, f.T)
		}
	}
	for i := range g.Initial {
		if !g.HasInitial[i] || math.Abs(g.Initial[i].T[0]-gen.Initial[i].T[0]) > 1e-12 {
			t.Fatalf("pose %d: initial %v, generated %v", i, g.Initial[i], gen.Initial[i])
		}
	}
	// The noise is what the weights say: F(truth) near its expectation.
	mean, v := ExpectedCost(g, posegraph.Poses)
	if f := g.Cost(truth, posegraph.Poses); math.Abs(f-mean) > 4*math.Sqrt(v) {
		t.Errorf("F(truth) = %g, expected %g +- %g", f, mean, math.Sqrt(v))
	}
	dt, err := DemoTruth()
	if err != nil || len(dt) != g.N() || math.Abs(dt[0].R[0]-g.Initial[0].R[0]) > 1e-15 || dt[0].T != g.Initial[0].T {
		t.Errorf("DemoTruth: %d poses, first %v, initial %v, %v", len(dt), dt[0], g.Initial[0], err)
	}
	// Fresh copies: changing one does not change the next.
	g.Edges[0].Kappa = -1
	if h, _ := Demo(); h.Edges[0].Kappa <= 0 {
		t.Error("Demo returned shared state")
	}
}
