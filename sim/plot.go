package sim

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"slices"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/tollgate/tollgate/autoscale"
)

// Format is an image format of the plots.
type Format string

// The plot formats.
const (
	PNG Format = "png"
	SVG Format = "svg"
)

// panel is one chart of a figure: lines over the seconds of a run, with
// reference marks.
type panel struct {
	title, ylabel string
	lines         []series
	// counts makes the y axis count whole things: integer ticks only.
	counts bool
	// marks are instants drawn as labelled vertical lines: a burst, a
	// rate step.
	marks []mark
	// level, when its label is set, is a labelled horizontal line: a
	// limit the lines are measured against.
	level mark
}

type series struct {
	name string
	ys   []float64
	// gaps, when set, marks the seconds that have no value (no call
	// completed, so no latency): the line breaks there instead of
	// dropping to zero.
	gaps []bool
}

// noCompletions marks the seconds of r in which no call completed.
func noCompletions(r *Result) []bool {
	gaps := make([]bool, len(r.Seconds))
	for i, s := range r.Seconds {
		gaps[i] = s.Completed == 0
	}
	return gaps
}

// mark is a labelled reference line at at (seconds on a vertical mark,
// y units on a level).
type mark struct {
	at    float64
	label string
}

func column(r *Result, f func(Second) float64) []float64 {
	ys := make([]float64, len(r.Seconds))
	for i, s := range r.Seconds {
		ys[i] = f(s)
	}
	return ys
}

func seconds(d time.Duration) float64 { return d.Seconds() }

// loadMarks are the instants at which r's clients change their load: each
// burst and each rate step.
func loadMarks(r *Result) []mark {
	end := r.Scenario.Duration.Seconds()
	var ms []mark
	for _, c := range r.Scenario.Clients {
		if c.Burst > 0 && c.BurstAt.Seconds() < end {
			ms = append(ms, mark{c.BurstAt.Seconds(), fmt.Sprintf("burst of %d", c.Burst)})
		}
		for _, st := range c.Steps {
			if st.At > 0 && st.At.Seconds() < end {
				ms = append(ms, mark{st.At.Seconds(), "rate → " + strconv.FormatFloat(st.Rate, 'f', -1, 64) + "/s"})
			}
		}
	}
	for _, c := range r.LimitChanges {
		if c.At > 0 && c.At.Seconds() < end {
			ms = append(ms, mark{c.At.Seconds(), "limit → " + c.Limit.String()})
		}
	}
	return ms
}

// refillLevel marks the bucket's refill rate on a calls-per-second panel.
func refillLevel(r *Result) mark {
	if r.Limit.IsZero() {
		return mark{}
	}
	return mark{r.Limit.RefillPerSecond(), "refill " + strconv.FormatFloat(r.Limit.RefillPerSecond(), 'f', -1, 64) + "/s"}
}

// maxInstancesLevel marks the backend's max instances, a bound per
// revision.
func maxInstancesLevel(r *Result) mark {
	n := r.Scenario.Backend.Autoscale.MaxInstances
	if n == 0 {
		n = autoscale.DefaultMaxInstances
	}
	if len(r.Revisions) > 1 {
		// Each revision has its own: the service's total may exceed it.
		return mark{float64(n), fmt.Sprintf("max %d per revision", n)}
	}
	return mark{float64(n), fmt.Sprintf("max instances %d", n)}
}

