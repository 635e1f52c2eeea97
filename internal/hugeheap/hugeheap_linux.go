//go:build linux

package hugeheap

import (
	"bytes"
	"math"
	"runtime"
	"runtime/debug"
	"strconv"
	"syscall"
	"unsafe"
)

const (
	thpDir = "/sys/kernel/mm/transparent_hugepage/"
	// defaultHugePage is the PMD size on amd64 and arm64 with 4 KB pages,
	// for a kernel that does not say (hpage_pmd_size appeared in 4.18).
	defaultHugePage = 2 << 20
)

// Reserve grows the heap by n bytes, rounded up to whole huge pages, of
// fresh memory marked for huge pages and frees it, and returns the marked
// range [start, end) (empty when it did nothing). Call it at most once, early in the process and before the
// large allocations: only memory the heap has not yet used is fresh, and a
// region the heap already used would be cleared (touched) by the
// allocation.
//
// It does nothing when the environment turns it off (Off), when THP is
// "never" (the mark is ignored) or "always" (every aligned region gets huge
// pages already), or when n is below one huge page. n is capped at half the
// runtime's memory limit (GOMEMLIMIT) and at half the machine's memory, so
// that a generous estimate never makes the runtime's mapping fail under the
// kernel's overcommit heuristic. With strict overcommit
// (vm.overcommit_memory 2), where the untouched region would still count
// against the commit limit, or under a limit on the address space (ulimit
// -v or -d), it does nothing: a heap growth the kernel refuses is a fatal
// error in the Go runtime, not an error to return.
func Reserve(n int) (start, end uintptr) {
	// A 32-bit address space has no room to spare for a reservation.
	if strconv.IntSize < 64 || Off() || !madviseMode() || strictOvercommit() || addressLimited() {
		return 0, 0
	}
	hp := hugePageSize()
	// The cap is a guard against a mapping the kernel refuses, so where
	// the machine's memory cannot be read there is no reservation.
	half := memTotal() / 2
	if half == 0 {
		return 0, 0
	}
	if n < hp {
		return 0, 0
	}
	// Whole huge pages: the region covers n (a caller sizes its heap
	// goal from the region, and one rounded down to the huge page below
	// n left a 1,000-pose solve a second collection).
	n = (n + hp - 1) &^ (hp - 1)
	n = min(n, half)
	// The freed region counts as the process's memory for the runtime's
	// memory limit (GOMEMLIMIT) until the scavenger returns it, so it
	// must not come near the limit: the collector and the scavenger would
	// work to bring the process under it.
	if limit := debug.SetMemoryLimit(-1); int64(n) > limit/2 {
		n = int(limit / 2)
	}
	if n < hp {
		return 0, 0
	}
	// One more huge page so that the aligned interior covers n. The
	// collector is off meanwhile: the block is far above the heap goal, so
	// allocating it would start a collection, with the block still live,
	// before the one below that frees it.
	gcPercent := debug.SetGCPercent(-1)
	b := make([]byte, n+hp)
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	start = (lo + uintptr(hp) - 1) &^ (uintptr(hp) - 1)
	end = start + uintptr(n)&^(uintptr(hp)-1)
	off := int(start - lo)
	if syscall.Madvise(b[off:off+int(end-start)], syscall.MADV_HUGEPAGE) != nil {
		start, end = 0, 0
	} else {
		// The huge page below the region holds the block's first bytes
		// and, in a fresh process, the heap's earlier allocations. After
		// the collection the runtime hands out that page's free 4 KB
		// pages first, each a fault of its own, before it reaches the
		// marked region. Backed by one huge page now, while the collector
		// is off and the page is quiet, they cost no fault.
		collapse(start-uintptr(hp), uintptr(hp))
	}
	b = nil
	debug.SetGCPercent(gcPercent)
	// The block is dead; a collection now frees its pages for the next
	// allocations. Without it the runtime would collect anyway at its next
	// allocation (the block is far above the heap goal), but concurrently,
	// and the allocations made meanwhile would grow the heap past the
	// marked region.
	runtime.GC()
	return start, end
}

