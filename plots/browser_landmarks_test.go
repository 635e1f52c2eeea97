package plots

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var (
	metaRE  = regexp.MustCompile(`id="file-meta"[^>]*>([^<]*)<`)
	hoverRE = regexp.MustCompile(`<html[^>]*\sdata-hover="([^"]*)"`)
	// Rows of the legend, which lists what is drawn.
	legendObsRE = regexp.MustCompile(`class="row"><span [^>]*></span><span>landmark observations</span>`)
	legendLmRE  = regexp.MustCompile(`class="row"><span class="swatch tri"[^>]*>△</span><span>landmarks</span>`)
	countRE     = regexp.MustCompile(`id="n-(obs|lms|poses)"[^>]*>\(([\d,]+)\)<`)
)

// Pages of graphs with landmarks render in 2-D and 3-D: by default, with
// observations hidden and plain colours set by the address, and driven by
// the self-test, whose last step hovers a landmark. The header and the
// check boxes count poses, landmarks and observations apart, and the
// side bar names the hovered landmark with its position.
func TestViewerInBrowserLandmarks(t *testing.T) {
	bin := chromium(t)
	dir := t.TempDir()
	for _, d := range []int{2, 3} {
		t.Run(fmt.Sprintf("d=%d", d), func(t *testing.T) { landmarkPage(t, bin, dir, d) })
	}
	// Many observations are hidden at first: the legend, which lists
	// what is drawn, leaves them out but keeps the landmarks.
	v := landmarkBrowserGraph(2, 3000, 500)
	many := 0
	for _, e := range v.Graph.Edges {
		if v.Graph.IsLandmark(e.J) {
			many++
		}
	}
	if many <= 2000 {
		t.Fatalf("%d observations: not enough to hide", many)
	}
	path := filepath.Join(dir, "many.html")
	if err := WriteHTMLFile(path, v); err != nil {
		t.Fatal(err)
	}
	checkPage(t, bin, path, "")
	dom, _ := runChromium(t, bin, "file://"+path, "--dump-dom")
	if legendObsRE.MatchString(dom) || !legendLmRE.MatchString(dom) {
		t.Errorf("%d observations: legend lists observations %t, landmarks %t; want false, true",
			many, legendObsRE.MatchString(dom), legendLmRE.MatchString(dom))
	}
}

func landmarkPage(t *testing.T, bin, dir string, d int) {
	{
		const n, nl = 240, 40
		v := landmarkBrowserGraph(d, n, nl)
		nObs := 0
		for _, e := range v.Graph.Edges {
			if v.Graph.IsLandmark(e.J) {
				nObs++
			}
		}
		path := filepath.Join(dir, v.Title+".html")
		if err := WriteHTMLFile(path, v); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"", "#observations=0&colour=plain&poses=1", "#selftest"} {
			checkPage(t, bin, path, f)
		}
		dom, _ := runChromium(t, bin, "file://"+path+"#selftest", "--dump-dom")
		meta := metaRE.FindStringSubmatch(dom)
		if meta == nil || !strings.Contains(meta[1], "240 poses · 40 landmarks") || !strings.Contains(meta[1], strconv.Itoa(nObs)+" observations") {
			t.Errorf("d=%d: header %q, want 240 poses, 40 landmarks and %d observations", d, meta, nObs)
		}
		want := map[string]string{"poses": "240", "lms": "40", "obs": strconv.Itoa(nObs)}
		got := map[string]string{}
		for _, c := range countRE.FindAllStringSubmatch(dom, -1) {
			got[c[1]] = c[2]
		}
		for k, w := range want {
			if got[k] != w {
				t.Errorf("d=%d: check box count %s is %q, want %q", d, k, got[k], w)
			}
		}
		if !legendObsRE.MatchString(dom) || !legendLmRE.MatchString(dom) {
			t.Errorf("d=%d: %d observations: the legend lacks observations (%t) or landmarks (%t)",
				d, nObs, legendObsRE.MatchString(dom), legendLmRE.MatchString(dom))
		}
		h := hoverRE.FindStringSubmatch(dom)
		if h == nil || !regexp.MustCompile(`^landmark 100\d\d  \(index \d+\) \| position \(-?[\d.]+, -?[\d.]+`).MatchString(h[1]) {
			t.Errorf("d=%d: hovering a landmark showed %v", d, h)
		} else {
			t.Logf("d=%d: hover: %s", d, h[1])
		}
	}
}