// WritePlot draws r as one figure of stacked panels — calls per second
// (first attempts, retries, admitted, throttled, 429) against the bucket's
// refill rate, backend instances against max instances, for a backend of
// revisions the instances, share and calls of each revision (with the
// instances over max), for calls taking from several buckets (RunTask on
// Fargate) each bucket's tokens and throttles, and latency percentiles —
// with each burst and rate step of the load, deployment and traffic
// change marked, and writes it to w in format f.
func WritePlot(w io.Writer, r *Result, f Format) error {
	marks := loadMarks(r)
	panels := []panel{{
		title:  r.Scenario.Name + ": calls per second (limit " + r.Limit.String() + ")",
		ylabel: "calls/s",
		counts: true,
		marks:  marks,
		level:  refillLevel(r),
		lines: []series{
			{"first attempts", column(r, func(s Second) float64 { return float64(s.FirstAttempts) }), nil},
			{"retries", column(r, func(s Second) float64 { return float64(s.Retries) }), nil},
			{"admitted", column(r, func(s Second) float64 { return float64(s.Admitted) }), nil},
			{"throttled", column(r, func(s Second) float64 { return float64(s.Throttled) }), nil},
			{"429", column(r, func(s Second) float64 { return float64(s.Rejected) }), nil},
		},
	}}
	if !r.Scenario.Backend.None {
		panels = append(panels, panel{
			title:  "backend instances (" + string(r.Scenario.Backend.Policy) + ")",
			ylabel: "instances",
			counts: true,
			marks:  marks,
			level:  maxInstancesLevel(r),
			lines: []series{
				{"ready", column(r, func(s Second) float64 { return float64(s.Ready) }), nil},
				{"starting", column(r, func(s Second) float64 { return float64(s.Starting) }), nil},
				{"recommended", column(r, func(s Second) float64 { return float64(s.Recommended) }), nil},
			},
		})
	}
	panels = append(panels, revisionPanels(r)...)
	panels = append(panels, bucketPanels(r)...)
	if r.Scenario.timesCalls() {
		panels = append(panels, panel{
			title:  "end-to-end latency of the calls completed each second (blank: none completed)",
			ylabel: "seconds",
			marks:  marks,
			lines: []series{
				{"p50", column(r, func(s Second) float64 { return seconds(s.P50) }), noCompletions(r)},
				{"p99", column(r, func(s Second) float64 { return seconds(s.P99) }), noCompletions(r)},
			},
		})
	}
	return drawFigure(w, panels, f)
}

// WriteComparisonPlot draws several runs on shared panels — admitted,
// throttled and retried calls per second, ready instances and p99 latency,
// one line per run, leaving out a panel no run has (retries, instances,
// latency) — and writes the figure to w in format f. The load's
// bursts and steps, the refill rate and max instances are marked where
// every run shares them.
func WriteComparisonPlot(w io.Writer, results []*Result, f Format) error {
	var marks []mark
	var refill, maxInst mark
	if len(results) > 0 {
		marks, refill, maxInst = loadMarks(results[0]), refillLevel(results[0]), maxInstancesLevel(results[0])
		for _, r := range results[1:] {
			if !slices.Equal(loadMarks(r), marks) {
				marks = nil
			}
			if refillLevel(r) != refill {
				refill = mark{}
			}
			if maxInstancesLevel(r) != maxInst || r.Scenario.Backend.None {
				maxInst = mark{}
			}
		}
	}
	metric := func(title, ylabel string, counts bool, level mark, fn func(Second) float64) panel {
		p := panel{title: title, ylabel: ylabel, counts: counts, marks: marks, level: level}
		for _, r := range results {
			var gaps []bool
			if !counts {
				gaps = noCompletions(r)
			}
			p.lines = append(p.lines, series{r.Scenario.Name, column(r, fn), gaps})
		}
		return p
	}
	panels := []panel{
		metric("admitted calls per second", "calls/s", true, refill, func(s Second) float64 { return float64(s.Admitted) }),
		metric("throttled calls per second", "calls/s", true, mark{}, func(s Second) float64 { return float64(s.Throttled) }),
	}
	// A panel no run has is left out rather than drawn empty.
	if slices.ContainsFunc(results, func(r *Result) bool { return !r.Scenario.Retry.Disabled }) {
		panels = append(panels, metric("retries per second", "calls/s", true, mark{}, func(s Second) float64 { return float64(s.Retries) }))
	}
	if slices.ContainsFunc(results, func(r *Result) bool { return r.Scenario.hasInstances() }) {
		panels = append(panels, metric("ready instances", "instances", true, maxInst, func(s Second) float64 { return float64(s.Ready) }))
	}
	if slices.ContainsFunc(results, func(r *Result) bool { return r.Scenario.timesCalls() }) {
		panels = append(panels, metric("p99 end-to-end latency (blank: no call completed)", "seconds", false, mark{}, func(s Second) float64 { return seconds(s.P99) }))
	}
	return drawFigure(w, panels, f)
}

// segments splits a series into runs of seconds with a value.
func segments(s series) []plotter.XYs {
	var segs []plotter.XYs
	var cur plotter.XYs
	for k, y := range s.ys {
		if s.gaps != nil && s.gaps[k] {
			if len(cur) > 0 {
				segs = append(segs, cur)
			}
			cur = nil
			continue
		}
		cur = append(cur, plotter.XY{X: float64(k), Y: y})
	}
	if len(cur) > 0 {
		segs = append(segs, cur)
	}
	return segs
}

