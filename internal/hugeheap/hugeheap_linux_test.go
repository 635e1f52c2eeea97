//go:build linux

package hugeheap

import (
	"bufio"
	"encoding/binary"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

// vmFlags returns the VmFlags of the mapping in /proc/self/smaps that
// contains addr, and whether one does.
func vmFlags(t *testing.T, addr uintptr) ([]string, bool) {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skip("no /proc/self/smaps:", err)
	}
	defer f.Close()
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if flags, ok := strings.CutPrefix(line, "VmFlags:"); ok {
			if in {
				return strings.Fields(flags), true
			}
			continue
		}
		// A mapping's header: "start-end perms offset dev inode [path]".
		span, _, _ := strings.Cut(line, " ")
		lo, hi, ok := strings.Cut(span, "-")
		if !ok || strings.Contains(span, ":") {
			continue
		}
		a, err1 := strconv.ParseUint(lo, 16, 64)
		b, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		in = uintptr(a) <= addr && addr < uintptr(b)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return nil, false
}

// thpBacked reports whether the 4 KB page at addr is part of a transparent
// huge page: its page frame from /proc/self/pagemap, that frame's flags
// from /proc/kpageflags (KPF_THP). Both need privileges (CAP_SYS_ADMIN);
// known is false where they cannot be read, and the callers then leave
// out only the checks that need it.
func thpBacked(addr uintptr) (backed, known bool) {
	var b [8]byte
	read := func(path string, off uint64) (uint64, bool) {
		f, err := os.Open(path)
		if err != nil {
			return 0, false
		}
		defer f.Close()
		if _, err := f.ReadAt(b[:], int64(off)); err != nil {
			return 0, false
		}
		return binary.LittleEndian.Uint64(b[:]), true
	}
	entry, ok := read("/proc/self/pagemap", uint64(addr)/uint64(os.Getpagesize())*8)
	if !ok {
		return false, false
	}
	if entry>>63 == 0 {
		return false, true // not present
	}
	pfn := entry & (1<<55 - 1)
	if pfn == 0 {
		return false, false // no page frames without CAP_SYS_ADMIN
	}
	const kpfTHP = 1 << 22
	flags, ok := read("/proc/kpageflags", pfn*8)
	return flags&kpfTHP != 0, ok
}

// madvCollapseErrno calls madvise(MADV_COLLAPSE) on [lo, lo+n) with the
// kernel's number itself, not the package's constant or collapse, which
// are under test; it retries a passing EAGAIN as collapse does.
func madvCollapseErrno(lo, n uintptr) syscall.Errno {
	for try := 0; ; try++ {
		_, _, errno := syscall.Syscall(syscall.SYS_MADVISE, lo, n, 25)
		if errno != syscall.EAGAIN || try == 2 {
			return errno
		}
	}
}

// canCollapse maps a private region and tries to collapse it: the tests
// of collapse skip where the kernel has no MADV_COLLAPSE (before 6.1, or
// THP "never": EINVAL) or no huge page to give (ENOMEM, EAGAIN), and fail
// on any other refusal.
func canCollapse(t *testing.T) bool {
	t.Helper()
	if strconv.IntSize < 64 {
		return false
	}
	hp := hugePageSize()
	m, err := syscall.Mmap(-1, 0, 2*hp, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return false
	}
	defer syscall.Munmap(m)
	base := uintptr(unsafe.Pointer(&m[0]))
	lo := (base + uintptr(hp) - 1) &^ (uintptr(hp) - 1)
	m[lo-base] = 1
	switch errno := madvCollapseErrno(lo, uintptr(hp)); errno {
	case 0:
		return true
	case syscall.EINVAL, syscall.ENOMEM, syscall.EAGAIN:
		return false
	default:
		t.Fatalf("MADV_COLLAPSE of a private, touched range: %v", errno)
		return false
	}
}

