package plots

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestCreateWithFailure: a figure whose drawing fails half-way is not
// written, and an older figure at its path stays as it was; nothing else
// is left in the folder.
func TestCreateWithFailure(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "trajectory.png")
	if err := os.WriteFile(path, []byte("the old figure"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := createWith(path, func(w io.Writer) error {
		io.WriteString(w, "\x89PNG half a new figure")
		return errors.New("injected failure")
	})
	if err == nil {
		t.Fatal("no error")
	}
	if b, _ := os.ReadFile(path); string(b) != "the old figure" {
		t.Errorf("the old figure became %q", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("the folder holds %d entries, want the old figure alone", len(ents))
	}
	fresh := filepath.Join(dir, "stages.png")
	if err := createWith(fresh, func(w io.Writer) error { return errors.New("injected failure") }); err == nil {
		t.Fatal("no error")
	}
	if _, err := os.Stat(fresh); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed figure was left at %s", fresh)
	}
}
