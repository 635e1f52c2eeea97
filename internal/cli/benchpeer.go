package cli

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bcmsync/bcmsync/internal/outfile"
)

// The bench command's side-by-side runs (--peer BIN): the peer solver
// (SE-Sync's example binary, or anything that takes a g2o file as its only
// argument) runs in turn with each bcmsync child on the same graph, both as
// whole processes, so that a row's ratio is the figure a user measures when
// comparing the two on their own files.

// peerRow is the peer's half of a side-by-side row.
type peerRow struct {
	// Wall is the median of the peer's whole-process wall times (seconds),
	// Runs of them, in turn with bcmsync's; PeakMB the largest peak
	// resident set of those runs (10^6 bytes).
	Wall   float64   `json:"wall_s"`
	Walls  []float64 `json:"walls_s"`
	Runs   int       `json:"runs"`
	PeakMB float64   `json:"peak_mb"`
	// Objective is the F of the peer's rounded estimate as it prints it
	// (SE-Sync: 6 significant digits), 0 when it printed none; Optimum says
	// it reported a global optimum.
	Objective float64 `json:"objective"`
	Optimum   bool    `json:"optimum"`
	// Ratio is bcmsync's median wall time over the peer's.
	Ratio float64 `json:"ratio"`
	// Error is set when the peer failed (its last output line).
	Error string `json:"error,omitempty"`
}

// peerCopy writes into dir a copy of the graph file src that SE-Sync's
// reader takes (it reads EDGE_SE2 / EDGE_SE3:QUAT and VERTEX lines only,
// repeats the last edge on a blank line and aborts on FIX): blank lines,
// comments and FIX lines dropped, TORO VERTEX2 / EDGE2 records rewritten
// as VERTEX_SE2 / EDGE_SE2 (information I11 I12 I22 I33 I13 I23 reordered
// to g2o's I11 I12 I13 I22 I23 I33), every other line's fields joined by
// single spaces. It returns the copy's path (src's base name in dir).
func peerCopy(dir, src string) (string, error) {
	in, err := os.Open(src)
	if err != nil {
		return "", err
	}
	defer in.Close()
	var out bytes.Buffer
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) == 0 || f[0] == "FIX" {
			continue
		}
		switch {
		case f[0] == "VERTEX2":
			f[0] = "VERTEX_SE2"
		case f[0] == "EDGE2" && len(f) == 12:
			i11, i12, i22, i33, i13, i23 := f[6], f[7], f[8], f[9], f[10], f[11]
			f = append([]string{"EDGE_SE2"}, f[1:6]...)
			f = append(f, i11, i12, i13, i22, i23, i33)
		}
		out.WriteString(strings.Join(f, " "))
		out.WriteByte('\n')
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("%s: %v", src, err)
	}
	dst := filepath.Join(dir, filepath.Base(src))
	return dst, outfile.Write(dst, func(w io.Writer) error {
		_, err := w.Write(out.Bytes())
		return err
	})
}

// peerF matches SE-Sync's report of its rounded estimate's objective.
// It is compiled on first use: only bench --peer needs it, and a regexp
// compiled at package initialization would cost every process (a solve,
// --version) its time.
var peerF = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`Value of rounded pose estimates F\(x\):\s*(\S+)`)
})

// peerOnce runs the peer on file and returns its wall time (seconds), its
// peak RSS (bytes), what it printed, and its error.
func peerOnce(ctx context.Context, bin, file string) (wall float64, rss int64, out []byte, err error) {
	cmd := exec.CommandContext(ctx, bin, file)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	t0 := time.Now()
	err = cmd.Run()
	wall = time.Since(t0).Seconds()
	if cmd.ProcessState != nil {
		rss = maxRSS(cmd.ProcessState)
	}
	return wall, rss, buf.Bytes(), err
}

// benchSideBySide runs bcmsync's child and the peer in turn on file,
// repeat times each (bcmsync first), and returns the row: bcmsync's
// fields as benchGraph makes them, with Wall the median, and the peer's.
func benchSideBySide(ctx context.Context, exe, peerBin, peerFile, file string, passed []string, repeat int) benchRow {
	var best benchRow
	var walls []float64
	pr := &peerRow{}
	for k := 0; k < repeat; k++ {
		row := benchOnce(ctx, exe, file, passed)
		if row.Error != "" || ctx.Err() != nil {
			row.Runs = k + 1
			return row
		}
		walls = append(walls, row.Wall)
		if k == 0 || row.Wall < best.Wall {
			best = row
		}
		wall, rss, out, err := peerOnce(ctx, peerBin, peerFile)
		if ctx.Err() != nil {
			return best
		}
		pr.Walls = append(pr.Walls, wall)
		pr.PeakMB = math.Max(pr.PeakMB, float64(rss)/1e6)
		if err != nil && pr.Error == "" {
			pr.Error = fmt.Sprintf("%v: %s", err, peerLastLine(out))
		}
		if m := peerF().FindSubmatch(out); m != nil {
			pr.Objective, _ = strconv.ParseFloat(string(m[1]), 64)
		}
		// Optimal only if every run said so.
		pr.Optimum = (len(pr.Walls) == 1 || pr.Optimum) && bytes.Contains(out, []byte("Found global optimum"))
	}
	best.Runs = repeat
	best.Walls = walls
	best.Wall = median(walls)
	pr.Runs = len(pr.Walls)
	pr.Wall = median(pr.Walls)
	if pr.Wall > 0 && pr.Error == "" {
		pr.Ratio = best.Wall / pr.Wall
	}
	best.Peer = pr
	return best
}

// median of xs (not empty); xs is left as it was.
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func peerLastLine(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// peerSummary is the line under a side-by-side table: how the runs were
// made and the geometric mean of the ratios.
func peerSummary(peerBin string, repeat int, rows []benchRow) string {
	logSum, n, failed := 0.0, 0, 0
	for _, r := range rows {
		switch {
		case r.Peer == nil:
		case r.Peer.Error != "":
			failed++
		case r.Peer.Ratio > 0:
			logSum += math.Log(r.Peer.Ratio)
			n++
		}
	}
	gm := "-"
	if n > 0 {
		gm = fmt.Sprintf("%.3f", math.Exp(logSum/float64(n)))
	}
	s := fmt.Sprintf("Side by side with the peer %s (each graph: bcmsync and the peer in turn, %d run(s) each, "+
		"whole processes, medians): geometric mean of wall/peer over %d graphs: %s.", peerBin, repeat, n, gm)
	if failed > 0 {
		s += fmt.Sprintf(" The peer failed on %d graph(s).", failed)
	}
	return s
}

// cells are the peer's columns of the table ("-" where it has no value).
func (p *peerRow) cells() []string {
	if p == nil {
		return []string{"-", "-", "-", "-"}
	}
	f, ratio := "-", "-"
	if p.Objective != 0 {
		f = strconv.FormatFloat(p.Objective, 'g', 6, 64)
		if !p.Optimum {
			f += " (not optimal)"
		}
	}
	if p.Error != "" {
		f = "error: " + strings.ReplaceAll(p.Error, "|", "/")
	}
	if p.Ratio > 0 {
		ratio = fmt.Sprintf("%.3f", p.Ratio)
	}
	return []string{fmt.Sprintf("%.3f", p.Wall), fmt.Sprintf("%.1f", p.PeakMB), f, ratio}
}
