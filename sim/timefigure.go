package sim

// This file draws figures of other packages' series over time (package
// replay's recorded traffic), in the look of WritePlot's: the same lines,
// widths, colours, ticks, legend column and geometry, with an x axis in
// whatever unit of time the series are binned by.

import (
	"fmt"
	"io"
	"math"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg/draw"
)

// maxFigurePanels and maxFigurePoints bound what WriteTimeFigure draws.
const (
	maxFigurePanels = 32
	maxFigurePoints = 1 << 20
)

// TimeSeries is one line of a TimeFigure: a value per step of time.
type TimeSeries struct {
	// Name labels the line in the legend.
	Name string
	// Values are its values, value i at x = i × TimeFigure.XStep.
	Values []float64
}

// TimePanel is one chart of a TimeFigure.
type TimePanel struct {
	// Title is over the chart, YLabel along its y axis.
	Title, YLabel string
	// Lines are drawn in order, each thinner than the one before.
	Lines []TimeSeries
	// Counts makes the y axis count whole things: integer ticks only.
	Counts bool
	// Level, when LevelLabel is set, is drawn as a labelled horizontal
	// line: a limit the lines are measured against. It is left out when
	// far above the lines (more than 1.5 times their top), unless
	// LevelAlways.
	Level       float64
	LevelLabel  string
	LevelAlways bool
}

// TimeFigure is panels stacked over one time axis.
type TimeFigure struct {
	// XLabel names the x axis ("minutes from 2026-11-30 12:00 UTC").
	XLabel string
	// XStep is the x of value 1 (the bin's width in the unit of XLabel);
	// 1 when zero.
	XStep float64
	// Panels are the charts, top to bottom.
	Panels []TimePanel
	// Step, when set, makes the x axis read clock time (UTC): value i
	// is at Start + i × Step, ticks are times of day, and XStep is not
	// used.
	Start time.Time
	Step  time.Duration
}

// WriteTimeFigure draws fig in format f, as WritePlot draws a run.
func WriteTimeFigure(w io.Writer, fig TimeFigure, f Format) error {
	if f != PNG && f != SVG {
		return fmt.Errorf("sim: unknown plot format %q (want %q or %q)", f, PNG, SVG)
	}
	if len(fig.Panels) == 0 || len(fig.Panels) > maxFigurePanels {
		return fmt.Errorf("sim: a figure of %d panels (want 1 to %d)", len(fig.Panels), maxFigurePanels)
	}
	step, x0 := fig.XStep, 0.0
	if fig.Step > 0 {
		step, x0 = fig.Step.Seconds(), float64(fig.Start.UnixNano())/1e9
	}
	if step == 0 {
		step = 1
	}
	if !(step > 0) {
		return fmt.Errorf("sim: figure x step %v is not positive", fig.XStep)
	}
	points := 0
	plots := make([][]*plot.Plot, len(fig.Panels))
	legends := make([]plot.Legend, len(fig.Panels))
	for i, pn := range fig.Panels {
		p := plot.New()
		p.Title.Text = pn.Title
		p.X.Label.Text = fig.XLabel
		p.Y.Label.Text = pn.YLabel
		p.Add(plotter.NewGrid())
		legends[i] = plot.NewLegend()
		legends[i].Top, legends[i].Left = true, true
		n, top := 0, 0.0
		widths := lineWidths(len(pn.Lines))
		for j, s := range pn.Lines {
			if points += len(s.Values); points > maxFigurePoints {
				return fmt.Errorf("sim: a figure of more than %d points", maxFigurePoints)
			}
			n = max(n, len(s.Values))
			xys := make(plotter.XYs, len(s.Values))
			zero := true
			for k, y := range s.Values {
				xys[k] = plotter.XY{X: x0 + float64(k)*step, Y: y}
				top = max(top, y)
				zero = zero && y == 0
			}
			style := draw.LineStyle{Color: plotutil.Color(j), Width: widths[j]}
			l := &plotter.Line{LineStyle: style}
			if len(xys) > 0 {
				var err error
				if l, err = plotter.NewLine(xys); err != nil {
					return fmt.Errorf("sim: plot %q: %w", s.Name, err)
				}
				l.LineStyle = style
				p.Add(l)
			}
			name := s.Name
			if zero {
				name += " (all 0)"
			}
			legends[i].Add(name, l)
		}
		if top == 0 {
			p.Title.Text += " — none in this figure"
		}
		if pn.LevelLabel != "" && (pn.LevelAlways || pn.Level <= 1.5*max(top, 1)) {
			m := mark{pn.Level, pn.LevelLabel}
			p.Add(levelLine{m})
			legends[i].Add(m.label, levelLine{m})
			top = max(top, m.at)
		}
		top = max(top, 1)
		p.Y.Min, p.Y.Max = -0.03*top, 1.08*top
		span := float64(max(n-1, 1)) * step
		p.X.Min, p.X.Max = x0-0.01*span, x0+span
		p.X.Tick.Marker = niceTicks{}
		if fig.Step > 0 {
			p.X.Tick.Marker = clockTicks{format: clockFormat(time.Duration(span * 1e9))}
		}
		p.Y.Tick.Marker = niceTicks{integer: pn.Counts}
		plots[i] = []*plot.Plot{p}
	}
	return writeStacked(w, f, plots, legends)
}

// InlineSVG returns the SVG a plot function writes without what precedes
// its <svg> element, to be put in an HTML page as WriteHTML puts its
// figures.
func InlineSVG(plot func(io.Writer) error) (string, error) { return inlineSVG(plot) }

// clockFormat is the layout of a clock-time tick on an axis spanning
// span: seconds when it is short, the date when it is long.
func clockFormat(span time.Duration) string {
	switch {
	case span <= 10*time.Minute:
		return "15:04:05"
	case span <= 24*time.Hour:
		return "15:04"
	}
	return "Jan 2 15:04"
}

// clockTicks marks an axis of Unix seconds at round times of day (UTC):
// every 1, 5, 10, 15 or 30 seconds or minutes, or 1, 2, 3, 6 or 12 hours,
// or days, some eight at most.
type clockTicks struct{ format string }

// Ticks implements plot.Ticker.
func (c clockTicks) Ticks(lo, hi float64) []plot.Tick {
	steps := []float64{1, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400}
	step := steps[len(steps)-1]
	for _, s := range steps {
		if (hi-lo)/s <= 8 {
			step = s
			break
		}
	}
	for (hi-lo)/step > 8 {
		step *= 2
	}
	var ts []plot.Tick
	for x := math.Ceil(lo/step) * step; x <= hi; x += step {
		ts = append(ts, plot.Tick{Value: x, Label: time.Unix(int64(x), 0).UTC().Format(c.format)})
	}
	return ts
}
