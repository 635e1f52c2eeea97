package datasets

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// suiteOrSkip returns the benchmark suite directory, failing under CI and
// skipping otherwise when it is missing.
func suiteOrSkip(t *testing.T) string {
	t.Helper()
	dir, err := SuiteDir()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	return dir
}

func TestReadReferenceSuite(t *testing.T) {
	dir := suiteOrSkip(t)
	refs, err := ReadReference(filepath.Join(dir, "REFERENCE.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) != 13 {
		t.Fatalf("%d rows, want 13", len(refs))
	}
	first := Reference{File: "tinyGrid3D.g2o", D: 3, N: 9, M: 11, FStar: 18.5193868731, PeerWallSeconds: 0.01}
	if refs[0] != first {
		t.Errorf("first row %+v, want %+v", refs[0], first)
	}
	last := refs[12]
	if last.File != "FR079_P_toro.graph" || last.D != 2 || last.N != 989 || last.M != 1217 || !strings.Contains(last.Notes, "TORO") {
		t.Errorf("last row %+v", last)
	}
	for _, r := range refs {
		// Every listed graph is in the suite, and its size is plausible:
		// connected (m >= n-1) with m counting EDGE lines.
		if _, err := os.Stat(filepath.Join(dir, r.File)); err != nil {
			t.Errorf("%s: %v", r.File, err)
		}
		if r.M < r.N-1 || r.FStar <= 0 {
			t.Errorf("%s: n=%d m=%d f*=%g", r.File, r.N, r.M, r.FStar)
		}
	}
}

func TestReadReferenceBad(t *testing.T) {
	const header = "file\td\tn\tm\tf_star\tpeer_wall_s\tnotes\n"
	cases := []struct {
		name, text, want string
	}{
		{"no header", "# only comments\n\n", "no header line"},
		{"wrong header", "# c\nfile\td\tn\tm\tfstar\tpeer_wall_s\tnotes\n", "ref.tsv:2: header column 5"},
		{"short header", "file d n m\n", "ref.tsv:1: header has 1"},
		{"few columns", header + "a.g2o\t2\t3\n", "ref.tsv:2: 3 tab-separated columns"},
		{"many columns", header + "a.g2o\t2\t3\t4\t1\t1\tx\ty\n", "ref.tsv:2: 8 tab-separated columns"},
		{"bad int", header + "# c\na.g2o\t2\tmany\t4\t1\t1\t\n", "ref.tsv:3: column n: \"many\""},
		{"bad d", header + "a.g2o\t4\t3\t4\t1\t1\t\n", "column d: 4"},
		{"bad float", header + "a.g2o\t2\t3\t4\tx\t1\t\n", "ref.tsv:2: column f_star"},
		{"nan", header + "a.g2o\t2\t3\t4\t1\tNaN\t\n", "column peer_wall_s: NaN"},
		{"negative", header + "a.g2o\t2\t3\t-4\t1\t1\t\n", "column m: -4"},
		{"empty file", header + "\t2\t3\t4\t1\t1\t\n", "empty file name"},
		{"escape", header + "../x.g2o\t2\t3\t4\t1\t1\t\n", "plain name"},
		{"duplicate", header + "a.g2o\t2\t3\t4\t1\t1\t\na.g2o\t2\t3\t4\t1\t1\t\n", "ref.tsv:3: file a.g2o already listed on line 2"},
	}
	dir := t.TempDir()
	for _, c := range cases {
		path := filepath.Join(dir, "ref.tsv")
		if err := os.WriteFile(path, []byte(c.text), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := ReadReference(path)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
	if _, err := ReadReference(filepath.Join(dir, "missing.tsv")); err == nil {
		t.Error("no error for a missing file")
	}
	// Without the optional notes column, with CRLF line ends.
	path := filepath.Join(dir, "ok.tsv")
	text := "file\td\tn\tm\tf_star\tpeer_wall_s\r\na.g2o\t2\t3\t4\t1.5\t0.25\r\n"
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	refs, err := ReadReference(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Reference{File: "a.g2o", D: 2, N: 3, M: 4, FStar: 1.5, PeerWallSeconds: 0.25}); len(refs) != 1 || refs[0] != want {
		t.Errorf("got %+v, want [%+v]", refs, want)
	}
}

func TestSuiteDirEnv(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("BCMSYNC_DATA", dir)
	got, err := SuiteDir()
	if err != nil || got != dir {
		t.Errorf("SuiteDir() = %q, %v; want %q", got, err, dir)
	}
	t.Setenv("BCMSYNC_DATA", filepath.Join(dir, "nope"))
	if _, err := SuiteDir(); err == nil || !strings.Contains(err.Error(), "BCMSYNC_DATA") {
		t.Errorf("missing BCMSYNC_DATA directory: error %v", err)
	}
}

func TestSuiteDirWalk(t *testing.T) {
	// A module root with a sibling shared/datasets, entered from below.
	root := t.TempDir()
	mod := filepath.Join(root, "repo")
	sub := filepath.Join(mod, "a", "b")
	suite := filepath.Join(root, "shared", "datasets")
	for _, d := range []string{sub, suite} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BCMSYNC_DATA", "")
	t.Chdir(sub)
	got, err := SuiteDir()
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := filepath.EvalSymlinks(suite); got != suite && got != want {
		t.Errorf("SuiteDir() = %q, want %q", got, suite)
	}
	if err := os.RemoveAll(suite); err != nil {
		t.Fatal(err)
	}
	if _, err := SuiteDir(); err == nil || !strings.Contains(err.Error(), "no benchmark suite") {
		t.Errorf("missing suite: error %v", err)
	}
}
