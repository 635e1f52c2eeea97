package plots

import (
	"fmt"
	"io"

	"github.com/bcmsync/bcmsync/internal/outfile"
)

// createWith writes path with write through outfile.Write, whole or not
// at all: write fills a temporary file beside path, which replaces path
// only once write and the flush to disk have succeeded, so a failed or
// interrupted drawing never leaves half a figure or page (and an older
// figure at path stays as it was). The folder must exist. write wraps its
// own errors, naming path; the file's own (creating, committing) are
// marked as the package's.
func createWith(path string, write func(w io.Writer) error) error {
	var werr error
	err := outfile.Write(path, func(w io.Writer) error {
		werr = write(w)
		return werr
	})
	if err != nil && werr == nil {
		return fmt.Errorf("plots: %w", err)
	}
	return err
}
