//go:build !linux

package cli

import (
	"io"
	"os"
)

// peakRSS is the process's peak resident set size (VmHWM) in bytes, or 0
// where /proc/self/status is not available (most systems but Linux).
func peakRSS() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	var buf [4096]byte
	n, _ := io.ReadFull(f, buf[:])
	return vmHWM(buf[:n])
}
