package plots

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bcmsync/bcmsync/posegraph"
)

// chromium returns the headless browser the page tests run, skipping the
// test when there is none, and failing it under CI, where .ci/run
// installs one.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{os.Getenv("BCMSYNC_CHROMIUM"), "/usr/bin/chromium", "chromium", "chromium-browser"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no chromium (looked for $BCMSYNC_CHROMIUM, /usr/bin/chromium, chromium, chromium-browser): " +
			"CI is set, so the viewer's browser tests must run; install the Debian package chromium")
	}
	t.Skip("no chromium: the viewer's browser tests need headless Chromium (Debian package chromium)")
	return ""
}

const winW, winH = 1280, 860

// runChromium loads url headless in a fresh profile and returns stdout
// and stderr; extra adds flags such as --dump-dom or --screenshot=FILE.
func runChromium(t *testing.T, bin, url string, extra ...string) (string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	args := []string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--hide-scrollbars", "--force-device-scale-factor=1",
		"--user-data-dir=" + t.TempDir(), fmt.Sprintf("--window-size=%d,%d", winW, winH),
		"--enable-logging=stderr", "--v=0",
	}
	args = append(args, extra...)
	args = append(args, url)
	// Headless Chromium on a loaded machine now and then dies of a signal
	// (a segmentation fault in its own process tree) before it prints
	// anything: that is the browser failing, not the page, so such a run is
	// repeated, at most twice. An exit status or a time-out still fails.
	var out, errb bytes.Buffer
	for attempt := 0; ; attempt++ {
		out.Reset()
		errb.Reset()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		if err == nil {
			break
		}
		var ee *exec.ExitError
		if errors.As(err, &ee) && ctx.Err() == nil && attempt < 2 {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				t.Logf("chromium %s: %v; running it again", url, err)
				continue
			}
		}
		t.Fatalf("chromium %s: %v\n%s", url, err, errb.String())
	}
	return out.String(), errb.String()
}

var (
	statusRE   = regexp.MustCompile(`<html[^>]*\sdata-status="([^"]*)"`)
	paintedRE  = regexp.MustCompile(`<html[^>]*\sdata-painted="(-?\d+)"`)
	drawMsRE   = regexp.MustCompile(`<html[^>]*\sdata-draw-ms="([\d.]+)"`)
	movingMsRE = regexp.MustCompile(`<html[^>]*\sdata-draw-ms-moving="([\d.]+)"`)
	// selfTestRE reads how many steps the page's #selftest took.
	selfTestRE = regexp.MustCompile(`<html[^>]*\sdata-selftest="(\d+)"`)
	// consoleRE matches what Chromium logs for a console message or an
	// uncaught exception.
	consoleRE = regexp.MustCompile(`(?m)^.*(CONSOLE|Uncaught).*$`)
)

