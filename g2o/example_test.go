package g2o_test

import (
	"fmt"
	"log"
	"os"
	"strings"

	"github.com/bcmsync/bcmsync/g2o"
)

// A small 2-D graph: ids 10, 20 and 35 (ids need not be contiguous).
const triangle = `# three poses, one loop closure
VERTEX_SE2 10 0 0 0
VERTEX_SE2 20 1 0 1.5707963
VERTEX_SE2 35 1 1 3.1415926
FIX 10
EDGE_SE2 10 20 1 0 1.5707963 100 0 0 100 0 400
EDGE_SE2 20 35 1 0 1.5707963 100 0 0 100 0 400
EDGE_SE2 35 10 1.4142136 0 2.3561945 50 0 0 50 0 200   # closes the loop
`

func ExampleRead() {
	g, err := g2o.Read(strings.NewReader(triangle), "triangle.g2o", g2o.ReadOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("d, n, m:", g.D, g.N(), g.M())
	fmt.Println("ids:", g.IDs, "fixed:", g.Fixed, "estimates:", g.HasInitial)
	for _, e := range g.Edges {
		fmt.Printf("line %d: pose %d -> %d, kappa %g, tau %g\n", e.Line, e.I, e.J, e.Kappa, e.Tau)
	}
	// Output:
	// d, n, m: 2 3 3
	// ids: [10 20 35] fixed: [0] estimates: [true true true]
	// line 6: pose 0 -> 1, kappa 400, tau 100
	// line 7: pose 1 -> 2, kappa 400, tau 100
	// line 8: pose 2 -> 0, kappa 200, tau 50
}

// A file that declares vertices must declare every vertex its edges name:
// otherwise a pose would be invented for the missing one.
func ExampleRead_undeclaredVertex() {
	src := "VERTEX_SE2 0 0 0 0\nVERTEX_SE2 1 1 0 0\n" +
		"EDGE_SE2 0 1 1 0 0 1 0 0 1 0 1\n" +
		"EDGE_SE2 1 2 1 0 0 1 0 0 1 0 1\n"
	_, err := g2o.Read(strings.NewReader(src), "typo.g2o", g2o.ReadOptions{})
	fmt.Println(err)
	// Output:
	// typo.g2o:4: edge 1 -> 2 names vertex 2, which no VERTEX line declares (a file with VERTEX lines must declare every vertex its edges name)
}

func ExampleRead_error() {
	_, err := g2o.Read(strings.NewReader("VERTEX_SE2 0 0 0 0\nEDGE_SE2 0 1 1 0 0 1 0 0 -1 0 1\n"), "bad.g2o", g2o.ReadOptions{})
	fmt.Println(err)
	// Output:
	// bad.g2o:2: EDGE_SE2: information matrix is not positive definite in its translation block (Cholesky pivot 2 is -1)
}

func ExampleWrite() {
	g, err := g2o.Read(strings.NewReader(triangle), "triangle.g2o", g2o.ReadOptions{})
	if err != nil {
		log.Fatal(err)
	}
	// With nil poses Write uses the file's estimates.
	if err := g2o.Write(os.Stdout, g, nil); err != nil {
		log.Fatal(err)
	}
	// Output:
	// VERTEX_SE2 10 0 0 0
	// VERTEX_SE2 20 1 0 1.5707963
	// VERTEX_SE2 35 1 1 3.1415926
	// FIX 10
	// EDGE_SE2 10 20 1 0 1.5707963 100 0 0 100 0 400
	// EDGE_SE2 20 35 1 0 1.5707963 100 0 0 100 0 400
	// EDGE_SE2 35 10 1.4142136 0 2.3561945 50 0 0 50 0 200
}

func ExampleWriteTUM() {
	g, err := g2o.Read(strings.NewReader(triangle), "triangle.g2o", g2o.ReadOptions{})
	if err != nil {
		log.Fatal(err)
	}
	var sb strings.Builder
	if err := g2o.WriteTUM(&sb, g, nil); err != nil {
		log.Fatal(err)
	}
	// Print rounded, as the last digits of the quaternion are noise.
	for _, line := range strings.Split(strings.TrimSpace(sb.String()), "\n") {
		var id, x, y, z, qx, qy, qz, qw float64
		fmt.Sscan(line, &id, &x, &y, &z, &qx, &qy, &qz, &qw)
		fmt.Printf("%g %.3f %.3f %.3f %.4f %.4f %.4f %.4f\n", id, x, y, z, qx, qy, qz, qw)
	}
	// Output:
	// 10 0.000 0.000 0.000 0.0000 0.0000 0.0000 1.0000
	// 20 1.000 0.000 0.000 0.0000 0.0000 0.7071 0.7071
	// 35 1.000 1.000 0.000 0.0000 0.0000 1.0000 0.0000
}

func ExampleReadTUM() {
	// A trajectory as WriteTUM writes it: the vertex id as the time stamp.
	const tum = `# timestamp tx ty tz qx qy qz qw
10 0 0 0 0 0 0 1
20 1 0 0 0 0 0.7071067811865476 0.7071067811865476
`
	tr, err := g2o.ReadTUM(strings.NewReader(tum), "path.tum")
	if err != nil {
		log.Fatal(err)
	}
	// Planar, so it can be compared with a 2-D graph's poses.
	flat, err := tr.Flatten()
	if err != nil {
		log.Fatal(err)
	}
	for k, p := range flat.Poses {
		fmt.Printf("stamp %g (line %d): x=%g y=%g angle=%.4f\n", flat.Stamps[k], flat.Lines[k], p.T[0], p.T[1], g2o.AngleFromRotation(p.R))
	}
	_, err = g2o.ReadTUM(strings.NewReader("10 0 0 0 0 0 0\n"), "bad.tum")
	fmt.Println(err)
	// Output:
	// stamp 10 (line 2): x=0 y=0 angle=0.0000
	// stamp 20 (line 3): x=1 y=0 angle=1.5708
	// bad.tum:1: 7 fields; a TUM line has 8: timestamp tx ty tz qx qy qz qw
}
