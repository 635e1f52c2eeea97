//go:build unix

package cli

import (
	"fmt"
	"os"
	"syscall"
)

// execProgram makes this process the program path with argv: it keeps the
// process id, standard streams and signal disposition, and its exit
// status is the program's. It returns only on failure.
func execProgram(path string, argv []string) error {
	err := syscall.Exec(path, argv, os.Environ())
	return fmt.Errorf("running %s: %w", path, err)
}
