package plots

import (
	"errors"
	"fmt"
	"image/color"
	"math"

	"github.com/golang/geo/r3"
	"gonum.org/v1/plot"
	gpalette "gonum.org/v1/plot/palette"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/bcmsync/bcmsync/posegraph"
)

// ErrorOptions configures TrajectoryError.
type ErrorOptions struct {
	// Title is the figure title; empty means one giving the error's RMSE
	// and maximum.
	Title string
	// Label names the error on the colour bar and the lower panel's axis
	// (empty: "ATE").
	Label string
	// Width and Height override the 16 x 18 cm figure size.
	Width, Height vg.Length
}

// TrajectoryError draws an estimate's error along its trajectory: the top
// panel shows the reference (grey) and the estimate, aligned to it, with
// each step of the estimate coloured by the error of its poses on a colour
// bar; the bottom panel draws the error against the pose's position in the
// sequence, with its RMSE. est, ref and errs are indexed alike (associated
// poses in trajectory order). A 3-D trajectory is drawn from above (x-y),
// with equal scales on both axes. The format follows path's extension:
// .png, .svg or .pdf.
func TrajectoryError(path string, d int, est, ref []posegraph.Pose, errs []float64, opts ErrorOptions) error {
	if err := checkErrorInput(d, est, ref, errs); err != nil {
		return fmt.Errorf("plots: %s: %w", path, err)
	}
	w, h := opts.Width, opts.Height
	if w == 0 || h == 0 {
		w, h = defaultWidth, 18*vg.Centimeter
	}
	label := opts.Label
	if label == "" {
		label = "ATE"
	}
	lo, hi, rmse := math.Inf(1), math.Inf(-1), 0.0
	for _, e := range errs {
		lo, hi = math.Min(lo, e), math.Max(hi, e)
		rmse += e * e
	}
	rmse = math.Sqrt(rmse / float64(len(errs)))
	title := opts.Title
	if title == "" {
		title = fmt.Sprintf("%s along the trajectory: RMSE %.4g, max %.4g (%d poses)", label, rmse, hi, len(errs))
	}
	cmap := newRamp(errorRamp)
	cmap.SetMin(0)
	cmap.SetMax(hi)
	if !(hi > 0) {
		cmap.SetMax(1) // all errors zero: a bar from 0 to 1
	}

	refStyle := draw.LineStyle{Color: color.RGBA{R: 0x99, G: 0x99, B: 0x99, A: 0xff}, Width: vg.Points(1.6)}
	rmsStyle := draw.LineStyle{Color: failColor, Width: vg.Points(1), Dashes: []vg.Length{vg.Points(4), vg.Points(2)}}
	errStyle := draw.LineStyle{Color: palette0(), Width: vg.Points(0.9)}
	entries := []entry{
		{"reference", lineThumb{draw.LineStyle{Color: refStyle.Color, Width: vg.Points(2.5)}}},
		{"estimate (aligned), coloured by " + label, rampThumb{cmap}},
		{fmt.Sprintf("RMSE %.4g", rmse), lineThumb{rmsStyle}},
	}
	view := view{xlabel: "x", ylabel: "y", right: r3.Vector{X: 1}, up: r3.Vector{Y: 1}}
	topTitle := ""
	if d == 3 {
		topTitle = "top view (x-y)"
	}
	return save(path, w, h, func(dc draw.Canvas) {
		c := drawTitle(dc, title)
		c = drawLegend(c, entries)
		// The trajectory takes the upper 64%, the error curve the rest;
		// the colour bar is a strip right of the trajectory.
		split := c.Min.Y + (c.Max.Y-c.Min.Y)*0.36
		top := c
		top.Min.Y = split
		bottom := c
		bottom.Max.Y = split - 6
		const barW = vg.Length(50)
		bar := top
		bar.Min.X = top.Max.X - barW
		top.Max.X -= barW + 6

		p := newPlot(topTitle, view.xlabel, view.ylabel)
		rp, ep := projectPoses(ref, view), projectPoses(est, view)
		p.Add(&plotter.Line{XYs: rp, LineStyle: refStyle})
		p.Add(&colouredPath{pts: ep, vals: errs, cmap: cmap, width: vg.Points(1.4)})
		pc := top
		pc.Min.X += 4
		equalAspect(p, pc)
		p.Draw(pc)

		bp := newPlot("", "", label)
		bp.HideX()
		bp.Y.Tick.Marker = plainTicks{}
		bp.Add(&plotter.ColorBar{ColorMap: cmap, Vertical: true})
		bc := bar
		bc.Min.Y += (bar.Max.Y - bar.Min.Y) * 0.1
		bc.Max.Y -= (bar.Max.Y - bar.Min.Y) * 0.1
		bp.Draw(bc)

		ip := newPlot("", "pose (in stamp order)", label)
		xy := make(plotter.XYs, len(errs))
		for k, e := range errs {
			xy[k].X, xy[k].Y = float64(k), e
		}
		ip.Add(plotter.NewGrid())
		ip.Add(&plotter.Line{XYs: xy, LineStyle: errStyle})
		ip.Add(&plotter.Line{XYs: plotter.XYs{{X: 0, Y: rmse}, {X: float64(len(errs) - 1), Y: rmse}}, LineStyle: rmsStyle})
		ip.Y.Min = 0
		if ip.Y.Max <= 0 {
			ip.Y.Max = 1
		}
		ic := bottom
		ic.Min.X += 4
		ic.Max.X -= 8
		ip.Draw(ic)
	})
}

func palette0() color.RGBA { return palette[0] }

