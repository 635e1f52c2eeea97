package plots

import (
	"fmt"
	"io"
	"os"
)

// createWith creates path and lets write fill it. A failure to close the
// file (where a full disk may first show) is the error when write
// succeeded, so a truncated figure or page is never reported as written.
// write wraps its own errors, naming path.
func createWith(path string, write func(w io.Writer) error) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("plots: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("plots: %w", cerr)
		}
	}()
	return write(f)
}
