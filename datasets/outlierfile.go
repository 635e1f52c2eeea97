package datasets

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/bcmsync/bcmsync/posegraph"
)

// The outlier sidecar is a text file beside a generated g2o file that says
// which of its edges are outliers, so that outlier rejection can be scored
// against the truth without changing the g2o file (a comment per edge would
// be lost by any tool that rewrites the file). It holds '#' comments and one
// line per outlier edge,
//
//	LINE ID_I ID_J
//
// where LINE is the 1-based line of the EDGE record in the g2o file and
// ID_I, ID_J its two vertex ids, which must agree with that record. Edges
// are identified by line rather than by vertex pair because an outlier may
// join the same pair as a true loop closure.

// OutlierEdge is one line of an outlier sidecar.
type OutlierEdge struct {
	// Line is the EDGE record's line in the g2o file; I and J its vertex
	// ids.
	Line, I, J int
	// At is this record's own line in the sidecar, for messages.
	At int
}

// WriteOutliers writes the sidecar of the outliers of g, which must have
// been read from graphFile (so its edges carry their lines): a header naming
// graphFile, then a line per edge k with mask[k] set.
func WriteOutliers(w io.Writer, graphFile string, g *posegraph.Graph, mask []bool) error {
	if len(mask) != g.M() {
		return fmt.Errorf("datasets: outlier mask of %d entries for %d edges", len(mask), g.M())
	}
	bw := bufio.NewWriter(w)
	count := 0
	for _, m := range mask {
		if m {
			count++
		}
	}
	fmt.Fprintf(bw, "# %d outlier edge(s) of %s, one per line: LINE ID_I ID_J\n", count, graphFile)
	fmt.Fprintf(bw, "# (LINE is the 1-based line of the EDGE record in %s)\n", graphFile)
	for k, e := range g.Edges {
		if !mask[k] {
			continue
		}
		if e.Line <= 0 {
			return fmt.Errorf("datasets: edge %d has no source line; write the graph and read it back first", k)
		}
		fmt.Fprintf(bw, "%d %d %d\n", e.Line, g.IDs[e.I], g.IDs[e.J])
	}
	return bw.Flush()
}

// ReadOutliers parses an outlier sidecar; name is used in messages. Errors
// name the sidecar's line.
func ReadOutliers(r io.Reader, name string) ([]OutlierEdge, error) {
	var out []OutlierEdge
	sc := bufio.NewScanner(r)
	seen := map[int]int{}
	for at := 1; sc.Scan(); at++ {
		s := sc.Text()
		if k := strings.IndexByte(s, '#'); k >= 0 {
			s = s[:k]
		}
		f := strings.Fields(s)
		if len(f) == 0 {
			continue
		}
		if len(f) != 3 {
			return nil, fmt.Errorf("%s:%d: %d fields; an outlier line is LINE ID_I ID_J", name, at, len(f))
		}
		var v [3]int
		for k := range f {
			x, err := strconv.Atoi(f[k])
			if err != nil {
				return nil, fmt.Errorf("%s:%d: field %d (%q) is not an integer", name, at, k+1, f[k])
			}
			v[k] = x
		}
		if v[0] < 1 {
			return nil, fmt.Errorf("%s:%d: line number %d is not positive", name, at, v[0])
		}
		if prev, dup := seen[v[0]]; dup {
			return nil, fmt.Errorf("%s:%d: line %d is listed twice (first at line %d)", name, at, v[0], prev)
		}
		seen[v[0]] = at
		out = append(out, OutlierEdge{Line: v[0], I: v[1], J: v[2], At: at})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

// OutlierMask returns the mask over g's edges (g read from its g2o file, so
// that edges carry their lines) that is true for the edges the sidecar
// records name. A record that names no edge of g, or an edge with other
// vertex ids, is an error naming the sidecar's line: the sidecar belongs to
// another file, or the file was rewritten.
func OutlierMask(g *posegraph.Graph, recs []OutlierEdge, name string) ([]bool, error) {
	byLine := make(map[int]int, g.M())
	for k, e := range g.Edges {
		if e.Line > 0 {
			byLine[e.Line] = k
		}
	}
	if len(byLine) == 0 && len(recs) > 0 {
		return nil, errors.New("datasets: the graph's edges carry no source lines; read it from its file")
	}
	mask := make([]bool, g.M())
	for _, r := range recs {
		k, ok := byLine[r.Line]
		if !ok {
			return nil, fmt.Errorf("%s:%d: %s has no EDGE record at line %d", name, r.At, g.Source, r.Line)
		}
		e := g.Edges[k]
		if g.IDs[e.I] != r.I || g.IDs[e.J] != r.J {
			return nil, fmt.Errorf("%s:%d: the edge at %s:%d joins %d and %d, not %d and %d",
				name, r.At, g.Source, r.Line, g.IDs[e.I], g.IDs[e.J], r.I, r.J)
		}
		mask[k] = true
	}
	return mask, nil
}

// ReadOutlierMask reads the sidecar at path and returns OutlierMask for g.
func ReadOutlierMask(path string, g *posegraph.Graph) ([]bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	recs, err := ReadOutliers(f, path)
	if err != nil {
		return nil, err
	}
	return OutlierMask(g, recs, path)
}
