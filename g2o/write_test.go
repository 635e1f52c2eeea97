package g2o

import (
	"bufio"
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/bcmsync/bcmsync/posegraph"
)

// randPose returns a random pose of SE(d).
func randPose(rng *rand.Rand, d int) posegraph.Pose {
	var p posegraph.Pose
	if d == 2 {
		p.R = RotationFromAngle((2*rng.Float64() - 1) * math.Pi)
	} else {
		p.R, _ = RotationFromQuat(rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64())
	}
	for a := 0; a < d; a++ {
		p.T[a] = 10 * rng.NormFloat64()
	}
	return p
}

// handGraph builds a graph in memory: sparse ids, edges without raw values
// (a chain plus random loop closures), some poses with estimates, a FIX.
func handGraph(rng *rand.Rand, d, n int) *posegraph.Graph {
	g := &posegraph.Graph{D: d, Source: "hand"}
	id := -5
	for i := 0; i < n; i++ {
		g.IDs = append(g.IDs, id)
		id += 1 + rng.IntN(7)
		g.Initial = append(g.Initial, randPose(rng, d))
		g.HasInitial = append(g.HasInitial, rng.IntN(3) > 0)
	}
	g.Fixed = []int{n / 2}
	add := func(i, j int) {
		p := randPose(rng, d)
		g.Edges = append(g.Edges, posegraph.Edge{I: i, J: j, R: p.R, T: p.T,
			Kappa: math.Exp(4 * rng.NormFloat64()), Tau: math.Exp(4 * rng.NormFloat64())})
	}
	for i := 1; i < n; i++ {
		add(i-1, i)
	}
	for k := 0; k < n; k++ {
		i, j := rng.IntN(n), rng.IntN(n)
		if i != j {
			add(i, j)
		}
	}
	return g
}

// TestWriteHandMade writes graphs made in memory and reads them back: the
// synthesized angle or quaternion and isotropic information matrix must give
// back R and T (to rounding), kappa and tau (exactly), and a second round trip must reproduce the
// edges exactly.
func TestWriteHandMade(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, d := range []int{2, 3} {
		g := handGraph(rng, d, 40)
		var buf bytes.Buffer
		if err := Write(&buf, g, nil); err != nil {
			t.Fatal(err)
		}
		h, err := Read(bytes.NewReader(buf.Bytes()), "written", ReadOptions{})
		if err != nil {
			t.Fatalf("d=%d: %v\n%s", d, err, buf.String())
		}
		if msg := sameGraph(g, h, 1e-14); msg != "" {
			t.Errorf("d=%d: %s", d, msg)
		}
		for k, e := range h.Edges {
			if e.Kappa != g.Edges[k].Kappa || e.Tau != g.Edges[k].Tau {
				t.Errorf("d=%d edge %d: kappa, tau %g, %g; wrote %g, %g", d, k, e.Kappa, e.Tau, g.Edges[k].Kappa, g.Edges[k].Tau)
			}
		}
		// h carries raw values now; the next round trip must be exact.
		buf.Reset()
		if err := Write(&buf, h, nil); err != nil {
			t.Fatal(err)
		}
		h2, err := Read(&buf, "written", ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if msg := sameGraph(h, h2, 1e-14); msg != "" {
			t.Errorf("d=%d, second round trip: %s", d, msg)
		}
	}
}

// TestWritePoses checks that explicit poses replace the estimates and keep
// the original ids.
func TestWritePoses(t *testing.T) {
	g := mustRead(t, "EDGE_SE2 4 9 1 0 0 1 0 0 1 0 1\n", ReadOptions{})
	poses := []posegraph.Pose{posegraph.Identity(2), {R: RotationFromAngle(0.5), T: [3]float64{3, -2}}}
	var buf bytes.Buffer
	if err := Write(&buf, g, poses); err != nil {
		t.Fatal(err)
	}
	want := "VERTEX_SE2 4 0 0 0\nVERTEX_SE2 9 3 -2 0.5\nEDGE_SE2 4 9 1 0 0 1 0 0 1 0 1\n"
	if buf.String() != want {
		t.Errorf("wrote\n%s\nwant\n%s", buf.String(), want)
	}
}

// TestWriteErrors checks that graphs that cannot be written are errors, not
// panics or unreadable files.
func TestWriteErrors(t *testing.T) {
	ok := func() *posegraph.Graph {
		return mustRead(t, "EDGE_SE2 0 1 1 0 0 1 0 0 1 0 1\n", ReadOptions{})
	}
	for name, c := range map[string]struct {
		g     *posegraph.Graph
		poses []posegraph.Pose
	}{
		"nil graph":    {nil, nil},
		"bad d":        {func() *posegraph.Graph { g := ok(); g.D = 4; return g }(), nil},
		"poses count":  {ok(), []posegraph.Pose{{}}},
		"NaN pose":     {ok(), []posegraph.Pose{{T: [3]float64{math.NaN()}}, {}}},
		"edge range":   {func() *posegraph.Graph { g := ok(); g.Edges[0].J = 2; return g }(), nil},
		"fixed range":  {func() *posegraph.Graph { g := ok(); g.Fixed = []int{-1}; return g }(), nil},
		"duplicate id": {func() *posegraph.Graph { g := ok(); g.IDs[1] = 0; return g }(), nil},
		"Inf kappa":    {func() *posegraph.Graph { g := ok(); g.Edges[0].Kappa = math.Inf(1); return g }(), nil},
	} {
		if err := Write(&bytes.Buffer{}, c.g, c.poses); err == nil {
			t.Errorf("%s: Write succeeded", name)
		}
		if err := WriteTUM(&bytes.Buffer{}, c.g, c.poses); err == nil && name != "edge range" && name != "Inf kappa" && name != "fixed range" {
			t.Errorf("%s: WriteTUM succeeded", name)
		}
	}
	if err := Write(failWriter{}, ok(), nil); err == nil {
		t.Error("write error not reported")
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// TestWriteTUM parses the TUM output back and compares it with the poses.
func TestWriteTUM(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, d := range []int{2, 3} {
		g := handGraph(rng, d, 10)
		poses := make([]posegraph.Pose, g.N())
		for i := range poses {
			poses[i] = randPose(rng, d)
		}
		var buf bytes.Buffer
		if err := WriteTUM(&buf, g, poses); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(&buf)
		i := 0
		for ; sc.Scan(); i++ {
			f := strings.Fields(sc.Text())
			if len(f) != 8 {
				t.Fatalf("line %q has %d fields", sc.Text(), len(f))
			}
			v := make([]float64, 8)
			for k := range f {
				var err error
				if v[k], err = strconv.ParseFloat(f[k], 64); err != nil {
					t.Fatal(err)
				}
			}
			if int(v[0]) != g.IDs[i] {
				t.Errorf("timestamp %v, want id %d", v[0], g.IDs[i])
			}
			r, _ := RotationFromQuat(v[4], v[5], v[6], v[7])
			want := poses[i]
			if d == 2 {
				want.R = r2to3(want.R)
				if v[3] != 0 || v[4] != 0 || v[5] != 0 {
					t.Errorf("2-D pose has z = %g, quaternion %v not about z", v[3], v[4:])
				}
			}
			if !close(r[:], want.R[:], 1e-14) || v[1] != want.T[0] || v[2] != want.T[1] || v[3] != want.T[2] {
				t.Errorf("pose %d: TUM %v, want %v", i, v, want)
			}
		}
		if i != g.N() {
			t.Errorf("%d lines, want %d", i, g.N())
		}
	}
}
