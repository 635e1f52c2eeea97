//go:build !linux

package cli

// peakRSS is the process's peak resident set size in bytes where the
// system reports it (Linux's /proc/self/status, peakrss_linux.go), and 0
// here: no other system has that file in Linux's format.
func peakRSS() int64 { return 0 }
