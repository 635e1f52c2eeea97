package sparse

import "sync"

// kernel6x8 adds alpha times the product of a packed 6 x k strip of A and
// a packed 8 x k strip of B (transposed) to the 6 x 8 tile of C at c with
// row stride ldc. It needs AVX2 and FMA (hasFMA).
//
//go:noescape
func kernel6x8(k int, a, b, c *float64, ldc int, alpha float64)

func cpuid(op, op2 uint32) (eax, ebx, ecx, edx uint32)

func xgetbv() (eax, edx uint32)

// hasFMA reports whether the CPU and the operating system support the
// AVX2 and FMA instructions kernel6x8 uses. It asks the CPU on its first
// call rather than at package initialization: in a virtual machine each
// CPUID instruction exits to the hypervisor, a cost a process whose
// factorizations never reach the kernel (a small graph's tiles) need not
// pay (docs/tuning.md).
var hasFMA = sync.OnceValue(detectFMA)

func detectFMA() bool {
	maxID, _, _, _ := cpuid(0, 0)
	if maxID < 7 {
		return false
	}
	_, _, ecx1, _ := cpuid(1, 0)
	const (
		fma     = 1 << 12
		osxsave = 1 << 27
		avx     = 1 << 28
	)
	if ecx1&(fma|osxsave|avx) != fma|osxsave|avx {
		return false
	}
	// The OS must save the YMM state (XCR0 bits 1 and 2).
	if xcr0, _ := xgetbv(); xcr0&6 != 6 {
		return false
	}
	_, ebx7, _, _ := cpuid(7, 0)
	const avx2 = 1 << 5
	return ebx7&avx2 != 0
}