// Figure geometry.
const (
	figureWidth  = 30 * vg.Centimeter
	panelHeight  = 7 * vg.Centimeter
	legendWidth  = 5.5 * vg.Centimeter
	maxLineWidth = 3.2 // points, of a panel's first line
	minLineWidth = 1.0 // points, of its last
)

// lineWidths returns n widths falling from maxLineWidth to minLineWidth:
// lines drawn in order, each thinner than the one before, leave every
// earlier line showing at its edges where they coincide.
func lineWidths(n int) []vg.Length {
	ws := make([]vg.Length, n)
	for i := range ws {
		w := maxLineWidth
		if n > 1 {
			w -= (maxLineWidth - minLineWidth) * float64(i) / float64(n-1)
		}
		ws[i] = vg.Points(w)
	}
	return ws
}

func drawFigure(w io.Writer, panels []panel, f Format) error {
	if f != PNG && f != SVG {
		return fmt.Errorf("sim: unknown plot format %q (want %q or %q)", f, PNG, SVG)
	}
	plots := make([][]*plot.Plot, len(panels))
	legends := make([]plot.Legend, len(panels))
	for i, pn := range panels {
		p := plot.New()
		p.Title.Text = pn.title
		p.X.Label.Text = "time (s)"
		p.Y.Label.Text = pn.ylabel
		p.Add(plotter.NewGrid())
		legends[i] = plot.NewLegend()
		legends[i].Top, legends[i].Left = true, true
		n, top := 0, 0.0
		for _, s := range pn.lines {
			n = max(n, len(s.ys))
			for _, y := range s.ys {
				top = max(top, y)
			}
		}
		if top == 0 {
			p.Title.Text += " — none in this figure"
		}
		widths := lineWidths(len(pn.lines))
		for j, s := range pn.lines {
			style := draw.LineStyle{Color: plotutil.Color(j), Width: widths[j]}
			var first *plotter.Line
			zero := true
			for _, seg := range segments(s) {
				l, err := plotter.NewLine(seg)
				if err != nil {
					return fmt.Errorf("sim: plot %q: %w", s.name, err)
				}
				l.LineStyle = style
				p.Add(l)
				if len(seg) == 1 {
					// A second alone between gaps is a dot, not nothing.
					sc, err := plotter.NewScatter(seg)
					if err != nil {
						return fmt.Errorf("sim: plot %q: %w", s.name, err)
					}
					sc.GlyphStyle = draw.GlyphStyle{Color: style.Color, Radius: style.Width, Shape: draw.CircleGlyph{}}
					p.Add(sc)
				}
				if first == nil {
					first = l
				}
				for _, xy := range seg {
					zero = zero && xy.Y == 0
				}
			}
			if first == nil {
				first = &plotter.Line{LineStyle: style}
			}
			name := s.name
			if zero {
				name += " (all 0)"
			}
			legends[i].Add(name, first)
		}
		if pn.level.label != "" && pn.level.at <= 1.5*max(top, 1) {
			p.Add(levelLine{pn.level})
			legends[i].Add(pn.level.label, levelLine{pn.level})
			top = max(top, pn.level.at)
		}
		for _, m := range pn.marks {
			p.Add(instantLine{m})
			legends[i].Add(m.label+" at "+strconv.FormatFloat(m.at, 'f', -1, 64)+" s", instantLine{m})
		}
		// A little room below zero and above the top, so that lines at
		// either are not drawn on the frame; an empty panel spans 0 to 1.
		top = max(top, 1)
		p.Y.Min, p.Y.Max = -0.03*top, 1.08*top
		// Likewise a little room left of second 0, so that a mark there
		// stands clear of the axis.
		span := float64(max(n-1, 1))
		p.X.Min, p.X.Max = -0.01*span, span
		p.X.Tick.Marker = niceTicks{integer: true}
		p.Y.Tick.Marker = niceTicks{integer: pn.counts}
		plots[i] = []*plot.Plot{p}
	}
	return writeStacked(w, f, plots, legends)
}