func checkErrorInput(d int, est, ref []posegraph.Pose, errs []float64) error {
	if d != 2 && d != 3 {
		return fmt.Errorf("dimension %d is not 2 or 3", d)
	}
	if len(est) < 2 {
		return errors.New("fewer than 2 poses to draw")
	}
	if len(ref) != len(est) || len(errs) != len(est) {
		return fmt.Errorf("%d estimated poses, %d reference poses and %d errors", len(est), len(ref), len(errs))
	}
	for k := range est {
		for a := 0; a < d; a++ {
			if bad(est[k].T[a]) || bad(ref[k].T[a]) {
				return fmt.Errorf("pose %d has a non-finite position", k)
			}
		}
		if bad(errs[k]) || errs[k] < 0 {
			return fmt.Errorf("error %d is %g, not a finite number >= 0", k, errs[k])
		}
	}
	return nil
}

func bad(x float64) bool { return math.IsNaN(x) || math.IsInf(x, 0) }

func projectPoses(poses []posegraph.Pose, v view) plotter.XYs {
	return project(poses, v)
}

// colouredPath draws the polyline through pts, each step k -> k+1 in the
// colour of the mean of vals[k] and vals[k+1].
type colouredPath struct {
	pts   plotter.XYs
	vals  []float64
	cmap  gpalette.ColorMap
	width vg.Length
}

func (s *colouredPath) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	line := make([]vg.Point, 2)
	for k := 0; k+1 < len(s.pts); k++ {
		col, err := s.cmap.At(math.Min(s.cmap.Max(), 0.5*(s.vals[k]+s.vals[k+1])))
		if err != nil {
			col = color.Black
		}
		sty := draw.LineStyle{Color: col, Width: s.width}
		line[0] = vg.Point{X: trX(s.pts[k].X), Y: trY(s.pts[k].Y)}
		line[1] = vg.Point{X: trX(s.pts[k+1].X), Y: trY(s.pts[k+1].Y)}
		c.StrokeLines(sty, c.ClipLinesXY(line)...)
	}
}

func (s *colouredPath) DataRange() (xmin, xmax, ymin, ymax float64) {
	return plotter.XYRange(s.pts)
}

// rampThumb is a legend thumbnail: the colour map as a horizontal strip.
type rampThumb struct{ cmap gpalette.ColorMap }

func (r rampThumb) Thumbnail(c *draw.Canvas) {
	const n = 12
	w := (c.Max.X - c.Min.X) / n
	for k := 0; k < n; k++ {
		v := r.cmap.Min() + (r.cmap.Max()-r.cmap.Min())*(float64(k)+0.5)/n
		col, err := r.cmap.At(v)
		if err != nil {
			continue
		}
		x0 := c.Min.X + vg.Length(k)*w
		c.FillPolygon(col, []vg.Point{{X: x0, Y: c.Min.Y}, {X: x0 + w, Y: c.Min.Y}, {X: x0 + w, Y: c.Max.Y}, {X: x0, Y: c.Max.Y}})
	}
}

// errorRamp runs from a dark blue (small errors) through bluish green and
// orange to vermillion (large ones): the Okabe-Ito hues, ordered so that
// lightness rises then the hue turns warm, readable with the common forms
// of colour blindness and never as pale as the white background.
var errorRamp = []color.RGBA{
	{R: 0x0b, G: 0x2e, B: 0x6b, A: 0xff},
	{R: 0x00, G: 0x72, B: 0xb2, A: 0xff},
	{R: 0x00, G: 0x9e, B: 0x73, A: 0xff},
	{R: 0xe6, G: 0x9f, B: 0x00, A: 0xff},
	{R: 0xd5, G: 0x3e, B: 0x00, A: 0xff},
}

// ramp is a gpalette.ColorMap interpolating linearly between evenly spaced
// colour stops.
type ramp struct {
	stops    []color.RGBA
	min, max float64
	alpha    float64
}

func newRamp(stops []color.RGBA) *ramp { return &ramp{stops: stops, max: 1, alpha: 1} }

func (r *ramp) At(v float64) (color.Color, error) {
	if bad(v) || v < r.min || v > r.max {
		return nil, gpalette.ErrOverflow
	}
	t := 0.0
	if r.max > r.min {
		t = (v - r.min) / (r.max - r.min)
	}
	x := t * float64(len(r.stops)-1)
	k := int(x)
	if k >= len(r.stops)-1 {
		k = len(r.stops) - 2
	}
	f := x - float64(k)
	a, b := r.stops[k], r.stops[k+1]
	mix := func(p, q uint8) uint8 { return uint8(math.Round(float64(p) + f*(float64(q)-float64(p)))) }
	return color.NRGBA{R: mix(a.R, b.R), G: mix(a.G, b.G), B: mix(a.B, b.B), A: uint8(math.Round(255 * r.alpha))}, nil
}

func (r *ramp) SetMax(v float64)       { r.max = v }
func (r *ramp) SetMin(v float64)       { r.min = v }
func (r *ramp) Max() float64           { return r.max }
func (r *ramp) Min() float64           { return r.min }
func (r *ramp) SetAlpha(alpha float64) { r.alpha = alpha }
func (r *ramp) Alpha() float64         { return r.alpha }

func (r *ramp) Palette(n int) gpalette.Palette {
	cs := make([]color.Color, n)
	for k := range cs {
		v := r.min
		if n > 1 {
			v += (r.max - r.min) * float64(k) / float64(n-1)
		}
		cs[k], _ = r.At(v)
	}
	return rampPalette(cs)
}

type rampPalette []color.Color

func (p rampPalette) Colors() []color.Color { return p }
