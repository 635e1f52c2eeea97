package outfile

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// listDir returns the names in dir, sorted.
func listDir(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	return names
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// failingWriter writes half of its text and then fails: a write that
// breaks in the middle, as a full disk or a bug would.
func failingWriter(text string) func(io.Writer) error {
	return func(w io.Writer) error {
		if _, err := io.WriteString(w, text[:len(text)/2]); err != nil {
			return err
		}
		return errors.New("injected failure")
	}
}

func TestWriteNewAndReplace(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.txt")
	if err := Write(path, func(w io.Writer) error { _, err := io.WriteString(w, "first\n"); return err }); err != nil {
		t.Fatal(err)
	}
	if got := mustRead(t, path); got != "first\n" {
		t.Fatalf("got %q", got)
	}
	// A new file gets the permissions os.Create would give it.
	ref := filepath.Join(dir, "ref")
	rf, err := os.Create(ref)
	if err != nil {
		t.Fatal(err)
	}
	rf.Close()
	a, _ := os.Stat(path)
	b, _ := os.Stat(ref)
	if a.Mode().Perm() != b.Mode().Perm() {
		t.Errorf("new file mode %v, os.Create gives %v", a.Mode().Perm(), b.Mode().Perm())
	}
	// Replacing keeps the destination's permission bits.
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, func(w io.Writer) error { _, err := io.WriteString(w, "second\n"); return err }); err != nil {
		t.Fatal(err)
	}
	if got := mustRead(t, path); got != "second\n" {
		t.Fatalf("got %q", got)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o640 {
		t.Errorf("mode after replacing: %v, want 0640", st.Mode().Perm())
	}
	if got := listDir(t, dir); !slices.Equal(got, []string{"out.txt", "ref"}) {
		t.Errorf("folder holds %v", got)
	}
}

// TestInjectedFailure: a write that fails half-way leaves no partial file
// and no temporary file, and an existing destination unchanged.
func TestInjectedFailure(t *testing.T) {
	dir := t.TempDir()
	fresh := filepath.Join(dir, "fresh.g2o")
	err := Write(fresh, failingWriter("VERTEX_SE2 0 0 0 0\nVERTEX_SE2 1 1 0 0\n"))
	if err == nil || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("err %v, want the writer's", err)
	}
	if _, err := os.Stat(fresh); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a failed write left %s (stat: %v)", fresh, err)
	}
	old := filepath.Join(dir, "old.g2o")
	if err := os.WriteFile(old, []byte("the old contents\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Write(old, failingWriter("new contents that never arrive\n")); err == nil {
		t.Fatal("no error")
	}
	if got := mustRead(t, old); got != "the old contents\n" {
		t.Errorf("the old file became %q", got)
	}
	if got := listDir(t, dir); !slices.Equal(got, []string{"old.g2o"}) {
		t.Errorf("folder holds %v after the failures", got)
	}
	// Until Commit, the destination is untouched and the data sit in a
	// temporary file in the same folder.
	f, err := Create(old)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(f, "half")
	if got := mustRead(t, old); got != "the old contents\n" {
		t.Errorf("mid-write the destination reads %q", got)
	}
	if got := listDir(t, dir); len(got) != 2 {
		t.Errorf("mid-write the folder holds %v, want the file and one temporary file", got)
	}
	f.Abort()
	f.Abort() // twice is harmless
	if err := f.Commit(); err == nil {
		t.Error("Commit after Abort succeeded")
	}
	if got := listDir(t, dir); !slices.Equal(got, []string{"old.g2o"}) {
		t.Errorf("after Abort the folder holds %v", got)
	}
}

// TestMissingFolder: the folder is not created; the error names it.
func TestMissingFolder(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "no", "such")
	err := Write(filepath.Join(missing, "o.g2o"), func(io.Writer) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "the folder "+missing+" does not exist") {
		t.Fatalf("err %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "no")); !errors.Is(err, fs.ErrNotExist) {
		t.Error("the missing folder was created")
	}
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o644)
	if err := Write(filepath.Join(file, "o.g2o"), func(io.Writer) error { return nil }); err == nil || !strings.Contains(err.Error(), "is not a folder") {
		t.Errorf("a file as the folder: err %v", err)
	}
	if err := Write(dir, func(io.Writer) error { return nil }); err == nil || !strings.Contains(err.Error(), "is a folder") {
		t.Errorf("a folder as the destination: err %v", err)
	}
}

// TestLinks: a symbolic link is written through, dangling or not.
func TestLinks(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target.txt")
	os.WriteFile(target, []byte("old"), 0o644)
	link := filepath.Join(dir, "link.txt")
	if err := os.Symlink("target.txt", link); err != nil {
		t.Skip("no symbolic links here:", err)
	}
	f, err := Create(link)
	if err != nil {
		t.Fatal(err)
	}
	if f.Name() != target {
		t.Errorf("Name %q, want %q", f.Name(), target)
	}
	io.WriteString(f, "new")
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v %v", st, err)
	}
	if got := mustRead(t, target); got != "new" {
		t.Errorf("target holds %q", got)
	}
	dangling := filepath.Join(dir, "dangling")
	os.Symlink("made.txt", dangling)
	if err := Write(dangling, func(w io.Writer) error { _, err := io.WriteString(w, "x"); return err }); err != nil {
		t.Fatal(err)
	}
	if got := mustRead(t, filepath.Join(dir, "made.txt")); got != "x" {
		t.Errorf("dangling link's target holds %q", got)
	}
	loop := filepath.Join(dir, "loop")
	os.Symlink("loop", loop)
	if err := Write(loop, func(io.Writer) error { return nil }); err == nil {
		t.Error("a link to itself was written")
	}
}

// TestDevice: a device is written in place and stays a device.
func TestDevice(t *testing.T) {
	const null = "/dev/null"
	st, err := os.Stat(null)
	if err != nil || st.Mode()&fs.ModeDevice == 0 {
		t.Skip("no /dev/null here")
	}
	if err := Write(null, func(w io.Writer) error { _, err := io.WriteString(w, "discarded"); return err }); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(null); err != nil || st.Mode()&fs.ModeDevice == 0 {
		t.Fatalf("%s is no longer a device: %v %v", null, st, err)
	}
}
