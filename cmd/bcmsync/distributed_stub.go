//go:build !nats

package main

import (
	"context"
	"flag"
	"fmt"
	"io"
)

// The distributed commands (distributed.go) link the NATS client and the
// embedded NATS server, which add 20 MB to the binary and, with it, about
// 3 ms and 8 MB of RSS to the start of every command, whatever it does
// (tinyGrid3D: 3.7 ms and 9.3 MB to solve without them, 6.1 ms and 17.9 MB
// with them). bench runs each graph in its own process, and on the
// benchmark suite that start alone moved the geometric mean of the time
// ratio to the C++ peer from 0.225-0.238 to 0.250-0.276. So the default
// build leaves them out, and a build with the nats tag has them:
//
//	go build -tags nats ./cmd/bcmsync
//
// Without the tag the two commands are listed and explain how to get them:
// run, they fail (exit status 1); asked for help, they give it (status 0).
// The distributed solver itself (package sync/distributed) is built and
// tested either way.

// withoutNATS names the commands this build leaves out.
var withoutNATS = map[string]bool{"agent": true, "distributed": true}

func init() {
	for name, short := range map[string]string{
		"agent":       "run one agent of a distributed solve (in builds with -tags nats)",
		"distributed": "solve and certify FILE with K agents exchanging public poses over NATS (in builds with -tags nats)",
	} {
		msg := fmt.Sprintf("this build leaves out the NATS transport (it would slow every command's start); "+
			"build with: go build -tags nats ./cmd/bcmsync, or run: go run -tags nats ./cmd/bcmsync %s ...", name)
		register(command{name: name, usage: name + " [flags] FILE", short: short,
			run: func(_ context.Context, args []string, _, stderr io.Writer) error {
				for _, a := range args {
					if a == "--" {
						break
					}
					if a == "-h" || a == "-help" || a == "--help" {
						fmt.Fprintf(stderr, "usage: bcmsync %s [flags] FILE\n\n%s: %s\n", name, short, msg)
						return flag.ErrHelp
					}
				}
				return fmt.Errorf("bcmsync %s: %s", name, msg)
			}})
	}
}
