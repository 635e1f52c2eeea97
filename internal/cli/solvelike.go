package cli

import (
	"flag"
	"fmt"
	"strings"
)

// The solve-like commands (solve, demo, view, bench, distributed) share
// one set of flags: solve's, declared once by solveFlags.register. Each
// takes every one of them unless it truly cannot; those it cannot take are
// its notTaken list, which its help prints with the reasons and which
// makes giving one of them a usage error that says why. A new solve flag
// therefore reaches every solve-like command, and a command that cannot
// honour it has to say so (TestSolveLikeFlags checks both).

// notTaken lists the solve flags (names without dashes) a command does
// not take, grouped by the reason.
type notTaken []struct {
	flags []string
	why   string
}

// has reports whether the flag name is in the list, and why.
func (s notTaken) has(name string) (string, bool) {
	for _, e := range s {
		for _, f := range e.flags {
			if f == name {
				return e.why, true
			}
		}
	}
	return "", false
}

// help is the paragraph of a command's help that names the solve flags it
// does not take and why ("" when it takes them all).
func (s notTaken) help(cmd string) string {
	if len(s) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Of solve's flags, %s takes all but these:", cmd)
	for _, e := range s {
		names := make([]string, len(e.flags))
		for k, f := range e.flags {
			names[k] = dashed(f)
		}
		fmt.Fprintf(&b, "\n    %s: %s", strings.Join(names, ", "), e.why)
	}
	return b.String()
}

// dashed is a flag's name as the help writes it: -o, --tum.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// registerExcept declares on fs every solve flag but those of skip,
// sharing f's values: the flags are solve's own, with solve's usage text
// and defaults.
func (f *solveFlags) registerExcept(fs *flag.FlagSet, skip notTaken) {
	all := flag.NewFlagSet("solve", flag.ContinueOnError)
	f.register(all)
	all.VisitAll(func(fl *flag.Flag) {
		if _, no := skip.has(fl.Name); !no {
			fs.Var(fl.Value, fl.Name, fl.Usage)
		}
	})
}

// registerOnly declares on fs the solve flags names, sharing f's values.
func (f *solveFlags) registerOnly(fs *flag.FlagSet, names ...string) {
	all := flag.NewFlagSet("solve", flag.ContinueOnError)
	f.register(all)
	for _, name := range names {
		fl := all.Lookup(name)
		fs.Var(fl.Value, fl.Name, fl.Usage)
	}
}

// parseSolveLike parses args as parseArgs does, after refusing, with the
// reason, a solve flag the command does not take (one that is not also a
// flag of the command's own, such as view's -o).
func parseSolveLike(fs *flag.FlagSet, skip notTaken, args []string) ([]string, error) {
	for _, a := range args {
		if a == "--" {
			break
		}
		if len(a) < 2 || a[0] != '-' {
			continue
		}
		name := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if k := strings.IndexByte(name, '='); k >= 0 {
			name = name[:k]
		}
		if fs.Lookup(name) != nil {
			continue
		}
		if why, ok := skip.has(name); ok {
			return nil, usageError{fmt.Errorf("%s: %s does not take it: %s", dashed(name), fs.Name(), why)}
		}
	}
	return parseArgs(fs, args)
}
