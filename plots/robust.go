package plots

import (
	"errors"
	"fmt"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// RobustStep is one weighted solve of a robust run (package sync's
// RobustIteration).
type RobustStep struct {
	// Certified marks a certified solve of settled weights; the others
	// are GNC's local solves.
	Certified bool
	// TLS is the truncated cost sum_e min(r_e^2, c_e^2) at the step's
	// estimate, Objective the weighted problem's F there (both > 0 to be
	// drawn on the log axis).
	TLS, Objective float64
	// Weights are the step's edge weights, in [0, 1], one per edge (the
	// same count at every step).
	Weights []float64
}

// RobustOptions configures Robust.
type RobustOptions struct {
	// Title is the figure title; empty means a generic one.
	Title string
	// Skip marks edges whose weights are not drawn (trusted odometry,
	// always 1); nil draws every edge.
	Skip []bool
}

// Robust draws a robust run step by step: on the left the TLS cost and
// the weighted objective of each weighted solve (log scale), a certified
// solve marked by a filled circle; on the right every drawn edge's weight,
// one thin line per edge across the steps, blue for the edges kept at the
// end and vermillion for those rejected, so the consistency stage (the
// weights of the first step), GNC's graduation and the TLS checks can be
// followed. The format follows path's extension: .png, .svg or .pdf.
func Robust(path string, steps []RobustStep, opts RobustOptions) error {
	if err := checkRobust(steps, opts); err != nil {
		return fmt.Errorf("plots: %s: %w", path, err)
	}
	n := len(steps)
	cost := newPlot("cost per step", "weighted solve (1: after the consistency stage)", "")
	cost.Y.Scale = plot.LogScale{}
	cost.Y.Tick.Marker = decadeTicks{}
	var entries []entry
	for k, s := range []struct {
		label string
		val   func(RobustStep) float64
	}{
		{"TLS cost", func(r RobustStep) float64 { return r.TLS }},
		{"weighted F", func(r RobustStep) float64 { return r.Objective }},
	} {
		xys := make(plotter.XYs, n)
		var cert plotter.XYs
		for i, st := range steps {
			xys[i] = plotter.XY{X: float64(i + 1), Y: math.Max(s.val(st), tinyPositive)}
			if st.Certified {
				cert = append(cert, xys[i])
			}
		}
		line, err := plotter.NewLine(xys)
		if err != nil {
			return fmt.Errorf("plots: %s: %w", path, err)
		}
		line.Color = costColors[k]
		line.Width = vg.Points(1.5)
		if k == 1 {
			line.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
		}
		cost.Add(line)
		entries = append(entries, entry{s.label, lineThumb{line.LineStyle}})
		if len(cert) > 0 {
			sc, err := plotter.NewScatter(cert)
			if err != nil {
				return fmt.Errorf("plots: %s: %w", path, err)
			}
			sc.GlyphStyle = draw.GlyphStyle{Color: costColors[k], Radius: vg.Points(3.5), Shape: draw.CircleGlyph{}}
			cost.Add(sc)
		}
	}
	glyph := draw.GlyphStyle{Color: color.Black, Radius: vg.Points(3.5), Shape: draw.CircleGlyph{}}
	entries = append(entries, entry{"certified solve", glyphThumb{glyph}})

	weights := newPlot("loop-closure weights per step", "weighted solve", "weight")
	last := steps[n-1].Weights
	kept := &polylines{style: draw.LineStyle{Color: withAlpha(palette[0], 0x50), Width: vg.Points(0.6)}}
	cut := &polylines{style: draw.LineStyle{Color: withAlpha(palette[5], 0x90), Width: vg.Points(0.6)}}
	for e := range last {
		if opts.Skip != nil && opts.Skip[e] {
			continue
		}
		xys := make(plotter.XYs, n)
		for i, st := range steps {
			xys[i] = plotter.XY{X: float64(i + 1), Y: st.Weights[e]}
		}
		if last[e] == 0 {
			cut.lines = append(cut.lines, xys)
		} else {
			kept.lines = append(kept.lines, xys)
		}
	}
	// The rejected edges on top: there are fewer of them.
	for _, l := range []*polylines{kept, cut} {
		if len(l.lines) > 0 {
			weights.Add(l)
		}
	}
	weights.X.Min, weights.X.Max = 1, math.Max(2, float64(n))
	weights.X.Tick.Marker, cost.X.Tick.Marker = stepTicks{}, stepTicks{}
	weights.Y.Min, weights.Y.Max = -0.05, 1.05
	cost.X.Min, cost.X.Max = weights.X.Min, weights.X.Max
	entries = append(entries,
		entry{fmt.Sprintf("kept (%d)", len(kept.lines)), lineThumb{draw.LineStyle{Color: palette[0], Width: vg.Points(1.5)}}},
		entry{fmt.Sprintf("rejected (%d)", len(cut.lines)), lineThumb{draw.LineStyle{Color: palette[5], Width: vg.Points(1.5)}}})

	title := opts.Title
	if title == "" {
		title = "Robust run: TLS cost and weights per weighted solve"
	}
	return saveSideBySide(path, 9*vg.Centimeter, title, entries, cost, weights)
}

// costColors are the cost lines' colours, apart from the weights' blue
// and vermillion.
var costColors = []color.RGBA{palette[6], palette[1]}

// stepTicks labels an axis of step numbers with integers only, at most
// ten of them.
type stepTicks struct{}

func (stepTicks) Ticks(min, max float64) []plot.Tick {
	lo, hi := int(math.Ceil(min)), int(math.Floor(max))
	step := 1
	for (hi-lo)/step > 10 {
		switch {
		case step%10 == 1 || step == 1:
			step *= 2
		case step%10 == 2:
			step = step / 2 * 5
		default:
			step *= 2
		}
	}
	var ticks []plot.Tick
	for v := lo; v <= hi; v++ {
		t := plot.Tick{Value: float64(v)}
		if (v-lo)%step == 0 {
			t.Label = fmt.Sprint(v)
		}
		ticks = append(ticks, t)
	}
	return ticks
}

// tinyPositive stands in for a zero cost on the log axis.
const tinyPositive = 1e-300

func checkRobust(steps []RobustStep, opts RobustOptions) error {
	if len(steps) == 0 {
		return errors.New("no steps to draw")
	}
	m := len(steps[0].Weights)
	if opts.Skip != nil && len(opts.Skip) != m {
		return fmt.Errorf("%d edges to skip marked for %d edges", len(opts.Skip), m)
	}
	for i, s := range steps {
		if len(s.Weights) != m {
			return fmt.Errorf("step %d has %d weights, step 1 %d", i+1, len(s.Weights), m)
		}
		for _, v := range []float64{s.TLS, s.Objective} {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				return fmt.Errorf("step %d: cost %g is not a finite non-negative number", i+1, v)
			}
		}
		for e, w := range s.Weights {
			if !(w >= 0 && w <= 1) {
				return fmt.Errorf("step %d: edge %d has weight %g, not in [0, 1]", i+1, e, w)
			}
		}
	}
	return nil
}

