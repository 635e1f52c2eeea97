package plots

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"path/filepath"

	"github.com/golang/geo/r3"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/bcmsync/bcmsync/posegraph"
)

// Trajectory is one estimate of a graph's poses to draw, such as the
// initial guess or the optimized solution.
type Trajectory struct {
	Label string
	Poses []posegraph.Pose
}

// TrajectoryOptions configures Trajectories.
type TrajectoryOptions struct {
	// Title is the figure title; empty means the graph's source name and
	// size.
	Title string
	// LoopClosures draws every edge that does not join consecutive poses
	// as a thin grey segment between the positions of the last trajectory
	// (by convention the optimized estimate).
	LoopClosures bool
	// Width and Height override the figure size: 16 x 12 cm in 2-D,
	// 16 x 16 cm in 3-D.
	Width, Height vg.Length
}

// view is an orthographic projection: a point t is drawn at
// (t . Right, t . Up).
type view struct {
	name, xlabel, ylabel string
	right, up            r3.Vector
	triad                bool // draw the world axes (for views not aligned with them)
}

// obliqueView looks at the scene from the direction (1, -1.4, 1.1), with
// world z pointing up on the page.
func obliqueView() view {
	toViewer := r3.Vector{X: 1, Y: -1.4, Z: 1.1}.Normalize()
	zUp := r3.Vector{Z: 1}
	right := zUp.Cross(toViewer).Normalize()
	up := toViewer.Cross(right)
	return view{name: "oblique view", right: right, up: up, triad: true}
}

// views3 are the panels of a 3-D figure, row by row.
func views3() []view {
	ex, ey, ez := r3.Vector{X: 1}, r3.Vector{Y: 1}, r3.Vector{Z: 1}
	return []view{
		{name: "top view", xlabel: "x", ylabel: "y", right: ex, up: ey},
		{name: "front view", xlabel: "x", ylabel: "z", right: ex, up: ez},
		{name: "side view", xlabel: "y", ylabel: "z", right: ey, up: ez},
		obliqueView(),
	}
}

// Trajectories draws the trajectories of graph g, in order (later ones on
// top), each as a polyline through its poses in index order, with equal
// scales on both axes. A 2-D graph gets one top view; a 3-D graph a 2 x 2
// grid of orthographic views: top (x-y), front (x-z), side (y-z) and an
// oblique view with the world axes drawn in its corner. The format follows
// path's extension: .png, .svg or .pdf.
func Trajectories(path string, g *posegraph.Graph, trajs []Trajectory, opts TrajectoryOptions) error {
	if err := checkTrajectories(g, trajs); err != nil {
		return fmt.Errorf("plots: %s: %w", path, err)
	}
	w, h := opts.Width, opts.Height
	if w == 0 || h == 0 {
		w, h = defaultWidth, defaultHeight
		if g.D == 3 {
			h = defaultWidth
		}
	}
	title := opts.Title
	if title == "" {
		name := "pose graph"
		if g.Source != "" {
			name = filepath.Base(g.Source)
		}
		title = fmt.Sprintf("%s: %d poses, %d edges", name, g.N(), g.M())
		if nl := g.NumLandmarks(); nl > 0 {
			title = fmt.Sprintf("%s: %d poses, %d landmarks, %d edges", name, g.NumPoses(), nl, g.M())
		}
	}
	// Landmarks follow the poses (posegraph's convention): the polylines
	// run through the first np positions, the rest are drawn as markers.
	np := g.NumPoses()

	styles := make([]draw.LineStyle, len(trajs))
	var entries []entry
	for k, tr := range trajs {
		styles[k] = draw.LineStyle{Color: trajColor(k, len(trajs)), Width: vg.Points(0.9)}
		entries = append(entries, entry{tr.Label, lineThumb{draw.LineStyle{Color: styles[k].Color, Width: vg.Points(2.5)}}})
	}
	glyphs := make([]draw.GlyphStyle, len(trajs))
	if np < g.N() {
		for k := range trajs {
			glyphs[k] = landmarkGlyph(styles[k].Color)
		}
		entries = append(entries, entry{fmt.Sprintf("landmarks (%d)", g.N()-np), glyphThumb{landmarkGlyph(styles[len(trajs)-1].Color)}})
	}
	closureStyle := draw.LineStyle{Color: color.NRGBA{R: 0xc0, G: 0x30, B: 0x30, A: 0xa0}, Width: vg.Points(0.6)}
	var closures [][2]int
	if opts.LoopClosures {
		closures = loopClosures(g)
		if len(closures) > 0 {
			entries = append(entries, entry{fmt.Sprintf("loop closures (%d)", len(closures)), lineThumb{closureStyle}})
		}
	}

	var vs []view
	if g.D == 2 {
		vs = []view{{xlabel: "x", ylabel: "y", right: r3.Vector{X: 1}, up: r3.Vector{Y: 1}}}
	} else {
		vs = views3()
	}
	return save(path, w, h, func(dc draw.Canvas) {
		c := drawTitle(dc, title)
		c = drawLegend(c, entries)
		tiles := draw.Tiles{Rows: 1, Cols: 1, PadTop: 2, PadBottom: 4, PadLeft: 4, PadRight: 8}
		if len(vs) == 4 {
			tiles = draw.Tiles{Rows: 2, Cols: 2, PadX: 14, PadY: 10, PadTop: 2, PadBottom: 4, PadLeft: 4, PadRight: 8}
		}
		for k, v := range vs {
			p := newPlot(v.name, v.xlabel, v.ylabel)
			if v.triad {
				p.HideAxes()
			}
			proj := make([]plotter.XYs, len(trajs))
			for t, tr := range trajs {
				proj[t] = project(tr.Poses, v)
			}
			if len(closures) > 0 {
				p.Add(&segments{pts: proj[len(proj)-1], pairs: closures, style: closureStyle})
			}
			for t := range trajs {
				l := &plotter.Line{XYs: proj[t][:np], LineStyle: styles[t]}
				p.Add(l)
			}
			if np < g.N() {
				for t := range trajs {
					p.Add(&plotter.Scatter{XYs: proj[t][np:], GlyphStyle: glyphs[t]})
				}
			}
			pc := tiles.At(c, k%tiles.Cols, k/tiles.Cols)
			if v.triad {
				// The world axes go in a strip left of the data, where
				// they cannot hide any of it.
				drawTriad(pc, v)
				pc = draw.Crop(pc, triadStrip, 0, 0, 0)
			}
			equalAspect(p, pc)
			p.Draw(pc)
		}
	})
}

