package plots

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// ReplayStep is one step of an online replay (bcmsync replay): the graph
// solved after the step's batch arrived.
type ReplayStep struct {
	// Seconds is the step's wall time (adding its batch and solving),
	// Objective the F of its estimate.
	Seconds, Objective float64
	// Certified says whether the step's estimate was certified.
	Certified bool
}

// Replay draws an online replay step by step: on the left each step's
// time, on the right its F, a certified step as a filled circle and an
// uncertified one as a red cross. The title gives the total time and the
// median and largest step. The format follows path's extension: .png,
// .svg or .pdf.
func Replay(path string, steps []ReplayStep, title string) error {
	if err := checkReplay(steps); err != nil {
		return fmt.Errorf("plots: %s: %w", path, err)
	}
	n := len(steps)
	secs := make([]float64, n)
	total := 0.0
	for i, s := range steps {
		secs[i], total = s.Seconds, total+s.Seconds
	}
	slices.Sort(secs)
	panels := []struct {
		title, ylabel string
		val           func(ReplayStep) float64
	}{
		{"time per step", "seconds", func(s ReplayStep) float64 { return s.Seconds }},
		{"F per step", "F (objective)", func(s ReplayStep) float64 { return s.Objective }},
	}
	certGlyph := draw.GlyphStyle{Color: palette[0], Radius: vg.Points(2.5), Shape: draw.CircleGlyph{}}
	failGlyph := draw.GlyphStyle{Color: failColor, Radius: vg.Points(4), Shape: thickCross{}}
	var drawn [2]*plot.Plot
	for k, pn := range panels {
		p := newPlot(pn.title, "step", pn.ylabel)
		xys := make(plotter.XYs, n)
		var cert, fail plotter.XYs
		for i, s := range steps {
			xys[i] = plotter.XY{X: float64(i + 1), Y: pn.val(s)}
			if s.Certified {
				cert = append(cert, xys[i])
			} else {
				fail = append(fail, xys[i])
			}
		}
		line, err := plotter.NewLine(xys)
		if err != nil {
			return fmt.Errorf("plots: %s: %w", path, err)
		}
		line.Color, line.Width = palette[0], vg.Points(1)
		p.Add(line)
		for _, g := range []struct {
			pts   plotter.XYs
			style draw.GlyphStyle
		}{{cert, certGlyph}, {fail, failGlyph}} {
			if len(g.pts) == 0 {
				continue
			}
			sc, err := plotter.NewScatter(g.pts)
			if err != nil {
				return fmt.Errorf("plots: %s: %w", path, err)
			}
			sc.GlyphStyle = g.style
			p.Add(sc)
		}
		p.X.Min, p.X.Max = 1, math.Max(2, float64(n))
		p.X.Tick.Marker = stepTicks{}
		p.Y.Min = 0
		drawn[k] = p
	}
	entries := []entry{{"certified step", glyphThumb{certGlyph}}}
	if slices.ContainsFunc(steps, func(s ReplayStep) bool { return !s.Certified }) {
		entries = append(entries, entry{"not certified", glyphThumb{failGlyph}})
	}
	if title == "" {
		title = "Online replay"
	}
	title = fmt.Sprintf("%s: %d steps, %s in all, median step %s, largest %s", title, n,
		formatSeconds(total), formatSeconds(secs[n/2]), formatSeconds(secs[n-1]))
	return saveSideBySide(path, 8*vg.Centimeter, title, entries, drawn[0], drawn[1])
}

func checkReplay(steps []ReplayStep) error {
	if len(steps) == 0 {
		return errors.New("no replay steps to draw")
	}
	for i, s := range steps {
		if math.IsNaN(s.Seconds) || math.IsInf(s.Seconds, 0) || s.Seconds < 0 {
			return fmt.Errorf("step %d: time %g is not a finite non-negative number", i+1, s.Seconds)
		}
		if math.IsNaN(s.Objective) || math.IsInf(s.Objective, 0) {
			return fmt.Errorf("step %d: F = %g is not finite", i+1, s.Objective)
		}
	}
	return nil
}
