// Package outfile writes output files whole or not at all. It is the one
// way bcmsync writes a file: the command-line tool's outputs (-o, --tum,
// --report, the view page, bench tables) and package plots's figures all go
// through it, and so should any new output.
//
// Create opens a temporary file in the destination's folder; Commit flushes
// it to disk and renames it over the destination in one step, and Abort (or
// a failed Commit) removes it. A reader of the destination therefore sees
// the old file or the complete new one, never half of it, whatever happens
// to the writing process in between (an error, an interrupt, a full disk).
// Write wraps the three for the usual case:
//
//	err := outfile.Write(path, func(w io.Writer) error {
//		return g2o.Write(w, g, poses)
//	})
//
// Details that matter to callers:
//   - The destination's folder must exist: Create does not make folders, so
//     a mistyped path is an error naming the missing folder rather than a
//     new tree of folders.
//   - A destination that is a symbolic link is written through: the link's
//     target is replaced, the link stays.
//   - A destination that exists but is not a regular file (a device such as
//     /dev/null or /dev/stdout, a named pipe) is written in place, as
//     os.Create would: it cannot be replaced by renaming, and holds nothing
//     a half-written output could spoil.
//   - An existing destination keeps its permission bits; a new one gets
//     0666 less the umask, as with os.Create.
//   - Renaming replaces the destination's directory entry, so another hard
//     link to the old file keeps the old contents.
//
// Package outfile does not decide which paths a command may write: the
// command checks its outputs against its inputs and each other before it
// starts (internal/cli/files.go).
package outfile
