package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/bcmsync/bcmsync/g2o"
	"github.com/bcmsync/bcmsync/posegraph"
)

type infoOptions struct {
	json    bool
	lenient bool
}

func (o *infoOptions) declare(fs *flag.FlagSet) {
	fs.BoolVar(&o.json, "json", false, "print one JSON object per file")
	fs.BoolVar(&o.lenient, "lenient", false, "skip records of unsupported types (landmarks, priors, ...) with a warning")
}

const (
	infoUsage = "info [--json] [--lenient] FILE..."
	infoDoc   = `For each g2o or TORO file, print the dimension d, the numbers of poses n and
edges m, the connected components (their sizes when there are several), the
minimum, mean and maximum degree, the number of loop closures (edges whose
vertex ids are not consecutive, |i-j| != 1), the FIX'ed vertices and how many
poses have an initial estimate.`
)

func init() {
	register(command{
		name:  "info",
		usage: infoUsage,
		short: "describe pose-graph files: size, connectivity, degrees, loop closures",
		run:   runInfo,
	})
}

// graphInfo is what info reports about one file; the JSON names are part
// of the command's interface.
type graphInfo struct {
	File           string   `json:"file"`
	D              int      `json:"d"`
	N              int      `json:"n"`
	M              int      `json:"m"`
	Components     int      `json:"components"`
	ComponentSizes []int    `json:"component_sizes"`
	DegreeMin      int      `json:"degree_min"`
	DegreeMean     float64  `json:"degree_mean"`
	DegreeMax      int      `json:"degree_max"`
	LoopClosures   int      `json:"loop_closures"`
	Fixed          []int    `json:"fixed"` // vertex ids
	Estimates      int      `json:"initial_estimates"`
	Warnings       []string `json:"warnings,omitempty"`
}

func runInfo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var opts infoOptions
	fs := newFlagSet("info", infoUsage, infoDoc, stderr)
	opts.declare(fs)
	files, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		fs.Usage()
		return usageError{errors.New("no FILE given")}
	}
	for k, file := range files {
		if err := ctx.Err(); err != nil {
			return err
		}
		var warns []string
		g, err := g2o.ReadFile(file, g2o.ReadOptions{
			Lenient: opts.lenient,
			Warn:    func(msg string) { warns = append(warns, msg) },
		})
		for _, w := range warns {
			fmt.Fprintln(stderr, "warning:", w)
		}
		if err != nil {
			return err
		}
		info := describe(g, file)
		info.Warnings = warns
		if opts.json {
			b, err := json.Marshal(info)
			if err != nil {
				return err
			}
			if _, err := fmt.Fprintf(stdout, "%s\n", b); err != nil {
				return err
			}
			continue
		}
		if k > 0 {
			fmt.Fprintln(stdout)
		}
		if err := writeInfo(stdout, info); err != nil {
			return err
		}
	}
	return nil
}

// describe computes the statistics info reports.
func describe(g *posegraph.Graph, file string) graphInfo {
	n := g.N()
	info := graphInfo{File: file, D: g.D, N: n, M: g.M(), Fixed: []int{}}
	for _, c := range g.Components() {
		info.ComponentSizes = append(info.ComponentSizes, len(c))
	}
	info.Components = len(info.ComponentSizes)
	deg := make([]int, n)
	for _, e := range g.Edges {
		deg[e.I]++
		deg[e.J]++
		if d := g.IDs[e.I] - g.IDs[e.J]; d != 1 && d != -1 {
			info.LoopClosures++
		}
	}
	if n > 0 {
		info.DegreeMin, info.DegreeMax = deg[0], deg[0]
		for _, d := range deg {
			info.DegreeMin = min(info.DegreeMin, d)
			info.DegreeMax = max(info.DegreeMax, d)
		}
		info.DegreeMean = float64(2*g.M()) / float64(n)
	}
	for _, i := range g.Fixed {
		info.Fixed = append(info.Fixed, g.IDs[i])
	}
	for _, h := range g.HasInitial {
		if h {
			info.Estimates++
		}
	}
	return info
}

func writeInfo(w io.Writer, s graphInfo) error {
	var b strings.Builder
	row := func(k, format string, args ...any) {
		fmt.Fprintf(&b, "%-16s"+format+"\n", append([]any{k}, args...)...)
	}
	row("file", "%s", s.File)
	row("dimension", "%d", s.D)
	row("poses", "%d", s.N)
	row("edges", "%d", s.M)
	if s.Components > 1 {
		sizes := make([]string, len(s.ComponentSizes))
		for k, c := range s.ComponentSizes {
			sizes[k] = fmt.Sprint(c)
		}
		row("components", "%d (sizes %s)", s.Components, strings.Join(sizes, ", "))
	} else {
		row("components", "%d", s.Components)
	}
	row("degree", "min %d, mean %.3f, max %d", s.DegreeMin, s.DegreeMean, s.DegreeMax)
	row("loop closures", "%d", s.LoopClosures)
	if len(s.Fixed) == 0 {
		row("fixed", "none")
	} else {
		row("fixed", "%s", strings.Trim(fmt.Sprint(s.Fixed), "[]"))
	}
	row("estimates", "%d of %d poses", s.Estimates, s.N)
	_, err := io.WriteString(w, b.String())
	return err
}
