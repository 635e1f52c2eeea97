package g2o

import (
	"math"
	"reflect"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// denseRawRotation is Eigen's toRotationMatrix by another route, dense
// gonum arithmetic on R = I + 2 w [v]x + 2 [v]x^2 (v = (x, y, z)): the
// identity Eigen's entries expand, valid for any quaternion, unit or not.
// (The other common form, (w^2 - |v|^2) I + 2 v v^T + 2 w [v]x, agrees with
// it only for unit quaternions, so it is not SE-Sync's matrix.)
func denseRawRotation(q [4]float64) *mat.Dense {
	x, y, z, w := q[0], q[1], q[2], q[3]
	k := mat.NewDense(3, 3, []float64{0, -z, y, z, 0, -x, -y, x, 0})
	var k2, r mat.Dense
	k2.Mul(k, k)
	k2.Scale(2, &k2)
	r.Scale(2*w, k)
	r.Add(&r, &k2)
	for a := 0; a < 3; a++ {
		r.Set(a, a, r.At(a, a)+1)
	}
	return &r
}

func TestRotationFromQuatRaw(t *testing.T) {
	scales := []float64{1, 1 + 3.4e-6, 1 - 2e-6, 1.01, 0.5, 3}
	for _, u := range quatCases() {
		u = unit(u)
		for _, s := range scales {
			q := [4]float64{s * u[0], s * u[1], s * u[2], s * u[3]}
			got, ok := RotationFromQuatRaw(q[0], q[1], q[2], q[3])
			if !ok {
				t.Fatalf("q %v rejected", q)
			}
			want := denseRawRotation(q)
			if !mat.EqualApprox(mat.NewDense(3, 3, got[:]), want, 1e-15*s*s+1e-15) {
				t.Errorf("q %v: got %v, want %v", q, got, mat.Formatted(want))
			}
			// q = s u gives I + s^2 (R(u) - I) exactly, in exact
			// arithmetic; and unit quaternions give RotationFromQuat's.
			ru, _ := RotationFromQuat(u[0], u[1], u[2], u[3])
			for k := range 9 {
				id := 0.0
				if k%4 == 0 {
					id = 1
				}
				if w := id + s*s*(ru[k]-id); math.Abs(got[k]-w) > 2e-15*(1+s*s) {
					t.Errorf("q %v entry %d: %g, want I + s^2 (R(u) - I) = %g", q, k, got[k], w)
				}
			}
		}
	}
	for _, q := range [][4]float64{{0, 0, 0, 0}, {math.NaN(), 0, 0, 1}, {0, math.Inf(1), 0, 1}} {
		if _, ok := RotationFromQuatRaw(q[0], q[1], q[2], q[3]); ok {
			t.Errorf("q %v accepted", q)
		}
	}
}

// rawSE3 is a small 3-D file whose edge quaternions are printed with the
// few-ppm norm errors of the published files, plus one far off unit norm
// on demand.
func rawSE3(extra string) string {
	info := " 10 0 0 0 0 0 10 0 0 0 0 10 0 0 0 40 0 0 40 0 40"
	return "VERTEX_SE3:QUAT 0 0 0 0 0 0 0 1\n" +
		"VERTEX_SE3:QUAT 1 1 0 0 0.1 0.2 0.3 0.9\n" + // not unit: normalized either way
		"VERTEX_SE3:QUAT 2 1 1 0 0 0 0 1\n" +
		"EDGE_SE3:QUAT 0 1 1 0 0 0.0998334 0 0 0.995004" + info + "\n" +
		"EDGE_SE3:QUAT 1 2 0 1 0 0.3171845 -0.2366641 0.1427899 0.9071908" + info + "\n" +
		"EDGE_SE3:QUAT 2 0 0 0 1 -0.0107791 0.00867285 -0.00190021 0.999902" + info + "\n" +
		extra
}

func TestReadRawQuaternions(t *testing.T) {
	def := mustRead(t, rawSE3(""), ReadOptions{})
	raw := mustRead(t, rawSE3(""), ReadOptions{RawQuaternions: true})
	if def.RawRotations || !raw.RawRotations {
		t.Fatalf("RawRotations: default %v, raw %v", def.RawRotations, raw.RawRotations)
	}
	if !reflect.DeepEqual(def.Initial, raw.Initial) {
		t.Errorf("vertex poses differ between the readings: %v, %v", def.Initial, raw.Initial)
	}
	for k := range raw.Edges {
		e, f := raw.Edges[k], def.Edges[k]
		q := [4]float64{e.Meas[3], e.Meas[4], e.Meas[5], e.Meas[6]}
		n2 := q[0]*q[0] + q[1]*q[1] + q[2]*q[2] + q[3]*q[3]
		if !mat.EqualApprox(mat.NewDense(3, 3, e.R[:]), denseRawRotation(q), 1e-15) {
			t.Errorf("edge %d: raw R %v, want toRotationMatrix %v", k, e.R, mat.Formatted(denseRawRotation(q)))
		}
		if e.Kappa != f.Kappa || e.Tau != f.Tau || e.T != f.T || !reflect.DeepEqual(e.Meas, f.Meas) || !reflect.DeepEqual(e.Info, f.Info) {
			t.Errorf("edge %d: the readings differ in more than R", k)
		}
		if math.Abs(n2-1) > 1e-8 && e.R == f.R {
			t.Errorf("edge %d: |q|^2 - 1 = %.2g but the raw R equals the normalized one", k, n2-1)
		}
	}
	if err := raw.Validate(); err != nil {
		t.Errorf("raw reading of ppm-off quaternions rejected: %v", err)
	}
	if err := def.Validate(); err != nil {
		t.Errorf("default reading rejected: %v", err)
	}
	// Far from unit norm: the default reading normalizes it, the raw one
	// is no rotation and Validate names the line.
	far := rawSE3("EDGE_SE3:QUAT 0 2 0 0 0 0 0 0.6 0.81" + // |q|^2 = 1.0161
		" 10 0 0 0 0 0 10 0 0 0 0 10 0 0 0 40 0 0 40 0 40\n")
	if err := mustRead(t, far, ReadOptions{}).Validate(); err != nil {
		t.Errorf("default reading of |q|^2 = 1.0161: %v", err)
	}
	err := mustRead(t, far, ReadOptions{RawQuaternions: true}).Validate()
	if err == nil || !strings.Contains(err.Error(), "test.g2o:7: measurement is not a rotation") {
		t.Errorf("raw reading of |q|^2 = 1.0161: Validate = %v, want test.g2o:7 not a rotation", err)
	}
	if _, err := Read(strings.NewReader(rawSE3("EDGE_SE3:QUAT 0 2 0 0 0 0 0 0 0"+
		" 10 0 0 0 0 0 10 0 0 0 0 10 0 0 0 40 0 0 40 0 40\n")), "test.g2o", ReadOptions{RawQuaternions: true}); err == nil ||
		!strings.Contains(err.Error(), "test.g2o:7: EDGE_SE3:QUAT has a zero quaternion") {
		t.Errorf("raw reading of a zero quaternion: %v", err)
	}
}

// The option changes nothing in 2-D: the graph is the default one, bit for
// bit, and is not marked.
func TestReadRawQuaternions2D(t *testing.T) {
	src := "VERTEX_SE2 0 0 0 0\nVERTEX_SE2 1 1 0 0.3\nVERTEX_SE2 2 2 0 0.1\n" +
		"EDGE_SE2 0 1 1 0 0.3 4 0 0 4 0 9\nEDGE_SE2 1 2 1 0 -0.2 4 0 0 4 0 9\n"
	def := mustRead(t, src, ReadOptions{})
	raw := mustRead(t, src, ReadOptions{RawQuaternions: true})
	if !reflect.DeepEqual(def, raw) {
		t.Errorf("2-D graphs differ: %s", sameGraph(def, raw, 0))
	}
}
