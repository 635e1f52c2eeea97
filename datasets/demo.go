package datasets

import (
	"bytes"
	_ "embed" // for the demo graph
	"fmt"

	"github.com/bcmsync/bcmsync/g2o"
	"github.com/bcmsync/bcmsync/posegraph"
)

//go:generate go test -run TestDemoFile -update .

// demoG2O is demo.g2o, written by demoGraph and g2o.Write; TestDemoFile
// checks that it is still exactly what they produce.
//
//go:embed demo.g2o
var demoG2O []byte

// DemoName is the name Demo gives the graph's source, for messages.
const DemoName = "demo.g2o"

// demoGraph generates the demo: a 2-D Manhattan world of 250 poses in a
// 10 x 10 square, with half the revisits closed and moderate noise (angle
// standard deviation 1/sqrt(1000) ~ 1.8 degrees per step, translation
// 0.05 per axis on unit steps), so dead reckoning drifts visibly and the
// solver certifies the optimum at rank 2 in a fraction of a second.
func demoGraph() (*posegraph.Graph, []posegraph.Pose, error) {
	return Manhattan(250, 10, Config{Kappa: 500, Tau: 400, LoopProb: 0.5, Seed: 3})
}

// Demo returns the embedded demo graph: 250 poses, 394 edges, 2-D, with
// the dead-reckoning estimate as its initial poses (the file's VERTEX
// lines). Each call parses a fresh copy.
func Demo() (*posegraph.Graph, error) {
	g, err := g2o.Read(bytes.NewReader(demoG2O), DemoName, g2o.ReadOptions{})
	if err != nil {
		return nil, fmt.Errorf("datasets: embedded demo: %w", err)
	}
	return g, nil
}

// DemoTruth returns the ground-truth poses of the demo graph, indexed like
// Demo's poses, in the same frame as its initial estimate (the first pose
// is the same in both).
func DemoTruth() ([]posegraph.Pose, error) {
	_, truth, err := demoGraph()
	return truth, err
}
