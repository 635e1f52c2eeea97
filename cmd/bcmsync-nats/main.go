// Command bcmsync-nats is bcmsync with the NATS transport of its
// distributed commands: "bcmsync distributed" and "bcmsync agent" run
// here, bcmsync handing them over when it finds this program beside itself
// or on PATH. It takes every command bcmsync takes, with the same flags
// and exit statuses:
//
//	bcmsync-nats distributed --agents K [flags] FILE
//	bcmsync-nats agent --nats URL --part K [flags] FILE
//
// NATS lives in this second program because Go initializes every linked
// package at start-up: linking the NATS client and server into bcmsync
// cost every command about 3 ms and 8 MB of memory, whatever it did.
package main

import (
	"os"

	"github.com/bcmsync/bcmsync/internal/cli"
	"github.com/bcmsync/bcmsync/internal/natslink"
)

func main() {
	cli.SetNATS(cli.NATS{Dial: natslink.Dial, Serve: natslink.Serve})
	os.Exit(cli.Main(os.Args[1:]))
}
