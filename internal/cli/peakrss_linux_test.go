package cli

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// readVmHWM finds the line wherever the reads' pieces cut the file: after a
// Groups line longer than its buffer, with the number cut at a piece's end,
// and at the file's end without a line break.
func TestReadVmHWM(t *testing.T) {
	long := "Groups:\t" + strings.Repeat("1234567890 ", 900) + "\n" // 9.9 KB
	for _, c := range []struct {
		name, text string
		want       int64
	}{
		{"short", "Name:\tbcmsync\nVmPeak:\t 99 kB\nVmHWM:\t   12345 kB\nVmRSS:\t 1 kB\n", 12345 << 10},
		{"after a long line", "Name:\tbcmsync\n" + long + "VmHWM:\t   67890 kB\nVmRSS:\t 1 kB\n", 67890 << 10},
		{"the number across pieces", strings.Repeat("x", 4096-12) + "\nVmHWM:\t 1234567 kB\n", 1234567 << 10},
		{"at the end", "Name:\tb\nVmHWM:\t 42 kB", 42 << 10},
		{"missing", "Name:\tb\n" + long + "VmRSS:\t 1 kB\n", 0},
	} {
		path := filepath.Join(t.TempDir(), "status")
		if err := os.WriteFile(path, []byte(c.text), 0o644); err != nil {
			t.Fatal(err)
		}
		fd, err := syscall.Open(path, syscall.O_RDONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		got := readVmHWM(fd)
		syscall.Close(fd)
		if got != c.want {
			t.Errorf("%s: readVmHWM = %d, want %d", c.name, got, c.want)
		}
	}
}
