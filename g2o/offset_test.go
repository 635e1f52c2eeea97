package g2o

import (
	"bytes"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/bcmsync/bcmsync/posegraph"
)

// A prior through a sensor offset reads as the prior Z O^-1, with the
// information J^T I J: checked by hand on a quarter turn with a lever arm
// along x (the translation block is R_o 4 I R_o^T = 4 I; the rotation
// block 10 I plus 16 [t_o]x^T [t_o]x = diag(10, 26, 26)).
func TestReadOffsetPrior(t *testing.T) {
	info21 := " 4 0 0 0 0 0 4 0 0 0 0 4 0 0 0 10 0 0 10 0 10"
	h := math.Sqrt(0.5)
	src := "PARAMS_SE3OFFSET 3 1 0 0 0 0 " + fmtF(h) + " " + fmtF(h) + "\n" +
		"EDGE_SE3:QUAT 1 2 1 0 0 0 0 0 1" + info21 + "\n" +
		"EDGE_SE3_PRIOR 1 3 5 6 7 0 0 0 1" + info21 + "\n"
	g := mustRead(t, src, ReadOptions{})
	if err := g.Validate(); err != nil {
		t.Fatal(err)
	}
	ps := g.Priors()
	if len(ps) != 1 {
		t.Fatalf("%d priors", len(ps))
	}
	p := ps[0]
	wantR := [9]float64{0, 1, 0, -1, 0, 0, 0, 0, 1} // R_o^T, R_o a quarter turn about z
	wantT := [3]float64{5, 7, 7}                    // t_z - R_o^T t_o
	for k := range wantR {
		if math.Abs(p.R[k]-wantR[k]) > 1e-15 {
			t.Fatalf("R = %v, want %v", p.R, wantR)
		}
	}
	for a := range wantT {
		if math.Abs(p.T[a]-wantT[a]) > 1e-14 {
			t.Fatalf("T = %v, want %v", p.T, wantT)
		}
	}
	kappa := 3 / (2 * (1.0/10 + 2.0/26))
	if math.Abs(p.Tau-4) > 1e-14 || math.Abs(p.Kappa-kappa) > 1e-14*kappa {
		t.Fatalf("kappa %v tau %v, want %v and 4", p.Kappa, p.Tau, kappa)
	}
	if p.Line != 3 || len(p.Meas) != offsetMeasLen || p.Meas[7] != 3 || p.Meas[8] != 1 || len(p.Info) != 21 {
		t.Fatalf("record %+v", p)
	}
}

func fmtF(x float64) string { return string(appendFloats(nil, []float64{x})[1:]) }

// g2oError is g2o's error of a 3-D pose prior: the translation of D and
// the vector part of its unit quaternion with w >= 0.
func g2oError(dl posegraph.Pose) [6]float64 {
	x, y, z, w := QuatFromRotation(dl.R)
	if w < 0 {
		x, y, z = -x, -y, -z
	}
	return [6]float64{dl.T[0], dl.T[1], dl.T[2], x, y, z}
}

func quadForm(info []float64, e [6]float64) float64 {
	var a [36]float64
	unpackUpper(a[:], info, 6)
	var s float64
	for i := range 6 {
		for j := range 6 {
			s += e[i] * a[i*6+j] * e[j]
		}
	}
	return s
}

func randomPose(rng *rand.Rand, scale float64) posegraph.Pose {
	var q [4]float64
	for k := range q {
		q[k] = rng.NormFloat64()
	}
	r, _ := RotationFromQuat(q[0], q[1], q[2], q[3])
	p := posegraph.Pose{R: r}
	for a := range 3 {
		p.T[a] = scale * rng.NormFloat64()
	}
	return p
}

// The prior offsetPrior returns has g2o's cost to second order: g2o's
// error of Z^-1 X O is zero at X = Z' and, for X = Z' exp(xi), its
// weighted square e^T I e equals e'^T I' e' (e' the error of Z'^-1 X) up
// to O(|xi|^3), while the untransformed I does not.
func TestOffsetPriorInformation(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 28))
	for trial := range 20 {
		z, o := randomPose(rng, 5), randomPose(rng, 2)
		// A random positive definite information matrix.
		var b, a [36]float64
		for k := range b {
			b[k] = rng.NormFloat64()
		}
		for i := range 6 {
			for j := range 6 {
				for k := range 6 {
					a[i*6+j] += b[i*6+k] * b[j*6+k]
				}
			}
			a[i*6+i] += 0.5
		}
		var info [21]float64
		k := 0
		for i := range 6 {
			for j := i; j < 6; j++ {
				info[k] = a[i*6+j]
				k++
			}
		}
		var info2 [21]float64
		zp := offsetPrior(&z.R, &z.T, &o, info[:], info2[:])
		zi := posegraph.Inverse(&z, 3)
		errAt := func(x posegraph.Pose) [6]float64 {
			xo := posegraph.Compose(&x, &o, 3)
			return g2oError(posegraph.Compose(&zi, &xo, 3))
		}
		for _, v := range errAt(zp) {
			if math.Abs(v) > 1e-12 {
				t.Fatalf("trial %d: g2o's error at Z O^-1 is %v, not zero", trial, errAt(zp))
			}
		}
		const eps = 1e-5
		for range 5 {
			var u [6]float64
			for k := range u {
				u[k] = eps * rng.NormFloat64()
			}
			// xi = (rho, 2 q): X = Z' (R(q), rho).
			w := math.Sqrt(1 - u[3]*u[3] - u[4]*u[4] - u[5]*u[5])
			r, _ := RotationFromQuat(u[3], u[4], u[5], w)
			step := posegraph.Pose{R: r, T: [3]float64{u[0], u[1], u[2]}}
			x := posegraph.Compose(&zp, &step, 3)
			zpi := posegraph.Inverse(&zp, 3)
			ep := g2oError(posegraph.Compose(&zpi, &x, 3))
			e := errAt(x)
			f, fp, f0 := quadForm(info[:], e), quadForm(info2[:], ep), quadForm(info[:], ep)
			if math.Abs(f-fp) > 1e-3*f {
				t.Fatalf("trial %d: g2o's cost %g, the equal prior's %g", trial, f, fp)
			}
			if math.Abs(f-f0) < 1e-2*f {
				t.Fatalf("trial %d: the untransformed information gives %g too, against %g: the test sees nothing", trial, f0, f)
			}
		}
	}
}

