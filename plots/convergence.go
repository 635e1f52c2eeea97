package plots

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Level is the history of one level of the Riemannian staircase (one rank
// r): the objective and gradient norm after each recorded iteration.
type Level struct {
	// Rank is the relaxation rank r of this level.
	Rank int
	// Label names the level in the legend; empty means "rank r".
	Label string
	// Iter and Time are the iteration count and the elapsed time in
	// seconds at each record, counted from the start of the whole solve
	// so that levels follow one another. Time may be empty.
	Iter, Time []float64
	// F is the objective at each record, GradNorm the Riemannian gradient
	// norm (may be empty).
	F, GradNorm []float64
	// Certified reports the certificate check at the end of the level:
	// nil if none was made, else whether it passed.
	Certified *bool
}

// XAxes selects the horizontal axes of a convergence figure.
type XAxes int

const (
	// IterationAndTime draws both columns: against iteration and time.
	IterationAndTime XAxes = iota
	// IterationOnly draws against iteration.
	IterationOnly
	// TimeOnly draws against time.
	TimeOnly
)

// ConvergenceOptions configures Convergence.
type ConvergenceOptions struct {
	// Title is the figure title; empty means one naming F_final.
	Title string
	// XAxes selects the columns. With IterationAndTime, the time column
	// is left out when no level has times.
	XAxes XAxes
	// Floor is the smallest F - F_final shown: smaller values, zero and
	// negative ones (F_final is usually the last F, or a rounded value
	// slightly above the relaxation's) are drawn on the floor. Zero means
	// 1e-12 max(1, |F_final|).
	Floor float64
	// Width and Height override the 16 x 12 cm figure size.
	Width, Height vg.Length
}

// Convergence draws the staircase's history: F - F_final (top row) and the
// Riemannian gradient norm (bottom row, when any level has one) against
// iteration and time, on log scales, one colour per level. The end of each
// level that was checked carries a marker: a filled circle if the
// certificate passed, a cross if it failed. The format follows path's
// extension: .png, .svg or .pdf.
func Convergence(path string, levels []Level, fFinal float64, opts ConvergenceOptions) error {
	if err := checkLevels(levels, fFinal); err != nil {
		return fmt.Errorf("plots: %s: %w", path, err)
	}
	hasTime, hasGrad := false, false
	for _, l := range levels {
		hasTime = hasTime || len(l.Time) > 0
		hasGrad = hasGrad || len(l.GradNorm) > 0
	}
	var cols []string // "iter" or "time"
	switch opts.XAxes {
	case IterationAndTime:
		cols = []string{"iter"}
		if hasTime {
			cols = append(cols, "time")
		}
	case IterationOnly:
		cols = []string{"iter"}
	case TimeOnly:
		if !hasTime {
			return fmt.Errorf("plots: %s: TimeOnly asked but no level has times", path)
		}
		cols = []string{"time"}
	default:
		return fmt.Errorf("plots: %s: unknown XAxes %d", path, opts.XAxes)
	}
	rows := []string{"gap"}
	if hasGrad {
		rows = append(rows, "grad")
	}

	floor := opts.Floor
	if !(floor > 0) {
		floor = 1e-12 * math.Max(1, math.Abs(fFinal))
	}
	gradFloor := math.Inf(1)
	for _, l := range levels {
		for _, v := range l.GradNorm {
			if v > 0 {
				gradFloor = math.Min(gradFloor, v)
			}
		}
	}
	gradFloor /= 10 // only used for zero gradients, drawn a decade below the rest

	series := func(l Level, row, col string) plotter.XYs {
		xs := l.Iter
		if col == "time" {
			xs = l.Time
		}
		ys, lo := l.F, floor
		if row == "grad" {
			ys, lo = l.GradNorm, gradFloor
		}
		if len(xs) == 0 || len(ys) == 0 {
			return nil
		}
		xy := make(plotter.XYs, len(ys))
		for i, y := range ys {
			if row == "gap" {
				y -= fFinal
			}
			xy[i] = plotter.XY{X: xs[i], Y: math.Max(y, lo)}
		}
		return xy
	}

	title := opts.Title
	if title == "" {
		title = fmt.Sprintf("Convergence (F_final = %.10g)", fFinal)
	}
	lineStyle := func(k int) draw.LineStyle {
		return draw.LineStyle{Color: colorAt(k), Width: vg.Points(1.2)}
	}
	pass := draw.GlyphStyle{Color: passColor, Radius: vg.Points(3.5), Shape: draw.CircleGlyph{}}
	fail := draw.GlyphStyle{Color: failColor, Radius: vg.Points(4), Shape: thickCross{}}
	var entries []entry
	anyPass, anyFail := false, false
	for k, l := range levels {
		label := l.Label
		if label == "" {
			label = fmt.Sprintf("rank %d", l.Rank)
		}
		ls := lineStyle(k)
		ls.Width = vg.Points(2.5)
		entries = append(entries, entry{label, lineThumb{ls}})
		if l.Certified != nil {
			anyPass = anyPass || *l.Certified
			anyFail = anyFail || !*l.Certified
		}
	}
	if anyPass {
		entries = append(entries, entry{"certified", glyphThumb{pass}})
	}
	if anyFail {
		entries = append(entries, entry{"certificate failed", glyphThumb{fail}})
	}

	w, h := opts.Width, opts.Height
	if w == 0 || h == 0 {
		w, h = defaultWidth, defaultHeight
	}
	return save(path, w, h, func(dc draw.Canvas) {
		c := drawTitle(dc, title)
		c = drawLegend(c, entries)
		tiles := draw.Tiles{Rows: len(rows), Cols: len(cols), PadX: 14, PadY: 8, PadTop: 2, PadBottom: 4, PadLeft: 4, PadRight: 8}
		for r, row := range rows {
			for ci, col := range cols {
				xlabel := "iteration"
				if col == "time" {
					xlabel = "time [s]"
				}
				ylabel := "F - F_final"
				if row == "grad" {
					ylabel = "gradient norm"
				}
				p := newPlot("", xlabel, ylabel)
				p.Y.Scale = plot.LogScale{}
				p.Y.Tick.Marker = decadeTicks{}
				ymin, ymax := math.Inf(1), math.Inf(-1)
				for k, l := range levels {
					xy := series(l, row, col)
					if len(xy) == 0 {
						continue
					}
					p.Add(&plotter.Line{XYs: xy, LineStyle: lineStyle(k)})
					for _, pt := range xy {
						ymin, ymax = math.Min(ymin, pt.Y), math.Max(ymax, pt.Y)
					}
					if l.Certified != nil {
						g := fail
						if *l.Certified {
							g = pass
						}
						s, _ := plotter.NewScatter(xy[len(xy)-1:])
						s.GlyphStyle = g
						p.Add(s)
					}
				}
				if ymin > ymax { // no data in this panel
					ymin, ymax = 1, 10
				}
				// Half a decade of room above and below.
				p.Y.Min, p.Y.Max = ymin/3, ymax*3
				p.Draw(tiles.At(c, ci, r))
			}
		}
	})
}

func checkLevels(levels []Level, fFinal float64) error {
	if len(levels) == 0 {
		return errors.New("no levels to draw")
	}
	if math.IsNaN(fFinal) || math.IsInf(fFinal, 0) {
		return fmt.Errorf("F_final = %g is not finite", fFinal)
	}
	for k, l := range levels {
		n := len(l.F)
		if len(l.Iter) != n {
			return fmt.Errorf("level %d (rank %d): %d iterations but %d values of F", k, l.Rank, len(l.Iter), n)
		}
		if len(l.Time) != 0 && len(l.Time) != n {
			return fmt.Errorf("level %d (rank %d): %d times but %d values of F", k, l.Rank, len(l.Time), n)
		}
		if len(l.GradNorm) != 0 && len(l.GradNorm) != n {
			return fmt.Errorf("level %d (rank %d): %d gradient norms but %d values of F", k, l.Rank, len(l.GradNorm), n)
		}
		for _, s := range []struct {
			name string
			v    []float64
		}{{"iteration", l.Iter}, {"time", l.Time}, {"F", l.F}, {"gradient norm", l.GradNorm}} {
			for i, v := range s.v {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					return fmt.Errorf("level %d (rank %d): %s %d is %g", k, l.Rank, s.name, i, v)
				}
			}
		}
	}
	return nil
}

// glyphThumb is a legend thumbnail: one glyph.
type glyphThumb struct{ style draw.GlyphStyle }

func (g glyphThumb) Thumbnail(c *draw.Canvas) { c.DrawGlyph(g.style, c.Center()) }

// thickCross is a cross glyph drawn with a heavier line than
// draw.CrossGlyph, so a failed check stands out on a busy curve.
type thickCross struct{}

func (thickCross) DrawGlyph(c *draw.Canvas, sty draw.GlyphStyle, pt vg.Point) {
	ls := draw.LineStyle{Color: sty.Color, Width: vg.Points(1.8)}
	r := sty.Radius
	c.StrokeLine2(ls, pt.X-r, pt.Y-r, pt.X+r, pt.Y+r)
	c.StrokeLine2(ls, pt.X-r, pt.Y+r, pt.X+r, pt.Y-r)
}
