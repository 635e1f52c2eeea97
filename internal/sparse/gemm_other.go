//go:build !amd64

package sparse

// Without the amd64 kernel gemmNT always takes gonum's Dgemm.
func hasFMA() bool { return false }

func kernel6x8(k int, a, b, c *float64, ldc int, alpha float64) {
	panic("sparse: kernel6x8 without AVX2")
}
