package g2o

import (
	"bufio"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// fieldsOracle reads line (a record without its tag) the slow way: fields
// split at white space, ids by strconv.ParseInt, numbers by
// strconv.ParseFloat. ok is false where the field-by-field reading would
// fail (wrong count, a bad id or number).
func fieldsOracle(line string, ids, nv int) (idv []int, vals []float64, ok bool) {
	if line != "" && !isSpace[line[0]] {
		return nil, nil, false // the tag runs on: a line after its tag starts with a separator
	}
	f := strings.FieldsFunc(line, func(r rune) bool { return r < 256 && isSpace[r] })
	if len(f) != ids+nv {
		return nil, nil, false
	}
	for _, s := range f[:ids] {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v > maxID || v < -maxID {
			return nil, nil, false
		}
		idv = append(idv, int(v))
	}
	for _, s := range f[ids:] {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, nil, false
		}
		vals = append(vals, v)
	}
	return idv, vals, true
}

// checkFast runs fastNumbers on rest and checks it against the oracle: it
// must take the record exactly when the field-by-field reading accepts
// it, with every id and number bit for bit the same. It reports whether
// fastNumbers took it.
func checkFast(t *testing.T, rest string, ids, nv int) bool {
	t.Helper()
	var p parser
	p.rest = []byte(rest)
	fast := p.fastNumbers(ids, nv)
	idv, vals, ok := fieldsOracle(rest, ids, nv)
	if fast != ok {
		t.Fatalf("%q: fastNumbers says %v, strconv %v", rest, fast, ok)
	}
	if !fast {
		return false
	}
	for k, id := range idv {
		if p.ids[k] != id {
			t.Fatalf("%q: id %d = %d, strconv %d", rest, k, p.ids[k], id)
		}
	}
	for k, v := range vals {
		if math.Float64bits(p.vals[k]) != math.Float64bits(v) {
			t.Fatalf("%q: number %d = %v (%#x), strconv %v (%#x)", rest, k, p.vals[k], math.Float64bits(p.vals[k]), v, math.Float64bits(v))
		}
	}
	return true
}

// TestFastNumbers checks the fast reading of ids and numbers against
// strconv, on the forms files print and on forms it leaves to strconv or
// must refuse.
func TestFastNumbers(t *testing.T) {
	taken := []string{
		" 0 1 0.082760 0.003050 0.284020", " -3 10 1 2 0.5", "\t7\t8\t-0.0\t+1.5\t.5\r\n",
		" 1 2 5. 1e-1 2E+0", " 1 2 1.0563000903578477 -3.094612661847212e-05 0.9997303653499322",
		" 1 2 123456789012345 0.000000000000000001 1e22", " 1 2 -1e-22 9007199254740991 0",
		" 1 2 1 2 3   ", " 1 2 0x1p-2 1 1", " +1 2 1e23 1 1", " 1 2 9007199254740993 12345678901234567890 1e00001", " 1 2 1_0 1 1",
	}
	for _, s := range taken {
		if !checkFast(t, s, 2, 3) {
			t.Errorf("fastNumbers did not take %q", s)
		}
	}
	refused := []string{
		" 1 2 3 4", " 1 2 3 4 5 6", " 1 2 3 4 5x", " 1 2 inf 1 1", " 1 2 NaN 1 1",
		" 1 1152921504606846977 1 1 1", " 1 2 1e 1 1", " 1 2 . 1 1", " 1 2 - 1 1", " 1 2 1e+ 1 1",
		" 1 2 1.5e10000 1 1", " 1 2 1\x00 1 1", " 1.5 2 1 1 1",
	}
	for _, s := range refused {
		if checkFast(t, s, 2, 3) {
			t.Errorf("fastNumbers took %q", s)
		}
	}
	// Random values printed the ways files and writers print them.
	rng := rand.New(rand.NewPCG(1, 2))
	formats := []func(float64) string{
		func(v float64) string { return strconv.FormatFloat(v, 'f', 6, 64) },
		func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) },
		func(v float64) string { return strconv.FormatFloat(v, 'e', rng.IntN(18), 64) },
		func(v float64) string { return strconv.FormatFloat(v, 'f', rng.IntN(20), 64) },
		func(v float64) string { return strconv.FormatFloat(v, 'g', 1+rng.IntN(18), 64) },
	}
	fast := 0
	for range 20000 {
		var b strings.Builder
		b.WriteString(" " + strconv.Itoa(rng.IntN(1e6)-1000) + " " + strconv.Itoa(rng.IntN(1e6)))
		for range 3 {
			v := math.Ldexp(rng.Float64()-0.5, rng.IntN(40)-20)
			b.WriteString(" " + formats[rng.IntN(len(formats))](v))
		}
		if checkFast(t, b.String(), 2, 3) {
			fast++
		}
	}
	if fast < 2000 {
		t.Errorf("fastNumbers took %d of 20000 random records; expected most with six-decimal and short forms", fast)
	}
	// Six decimals, the usual form of published files, always.
	for range 10000 {
		v := math.Ldexp(rng.Float64()-0.5, rng.IntN(30))
		s := " 4 5 " + strconv.FormatFloat(v, 'f', 6, 64) + " 1 1"
		if !checkFast(t, s, 2, 3) {
			t.Fatalf("fastNumbers did not take %q", s)
		}
	}
}

// FuzzFastNumbers checks that whatever the fast reading takes, strconv
// reads as the same ids and numbers, bit for bit.
func FuzzFastNumbers(f *testing.F) {
	f.Add(" 0 1 0.082760 0.003050 0.284020")
	f.Add(" -3 10 1e-1 2E+0 .5")
	f.Add(" 1 2 9007199254740991 1e22 -0")
	f.Fuzz(func(t *testing.T, rest string) {
		checkFast(t, rest, 2, 3)
		checkFast(t, rest, 1, 3)
	})
}

// TestReadNumbersExact reads every benchmark graph and checks each edge's
// recorded measurement and information values, and each vertex's pose
// values, against strconv's reading of the file's fields, bit for bit:
// the fast path must not change a single value.
func TestReadNumbersExact(t *testing.T) {
	dir := dataDir(t)
	files, _ := filepath.Glob(filepath.Join(dir, "*.g2o"))
	if len(files) == 0 {
		t.Skip("no benchmark graphs")
	}
	for _, file := range files {
		g, err := ReadFile(file, ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		byLine := make(map[int]int, len(g.Edges))
		for k, e := range g.Edges {
			byLine[e.Line] = k
		}
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		line, checked := 0, 0
		for sc.Scan() {
			line++
			fs := strings.Fields(sc.Text())
			if len(fs) == 0 || !strings.HasPrefix(fs[0], "EDGE") {
				continue
			}
			e := g.Edges[byLine[line]]
			vals := append(append([]float64(nil), e.Meas...), e.Info...)
			if len(vals) != len(fs)-3 {
				t.Fatalf("%s:%d: %d values read, %d fields", file, line, len(vals), len(fs)-3)
			}
			for k, s := range fs[3:] {
				v, _ := strconv.ParseFloat(s, 64)
				if math.Float64bits(v) != math.Float64bits(vals[k]) {
					t.Fatalf("%s:%d: field %d %q read as %v", file, line, k+3, s, vals[k])
				}
			}
			checked++
		}
		f.Close()
		if checked != len(g.Edges) {
			t.Errorf("%s: checked %d of %d edges", file, checked, len(g.Edges))
		}
	}
}
