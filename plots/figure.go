package plots

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgpdf"
	"gonum.org/v1/plot/vg/vgsvg"
)

// DPI is the resolution of PNG output: a 16 cm wide figure is 705 pixels
// wide, the width at which a README shows it.
const DPI = 112

// Fixed figure sizes.
const (
	defaultWidth  = 16 * vg.Centimeter
	defaultHeight = 12 * vg.Centimeter
)

// palette holds colours that stay distinct for colour-blind readers
// (Okabe and Ito), in the order series take them.
var palette = []color.RGBA{
	{R: 0x00, G: 0x72, B: 0xb2, A: 0xff}, // blue
	{R: 0xe6, G: 0x9f, B: 0x00, A: 0xff}, // orange
	{R: 0x00, G: 0x9e, B: 0x73, A: 0xff}, // bluish green
	{R: 0xcc, G: 0x79, B: 0xa7, A: 0xff}, // reddish purple
	{R: 0x56, G: 0xb4, B: 0xe9, A: 0xff}, // sky blue
	{R: 0xd5, G: 0x5e, B: 0x00, A: 0xff}, // vermillion
	{R: 0x44, G: 0x44, B: 0x44, A: 0xff}, // dark grey
}

func colorAt(k int) color.RGBA { return palette[k%len(palette)] }

var (
	passColor = color.RGBA{R: 0x00, G: 0x9e, B: 0x73, A: 0xff}
	failColor = color.RGBA{R: 0xd5, G: 0x1e, B: 0x00, A: 0xff}
)

// save draws a figure of size w x h with paint and writes it to path in
// the format its extension names (.png, .svg or .pdf).
func save(path string, w, h vg.Length, paint func(dc draw.Canvas)) error {
	var c vg.CanvasWriterTo
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".png":
		c = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(DPI))}
	case ".svg":
		c = vgsvg.New(w, h)
	case ".pdf":
		c = vgpdf.New(w, h)
	default:
		return fmt.Errorf("plots: %s: unsupported output format %q (want .png, .svg or .pdf)", path, ext)
	}
	paint(draw.New(c))
	return createWith(path, func(f io.Writer) error {
		if _, err := c.WriteTo(f); err != nil {
			return fmt.Errorf("plots: writing %s: %w", path, err)
		}
		return nil
	})
}

// textStyle returns the default font at the given size.
func textStyle(size vg.Length) text.Style {
	return text.Style{
		Color:   color.Black,
		Font:    font.From(plot.DefaultFont, size),
		Handler: plot.DefaultTextHandler,
	}
}

// newPlot returns a plot with the house style: smaller fonts than gonum's
// defaults, so four panels fit a 16 cm figure, and a light grid.
func newPlot(title, xlabel, ylabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = 10
	p.Title.Padding = 3
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Tick.Marker = plainTicks{}
		a.Label.TextStyle.Font.Size = 9
		a.Tick.Label.Font.Size = 8
		a.Padding = 2
	}
	return p
}

// entry is one item of a figure legend.
type entry struct {
	label string
	thumb plot.Thumbnailer
}

// legendHeight is the height of the strip drawLegend needs.
func legendHeight() vg.Length { return 16 }

// drawLegend draws the entries side by side, centred in a strip at the top
// of c, and returns c without the strip. One legend per figure, outside
// the data, so it never hides a trajectory or a curve.
func drawLegend(c draw.Canvas, entries []entry) draw.Canvas {
	if len(entries) == 0 {
		return c
	}
	sty := textStyle(9)
	const thumbW, gap, pad = vg.Length(18), vg.Length(4), vg.Length(12)
	total := vg.Length(0)
	for k, e := range entries {
		if k > 0 {
			total += pad
		}
		total += thumbW + gap + sty.Width(e.label)
	}
	h := legendHeight()
	top := c.Max.Y
	x := c.Center().X - total/2
	ext := sty.FontExtents()
	yText := top - h/2 - (ext.Ascent-ext.Descent)/2
	for _, e := range entries {
		tc := draw.Canvas{Canvas: c.Canvas, Rectangle: vg.Rectangle{
			Min: vg.Point{X: x, Y: top - h/2 - 4},
			Max: vg.Point{X: x + thumbW, Y: top - h/2 + 4},
		}}
		e.thumb.Thumbnail(&tc)
		x += thumbW + gap
		c.FillText(sty, vg.Point{X: x, Y: yText}, e.label)
		x += sty.Width(e.label) + pad
	}
	c.Max.Y -= h
	return c
}

