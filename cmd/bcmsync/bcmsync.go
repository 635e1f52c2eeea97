// Command bcmsync solves pose-graph optimization problems with certifiably
// optimal block-coordinate minimization, and inspects pose-graph files.
//
// Usage:
//
//	bcmsync COMMAND [flags] [args]
//
// Run "bcmsync help" for the list of commands and "bcmsync help COMMAND"
// (or "bcmsync COMMAND -h") for one command's flags, and "bcmsync
// --version" for the version. Exit status: 0 on success (for a solve, a
// certified estimate), 1 on an error (the message goes to stderr), 2 on a
// usage error, 3 to 9 for a result that is not certified, one status per
// way a solve ends short of a certificate.
//
// The distributed commands (distributed, agent) run in a second program,
// bcmsync-nats, which holds the NATS transport: bcmsync finds it beside
// itself or on PATH and hands the command over to it, so that linking NATS
// does not slow the start of every other command. Install both with
//
//	go install github.com/bcmsync/bcmsync/cmd/...@latest
//
// The commands are package internal/cli.
package main

import (
	"os"

	"github.com/bcmsync/bcmsync/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:]))
}
