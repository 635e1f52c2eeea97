//go:build linux

package hugeheap

import (
	"bufio"
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

func thpMode() string {
	b, err := os.ReadFile(thpDir + "enabled")
	if err != nil {
		return ""
	}
	s := string(b)
	if i := strings.IndexByte(s, '['); i >= 0 {
		if j := strings.IndexByte(s[i:], ']'); j > 0 {
			return s[i+1 : i+j]
		}
	}
	return ""
}

// Reserve marks a heap region for huge pages: the region it returns is
// in one mapping whose VmFlags carry hg (MADV_HUGEPAGE), and the heap's
// next large allocation lands in it.
func TestReserveMarksHeap(t *testing.T) {
	if mode := thpMode(); mode != "madvise" {
		t.Skipf("THP mode %q: Reserve does nothing unless it is madvise", mode)
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
	if thpMode() != "madvise" || strictOvercommit() {
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
	if thpMode() != "madvise" || strictOvercommit() || addressLimited() {
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
	if mode := thpMode(); mode != "madvise" {
		t.Skipf("THP mode %q: Reserve does nothing unless it is madvise", mode)
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
