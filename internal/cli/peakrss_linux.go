package cli

import (
	"bytes"
	"syscall"
)

// peakRSS is the process's peak resident set size (VmHWM) in bytes, or 0
// where /proc is not available. It finds the line itself: fmt's scanner and
// a split of the whole text, used only here, were the first use of their
// code and memory in a solve, page faults a small solve paid at its end.
// It reads with plain system calls: os.Open adds a poller registration
// attempt and four fcntl calls, which took about half of the read's 0.12
// ms in a small solve's process (docs/tuning.md, "A small process, fourth
// pass").
func peakRSS() int64 {
	fd, err := syscall.Open("/proc/self/status", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return 0
	}
	defer syscall.Close(fd)
	return readVmHWM(fd)
}

// readVmHWM reads the VmHWM line of the status file open at fd.
func readVmHWM(fd int) int64 {
	// VmHWM is some 1.5 KB into the file, after the Groups line, which a
	// user in many groups makes long: read on in pieces, looking in each
	// piece's whole lines and keeping its last partial line (from its line
	// break, which vmHWM's "\nVmHWM:" needs) for the next.
	var buf [4096]byte
	n := 0
	for {
		k, err := syscall.Read(fd, buf[n:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil || k == 0 {
			return vmHWM(buf[:n]) // the file's end: its last line is whole
		}
		n += k
		i := bytes.LastIndexByte(buf[:n], '\n')
		if i >= 0 {
			if v := vmHWM(buf[:i+1]); v > 0 {
				return v
			}
			n = copy(buf[:], buf[i:n])
		}
		if n == len(buf) {
			n = 0 // a line longer than buf: not the one looked for
		}
	}
}
