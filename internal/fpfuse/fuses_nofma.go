//go:build amd64 && !amd64.v3

package fpfuse

// Fuses reports whether the compiler may fuse x*y + z on this target.
const Fuses = false
