package sync

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/bcmsync/bcmsync/g2o"
	"github.com/bcmsync/bcmsync/posegraph"
)

// offsetPriorFile is noisyGraph (3-D) in g2o text, seen from a random
// world frame G, with two EDGE_SE3_PRIOR records through two sensor
// offsets (measuring G x_i O with noise, with full information matrices)
// and three EDGE_SE3_XYZ_PRIOR fixes. It returns the text and the truth in
// the world frame (the world vertex, last, the identity).
func offsetPriorFile(t *testing.T, n int, seed uint64) (string, []posegraph.Pose) {
	t.Helper()
	g, truth := noisyGraph(3, n, 3, 0.02, 0.03, seed)
	var buf bytes.Buffer
	if err := g2o.Write(&buf, g, nil); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 28))
	randRot := func(s float64) [9]float64 {
		var w [3]float64
		for a := range w {
			w[a] = s * rng.NormFloat64()
		}
		return rotation(3, w)
	}
	world := posegraph.Pose{R: randRot(2)}
	for a := range 3 {
		world.T[a] = 10 * rng.NormFloat64()
	}
	inWorld := make([]posegraph.Pose, n+1)
	for i := range n {
		inWorld[i] = posegraph.Compose(&world, &truth[i], 3)
	}
	inWorld[n] = posegraph.Identity(3)
	num := func(b *strings.Builder, xs ...float64) {
		for _, x := range xs {
			b.WriteByte(' ')
			b.WriteString(strconv.FormatFloat(x, 'g', -1, 64))
		}
	}
	var b strings.Builder
	b.WriteString(buf.String())
	offsets := []posegraph.Pose{
		{R: randRot(1), T: [3]float64{1.5, -0.5, 0.25}},
		{R: randRot(1), T: [3]float64{-0.5, 0.75, 2}},
	}
	for k, o := range offsets {
		fmt.Fprintf(&b, "PARAMS_SE3OFFSET %d", k+1)
		qx, qy, qz, qw := g2o.QuatFromRotation(o.R)
		num(&b, o.T[0], o.T[1], o.T[2], qx, qy, qz, qw)
		b.WriteByte('\n')
	}
	for k, o := range offsets {
		i := rng.IntN(n)
		xo := posegraph.Compose(&inWorld[i], &o, 3)
		noise := posegraph.Pose{R: randRot(0.05)}
		for a := range 3 {
			noise.T[a] = 0.1 * rng.NormFloat64()
		}
		z := posegraph.Compose(&xo, &noise, 3)
		fmt.Fprintf(&b, "EDGE_SE3_PRIOR %d %d", g.IDs[i], k+1)
		qx, qy, qz, qw := g2o.QuatFromRotation(z.R)
		num(&b, z.T[0], z.T[1], z.T[2], qx, qy, qz, qw)
		// A full information matrix: diag(100, 80, 60, 400, 500, 300)
		// with cross terms, positive definite.
		diag := []float64{100, 80, 60, 400, 500, 300}
		for r := range 6 {
			for c := r; c < 6; c++ {
				v := 0.0
				if r == c {
					v = diag[r]
				} else if (r+c+k)%3 == 0 {
					v = 5
				}
				num(&b, v)
			}
		}
		b.WriteByte('\n')
	}
	for k := range 3 {
		i := rng.IntN(n)
		fmt.Fprintf(&b, "EDGE_SE3_XYZ_PRIOR %d %d", g.IDs[i], 1+k%2)
		num(&b, inWorld[i].T[0]+0.3*rng.NormFloat64(), inWorld[i].T[1]+0.3*rng.NormFloat64(), inWorld[i].T[2]+0.3*rng.NormFloat64())
		num(&b, 10, 1, 0, 12, 0, 9)
		b.WriteByte('\n')
	}
	return b.String(), inWorld
}