// saveSideBySide saves a figure of height h: the title, the legend's
// entries, and the two panels left and right of the middle.
func saveSideBySide(path string, h vg.Length, title string, entries []entry, left, right *plot.Plot) error {
	return save(path, defaultWidth, h, func(dc draw.Canvas) {
		c := drawTitle(dc, title)
		c = drawLegend(c, entries)
		c = draw.Crop(c, 2, -4, 2, -2)
		mid := (c.Min.X + c.Max.X) / 2
		l, r := c, c
		l.Max.X, r.Min.X = mid-6, mid+6
		left.Draw(l)
		right.Draw(r)
	})
}

// drawTitle draws a figure title at the top of c and returns the rest.
func drawTitle(c draw.Canvas, title string) draw.Canvas {
	if title == "" {
		return c
	}
	sty := textStyle(12)
	sty.XAlign = draw.XCenter
	sty.YAlign = draw.YTop
	c.FillText(sty, vg.Point{X: c.Center().X, Y: c.Max.Y - 2}, title)
	c.Max.Y -= sty.Height(title) + 4
	return c
}

// equalAspect widens the x or y range of p so that one data unit is as
// long on both axes when p is drawn into c. The data area depends on the
// tick labels, which depend on the ranges, so it iterates; three rounds
// settle it to a fraction of a point.
func equalAspect(p *plot.Plot, c draw.Canvas) {
	xmid, ymid := (p.X.Min+p.X.Max)/2, (p.Y.Min+p.Y.Max)/2
	xr, yr := p.X.Max-p.X.Min, p.Y.Max-p.Y.Min
	if xr <= 0 {
		xr = 1
	}
	if yr <= 0 {
		yr = 1
	}
	for range 3 {
		da := p.DataCanvas(c)
		w, h := float64(da.Max.X-da.Min.X), float64(da.Max.Y-da.Min.Y)
		if w <= 0 || h <= 0 {
			return
		}
		// Units per point must match: xr/w == yr/h, only ever growing.
		if xr/w < yr/h {
			xr = yr * w / h
		} else {
			yr = xr * h / w
		}
		p.X.Min, p.X.Max = xmid-xr/2, xmid+xr/2
		p.Y.Min, p.Y.Max = ymid-yr/2, ymid+yr/2
	}
}

// plainTicks places ticks as gonum's default ticker does but labels them
// in the shortest form (25, not 25.00; 0.006, not 0.0060).
type plainTicks struct{}

func (plainTicks) Ticks(min, max float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(min, max)
	for k := range ticks {
		if ticks[k].Label != "" {
			ticks[k].Label = strconv.FormatFloat(ticks[k].Value, 'g', 6, 64)
		}
	}
	return ticks
}

// decadeTicks marks a log axis: a labelled tick at every k-th power of
// ten, k chosen so that at most six labels appear, minor ticks at the other
// decades (and at 2..9 times each decade when the range is short), and
// labels 2 and 5 times a decade too when the range spans less than two.
type decadeTicks struct{}

func (decadeTicks) Ticks(min, max float64) []plot.Tick {
	if !(min > 0) || !(max > min) {
		return nil
	}
	lo, hi := int(math.Floor(math.Log10(min))), int(math.Ceil(math.Log10(max)))
	span := hi - lo
	step := (span + 5) / 6
	if step < 1 {
		step = 1
	}
	var ticks []plot.Tick
	for e := lo; e <= hi; e++ {
		v := math.Pow(10, float64(e))
		t := plot.Tick{Value: v}
		if e%step == 0 {
			t.Label = powerLabel(e)
		}
		ticks = append(ticks, t)
		if span <= 4 && e < hi {
			for m := 2; m <= 9; m++ {
				t := plot.Tick{Value: float64(m) * v}
				if span <= 2 && (m == 2 || m == 5) {
					t.Label = mantissaLabel(m, e)
				}
				ticks = append(ticks, t)
			}
		}
	}
	return ticks
}

// powerLabel writes 10^e compactly: 1, 10, 1000, 0.01, 0.001, else 1e-7.
func powerLabel(e int) string { return mantissaLabel(1, e) }

// mantissaLabel writes m 10^e as a plain decimal when e is in [-3, 3],
// else as me<e> (2e-7, 5e6).
func mantissaLabel(m, e int) string {
	switch {
	case e >= 0 && e <= 3:
		return strconv.FormatFloat(float64(m)*math.Pow(10, float64(e)), 'f', 0, 64)
	case e < 0 && e >= -3:
		return strconv.FormatFloat(float64(m)*math.Pow(10, float64(e)), 'f', -e, 64)
	}
	return strconv.Itoa(m) + "e" + strconv.Itoa(e)
}
