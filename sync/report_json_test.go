package sync

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

// encodingJSON is WriteJSON's reference: the report as encoding/json
// writes it with WriteJSON's settings.
func encodingJSON(r *Report) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	err := enc.Encode(r)
	return b.Bytes(), err
}

// reportFiller sets every field of a value, recursively, to one of a few
// values chosen at random, among them the ones whose encoding has a rule
// of its own: zero (left out under omitempty), -0, floats at the
// exponent form's cutoffs, strings that need escaping, nil and empty
// slices, nil pointers.
type reportFiller struct{ rnd *rand.Rand }

var (
	fillFloats = []float64{0, math.Copysign(0, -1), 1, -2.5, 0.1, 1e-6, 9.99999e-7, 1e-7, 1.5e-10, 5e-324,
		1e20, 1e21, 1.2345e21, -1e-300, math.MaxFloat64, 31.7037159921, 1.0 / 3, 123456789.125}
	fillStrings = []string{"", "a", "certified", "<stdin>", `q"uote\back`, "tab\tnl\ncr\rbs\bff\f", "\x00\x01\x1f\x7f",
		"é 日本", "bad \xff\xfe utf8", "\u2028 and \u2029", "&<>'"}
	fillInts = []int64{0, 1, -1, 7, 1 << 40, math.MinInt64, math.MaxInt64}
)

func (f reportFiller) fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				f.fill(v.Field(i))
			}
		}
	case reflect.Pointer:
		if f.rnd.IntN(3) == 0 {
			v.SetZero()
			return
		}
		v.Set(reflect.New(v.Type().Elem()))
		f.fill(v.Elem())
	case reflect.Slice:
		switch k := f.rnd.IntN(5); k {
		case 0:
			v.SetZero()
		default:
			v.Set(reflect.MakeSlice(v.Type(), k-1, k-1))
			for i := range v.Len() {
				f.fill(v.Index(i))
			}
		}
	case reflect.String:
		v.SetString(fillStrings[f.rnd.IntN(len(fillStrings))])
	case reflect.Float64:
		v.SetFloat(fillFloats[f.rnd.IntN(len(fillFloats))])
	case reflect.Int, reflect.Int64:
		x := fillInts[f.rnd.IntN(len(fillInts))]
		if v.OverflowInt(x) {
			x = 3
		}
		v.SetInt(x)
	case reflect.Uint64:
		v.SetUint([]uint64{0, 1, math.MaxUint64}[f.rnd.IntN(3)])
	case reflect.Bool:
		v.SetBool(f.rnd.IntN(2) == 0)
	case reflect.Interface:
		v.SetZero() // MethodOptions: set by the test where it wants one
	default:
		panic("reportFiller: no values for " + v.Type().String())
	}
}

// TestReportJSONMatchesEncodingJSON holds WriteJSON's own encoder to
// encoding/json's bytes on reports whose every field is set: a field added
// to Report or the types it holds that appendReportJSON does not write
// fails it.
func TestReportJSONMatchesEncodingJSON(t *testing.T) {
	f := reportFiller{rand.New(rand.NewPCG(1, 2))}
	fast := 0
	for i := range 1000 {
		var r Report
		f.fill(reflect.ValueOf(&r).Elem())
		if i%2 == 0 {
			// The fast path's reports: a plain solve's.
			r.Robust, r.Distributed = nil, nil
		}
		if i%7 == 0 {
			r.Options.MethodOptions = map[string]int{"agents": 4}
		}
		want, wantErr := encodingJSON(&r)
		var got bytes.Buffer
		err := r.WriteJSON(&got)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("report %d: WriteJSON error %v, encoding/json's %v", i, err, wantErr)
		}
		if err != nil {
			continue
		}
		if _, ok := appendReportJSON(nil, &r); ok {
			fast++
		}
		if !bytes.Equal(got.Bytes(), want) {
			t.Fatalf("report %d: WriteJSON and encoding/json differ at byte %d:\n%s\nwant\n%s", i,
				firstDiff(got.Bytes(), want), got.Bytes(), want)
		}
	}
	// About half the reports, less those with method options or a value
	// encoding/json refuses (MaxFloat64 is fine; there is no NaN here).
	if fast < 300 {
		t.Errorf("only %d of 1000 reports took appendReportJSON's path", fast)
	}
}

// TestReportJSONRefused: a value encoding/json refuses (NaN, an
// infinity) gets its error, not a report with null in its place.
func TestReportJSONRefused(t *testing.T) {
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		r := Report{Schema: ReportSchema, Levels: []Level{{F: 1}}, Stages: []Stage{}, History: []Record{{Seconds: v}}}
		_, wantErr := encodingJSON(&r)
		err := r.WriteJSON(new(bytes.Buffer))
		if err == nil || wantErr == nil || err.Error() != wantErr.Error() {
			t.Errorf("%v: WriteJSON error %v, encoding/json's %v", v, err, wantErr)
		}
	}
}

// TestReportJSONSolve compares the two on real solves' reports, and
// that ReadReport reads WriteJSON's back.
func TestReportJSONSolve(t *testing.T) {
	for _, d := range []int{2, 3} {
		g, _ := noisyGraph(d, 40, 25, 0.05, 0.1, uint64(d))
		res, err := Solve(context.Background(), g, Options{})
		if err != nil {
			t.Fatal(err)
		}
		r := NewReport("noisy.g2o", res)
		r.PeakRSSBytes = 12345678
		want, err := encodingJSON(r)
		if err != nil {
			t.Fatal(err)
		}
		b, ok := appendReportJSON(nil, r)
		if !ok {
			t.Fatalf("d=%d: a plain solve's report did not take appendReportJSON's path", d)
		}
		if !bytes.Equal(b, want) {
			t.Fatalf("d=%d: differs at byte %d", d, firstDiff(b, want))
		}
		back, err := ReadReport(bytes.NewReader(b))
		if err != nil || !reflect.DeepEqual(back.Levels, r.Levels) || back.Objective != r.Objective {
			t.Fatalf("d=%d: read back %v", d, err)
		}
	}
}

func firstDiff(a, b []byte) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return n
	}
	return -1
}
