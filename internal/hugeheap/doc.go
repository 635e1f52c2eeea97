// Package hugeheap asks the kernel to back the Go heap with transparent
// huge pages (2 MB on amd64) where that pays: in a fresh process about to
// allocate megabytes.
//
// Why: every 4 KB page of fresh memory costs a page fault on first touch,
// and on some kernels and virtual machines that fault is expensive (13 to
// 15 us on the machine the project is measured on, so a solve that touches
// 60 MB of heap spends some 200 ms faulting). A huge page is one fault for
// 512 pages. Linux's default THP mode on many distributions (Debian's, for
// one) is "madvise": only memory marked with madvise(MADV_HUGEPAGE) gets
// huge pages, and the Go runtime never marks its heap. Nor can a program
// mark the heap's future memory: each heap growth maps a fresh region
// over reserved address space (mmap with MAP_FIXED), which drops a mark
// made before.
//
// So Reserve grows the heap at once to the size the caller expects to
// need, by one allocation that is never touched (fresh memory from the
// kernel needs no zeroing), marks that region, and frees it with one
// collection. The region stays mapped and marked; the runtime hands out
// its lowest free addresses first, so the process's later allocations land
// in it and fault in 2 MB pages. They reach it only after the free pages
// below it, in the huge page where the block began and the heap's earlier
// allocations lie; Reserve has the kernel back that page with a huge page
// at once too (MADV_COLLAPSE, Linux 6.1: it copies the pages already
// touched), where the kernel can. That page is then resident whole: up to
// 2 MB more of peak memory, in exchange for some hundreds of faults.
//
// The cost is the collection and a little address-space bookkeeping, so
// Reserve is for a process's start, before its large allocations, and for
// sizes where the faults it saves outweigh that: callers decide with
// their own threshold. It does nothing where the kernel would not use the
// mark (THP "never") or does not need it (THP "always"), on systems other
// than Linux, and when the environment variable BCMSYNC_HUGEPAGES is "0"
// or "off".
//
// The risks, and why the Go runtime itself stopped marking its heap (Go
// 1.21.4, golang/go#64332 and #61718) and collapsing it (#63334): where
// THP's defrag setting is
// "madvise" (the kernel's default) or "always", a fault in marked memory
// may stall while the kernel compacts memory to find a free huge page,
// which on a fragmented, busy machine can cost more than the faults saved;
// and khugepaged may later fill holes the runtime's scavenger returned,
// which grows the resident set of a long-lived process. Reserve is meant
// for short-lived processes that allocate their working set at once (a
// solve from a file); a long-running service embedding the solver should
// not call it. The switch above turns it off where the stalls show.
package hugeheap
