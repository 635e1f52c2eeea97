package plots

import (
	"bytes"
	"fmt"
	"image"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/bcmsync/bcmsync/posegraph"
)

// ellipseViewer is browserGraph with position covariances that grow along
// the path, elongated and turning, scaled by size; vertex 0 is the gauge
// (zero covariance).
func ellipseViewer(d, n int, size float64) Viewer {
	v := browserGraph(d, n, posegraph.Poses)
	e := &Ellipses{XY: make([][3]float64, n), Note: "test covariances."}
	for i := 1; i < n; i++ {
		s := size * float64(i) / float64(n)
		a, b, ph := s, 0.4*s, float64(i)/10
		c, sn := math.Cos(ph), math.Sin(ph)
		e.XY[i] = [3]float64{a*a*c*c + b*b*sn*sn, (a*a - b*b) * c * sn, a*a*sn*sn + b*b*c*c}
	}
	v.Ellipses = e
	return v
}

var (
	legendEllRE = regexp.MustCompile(`<span>95% position ellipses([^<]*)</span>`)
	ellNoteRE   = regexp.MustCompile(`id="ell-note">([^<]*)<`)
)

// ellipseInk counts the pixels of the canvas that have the ellipses'
// purple: the plain colours of edges and poses (blue, red, green) and
// the grey grid have none of it.
func ellipseInk(img image.Image) int {
	r := image.Rect(260, 110, winW-10, winH-240)
	count := 0
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			cr, cg, cb, _ := img.At(x, y).RGBA()
			cr, cg, cb = cr>>8, cg>>8, cb>>8
			if cr > 110 && cb > 140 && cg+40 < cr && cg+60 < cb {
				count++
			}
		}
	}
	return count
}

// The covariance ellipses are off at first and drawn with ellipses=1 (in
// 2-D and in 3-D, where they lie in the horizontal plane), listed in the
// legend with their magnification, driven by the self-test, and only on
// the last estimate, the one the covariances belong to. Tiny covariances
// get a magnification that makes them show; the address can set another.
func TestViewerInBrowserEllipses(t *testing.T) {
	bin := chromium(t)
	dir := t.TempDir()
	for _, d := range []int{2, 3} {
		t.Run(fmt.Sprintf("d=%d", d), func(t *testing.T) {
			v := ellipseViewer(d, 300, 0.3)
			path := filepath.Join(dir, fmt.Sprintf("ell%d.html", d))
			if err := WriteHTMLFile(path, v); err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{"#ellipses=1", "#ellipses=1&selftest"} {
				checkPage(t, bin, path, f)
			}
			ink := map[string]int{}
			for _, f := range []string{"#colour=plain", "#colour=plain&ellipses=1", "#colour=plain&ellipses=1&est=0"} {
				shot := filepath.Join(t.TempDir(), "shot.png")
				runChromium(t, bin, "file://"+path+f, "--screenshot="+shot)
				ink[f] = ellipseInk(decodePNG(t, shot, winW, winH))
				if dir := os.Getenv("BCMSYNC_VIEW_SHOTS"); dir != "" {
					raw, _ := os.ReadFile(shot)
					os.WriteFile(filepath.Join(dir, fmt.Sprintf("ellipses%d%s.png", d, strings.NewReplacer("#", "_", "&", "_", "=", "-").Replace(f))), raw, 0o644)
				}
			}
			if ink["#colour=plain"] != 0 || ink["#colour=plain&ellipses=1"] < 2000 || ink["#colour=plain&ellipses=1&est=0"] != 0 {
				t.Errorf("ellipse-coloured pixels: off %d, on %d, on the initial estimate %d; want 0, at least 2000, 0", ink["#colour=plain"], ink["#colour=plain&ellipses=1"], ink["#colour=plain&ellipses=1&est=0"])
			}
			dom, _ := runChromium(t, bin, "file://"+path+"#ellipses=1", "--dump-dom")
			if m := legendEllRE.FindStringSubmatch(dom); m == nil || strings.Contains(m[1], "magnified") {
				t.Errorf("legend entry %v, want the ellipses unmagnified", m)
			}
			note := ellNoteRE.FindStringSubmatch(dom)
			if note == nil || !strings.Contains(note[1], "test covariances.") || (d == 3) != strings.Contains(note[1], "x–y marginal") {
				t.Error("the side bar does not carry the note (and, in 3-D, say that the ellipses are the x-y marginal)")
			}
		})
	}
	// Millimetres on a map of metres: magnified until they show, and the
	// address can choose the factor.
	v := ellipseViewer(2, 200, 1e-4)
	path := filepath.Join(dir, "tiny.html")
	if err := WriteHTMLFile(path, v); err != nil {
		t.Fatal(err)
	}
	// The median semi-axis is 2.45 * 5e-5 m on a helix 10 m across: x1000
	// brings it to 0.4% of that.
	for f, want := range map[string]string{"#ellipses=1": ", magnified ×1,000", "#ellipses=1&ellipse-scale=100": ", magnified ×100"} {
		dom, _ := runChromium(t, bin, "file://"+path+f, "--dump-dom")
		if m := legendEllRE.FindStringSubmatch(dom); m == nil || m[1] != want {
			t.Errorf("%s: legend entry %v, want %q", f, m, want)
		}
	}
	// Without covariances the control is hidden.
	plain := browserGraph(2, 50, posegraph.Poses)
	path = filepath.Join(dir, "none.html")
	if err := WriteHTMLFile(path, plain); err != nil {
		t.Fatal(err)
	}
	dom, _ := runChromium(t, bin, "file://"+path+"#ellipses=1", "--dump-dom")
	if !regexp.MustCompile(`<label id="ell-box" hidden`).MatchString(dom) || legendEllRE.MatchString(dom) {
		t.Error("a page without covariances shows the ellipse control or lists ellipses")
	}
}

// Bad covariances are refused with the vertex named.
func TestEllipsesRefused(t *testing.T) {
	for _, c := range []struct {
		xy   [3]float64
		want string
	}{
		{[3]float64{math.NaN(), 0, 1}, "non-finite"},
		{[3]float64{1, 2, 1}, "not positive semidefinite"},
		{[3]float64{-1, 0, 1}, "not positive semidefinite"},
	} {
		v := ellipseViewer(2, 20, 1)
		v.Ellipses.XY[5] = c.xy
		var buf bytes.Buffer
		if err := WriteHTML(&buf, v); err == nil || !strings.Contains(err.Error(), "vertex 5") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want one naming vertex 5 and %q", c.xy, err, c.want)
		}
	}
	v := ellipseViewer(2, 20, 1)
	v.Ellipses.XY = v.Ellipses.XY[:5]
	if err := WriteHTML(&bytes.Buffer{}, v); err == nil || !strings.Contains(err.Error(), "5 covariances for 20 vertices") {
		t.Errorf("short covariances: error %v", err)
	}
}