// collapse backs a range of whole huge pages with huge pages and keeps
// its contents: the bytes written before, and zeros where nothing was.
// A range that is not all mapped is refused.
func TestCollapse(t *testing.T) {
	if !canCollapse(t) {
		t.Skip("the kernel does not collapse pages into huge pages here")
	}
	hp := hugePageSize()
	m, err := syscall.Mmap(-1, 0, 3*hp, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(m)
	base := uintptr(unsafe.Pointer(&m[0]))
	lo := (base + uintptr(hp) - 1) &^ (uintptr(hp) - 1)
	off := int(lo - base)
	// Touch a few 4 KB pages, as a heap's first allocations would.
	for _, k := range []int{0, 3, 17, 511} {
		m[off+k*4096+5] = byte(k + 1)
	}
	if backed, known := thpBacked(lo); madviseMode() && known && backed {
		t.Fatal("a range of touched 4 KB pages is a huge page before collapse")
	}
	if !collapse(lo, uintptr(hp)) {
		t.Fatal("collapse of a mapped, touched range failed")
	}
	for _, a := range []uintptr{lo, lo + 17*4096, lo + uintptr(hp) - 1} {
		if backed, known := thpBacked(a); known && !backed {
			t.Errorf("after collapse, %#x (range [%#x, %#x)) is not in a huge page", a, lo, lo+uintptr(hp))
		} else if !known {
			t.Log("/proc/kpageflags not readable: the huge page itself is not checked")
			break
		}
	}
	for i := 0; i < hp; i++ {
		want := byte(0)
		if i%4096 == 5 {
			switch k := i / 4096; k {
			case 0, 3, 17, 511:
				want = byte(k + 1)
			}
		}
		if m[off+i] != want {
			t.Fatalf("byte %d after collapse = %d, want %d", i, m[off+i], want)
		}
	}
	// A range with a hole is refused, and nothing breaks.
	if _, _, errno := syscall.Syscall(syscall.SYS_MUNMAP, lo+uintptr(hp), uintptr(hp), 0); errno != 0 {
		t.Fatal(errno)
	}
	if collapse(lo+uintptr(hp), uintptr(hp)) {
		t.Error("collapse of an unmapped range succeeded")
	}
}

var marksRan bool

// Reserve marks a heap region for huge pages: the region it returns is
// in one mapping whose VmFlags carry hg (MADV_HUGEPAGE), and the heap's
// next large allocation lands in it.
func TestReserveMarksHeap(t *testing.T) {
	// Reserve is once per process: a second call finds the first region
	// free, and its block lands in it (go test -count=2).
	if marksRan {
		t.Skip("ran already in this process")
	}
	marksRan = true
	if !madviseMode() {
		t.Skip("THP is not in madvise mode: Reserve does nothing")
	}
	if strictOvercommit() || addressLimited() || strconv.IntSize < 64 {
		t.Skip("strict overcommit, a limited or 32-bit address space: Reserve does nothing")
	}
	t.Setenv(Env, "")
	const n = 16 << 20
	start, end := Reserve(n)
	if start == 0 || end-start < n || start%uintptr(hugePageSize()) != 0 {
		t.Fatalf("Reserve(%d) = [%#x, %#x): want an aligned range of about %d bytes", n, start, end, n)
	}
	for _, a := range []uintptr{start, end - 1} {
		flags, ok := vmFlags(t, a)
		if !ok {
			t.Fatalf("no mapping holds %#x", a)
		}
		if !slices.Contains(flags, "hg") {
			t.Errorf("mapping of %#x has VmFlags %v, without hg", a, flags)
		}
	}
	// The huge page below the region, where the heap's next small
	// allocations go first, is a huge page already, where it is all heap
	// (the test binary's heap might begin inside it) and the kernel
	// collapses pages.
	below := start - uintptr(hugePageSize())
	if backed, known := thpBacked(below); known && !backed && canCollapse(t) {
		if errno := madvCollapseErrno(below, uintptr(hugePageSize())); errno == 0 {
			t.Errorf("the huge page below the region, at %#x, was not collapsed, and the kernel collapses it", below)
		}
	}
	// The region is free heap again: an allocation of its size fits in it.
	b := make([]byte, n/2)
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if p+uintptr(len(b)) <= start || p >= end {
		t.Errorf("a %d-byte allocation after Reserve is at %#x, outside the region [%#x, %#x)", len(b), p, start, end)
	}
	b[0] = 1
}

// Turned off, Reserve does nothing: no range, no allocation.
func TestReserveOff(t *testing.T) {
	for _, v := range []string{"0", "off"} {
		t.Setenv(Env, v)
		if !Off() {
			t.Fatalf("%s=%s: Off() = false", Env, v)
		}
		allocs := testing.AllocsPerRun(1, func() {
			if start, end := Reserve(64 << 20); start != 0 || end != 0 {
				t.Errorf("%s=%s: Reserve = [%#x, %#x), want nothing", Env, v, start, end)
			}
		})
		if allocs != 0 {
			t.Errorf("%s=%s: Reserve allocated %v times", Env, v, allocs)
		}
	}
}

// Below one huge page Reserve does nothing.
func TestReserveSmall(t *testing.T) {
	t.Setenv(Env, "")
	if start, end := Reserve(4096); start != 0 || end != 0 {
		t.Errorf("Reserve(4096) = [%#x, %#x), want nothing", start, end)
	}
}

// Under a limit on the address space Reserve does nothing: a heap growth
// past the limit would end the process.
func TestReserveAddressLimit(t *testing.T) {
	if !madviseMode() || strictOvercommit() {
		t.Skip("Reserve does nothing here anyway")
	}
	t.Setenv(Env, "")
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_AS, &old); err != nil {
		t.Skip(err)
	}
	if old.Cur != ^uint64(0) {
		t.Skip("the address space is limited already")
	}
	lim := old
	lim.Cur = 1 << 46
	if err := syscall.Setrlimit(syscall.RLIMIT_AS, &lim); err != nil {
		t.Skip(err)
	}
	start, end := Reserve(16 << 20)
	if err := syscall.Setrlimit(syscall.RLIMIT_AS, &old); err != nil {
		t.Fatal(err)
	}
	if start != 0 || end != 0 {
		t.Errorf("Reserve under RLIMIT_AS = [%#x, %#x), want nothing", start, end)
	}
}

