package plots

import (
	"bufio"
	_ "embed"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"strings"
)

// The page is one template with the style sheet, the script and the data
// put in place, so the written file needs nothing beside it: no network,
// no library, and it works when opened from disk.
var (
	//go:embed viewer/page.html
	pageTemplate string
	//go:embed viewer/viewer.css
	pageCSS string
	//go:embed viewer/viewer.js
	pageJS string
)

// WriteHTML writes v as a self-contained interactive HTML page: the
// trajectory on a canvas (2-D with pan and zoom, 3-D with an orbit
// camera), odometry and loop-closure edges, the estimates one at a time or
// overlaid, edges coloured by their term of F on a logarithmic scale, and
// with a Run the certificate in the header and the convergence history.
//
// The data goes into the page as JSON inside a <script
// type="application/json"> element; encoding/json escapes <, > and & in
// strings, so no title can end that element early.
func WriteHTML(w io.Writer, v Viewer) error {
	if err := writePage(w, v); err != nil {
		return fmt.Errorf("plots: %w", err)
	}
	return nil
}

func writePage(w io.Writer, v Viewer) error {
	pd, err := buildPage(v)
	if err != nil {
		return err
	}
	data, err := json.Marshal(pd)
	if err != nil {
		return err
	}
	title := v.Title
	if title == "" {
		title = "pose graph"
	}
	// One pass: what is substituted is never scanned again, so a title or
	// a datum that looks like a marker stays as it is.
	r := strings.NewReplacer(
		"{{TITLE}}", html.EscapeString(title+" — bcmsync view"),
		"{{CSS}}", pageCSS,
		"{{JS}}", pageJS,
		"{{DATA}}", string(data),
	)
	bw := bufio.NewWriter(w)
	if _, err := r.WriteString(bw, pageTemplate); err != nil {
		return err
	}
	return bw.Flush()
}

// WriteHTMLFile writes the page of v to path (see WriteHTML).
func WriteHTMLFile(path string, v Viewer) error {
	return createWith(path, func(w io.Writer) error {
		if err := writePage(w, v); err != nil {
			return fmt.Errorf("plots: %s: %w", path, err)
		}
		return nil
	})
}