// An identity offset, under any id and with any w, reads as no offset at
// all, bit for bit.
func TestIdentityOffsetIsNoOffset(t *testing.T) {
	info21 := " 4 0.5 0 0 0 0 4 0 0 0 0 4 0 0 0 10 0 0 10 0 10"
	body := "EDGE_SE3:QUAT 1 2 1 0 0 0 0 0 1" + info21 + "\nEDGE_SE3_PRIOR 1 %s 5 6 7 0.1 0.2 0.6 0.81" + info21 + "\n"
	none := mustRead(t, strings.ReplaceAll(body, "%s", "0"), ReadOptions{})
	for _, decl := range []string{"PARAMS_SE3OFFSET 0 0 0 0 0 0 0 1\n", "PARAMS_SE3OFFSET 0 0 0 0 0 0 0 -2.5\n"} {
		g := mustRead(t, decl+strings.ReplaceAll(body, "%s", "0"), ReadOptions{})
		for k := range g.Edges {
			a, b := none.Edges[k], g.Edges[k]
			if a.R != b.R || a.T != b.T || a.Kappa != b.Kappa || a.Tau != b.Tau || !slices.Equal(a.Meas, b.Meas) {
				t.Fatalf("%q: edge %d %+v, without an offset %+v", decl, k, b, a)
			}
		}
	}
}

// Priors through sensor offsets are written back with their offsets and
// read back bit for bit, offset ids included, also when the file's offset
// 0 is not the identity (the identity then takes another id).
func TestWriteOffsetPriorsRoundTrip(t *testing.T) {
	info21 := " 4 0.5 0 0 0 0 4 0 0 0 0 4 0 0 0 10 0 0 10 0 10"
	for _, src := range []string{
		"PARAMS_SE3OFFSET 0 0 0 0 0 0 0 1\nPARAMS_SE3OFFSET 5 0.25 -1 0.5 0.1 0.2 0.3 0.9\n" +
			"PARAMS_SE3OFFSET 6 1e-3 0 0 0 0 0 1\n" +
			"EDGE_SE3:QUAT 1 2 1 0 0 0 0 0 1" + info21 + "\nEDGE_SE3_PRIOR 1 5 5 6 7 0 0 0.6 0.81" + info21 +
			"\nEDGE_SE3_PRIOR 2 6 -1 2 0.5 0.1 0 0 1" + info21 + "\nEDGE_SE3_PRIOR 2 0 -1 2 0.5 0.1 0 0 1" + info21 +
			"\nEDGE_SE3_XYZ_PRIOR 2 5 1 2 3 2 0.1 0 2 0 2\n",
		"PARAMS_SE3OFFSET 0 0.25 -1 0.5 0.1 0.2 0.3 0.9\nPARAMS_SE3OFFSET 1 0 0 0 0 0 0 1\n" +
			"EDGE_SE3:QUAT 1 2 1 0 0 0 0 0 1" + info21 + "\nEDGE_SE3_PRIOR 1 0 5 6 7 0 0 0.6 0.81" + info21 +
			"\nEDGE_SE3_TRACKXYZ 1 9 1 0 0 1 1 0 0 1 0 1\n",
	} {
		g := mustRead(t, src, ReadOptions{})
		var buf bytes.Buffer
		if err := Write(&buf, g, nil); err != nil {
			t.Fatal(err)
		}
		h := mustRead(t, buf.String(), ReadOptions{})
		if len(h.Edges) != len(g.Edges) {
			t.Fatalf("%d edges read back, want %d:\n%s", len(h.Edges), len(g.Edges), buf.String())
		}
		offsets := 0
		for k := range g.Edges {
			a, b := g.Edges[k], h.Edges[k]
			if a.Prior != b.Prior || a.I != b.I || a.J != b.J || a.R != b.R || a.T != b.T || a.Kappa != b.Kappa || a.Tau != b.Tau ||
				!slices.Equal(a.Meas, b.Meas) || !slices.Equal(a.Info, b.Info) {
				t.Fatalf("edge %d: %+v read back as %+v:\n%s", k, a, b, buf.String())
			}
			if len(a.Meas) == offsetMeasLen {
				offsets++
			}
		}
		if offsets == 0 {
			t.Fatal("no prior carries an offset: the test sees nothing")
		}
		// Written twice, the same file.
		var again bytes.Buffer
		if err := Write(&again, h, nil); err != nil {
			t.Fatal(err)
		}
		if again.String() != buf.String() {
			t.Fatalf("written again:\n%s\nfirst:\n%s", again.String(), buf.String())
		}
	}
}
