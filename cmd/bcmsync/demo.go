package main

import (
	"context"
	"io"

	"github.com/bcmsync/bcmsync/datasets"
)

func init() {
	register(command{
		name:  "demo",
		usage: "demo [flags]",
		short: "solve the embedded demo graph, print the certificate and draw its plots (what a bare bcmsync runs)",
		run:   runDemo,
	})
}

// runDemo solves the embedded demo graph: a synthetic 2-D Manhattan world
// made by package datasets, so the tool shows itself with no file at all.
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("demo", "demo [flags]",
		"Solves the embedded demo graph (a synthetic 2-D Manhattan world, "+datasets.DemoName+") and writes its plots.", stderr)
	var f solveFlags
	f.register(fs)
	fs.Lookup("plots").DefValue = "bcmsync-demo"
	f.plots = "bcmsync-demo"
	if _, err := parseArgs(fs, args); err != nil {
		return err
	}
	g, err := datasets.Demo()
	if err != nil {
		return err
	}
	_, err = solveAndWrite(ctx, datasets.DemoName, g, 0, &f, stdout, stderr)
	return err
}
