//go:build !linux

package hugeheap

// Reserve does nothing outside Linux: transparent huge pages and their
// madvise mark are Linux's.
func Reserve(n int) (start, end uintptr) { return 0, 0 }