// checkPage loads the page at path (with an optional #fragment) and checks
// that it rendered: the page's own status says ok, no console message or
// uncaught error was logged, its self-check counted painted pixels, and a
// screenshot of the trajectory's canvas has many colours and enough ink.
// It returns the page's draw time in milliseconds, as the page measured it.
func checkPage(t *testing.T, bin, path, fragment string) float64 {
	t.Helper()
	url := "file://" + path + fragment
	dom, logs := runChromium(t, bin, url, "--dump-dom")
	m := statusRE.FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("%s: no data-status in the DOM (did the script run?):\n%.400s", url, dom)
	}
	if m[1] != "ok" {
		t.Fatalf("%s: page status %q", url, m[1])
	}
	for _, line := range consoleRE.FindAllString(logs, -1) {
		t.Errorf("%s: browser console: %s", url, strings.TrimSpace(line))
	}
	if p := paintedRE.FindStringSubmatch(dom); p == nil || p[1] == "0" {
		t.Errorf("%s: the page's self-check found nothing painted (%v)", url, p)
	}
	if strings.Contains(fragment, "selftest") {
		if st := selfTestRE.FindStringSubmatch(dom); st == nil || st[1] == "0" {
			t.Errorf("%s: the self-test did not run (%v)", url, st)
		}
	}
	ms := 0.0
	if d := drawMsRE.FindStringSubmatch(dom); d != nil {
		ms, _ = strconv.ParseFloat(d[1], 64)
	}
	if d := movingMsRE.FindStringSubmatch(dom); d != nil {
		t.Logf("%s: a frame drawn while the view moves took %s ms", url, d[1])
	}

	shot := filepath.Join(t.TempDir(), "shot.png")
	runChromium(t, bin, url, "--screenshot="+shot)
	img := decodePNG(t, shot, winW, winH)
	if dir := os.Getenv("BCMSYNC_VIEW_SHOTS"); dir != "" {
		// Keep the screenshot for a person to look at.
		raw, _ := os.ReadFile(shot)
		name := strings.NewReplacer("/", "_", "#", "_", "=", "-", "&", "_").Replace(t.Name()+fragment) + ".png"
		os.WriteFile(filepath.Join(dir, name), raw, 0o644)
	}
	// The trajectory's canvas: right of the 250 px side bar, below the
	// header, above the 230 px convergence strip.
	canvas := image.Rect(260, 110, winW-10, winH-240)
	share, colours := inked(img, canvas)
	if share < 0.01 || colours < 40 {
		t.Errorf("%s: the canvas looks blank: %.2f%% inked, %d colours", url, 100*share, colours)
	}
	// The grid, the axes and their labels are grey: the graph itself is
	// what has colour.
	if share, colours := saturated(img, canvas); share < 0.003 || colours < 20 {
		t.Errorf("%s: no graph drawn on the canvas: %.2f%% coloured pixels in %d colours", url, 100*share, colours)
	}
	return ms
}

// measure sets each edge's measurement to the relative pose of x, with
// the translation perturbed by up to noise times its length (and the
// rotation by up to noise radians about z), so the edge costs at x are
// small but not all zero.
func measure(g *posegraph.Graph, x []posegraph.Pose, noise float64) {
	d := g.D
	for k := range g.Edges {
		e := &g.Edges[k]
		e.R, e.T = [9]float64{}, [3]float64{}
		ri, rj := &x[e.I].R, &x[e.J].R
		for a := 0; a < d; a++ {
			for c := 0; c < d; c++ {
				for q := 0; q < d; q++ {
					e.R[a*d+c] += ri[q*d+a] * rj[q*d+c]
				}
				e.T[a] += ri[c*d+a] * (x[e.J].T[c] - x[e.I].T[c])
			}
		}
		w := noise * math.Sin(float64(7*k+3))
		for a := 0; a < d; a++ {
			e.T[a] *= 1 + w
		}
		var turn [9]float64
		if d == 2 {
			turn = rot2(w)
		} else {
			turn = rot3([3]float64{0, 0, 1}, w)
		}
		var r [9]float64
		for a := 0; a < d; a++ {
			for c := 0; c < d; c++ {
				for q := 0; q < d; q++ {
					r[a*d+c] += e.R[a*d+q] * turn[q*d+c]
				}
			}
		}
		e.R = r
	}
}

// saturated returns the share of pixels in r of img whose channels differ
// by more than 40 (colours, not greys), and how many such colours there are.
func saturated(img image.Image, r image.Rectangle) (share float64, colours int) {
	seen := map[[3]uint32]bool{}
	sat, all := 0, 0
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			cr, cg, cb, _ := img.At(x, y).RGBA()
			cr, cg, cb = cr>>8, cg>>8, cb>>8
			all++
			if max(cr, cg, cb)-min(cr, cg, cb) > 40 {
				sat++
				seen[[3]uint32{cr, cg, cb}] = true
			}
		}
	}
	return float64(sat) / float64(all), len(seen)
}

