package sim

import (
	"fmt"
	"io"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Format is an image format of the plots.
type Format string

// The plot formats.
const (
	PNG Format = "png"
	SVG Format = "svg"
)

// panel is one chart of a figure: lines over the seconds of a run.
type panel struct {
	title, ylabel string
	lines         []series
}

type series struct {
	name string
	ys   []float64
}

func column(r *Result, f func(Second) float64) []float64 {
	ys := make([]float64, len(r.Seconds))
	for i, s := range r.Seconds {
		ys[i] = f(s)
	}
	return ys
}

func seconds(d time.Duration) float64 { return d.Seconds() }

// WritePlot draws r as one figure of stacked panels — calls per second
// (first attempts, retries, admitted, throttled, 429), backend instances
// and latency percentiles — and writes it to w in format f.
func WritePlot(w io.Writer, r *Result, f Format) error {
	panels := []panel{{
		title:  r.Scenario.Name + ": calls per second (limit " + r.Limit.String() + ")",
		ylabel: "calls/s",
		lines: []series{
			{"first attempts", column(r, func(s Second) float64 { return float64(s.FirstAttempts) })},
			{"retries", column(r, func(s Second) float64 { return float64(s.Retries) })},
			{"admitted", column(r, func(s Second) float64 { return float64(s.Admitted) })},
			{"throttled", column(r, func(s Second) float64 { return float64(s.Throttled) })},
			{"429", column(r, func(s Second) float64 { return float64(s.Rejected) })},
		},
	}}
	if !r.Scenario.Backend.None {
		panels = append(panels, panel{
			title:  "backend instances (" + string(r.Scenario.Backend.Policy) + ")",
			ylabel: "instances",
			lines: []series{
				{"ready", column(r, func(s Second) float64 { return float64(s.Ready) })},
				{"starting", column(r, func(s Second) float64 { return float64(s.Starting) })},
				{"recommended", column(r, func(s Second) float64 { return float64(s.Recommended) })},
			},
		})
	}
	panels = append(panels, panel{
		title:  "end-to-end latency of completed calls",
		ylabel: "seconds",
		lines: []series{
			{"p50", column(r, func(s Second) float64 { return seconds(s.P50) })},
			{"p99", column(r, func(s Second) float64 { return seconds(s.P99) })},
		},
	})
	return drawFigure(w, panels, f)
}

// WriteComparisonPlot draws several runs on shared panels — admitted,
// throttled and retried calls per second, ready instances and p99 latency,
// one line per run — and writes the figure to w in format f.
func WriteComparisonPlot(w io.Writer, results []*Result, f Format) error {
	metric := func(title, ylabel string, fn func(Second) float64) panel {
		p := panel{title: title, ylabel: ylabel}
		for _, r := range results {
			p.lines = append(p.lines, series{r.Scenario.Name, column(r, fn)})
		}
		return p
	}
	panels := []panel{
		metric("admitted calls per second", "calls/s", func(s Second) float64 { return float64(s.Admitted) }),
		metric("throttled calls per second", "calls/s", func(s Second) float64 { return float64(s.Throttled) }),
		metric("retries per second", "calls/s", func(s Second) float64 { return float64(s.Retries) }),
		metric("ready instances", "instances", func(s Second) float64 { return float64(s.Ready) }),
		metric("p99 end-to-end latency", "seconds", func(s Second) float64 { return seconds(s.P99) }),
	}
	return drawFigure(w, panels, f)
}

func drawFigure(w io.Writer, panels []panel, f Format) error {
	if f != PNG && f != SVG {
		return fmt.Errorf("sim: unknown plot format %q (want %q or %q)", f, PNG, SVG)
	}
	plots := make([][]*plot.Plot, len(panels))
	for i, pn := range panels {
		p := plot.New()
		p.Title.Text = pn.title
		p.X.Label.Text = "time (s)"
		p.Y.Label.Text = pn.ylabel
		p.Y.Min = 0
		p.Legend.Top = true
		p.Add(plotter.NewGrid())
		for j, s := range pn.lines {
			xys := make(plotter.XYs, len(s.ys))
			for k, y := range s.ys {
				xys[k] = plotter.XY{X: float64(k), Y: y}
			}
			l, err := plotter.NewLine(xys)
			if err != nil {
				return fmt.Errorf("sim: plot %q: %w", s.name, err)
			}
			l.Color = plotutil.Color(j)
			l.Width = vg.Points(1)
			p.Add(l)
			p.Legend.Add(s.name, l)
		}
		plots[i] = []*plot.Plot{p}
	}
	width, height := 28*vg.Centimeter, vg.Length(len(panels))*8*vg.Centimeter
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadTop: vg.Centimeter / 2, PadBottom: vg.Centimeter / 4,
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
	cs := plot.Align(plots, tiles, dc)
	for i := range plots {
		plots[i][0].Draw(cs[i][0])
	}
	if _, err := canvas.WriteTo(w); err != nil {
		return fmt.Errorf("sim: write plot: %w", err)
	}
	return nil
}
