// Package cli is the bcmsync command line: every command of the bcmsync
// program, and of bcmsync-nats, which adds the NATS transport of the
// distributed commands (SetNATS). The two programs are thin mains in
// cmd/bcmsync and cmd/bcmsync-nats.
//
// Each command lives in its own file and registers itself (register).
// Exit status: 0 on success (for a solve, a certified estimate), 1 on an
// error (the message goes to stderr), 2 on a usage error, 3 to 9 for a
// result that is not certified, one status per way a solve ends short of
// a certificate (exit.go).
//
// Files: no output may overwrite an input or another output, every output
// is written whole or not at all, and "-" names standard input or output
// (files.go).
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/bcmsync/bcmsync/internal/hugeheap"
)

// A command is one subcommand. Each lives in its own file and registers
// itself from an init function, so adding a subcommand means adding a file:
//
//	func init() {
//		register(command{name: "info", usage: "info [flags] FILE...", short: "...", run: runInfo})
//	}
type command struct {
	name  string
	usage string // the synopsis after "bcmsync ", e.g. "info [flags] FILE..."
	short string // one line for the command list
	// run executes the command with the arguments after its name. By
	// convention a command prints its own usage on a usage error (a
	// FlagSet from newFlagSet does) and returns a usageError (status 2); -h
	// returns an error wrapping flag.ErrHelp (status 0); any other error
	// is printed as it is, with status 1.
	run func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var commands = map[string]command{}

// register adds c to the command table; called from init functions.
func register(c command) {
	if _, dup := commands[c.name]; dup {
		panic("bcmsync: command " + c.name + " registered twice")
	}
	commands[c.name] = c
}

// usageError marks a mistake in the command line: exit status 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// Main runs the command line args (without the program name) as the
// process bcmsync, on the standard streams, and returns its exit status.
func Main(args []string) int {
	return runProcess(args)
}

// runProcess runs the command line args as the process bcmsync: with its
// memory setting and its signal handling, on the standard streams; it
// returns the exit status. Test children (bench_test.go) run through it
// too.
func runProcess(args []string) int {
	command := ""
	if len(args) > 0 {
		command = args[0]
	}
	if os.Getenv("GOGC") == "" {
		setGCPolicy(command)
	}
	ctx := watchSignals()
	if command == "distributed" || command == "agent" {
		// They hand over to bcmsync-nats or connect to a server, which
		// their callers (and tests) take as the sign that an interrupt
		// is handled; distributed gives its stderr to the agents it
		// starts, which must be the file itself (not a pipe that this
		// process copies).
		awaitSignals()
		return run(ctx, args, os.Stdout, os.Stderr)
	}
	return run(ctx, args, signalGated{os.Stdout}, signalGated{os.Stderr})
}

// run executes the command line args (without the program name) and returns
// the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		// With no arguments the tool shows what it does on its own demo.
		args = []string{"demo"}
	}
	name := args[0]
	switch name {
	case "--version", "-version":
		fmt.Fprintln(stdout, versionLine())
		return exitOK
	case "help", "-h", "-help", "--help":
		if len(args) == 1 || args[1] == "help" {
			writeUsage(stdout)
			return exitOK
		}
		c, ok := commands[args[1]]
		if !ok {
			fmt.Fprintf(stderr, "bcmsync help: unknown command %q\n\n", args[1])
			writeUsage(stderr)
			return exitUsage
		}
		// A command's -h prints its usage on its stderr: send that to stdout.
		if err := c.run(ctx, []string{"-h"}, stdout, stdout); err != nil && !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stderr, err)
			return exitError
		}
		return exitOK
	}
	c, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "bcmsync: unknown command %q\n\n", name)
		writeUsage(stderr)
		return exitUsage
	}
	err := c.run(ctx, args[1:], stdout, stderr)
	var ue usageError
	var nc notCertifiedError
	var es exitStatus
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "bcmsync %s: %v\n", name, ue.err)
		return exitUsage
	case errors.As(err, &nc):
		fmt.Fprintln(stderr, err)
		return nc.code
	case errors.As(err, &es):
		return es.code // the program it ran has said why
	case errors.Is(err, context.Canceled):
		fmt.Fprintf(stderr, "bcmsync %s: interrupted\n", name)
		return exitCancelled
	default:
		fmt.Fprintln(stderr, err)
		return exitError
	}
}

// versionLine is what --version prints: the module version (a release,
// Go's pseudo-version of the commit when built from a checkout, "(devel)"
// without VCS information), the VCS commit with a "+dirty" mark for
// uncommitted changes and the commit time, and the Go version and platform.
func versionLine() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "bcmsync (unknown version: built without module information)"
	}
	version := bi.Main.Version
	if version == "" {
		version = "(devel)" // a test binary, or go run of a file list
	}
	var rev, when string
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	commit := "commit unknown (built without VCS information)"
	if rev != "" {
		commit = "commit " + rev
		if dirty {
			commit += "+dirty"
		}
		if when != "" {
			commit += " (" + when + ")"
		}
	}
	return fmt.Sprintf("bcmsync %s %s, %s %s/%s", version, commit, bi.GoVersion, runtime.GOOS, runtime.GOARCH)
}

func writeUsage(w io.Writer) {
	var b strings.Builder
	b.WriteString("bcmsync: certifiably optimal pose-graph optimization by block-coordinate minimization\n\n")
	b.WriteString("usage: bcmsync COMMAND [flags] [args]\n\ncommands:\n")
	names := make([]string, 0, len(commands))
	width := 0
	for n := range commands {
		names = append(names, n)
		width = max(width, len(n))
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(&b, "  %-*s  %s\n", width, n, commands[n].short)
	}
	b.WriteString("\nRun \"bcmsync help COMMAND\" for a command's flags, \"bcmsync --version\" for the version.\n\n")
	b.WriteString("files: no output may name an input or another output (refused, exit 2), every output\n" +
		"is written whole or not at all, an output file's folder must exist, and - names\n" +
		"standard input or output where one file is read or written.\n\n")
	fmt.Fprintf(&b, "memory: on Linux, solve and view of a file of %d KB or more (replay: %d KB) ask for\n"+
		"transparent huge pages for their heap (fewer page faults); %s=0 turns that off.\n"+
		"The collector runs at 50%% once 32 MB are live and 10%% past 1 GiB (distributed and\n"+
		"agent: 20%%, then 10%%; replay: 100%% throughout); GOGC, if set, replaces that.\n\n",
		minReserve/heapPerInputByte>>10, minReserve/replayPerInputByte>>10, hugeheap.Env)
	exitStatusHelp(&b)
	io.WriteString(w, b.String())
}

// newFlagSet returns a FlagSet for the command name that reports its
// errors, and the usage for -h, on stderr: "usage: bcmsync " + usage, the
// doc paragraph if any, and the flags.
func newFlagSet(name, usage, doc string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: bcmsync %s\n", usage)
		if doc != "" {
			fmt.Fprintf(stderr, "\n%s\n", doc)
		}
		fmt.Fprintf(stderr, "\nflags:\n")
		fs.PrintDefaults()
	}
	return fs
}

// parseArgs parses args with fs and returns the positional arguments.
// Unlike fs.Parse it also takes flags after positional arguments
// ("info FILE --json"); "--" ends the flags. Errors are usageErrors, one
// wrapping flag.ErrHelp for -h.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, usageError{err}
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if k := len(args) - len(rest) - 1; k >= 0 && args[k] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}
