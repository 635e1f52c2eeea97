package cli

import "syscall"

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
	var buf [4096]byte // the file is about 1.5 KB
	n := 0
	for n < len(buf) {
		k, err := syscall.Read(fd, buf[n:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil || k == 0 {
			break
		}
		n += k
	}
	return vmHWM(buf[:n])
}
