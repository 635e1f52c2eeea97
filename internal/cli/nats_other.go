//go:build !unix

package cli

// execProgram runs the program path with argv as a child that takes this
// process's place (standard streams, signals, exit status), since a
// process here cannot become another program.
func execProgram(path string, argv []string) error {
	return forwardSignals(path, argv)
}
