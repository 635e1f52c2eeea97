package plots

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// StageTimes draws a horizontal bar chart of the time spent in each stage
// of a run (read, initialize, optimize, certify, ...), top to bottom in the
// given order, each bar labelled with its time and share of the total. The
// format follows path's extension: .png, .svg or .pdf.
func StageTimes(path string, names []string, seconds []float64) error {
	if err := checkStages(names, seconds); err != nil {
		return fmt.Errorf("plots: %s: %w", path, err)
	}
	n := len(names)
	total, longest := 0.0, 0.0
	for _, s := range seconds {
		total += s
		longest = math.Max(longest, s)
	}
	// Bars are drawn bottom-up; reverse so the first stage is on top.
	vals := make(plotter.Values, n)
	rev := make([]string, n)
	for i := range names {
		vals[n-1-i] = seconds[i]
		rev[n-1-i] = names[i]
	}
	p := newPlot("", "time [s]", "")
	p.Title.Text = ""
	bars, err := plotter.NewBarChart(vals, vg.Points(14))
	if err != nil {
		return fmt.Errorf("plots: %s: %w", path, err)
	}
	bars.Horizontal = true
	bars.Color = palette[0]
	bars.LineStyle.Width = 0
	p.Add(bars)
	p.NominalY(rev...)
	p.Y.Tick.Label.Font.Size = 9

	// Time labels just right of each bar end.
	xys := make(plotter.XYs, n)
	labels := make([]string, n)
	for i, v := range vals {
		xys[i] = plotter.XY{X: v, Y: float64(i)}
		share := 0.0
		if total > 0 {
			share = 100 * v / total
		}
		labels[i] = fmt.Sprintf(" %s (%.0f%%)", formatSeconds(v), share)
	}
	lab, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: labels})
	if err != nil {
		return fmt.Errorf("plots: %s: %w", path, err)
	}
	for i := range lab.TextStyle {
		lab.TextStyle[i] = textStyle(8)
		lab.TextStyle[i].YAlign = draw.YCenter
	}
	p.Add(lab)
	p.X.Min = 0
	if longest == 0 {
		longest = 1
	}
	// Room on the right for the labels.
	p.X.Max = longest * 1.3

	h := vg.Length(n)*22 + 70
	if h < 6*vg.Centimeter {
		h = 6 * vg.Centimeter
	}
	title := fmt.Sprintf("Time per stage (total %s)", formatSeconds(total))
	return save(path, defaultWidth, h, func(dc draw.Canvas) {
		c := drawTitle(dc, title)
		c = draw.Crop(c, 4, -12, 2, -2)
		p.Draw(c)
	})
}

func checkStages(names []string, seconds []float64) error {
	if len(names) == 0 {
		return errors.New("no stages to draw")
	}
	if len(names) != len(seconds) {
		return fmt.Errorf("%d stage names but %d times", len(names), len(seconds))
	}
	for i, s := range seconds {
		if math.IsNaN(s) || math.IsInf(s, 0) || s < 0 {
			return fmt.Errorf("stage %d (%q): time %g is not a finite non-negative number", i, names[i], s)
		}
	}
	return nil
}

// formatSeconds writes a duration with three significant digits and a unit
// that keeps it readable: 1.23 s, 45.6 ms, 789 us.
func formatSeconds(s float64) string {
	switch {
	case s == 0:
		return "0 s"
	case s >= 1:
		return fmt.Sprintf("%.3g s", s)
	case s >= 1e-3:
		return fmt.Sprintf("%.3g ms", s*1e3)
	}
	return fmt.Sprintf("%.3g µs", s*1e6)
}
