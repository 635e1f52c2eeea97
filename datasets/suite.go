package datasets

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Reference is one row of the benchmark suite's REFERENCE.tsv: a graph file
// (relative to the suite directory), its dimension and size, its certified
// optimal value F* (docs/design.md section 1's objective), a peer solver's wall
// time on it, and free-form notes.
type Reference struct {
	File            string
	D, N, M         int
	FStar           float64
	PeerWallSeconds float64
	Notes           string
}

// referenceColumns is the header REFERENCE.tsv must carry, in this order.
var referenceColumns = []string{"file", "d", "n", "m", "f_star", "peer_wall_s", "notes"}

// ReadReference parses a REFERENCE.tsv file: lines starting with '#' and
// blank lines are comments, the first other line is the header (the columns
// file d n m f_star peer_wall_s notes, tab-separated), and each later line
// is one graph. The notes column may be empty or absent. Errors name the
// file and line.
func ReadReference(path string) ([]Reference, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var refs []Reference
	sc := bufio.NewScanner(f)
	line := 0
	header := false
	seen := map[string]int{}
	for sc.Scan() {
		line++
		text := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(text) == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Split(text, "\t")
		if !header {
			if err := checkHeader(fields); err != nil {
				return nil, fmt.Errorf("%s:%d: %v", path, line, err)
			}
			header = true
			continue
		}
		r, err := parseReference(fields)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, line, err)
		}
		if prev, ok := seen[r.File]; ok {
			return nil, fmt.Errorf("%s:%d: file %s already listed on line %d", path, line, r.File, prev)
		}
		seen[r.File] = line
		refs = append(refs, r)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %v", path, line+1, err)
	}
	if !header {
		return nil, fmt.Errorf("%s: no header line (%s)", path, strings.Join(referenceColumns, " "))
	}
	return refs, nil
}

func checkHeader(fields []string) error {
	if len(fields) != len(referenceColumns) && len(fields) != len(referenceColumns)-1 {
		return fmt.Errorf("header has %d tab-separated columns, want %d: %s", len(fields), len(referenceColumns), strings.Join(referenceColumns, " "))
	}
	for k, f := range fields {
		if strings.TrimSpace(f) != referenceColumns[k] {
			return fmt.Errorf("header column %d is %q, want %q", k+1, f, referenceColumns[k])
		}
	}
	return nil
}

func parseReference(fields []string) (Reference, error) {
	var r Reference
	if len(fields) < len(referenceColumns)-1 || len(fields) > len(referenceColumns) {
		return r, fmt.Errorf("%d tab-separated columns, want %d (%s)", len(fields), len(referenceColumns), strings.Join(referenceColumns, " "))
	}
	r.File = strings.TrimSpace(fields[0])
	if r.File == "" {
		return r, errors.New("empty file name")
	}
	if filepath.IsAbs(r.File) || strings.Contains(filepath.ToSlash(r.File), "../") {
		return r, fmt.Errorf("file %q must be a plain name inside the suite directory", r.File)
	}
	ints := []struct {
		name string
		dst  *int
		min  int
	}{{"d", &r.D, 2}, {"n", &r.N, 1}, {"m", &r.M, 0}}
	for k, c := range ints {
		v, err := strconv.Atoi(strings.TrimSpace(fields[1+k]))
		if err != nil {
			return r, fmt.Errorf("column %s: %q is not an integer", c.name, fields[1+k])
		}
		if v < c.min {
			return r, fmt.Errorf("column %s: %d is below %d", c.name, v, c.min)
		}
		*c.dst = v
	}
	if r.D > 3 {
		return r, fmt.Errorf("column d: %d is not 2 or 3", r.D)
	}
	floats := []struct {
		name string
		dst  *float64
	}{{"f_star", &r.FStar}, {"peer_wall_s", &r.PeerWallSeconds}}
	for k, c := range floats {
		s := strings.TrimSpace(fields[4+k])
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return r, fmt.Errorf("column %s: %q is not a number", c.name, fields[4+k])
		}
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return r, fmt.Errorf("column %s: %s is not a finite non-negative number", c.name, s)
		}
		*c.dst = v
	}
	if len(fields) == len(referenceColumns) {
		r.Notes = strings.TrimSpace(fields[6])
	}
	return r, nil
}

// SuiteDir returns the directory of the benchmark suite: the value of the
// environment variable BCMSYNC_DATA if set, else ../shared/datasets beside
// the module root, the first directory at or above the working directory
// that contains go.mod. It checks that the directory exists.
func SuiteDir() (string, error) {
	if dir := os.Getenv("BCMSYNC_DATA"); dir != "" {
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return "", fmt.Errorf("datasets: BCMSYNC_DATA=%s is not a directory", dir)
		}
		return dir, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			suite := filepath.Join(dir, "..", "shared", "datasets")
			if st, err := os.Stat(suite); err != nil || !st.IsDir() {
				return "", fmt.Errorf("datasets: no benchmark suite at %s (set BCMSYNC_DATA)", filepath.Clean(suite))
			}
			return filepath.Clean(suite), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("datasets: no go.mod at or above %s to locate the benchmark suite (set BCMSYNC_DATA)", wd)
		}
		dir = parent
	}
}

// TB is the part of testing.TB that SuiteOrSkip needs; *testing.T and
// *testing.B satisfy it (datasets does not import testing).
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Skipf(format string, args ...any)
}

// SuiteOrSkip returns SuiteDir() for a test or benchmark that reads the
// benchmark graphs. When they cannot be found it fails tb if the CI
// environment variable is set and skips it otherwise, as docs/design.md
// section 9 asks: CI must not pass by skipping.
func SuiteOrSkip(tb TB) string {
	tb.Helper()
	dir, err := SuiteDir()
	if err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatalf("benchmark graphs not found (CI is set): %v", err)
		}
		tb.Skipf("benchmark graphs not found: %v", err)
	}
	return dir
}
