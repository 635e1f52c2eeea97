package cli

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestPeerCopy: the peer's copy drops blank lines, comments and FIX lines,
// rewrites TORO records in g2o's order, and leaves g2o records' fields as
// they are.
func TestPeerCopy(t *testing.T) {
	src := filepath.Join(t.TempDir(), "toro.graph")
	in := "# comment\nVERTEX2 0 0 0 0\n\nVERTEX2 1 1 0 0   # trailing\nFIX 0\n" +
		"EDGE2 0 1 1 0 0 11 12 22 33 13 23\r\nEDGE_SE2\t1 0 -1 0 0 1 0 0 1 0 1\n\n\n"
	if err := os.WriteFile(src, []byte(in), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	dst, err := peerCopy(dir, src)
	if err != nil {
		t.Fatal(err)
	}
	if dst != filepath.Join(dir, "toro.graph") {
		t.Errorf("copy at %s", dst)
	}
	got, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	want := "VERTEX_SE2 0 0 0 0\nVERTEX_SE2 1 1 0 0\nEDGE_SE2 0 1 1 0 0 11 12 13 22 23 33\nEDGE_SE2 1 0 -1 0 0 1 0 0 1 0 1\n"
	if string(got) != want {
		t.Errorf("copy:\n%s\nwant:\n%s", got, want)
	}
}

// TestBenchPeer runs the bench with --peer on a fake peer (a shell script
// that checks it was given a copy it can read and prints SE-Sync's result
// line) and checks the side-by-side columns: medians of the runs, taken
// in turn, and their ratio.
func TestBenchPeer(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the fake peer is a shell script")
	}
	dir := t.TempDir()
	names, _ := benchGraphs(t, dir)
	log := filepath.Join(t.TempDir(), "peer.log")
	peer := filepath.Join(t.TempDir(), "fake-peer")
	script := "#!/bin/sh\n" +
		"echo \"$1\" >> " + log + "\n" +
		"if grep -q -e '^$' -e '^FIX' -e '^#' \"$1\"; then echo 'Error: unreadable'; exit 1; fi\n" +
		"echo 'Found global optimum!'\n" +
		"echo 'Value of rounded pose estimates F(x): 12.3456'\n"
	if err := os.WriteFile(peer, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "results")
	code, stdout, stderr := runCmd("bench", dir, "-o", out, "--repeat", "3", "--peer", peer)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	rows, md := readBench(t, out)
	if stdout != md {
		t.Errorf("stdout differs from bench.md")
	}
	calls, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(calls), "\n"); n != 3*len(names) {
		t.Errorf("the peer ran %d times, want 3 per graph:\n%s", n, calls)
	}
	logSum := 0.0
	for k, r := range rows {
		p := r.Peer
		if p == nil || r.Error != "" {
			t.Fatalf("%s: no peer runs (error %q)", names[k], r.Error)
		}
		if len(r.Walls) != 3 || p.Runs != 3 || len(p.Walls) != 3 || r.Runs != 3 {
			t.Errorf("%s: runs %d/%d, peer %d/%d", r.File, r.Runs, len(r.Walls), p.Runs, len(p.Walls))
		}
		if r.Wall != median(r.Walls) || p.Wall != median(p.Walls) || p.Ratio != r.Wall/p.Wall {
			t.Errorf("%s: wall %g of %v, peer %g of %v, ratio %g", r.File, r.Wall, r.Walls, p.Wall, p.Walls, p.Ratio)
		}
		if p.Objective != 12.3456 || !p.Optimum || p.Error != "" {
			t.Errorf("%s: peer F %g optimum %v error %q", r.File, p.Objective, p.Optimum, p.Error)
		}
		logSum += math.Log(p.Ratio)
	}
	want := fmt.Sprintf("geometric mean of wall/peer over 2 graphs: %.3f.", math.Exp(logSum/2))
	if !strings.Contains(md, want) || !strings.Contains(md, "| wall/peer |") {
		t.Errorf("bench.md lacks the side-by-side columns or %q:\n%s", want, md)
	}
	if got := median([]float64{3, 1, 2, 4}); got != 2.5 {
		t.Errorf("median of 1..4 = %g", got)
	}
}