// withAlpha returns c with alpha a, premultiplied as color.RGBA wants.
func withAlpha(c color.RGBA, a uint8) color.RGBA {
	f := float64(a) / 255
	return color.RGBA{R: uint8(float64(c.R) * f), G: uint8(float64(c.G) * f), B: uint8(float64(c.B) * f), A: a}
}

// polylines draws many polylines in one style (one plotter for thousands
// of edges' weight traces).
type polylines struct {
	lines []plotter.XYs
	style draw.LineStyle
}

func (p *polylines) Plot(c draw.Canvas, plt *plot.Plot) {
	trX, trY := plt.Transforms(&c)
	var pts []vg.Point
	for _, l := range p.lines {
		pts = pts[:0]
		for _, xy := range l {
			pts = append(pts, vg.Point{X: trX(xy.X), Y: trY(xy.Y)})
		}
		c.StrokeLines(p.style, c.ClipLinesXY(pts)...)
	}
}

func (p *polylines) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, ymin = math.Inf(1), math.Inf(1)
	xmax, ymax = math.Inf(-1), math.Inf(-1)
	for _, l := range p.lines {
		a, b, c, d := plotter.XYRange(l)
		xmin, xmax = math.Min(xmin, a), math.Max(xmax, b)
		ymin, ymax = math.Min(ymin, c), math.Max(ymax, d)
	}
	return xmin, xmax, ymin, ymax
}
