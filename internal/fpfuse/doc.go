// Package fpfuse tells tests whether the compiler may fuse a multiply and
// an add (x*y + z) into one fused multiply-add on the target it builds for.
//
// Go's specification lets an implementation fuse them, rounding once
// instead of twice. On amd64 the compiler does so only from GOAMD64=v3 on
// (the default, v1, has no FMA instruction to fuse into); on arm64,
// ppc64, s390x and riscv64 it does. Kernels written to add the same terms
// in the same order as a reference give the reference's bits exactly
// where nothing fuses, and may differ in the last place where either side
// fuses and the other does not. Tests that assert bit-identity compare
// exactly when Fuses is false and to rounding otherwise.
package fpfuse