func checkTrajectories(g *posegraph.Graph, trajs []Trajectory) error {
	if g == nil {
		return errors.New("no graph")
	}
	if g.D != 2 && g.D != 3 {
		return fmt.Errorf("graph dimension %d is not 2 or 3", g.D)
	}
	if len(trajs) == 0 {
		return errors.New("no trajectory to draw")
	}
	n := g.N()
	for k, tr := range trajs {
		if len(tr.Poses) != n {
			return fmt.Errorf("trajectory %d (%q) has %d poses, the graph %d", k, tr.Label, len(tr.Poses), n)
		}
		for i, p := range tr.Poses {
			for _, v := range p.T[:g.D] {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					return fmt.Errorf("trajectory %d (%q): pose %d has a non-finite position %v", k, tr.Label, i, p.T[:g.D])
				}
			}
		}
	}
	for k, e := range g.Edges {
		if e.I < 0 || e.I >= n || e.J < 0 || e.J >= n {
			return fmt.Errorf("edge %d (%d, %d) has an endpoint outside 0..%d", k, e.I, e.J, n-1)
		}
	}
	return nil
}

// trajColor gives the last trajectory (the estimate) the strong blue and
// the earlier ones (guesses) the other palette colours.
func trajColor(k, n int) color.RGBA {
	if k == n-1 {
		return palette[0]
	}
	return colorAt(k + 1)
}

func project(poses []posegraph.Pose, v view) plotter.XYs {
	xy := make(plotter.XYs, len(poses))
	for i, p := range poses {
		t := r3.Vector{X: p.T[0], Y: p.T[1], Z: p.T[2]}
		xy[i].X, xy[i].Y = t.Dot(v.right), t.Dot(v.up)
	}
	return xy
}

// lineThumb is a legend thumbnail: a short line in a given style.
type lineThumb struct{ style draw.LineStyle }

func (l lineThumb) Thumbnail(c *draw.Canvas) {
	y := c.Center().Y
	c.StrokeLine2(l.style, c.Min.X, y, c.Max.X, y)
}

// segments draws the line segments pts[a]-pts[b] for the given pairs.
type segments struct {
	pts   plotter.XYs
	pairs [][2]int
	style draw.LineStyle
}

func (s *segments) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	line := make([]vg.Point, 2)
	for _, ab := range s.pairs {
		a, b := s.pts[ab[0]], s.pts[ab[1]]
		line[0] = vg.Point{X: trX(a.X), Y: trY(a.Y)}
		line[1] = vg.Point{X: trX(b.X), Y: trY(b.Y)}
		c.StrokeLines(s.style, c.ClipLinesXY(line)...)
	}
}

func (s *segments) DataRange() (xmin, xmax, ymin, ymax float64) {
	return plotter.XYRange(s.pts)
}

// triadStrip is the width of the strip holding the world axes.
const triadStrip = vg.Length(40)

// drawTriad draws the projected world axes x, y, z at the bottom of a
// strip along the left edge of c, so an oblique view can be read without
// axes.
func drawTriad(c draw.Canvas, v view) {
	const length = vg.Length(13)
	o := vg.Point{X: c.Min.X + triadStrip/2, Y: c.Min.Y + triadStrip/2}
	sty := textStyle(8)
	sty.XAlign, sty.YAlign = draw.XCenter, draw.YCenter
	axes := []struct {
		name string
		dir  r3.Vector
	}{{"x", r3.Vector{X: 1}}, {"y", r3.Vector{Y: 1}}, {"z", r3.Vector{Z: 1}}}
	ls := draw.LineStyle{Color: color.Black, Width: vg.Points(0.8)}
	for _, a := range axes {
		dx, dy := vg.Length(a.dir.Dot(v.right)), vg.Length(a.dir.Dot(v.up))
		c.StrokeLine2(ls, o.X, o.Y, o.X+length*dx, o.Y+length*dy)
		c.FillText(sty, vg.Point{X: o.X + (length+5)*dx, Y: o.Y + (length+5)*dy}, a.name)
	}
}

// landmarkGlyph is the marker of a landmark: a small hollow triangle in
// the colour of its trajectory, distinct from the polylines of the poses.
func landmarkGlyph(c color.Color) draw.GlyphStyle {
	return draw.GlyphStyle{Color: c, Radius: vg.Points(2.2), Shape: draw.TriangleGlyph{}}
}

// loopClosures returns the edges that do not join consecutive poses,
// landmark observations left out.
func loopClosures(g *posegraph.Graph) [][2]int {
	var out [][2]int
	for _, e := range g.Edges {
		if g.IsLandmark(e.J) {
			continue // an observation, not a loop closure
		}
		if e.J != e.I+1 && e.I != e.J+1 {
			out = append(out, [2]int{e.I, e.J})
		}
	}
	return out
}