// Under a memory limit the reservation is at most half of it.
func TestReserveMemoryLimit(t *testing.T) {
	if !madviseMode() || strictOvercommit() || addressLimited() {
		t.Skip("Reserve does nothing here anyway")
	}
	t.Setenv(Env, "")
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	const limit = 64 << 20
	debug.SetMemoryLimit(limit)
	start, end := Reserve(limit * 4)
	if end-start > limit/2 {
		t.Errorf("Reserve under a %d-byte memory limit marked %d bytes, want at most half", limit, end-start)
	}
}

// memTotal, from sysinfo, is /proc/meminfo's MemTotal.
func TestMemTotal(t *testing.T) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Skip(err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) != 3 || f[0] != "MemTotal:" || f[2] != "kB" {
		t.Skipf("unexpected first line of /proc/meminfo: %q", line)
	}
	kb, err := strconv.Atoi(f[1])
	if err != nil {
		t.Fatal(err)
	}
	if got := memTotal(); got != kb<<10 {
		t.Errorf("memTotal() = %d, /proc/meminfo says %d kB = %d", got, kb, kb<<10)
	}
}

// readSmall reads a file that fits its buffer, and refuses one that does
// not or does not exist.
func TestReadSmall(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "setting")
	if err := os.WriteFile(path, []byte("always [madvise] never\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var buf [64]byte
	if b, ok := readSmall(path, buf[:]); !ok || string(b) != "always [madvise] never\n" {
		t.Errorf("readSmall = %q, %v", b, ok)
	}
	if b, ok := readSmall(path, buf[:10]); ok {
		t.Errorf("readSmall into 10 bytes = %q, true: want a refusal", b)
	}
	if _, ok := readSmall(filepath.Join(dir, "none"), buf[:]); ok {
		t.Error("readSmall of a missing file: ok")
	}
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, nil, 0o644)
	if b, ok := readSmall(empty, buf[:]); !ok || len(b) != 0 {
		t.Errorf("readSmall of an empty file = %q, %v", b, ok)
	}
}

// The region covers n, rounded up to whole huge pages: callers size the
// heap goal from it.
func TestReserveCoversN(t *testing.T) {
	if !madviseMode() {
		t.Skip("THP is not in madvise mode: Reserve does nothing")
	}
	if strictOvercommit() || addressLimited() || strconv.IntSize < 64 {
		t.Skip("strict overcommit, a limited or 32-bit address space: Reserve does nothing")
	}
	t.Setenv(Env, "")
	hp := uintptr(hugePageSize())
	n := 3*hp + 12345
	start, end := Reserve(int(n))
	if want := 4 * hp; end-start != want || start%hp != 0 {
		t.Errorf("Reserve(%d) = [%#x, %#x), %d bytes: want %d, huge-page aligned", n, start, end, end-start, want)
	}
}
