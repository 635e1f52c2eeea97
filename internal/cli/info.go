package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/bcmsync/bcmsync/g2o"
	"github.com/bcmsync/bcmsync/posegraph"
)

type infoOptions struct {
	json    bool
	lenient bool
	rawQuat bool
}

func (o *infoOptions) declare(fs *flag.FlagSet) {
	fs.BoolVar(&o.json, "json", false, "print one JSON object per file")
	fs.BoolVar(&o.lenient, "lenient", false, lenientUsage)
	fs.BoolVar(&o.rawQuat, "raw-quaternions", false, rawQuatUsage+
		"; info then also reports the largest | |q|^2 - 1 | of the edge quaternions")
}

const (
	infoUsage = "info [--json] [--lenient] [--raw-quaternions] FILE..."
	infoDoc   = `For each g2o or TORO file, print the dimension d, the numbers of poses n and
edges m, the connected components (their sizes when there are several), the
minimum, mean and maximum degree, the number of loop closures (edges whose
vertex ids are not consecutive, |i-j| != 1), the FIX'ed vertices and how many
poses have an initial estimate. FILE - reads standard input.

A file that cannot be read is reported on stderr (FILE:LINE: problem; with
--json also as {"file": ..., "error": ...} on stdout) and info goes on with
the next; the exit status is 1 when any file was bad, 0 when all were read.`
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
	// RawQuaternions: read with --raw-quaternions (3-D only); then
	// QuatNormError is the largest | |q|^2 - 1 | over the edges, which
	// bounds how far that reading's rotations are from orthogonal.
	RawQuaternions bool    `json:"raw_quaternions,omitempty"`
	QuatNormError  float64 `json:"quat_norm_error,omitempty"`
	// Landmarks and Observations count landmark vertices (included in N,
	// the vertex count) and the edges observing them (included in M; not
	// loop closures).
	Landmarks    int `json:"landmarks,omitempty"`
	Observations int `json:"observations,omitempty"`
	// Priors counts the prior records (included in M; not loop closures
	// and not in the degrees), PosePriors those of whole poses; the
	// others are position priors. Components counts the priors'
	// world frame as a link: poses joined only through their priors are
	// one component.
	Priors     int `json:"priors,omitempty"`
	PosePriors int `json:"pose_priors,omitempty"`
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
	var set fileSet
	for _, file := range files {
		set.input("FILE", file)
	}
	if err := set.check(); err != nil {
		return err
	}
	bad, shown := 0, 0
	for _, file := range files {
		if err := ctx.Err(); err != nil {
			return err
		}
		var warns []string
		g, err := readGraph(file, g2o.ReadOptions{
			Lenient:        opts.lenient,
			RawQuaternions: opts.rawQuat,
			Warn:           func(msg string) { warns = append(warns, msg) },
		})
		for _, w := range warns {
			fmt.Fprintln(stderr, "warning:", w)
		}
		if err != nil {
			bad++
			err = lenientHint(err)
			fmt.Fprintln(stderr, err)
			if opts.json {
				enc := json.NewEncoder(stdout)
				enc.SetEscapeHTML(false)
				if err := enc.Encode(infoError{File: file, Error: err.Error()}); err != nil {
					return err
				}
			}
			continue
		}
		info := describe(g, g.Source)
		info.Warnings = warns
		if opts.json {
			enc := json.NewEncoder(stdout)
			enc.SetEscapeHTML(false) // "<stdin>", not "\u003cstdin\u003e"
			if err := enc.Encode(info); err != nil {
				return err
			}
			continue
		}
		if shown > 0 {
			fmt.Fprintln(stdout)
		}
		shown++
		if err := writeInfo(stdout, info); err != nil {
			return err
		}
	}
	if bad > 0 {
		return fmt.Errorf("info: %d of %d files could not be read (the errors are above)", bad, len(files))
	}
	return nil
}

// infoError is info's JSON object for a file it could not read.
type infoError struct {
	File  string `json:"file"`
	Error string `json:"error"`
}

// describe computes the statistics info reports.
func describe(g *posegraph.Graph, file string) graphInfo {
	if w := g.World(); w >= 0 {
		// The file's vertices and edges, then its priors: the world
		// vertex is no vertex of the file.
		info := describe(g.WithoutPriors(), file)
		for _, p := range g.Priors() {
			info.M++
			info.Priors++
			if p.Kind == posegraph.PosePrior {
				info.PosePriors++
			}
		}
		info.ComponentSizes = info.ComponentSizes[:0]
		for _, c := range g.Components() {
			size := len(c)
			if slices.Contains(c, w) {
				size--
			}
			info.ComponentSizes = append(info.ComponentSizes, size)
		}
		info.Components = len(info.ComponentSizes)
		return info
	}
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
		if g.IsLandmark(e.J) {
			info.Observations++
			continue
		}
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
	info.Landmarks = g.NumLandmarks()
	for _, i := range g.Fixed {
		info.Fixed = append(info.Fixed, g.IDs[i])
	}
	for _, h := range g.HasInitial {
		if h {
			info.Estimates++
		}
	}
	if g.RawRotations {
		info.RawQuaternions = true
		for _, e := range g.Edges {
			if len(e.Meas) == 7 || e.Prior == posegraph.PosePrior && len(e.Meas) == 15 { // 15: with a sensor offset
				q := e.Meas[3:7]
				n2 := q[0]*q[0] + q[1]*q[1] + q[2]*q[2] + q[3]*q[3]
				info.QuatNormError = max(info.QuatNormError, math.Abs(n2-1))
			}
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
	if s.Landmarks > 0 {
		row("poses", "%d + %d landmarks", s.N-s.Landmarks, s.Landmarks)
		row("edges", "%d (%d landmark observations)", s.M, s.Observations)
	} else {
		row("poses", "%d", s.N)
		row("edges", "%d", s.M)
	}
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
	if s.Priors > 0 {
		row("priors", "%d (%d pose, %d position; in the edges)", s.Priors, s.PosePriors, s.Priors-s.PosePriors)
	}
	if len(s.Fixed) == 0 {
		row("fixed", "none")
	} else {
		row("fixed", "%s", strings.Trim(fmt.Sprint(s.Fixed), "[]"))
	}
	if s.Landmarks > 0 {
		row("estimates", "%d of %d vertices", s.Estimates, s.N)
	} else {
		row("estimates", "%d of %d poses", s.Estimates, s.N)
	}
	if s.RawQuaternions {
		row("reading", "SE-Sync's raw quaternions, | |q|^2 - 1 | up to %.2g", s.QuatNormError)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
