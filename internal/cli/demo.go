package cli

import (
	"context"
	"fmt"
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
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		fs.Usage()
		return usageError{fmt.Errorf("demo takes no FILE (it solves its own graph; bcmsync solve FILE solves yours), not %q", pos[0])}
	}
	if _, err := f.options(io.Discard); err != nil {
		return usageError{err}
	}
	var set fileSet
	f.outputs(&set)
	if err := set.check(); err != nil {
		return err
	}
	g, err := datasets.Demo()
	if err != nil {
		return err
	}
	return solveAndWrite(ctx, datasets.DemoName, g, 0, &f, set.toStdout(), stdout, stderr)
}
