package outfile_test

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/bcmsync/bcmsync/internal/outfile"
)

// Write replaces a file only once its new contents are complete: when the
// writer fails, the old file is still there, unchanged.
func ExampleWrite() {
	dir, _ := os.MkdirTemp("", "outfile")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "result.txt")

	outfile.Write(path, func(w io.Writer) error {
		_, err := io.WriteString(w, "F* = 52.348\n")
		return err
	})
	err := outfile.Write(path, func(w io.Writer) error {
		io.WriteString(w, "F* = ")
		return fmt.Errorf("the solve failed")
	})
	b, _ := os.ReadFile(path)
	fmt.Printf("error: %v\nfile: %s", err, b)
	// Output:
	// error: the solve failed
	// file: F* = 52.348
}