// offsetPriorResiduals writes the residuals of an EDGE_SE3_PRIOR read
// through a sensor offset from g2o's definition of its error, D =
// Z^-1 X O with X the pose in the world frame (W^-1 x_i) and Z and O the
// record's values (Meas), in bcmsync's chordal form with the edge's kappa
// and tau: sqrt(kappa) (R_D - I) and sqrt(tau) t(O D O^-1), the
// translation of D carried to the pose's frame. It does not use the
// edge's R and T, which the reader derived.
func offsetPriorResiduals(r []float64, e *posegraph.Edge, x []posegraph.Pose) ([]float64, bool) {
	if e.Prior != posegraph.PosePrior || len(e.Meas) != 15 {
		return r, false
	}
	m := e.Meas
	zr, _ := g2o.RotationFromQuat(m[3], m[4], m[5], m[6])
	z := posegraph.Pose{R: zr, T: [3]float64{m[0], m[1], m[2]}}
	or, _ := g2o.RotationFromQuat(m[11], m[12], m[13], m[14])
	o := posegraph.Pose{R: or, T: [3]float64{m[8], m[9], m[10]}}
	xi := posegraph.Between(&x[e.I], &x[e.J], 3) // W^-1 x_i
	zi := posegraph.Inverse(&z, 3)
	xo := posegraph.Compose(&xi, &o, 3)
	dl := posegraph.Compose(&zi, &xo, 3)
	sk, st := math.Sqrt(e.Kappa), math.Sqrt(e.Tau)
	id := posegraph.Identity(3)
	for k := range 9 {
		r = append(r, sk*(dl.R[k]-id.R[k]))
	}
	od := posegraph.Compose(&o, &dl, 3)
	oi := posegraph.Inverse(&o, 3)
	c := posegraph.Compose(&od, &oi, 3)
	for a := range 3 {
		r = append(r, st*c.T[a])
	}
	return r, true
}

// The certified optimum of a 3-D graph with priors through sensor offsets
// is the Levenberg-Marquardt solve of the objective written from g2o's
// error definition (offsetPriorResiduals) with the edges' kappa and tau:
// the same F and the same poses, in the world frame.
func TestSolveOffsetPriorsMatchesLocalSolve(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		src, truth := offsetPriorFile(t, 12, seed)
		g, err := g2o.Read(strings.NewReader(src), "offsets.g2o", g2o.ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Validate(); err != nil {
			t.Fatal(err)
		}
		withOffset := 0
		for k := range g.Edges {
			if len(g.Edges[k].Meas) == 15 {
				withOffset++
			}
		}
		if withOffset != 2 || g.World() != 12 {
			t.Fatalf("seed %d: %d priors through offsets, world %d; want 2 and 12", seed, withOffset, g.World())
		}
		res, err := Solve(context.Background(), g, Options{Seed: seed, Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Certified {
			t.Fatalf("seed %d: %s (min eig %g, bound %g)", seed, res.Status, res.MinEigenvalue, res.SuboptimalityBound)
		}
		local := localSolveWith(t, g, truth, offsetPriorResiduals)
		var fl float64
		for k := range g.Edges {
			e := &g.Edges[k]
			r, ok := offsetPriorResiduals(nil, e, local)
			if !ok {
				fl += g.EdgeCost(e, local, posegraph.Poses) // the relative edges and the position priors
				continue
			}
			for _, v := range r {
				fl += v * v
			}
		}
		if math.Abs(res.Objective-fl) > 1e-7*fl {
			t.Fatalf("seed %d: certified F = %.12g, g2o's objective at the local solve %.12g", seed, res.Objective, fl)
		}
		for i := range local {
			for a := range 3 {
				if dt := math.Abs(res.Poses[i].T[a] - local[i].T[a]); dt > 1e-4 {
					t.Fatalf("seed %d: pose %d t differs by %g", seed, i, dt)
				}
			}
			for k := range 9 {
				if dr := math.Abs(res.Poses[i].R[k] - local[i].R[k]); dr > 1e-4 {
					t.Fatalf("seed %d: pose %d R differs by %g", seed, i, dr)
				}
			}
		}
	}
}