// madvCollapse is MADV_COLLAPSE (Linux 6.1), which the syscall package
// does not name; its value is the same on every Linux architecture Go
// supports.
const madvCollapse = 25

// collapse asks the kernel to back [lo, lo+n), a range of whole huge pages
// in one mapping, with huge pages at once, copying the 4 KB pages already
// there (MADV_COLLAPSE). It is a hint: on a kernel without it, or where the
// range is not all mapped, nothing happens. The kernel may refuse for a
// passing reason (EAGAIN, a page it could not isolate at that moment);
// a second try then succeeds on the machine the project is measured on,
// where a first try failed in about one solve of three.
func collapse(lo, n uintptr) bool {
	for try := 0; try < 3; try++ {
		_, _, errno := syscall.Syscall(syscall.SYS_MADVISE, lo, n, madvCollapse)
		if errno == 0 {
			return true
		}
		if errno != syscall.EAGAIN {
			return false
		}
	}
	return false
}

// madviseMode reports whether THP is in "madvise" mode, the one in which
// marking memory changes what the kernel does.
func madviseMode() bool {
	var buf [128]byte
	b, ok := readSmall(thpDir+"enabled", buf[:])
	return ok && bytes.Contains(b, []byte("[madvise]"))
}

// hugePageSize is the size of a transparent huge page.
func hugePageSize() int {
	if v := readInt(thpDir + "hpage_pmd_size"); v > 0 {
		return v
	}
	return defaultHugePage
}

// strictOvercommit reports whether the kernel refuses to overcommit memory,
// or may: true where the setting cannot be read.
func strictOvercommit() bool {
	var buf [16]byte
	b, ok := readSmall("/proc/sys/vm/overcommit_memory", buf[:])
	return !ok || string(bytes.TrimSpace(b)) == "2"
}

// addressLimited reports whether the process's address space or data
// segment is limited (RLIMIT_AS, RLIMIT_DATA).
func addressLimited() bool {
	for _, r := range []int{syscall.RLIMIT_AS, syscall.RLIMIT_DATA} {
		var lim syscall.Rlimit
		if syscall.Getrlimit(r, &lim) != nil || lim.Cur != ^uint64(0) {
			return true
		}
	}
	return false
}

// memTotal is the machine's memory in bytes (MemTotal of /proc/meminfo,
// which sysinfo reports without formatting the whole of that file), or 0
// if unknown.
func memTotal() int {
	var si syscall.Sysinfo_t
	if syscall.Sysinfo(&si) != nil {
		return 0
	}
	unit := uint64(si.Unit)
	if unit == 0 {
		unit = 1 // kernels before 2.3.23
	}
	// Totalram is 32 bits wide on 32-bit systems, where Unit scales it.
	return int(min(uint64(si.Totalram)*unit, math.MaxInt))
}

// readInt reads a file holding one decimal integer; 0 if it cannot.
func readInt(path string) int {
	var buf [32]byte
	b, ok := readSmall(path, buf[:])
	if !ok {
		return 0
	}
	v, err := strconv.Atoi(string(bytes.TrimSpace(b)))
	if err != nil {
		return 0
	}
	return v
}

// readSmall reads the file at path, a kernel setting of a few bytes, into
// buf, and returns the bytes read; ok is false if it cannot be read or
// does not fit. It reads with plain system calls: os.ReadFile adds a
// stat, a second read and, for sysfs files, which can be polled, their
// registration with the runtime's poller and its removal, some 40 us a
// file on the machine the project is measured on, where every solve of
// a file of 64 KB or more reads these three.
func readSmall(path string, buf []byte) (_ []byte, ok bool) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	for err == syscall.EINTR {
		fd, err = syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	}
	if err != nil {
		return nil, false
	}
	defer syscall.Close(fd)
	n := 0
	for n < len(buf) {
		k, err := syscall.Read(fd, buf[n:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, false
		}
		if k == 0 {
			return buf[:n], true
		}
		n += k
	}
	return nil, false // longer than buf: not the file expected
}
