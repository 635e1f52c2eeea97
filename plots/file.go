package plots

import (
	"fmt"
	"io"

	"github.com/bcmsync/bcmsync/internal/outfile"
)

// createWith writes path with write through package outfile, whole or not
// at all: write fills a temporary file beside path, which replaces path
// only once write and the flush to disk have succeeded, so a failed or
// interrupted drawing never leaves half a figure or page (and an older
// figure at path stays as it was). The folder must exist. write wraps its
// own errors, naming path.
func createWith(path string, write func(w io.Writer) error) error {
	f, err := outfile.Create(path)
	if err != nil {
		return fmt.Errorf("plots: %w", err)
	}
	defer f.Abort()
	if err := write(f); err != nil {
		return err
	}
	if err := f.Commit(); err != nil {
		return fmt.Errorf("plots: %w", err)
	}
	return nil
}
