package fpfuse

import "testing"

// x*y + z with x*y inexact: a fused multiply-add rounds once and gives
// 2^-104 where separate operations give 0 (x*y rounds to 1 + 2^-51, so
// the sum is exactly 0). Where Fuses is false the compiler must not fuse.
func TestFuses(t *testing.T) {
	x, y, z := 1+0x1p-52, 1-0x1p-53, -(1 + 0x1p-52 - 0x1p-53)
	x, y, z = id(x), id(y), id(z)
	got := x*y + z
	if !Fuses && got != float64(x*y)+z {
		t.Errorf("x*y + z = %v, separately rounded %v: the compiler fused on a target where Fuses is false", got, float64(x*y)+z)
	}
}

//go:noinline
func id(v float64) float64 { return v }
