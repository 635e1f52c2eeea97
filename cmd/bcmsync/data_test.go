package main

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// dataDir locates the benchmark graphs: $BCMSYNC_DATA, else
// ../shared/datasets next to the repository root. Without them the test
// fails when $CI is set and is skipped otherwise.
func dataDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("BCMSYNC_DATA")
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			t.Fatal(err)
		}
		for d := wd; ; d = filepath.Dir(d) {
			if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
				dir = filepath.Join(d, "..", "shared", "datasets")
				break
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	if dir != "" {
		if _, err := os.Stat(filepath.Join(dir, "REFERENCE.tsv")); err == nil {
			return dir
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("benchmark graphs not found (set BCMSYNC_DATA); looked in %q", dir)
	}
	t.Skipf("benchmark graphs not found (set BCMSYNC_DATA); looked in %q", dir)
	return ""
}

type refRow struct {
	file    string
	d, n, m int
}

// reference reads d, n and m of every graph listed in REFERENCE.tsv.
func reference(t testing.TB, dir string) []refRow {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "REFERENCE.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []refRow
	sc := bufio.NewScanner(f)
	header := true
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
			continue
		}
		if header { // the column names
			header = false
			continue
		}
		c := strings.Split(line, "\t")
		if len(c) < 4 {
			t.Fatalf("REFERENCE.tsv: short row %q", line)
		}
		var r refRow
		r.file = c[0]
		for k, p := range []*int{&r.d, &r.n, &r.m} {
			v, err := strconv.Atoi(c[k+1])
			if err != nil {
				t.Fatalf("REFERENCE.tsv: row %q: %v", line, err)
			}
			*p = v
		}
		rows = append(rows, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Fatal("REFERENCE.tsv lists no graphs")
	}
	return rows
}