// browserGraph is a viewer of helixGraph with a made-up three-level
// history, so every part of the page has something to draw.
func browserGraph(d, n int, problem posegraph.Problem) Viewer {
	g, truth, guess := helixGraph(d, n)
	// Give the estimates some rotation so headings and rotation costs
	// are not all trivial.
	for i := range guess {
		a := 0.2 * math.Sin(float64(i)/5)
		if d == 2 {
			guess[i].R = rot2(a)
		} else {
			guess[i].R = rot3([3]float64{0, 0, 1}, a)
		}
	}
	measure(g, truth, 0.02)
	levels, fFinal := staircase()
	run := &Run{Status: "certified", Certified: true, Objective: fFinal, RelaxationObjective: fFinal, Rank: 5, Init: "chordal", Seconds: 1.5}
	for _, l := range levels {
		for k := range l.F {
			phase := "bcm"
			if k > len(l.F)/2 {
				phase = "rtr"
			}
			run.History = append(run.History, Step{Rank: l.Rank, Phase: phase, Iter: k, Seconds: l.Time[k], F: l.F[k], RelGrad: l.GradNorm[k] / 1e3})
		}
		run.Levels = append(run.Levels, LevelCheck{Rank: l.Rank, Certified: *l.Certified})
	}
	return Viewer{
		Title: fmt.Sprintf("helix-%dd </script>.g2o", d), Graph: g, Problem: problem,
		Estimates: []Trajectory{{Label: "initial (chordal)", Poses: guess}, {Label: "optimized", Poses: truth}},
		Run:       run,
	}
}

// The page renders in a real browser in 2-D, 3-D and rotation-only, in
// its default state and with the address selecting other states: the
// initial estimate overlaid, plain colours, a top view, time on the
// convergence axis.
func TestViewerInBrowser(t *testing.T) {
	bin := chromium(t)
	cases := []struct {
		name      string
		v         Viewer
		fragments []string
	}{
		{"se2", browserGraph(2, 300, posegraph.Poses), []string{"", "#overlay=1&colour=plain&poses=1&x=time"}},
		{"se3", browserGraph(3, 300, posegraph.Poses), []string{"", "#est=0&view=top&ortho=1&heads=1"}},
		{"so3", browserGraph(3, 200, posegraph.Rotations), []string{""}},
		{"no-run", func() Viewer { v := browserGraph(2, 100, posegraph.Poses); v.Run = nil; return v }(), []string{""}},
		// Every control driven once by the page's self-test.
		{"selftest2", browserGraph(2, 200, posegraph.Poses), []string{"#selftest"}},
		{"selftest3", browserGraph(3, 200, posegraph.Poses), []string{"#selftest"}},
	}
	dir := t.TempDir()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, c.name+".html")
			if err := WriteHTMLFile(path, c.v); err != nil {
				t.Fatal(err)
			}
			for _, f := range c.fragments {
				checkPage(t, bin, path, f)
			}
		})
	}
}

// The checks can fail: a page whose script throws reports it in its
// status, and an error in the data shows on the page rather than a blank.
func TestViewerInBrowserCatchesErrors(t *testing.T) {
	bin := chromium(t)
	var buf bytes.Buffer
	if err := WriteHTML(&buf, browserGraph(2, 50, posegraph.Poses)); err != nil {
		t.Fatal(err)
	}
	// Cut the data's edge list short of its closing bracket: the JSON
	// no longer parses.
	page := strings.Replace(buf.String(), `"edges":[`, `"edges":[[`, 1)
	path := filepath.Join(t.TempDir(), "broken.html")
	if err := os.WriteFile(path, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	dom, logs := runChromium(t, bin, "file://"+path, "--dump-dom")
	if !consoleRE.MatchString(logs) {
		t.Error("broken page: the browser logged no console error, so checkPage's console check would miss one")
	}
	m := statusRE.FindStringSubmatch(dom)
	if m == nil || !strings.HasPrefix(m[1], "error: ") {
		t.Fatalf("broken page: status %v, want an error", m)
	}
	if !strings.Contains(dom, "The viewer failed:") {
		t.Error("broken page: no visible error message")
	}
}

// A page of 10^5 poses renders; the draw time the page measured is
// logged, not asserted (it depends on the machine and its load).
func TestViewerInBrowserLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the 10^5-pose page")
	}
	bin := chromium(t)
	for _, d := range []int{3} {
		v := browserGraph(d, 100000, posegraph.Poses)
		path := filepath.Join(t.TempDir(), "large.html")
		if err := WriteHTMLFile(path, v); err != nil {
			t.Fatal(err)
		}
		st, _ := os.Stat(path)
		ms := checkPage(t, bin, path, "#selftest")
		t.Logf("%d-D, 10^5 poses, %d edges: page %.1f MB, a full frame drawn in %.0f ms", d, v.Graph.M(), float64(st.Size())/1e6, ms)
	}
}