// writeStacked writes plots, one panel a row, each with its legend in a
// column of its own at the right, beside its panel, never over a line,
// as an SVG or a PNG (f).
func writeStacked(w io.Writer, f Format, plots [][]*plot.Plot, legends []plot.Legend) error {
	width, height := figureWidth, vg.Length(len(plots))*panelHeight
	tiles := draw.Tiles{Rows: len(plots), Cols: 1, PadTop: vg.Centimeter / 2, PadBottom: vg.Centimeter / 4,
		PadLeft: vg.Centimeter / 4, PadRight: vg.Centimeter / 2, PadY: vg.Centimeter / 2}
	var (
		canvas vg.CanvasWriterTo
		dc     draw.Canvas
	)
	if f == SVG {
		c := vgsvg.New(width, height)
		canvas, dc = c, draw.New(c)
	} else {
		c := vgimg.New(width, height)
		canvas, dc = vgimg.PngCanvas{Canvas: c}, draw.New(c)
	}
	cs := plot.Align(plots, tiles, draw.Crop(dc, 0, -legendWidth, 0, 0))
	for i := range plots {
		plots[i][0].Draw(cs[i][0])
		lc := cs[i][0]
		lc.Min.X, lc.Max.X = dc.Max.X-legendWidth+vg.Centimeter/4, dc.Max.X
		lc.Max.Y -= vg.Centimeter // below the panel's title
		legends[i].Draw(lc)
	}
	if _, err := canvas.WriteTo(w); err != nil {
		return fmt.Errorf("sim: write plot: %w", err)
	}
	return nil
}

// markStyle is how reference lines are drawn: thin, dashed, grey. Their
// labels are in the legend, not over the lines of data.
var markStyle = draw.LineStyle{Color: color.Gray{Y: 80}, Width: vg.Points(1.2), Dashes: []vg.Length{vg.Points(5), vg.Points(3)}}

// instantLine draws a mark as a vertical line.
type instantLine struct{ m mark }

// Plot implements plot.Plotter.
func (l instantLine) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	x := trX(l.m.at)
	c.StrokeLine2(markStyle, x, c.Min.Y, x, c.Max.Y)
}

// Thumbnail implements plot.Thumbnailer: a short vertical dash.
func (l instantLine) Thumbnail(c *draw.Canvas) {
	x := (c.Min.X + c.Max.X) / 2
	c.StrokeLine2(markStyle, x, c.Min.Y, x, c.Max.Y)
}

// levelLine draws a mark as a horizontal line.
type levelLine struct{ m mark }

// Plot implements plot.Plotter.
func (l levelLine) Plot(c draw.Canvas, p *plot.Plot) {
	_, trY := p.Transforms(&c)
	y := trY(l.m.at)
	c.StrokeLine2(markStyle, c.Min.X, y, c.Max.X, y)
}

// Thumbnail implements plot.Thumbnailer: a short horizontal dash.
func (l levelLine) Thumbnail(c *draw.Canvas) {
	y := (c.Min.Y + c.Max.Y) / 2
	c.StrokeLine2(markStyle, c.Min.X, y, c.Max.X, y)
}

// niceTicks labels an axis every 1, 2 or 5 × a power of ten, at most
// eight labels, printed with no more decimals than the step needs ("500",
// not "500.00"); an integer axis never steps below 1 (no "0.5" instances).
type niceTicks struct{ integer bool }

// Ticks implements plot.Ticker.
func (t niceTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi > lo) || math.IsInf(hi-lo, 0) {
		return nil
	}
	raw := (hi - lo) / 8
	step := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*step >= raw {
			step *= m
			break
		}
	}
	if t.integer {
		step = max(step, 1)
	}
	prec := 0
	if step < 1 {
		prec = int(math.Ceil(-math.Log10(step) - 1e-9))
	}
	var ticks []plot.Tick
	first := math.Ceil(lo/step - 1e-9)
	for k := first; k*step <= hi+1e-9*step && len(ticks) < 100; k++ {
		v := k * step
		if v == 0 {
			v = 0 // no "-0"
		}
		ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', prec, 64)})
		// Four unlabelled minor ticks between labels, on whole values
		// only for an integer axis.
		if minor := step / 5; !t.integer || minor >= 1 {
			for m := 1; m < 5; m++ {
				if mv := v + float64(m)*minor; mv <= hi {
					ticks = append(ticks, plot.Tick{Value: mv})
				}
			}
		}
	}
	return ticks
}
