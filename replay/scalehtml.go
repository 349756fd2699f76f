package replay

// This file follows an autoscaled run minute by minute, and writes a
// ScaleReport as one self-contained HTML page with its figures.

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/sim"
)

// minuteSeries follows a run: its instances minute by minute (memory
// grows with the run's span, at most sim.MaxRecordedSpan, not with its
// requests), and, for the figure, its instances, pending requests and
// 429s in at most maxBins bins, coarser as the run goes on.
type minuteSeries struct {
	peaks                        []int
	instances, pending, rejected bins
}

func newMinuteSeries() *minuteSeries {
	return &minuteSeries{instances: bins{step: time.Second}, pending: bins{step: time.Second}, rejected: bins{step: time.Second, sum: true}}
}

func (m *minuteSeries) add(s sim.Second) {
	k := int(s.Start / time.Minute)
	for len(m.peaks) <= k {
		m.peaks = append(m.peaks, 0)
	}
	n := s.Starting + s.Ready + s.Draining
	m.peaks[k] = max(m.peaks[k], n)
	m.instances.add(s.Start, n)
	m.pending.add(s.Start, s.Pending)
	m.rejected.add(s.Start, s.Rejected)
}

// growSteps are the widths bins take as a run grows, each a multiple of
// the one before; past the last, twice the one before.
var growSteps = []time.Duration{time.Second, 2 * time.Second, 10 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 10 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour}

// bins is a series in bins of step: the most of each (or the sum).
type bins struct {
	step time.Duration
	vals []int
	sum  bool
}

func (b *bins) add(at time.Duration, v int) {
	k := int(at / b.step)
	for k >= maxBins {
		b.widen()
		k = int(at / b.step)
	}
	for len(b.vals) <= k {
		b.vals = append(b.vals, 0)
	}
	b.vals[k] = b.combine(b.vals[k], v)
}

func (b *bins) combine(x, v int) int {
	if b.sum {
		return x + v
	}
	return max(x, v)
}

// widen takes the next step of growSteps.
func (b *bins) widen() {
	next := 2 * b.step
	for _, s := range growSteps {
		if s > b.step {
			next = s
			break
		}
	}
	b.rebin(next)
}

// rebin merges the bins into bins of step s, a multiple of b.step.
func (b *bins) rebin(s time.Duration) {
	f := int(s / b.step)
	out := make([]int, (len(b.vals)+f-1)/f)
	for i, v := range b.vals {
		out[i/f] = b.combine(out[i/f], v)
	}
	b.step, b.vals = s, out
}

// ScaleTimeline is a service's runs over time, a series per value of the
// sweep, in bins of Step from the report's Start: the most instances and
// pending requests at the end of a second, and the 429s.
type ScaleTimeline struct {
	// Step is each bin's width: a second for a short run, wider as it
	// grows, so that no series holds more than 720 bins.
	Step time.Duration `json:"step_ns"`
	// Instances and Pending are the most at the end of a second of the
	// bin, Rejected the 429s of the bin, each by value of the sweep.
	Instances [][]int `json:"instances"`
	Pending   [][]int `json:"pending"`
	Rejected  [][]int `json:"rejected"`
}

// scaleTimeline returns the series of runs, rebinned to one step.
func scaleTimeline(runs []*minuteSeries) *ScaleTimeline {
	tl := &ScaleTimeline{Step: time.Second}
	for _, m := range runs {
		tl.Step = max(tl.Step, m.instances.step)
	}
	for _, m := range runs {
		for _, b := range []*bins{&m.instances, &m.pending, &m.rejected} {
			for b.step < tl.Step {
				b.widen()
			}
		}
		tl.Instances = append(tl.Instances, m.instances.vals)
		tl.Pending = append(tl.Pending, m.pending.vals)
		tl.Rejected = append(tl.Rejected, m.rejected.vals)
	}
	return tl
}

// scaleFigure is a service's figure: instances, pending requests and 429s
// over time, a line per value of the sweep.
func (r *ScaleReport) scaleFigure(svc ServiceScale) sim.TimeFigure {
	tl := svc.Timeline
	label, xstep := timeAxis(r.Start, tl.Step)
	per := "per " + stepName(tl.Step)
	at := " (at the end of each second)"
	if tl.Step > time.Second {
		at = " (the most at the end of a second, " + per + ")"
	}
	panels := []sim.TimePanel{
		{Title: svc.Name + ": instances" + at, YLabel: "instances", Counts: true},
		{Title: svc.Name + ": pending requests" + at, YLabel: "pending", Counts: true},
		{Title: svc.Name + ": 429s at max instances, " + per, YLabel: "429s", Counts: true},
	}
	for c := range tl.Instances {
		name := "recorded"
		if len(r.Values) > c {
			name = r.Setting + "=" + strconv.Itoa(r.Values[c])
		}
		panels[0].Lines = append(panels[0].Lines, sim.TimeSeries{Name: name, Values: floats(tl.Instances[c])})
		panels[1].Lines = append(panels[1].Lines, sim.TimeSeries{Name: name, Values: floats(tl.Pending[c])})
		panels[2].Lines = append(panels[2].Lines, sim.TimeSeries{Name: name, Values: floats(tl.Rejected[c])})
	}
	return sim.TimeFigure{XLabel: label, XStep: xstep, Panels: panels}
}

// WriteHTML writes the report as one HTML page that loads nothing: its
// counts, a table per service (a column per value of the sweep) and its
// figure.
func (r *ScaleReport) WriteHTML(w io.Writer) error {
	b := bufio.NewWriter(w)
	esc := html.EscapeString
	b.WriteString("<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n" +
		"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>tollgate replay: autoscaling</title>\n")
	b.WriteString(sim.ReportStyle())
	b.WriteString("</head>\n<body>\n<h1>tollgate replay: autoscaling</h1>\n")
	for _, s := range r.Inexact {
		fmt.Fprintf(b, "<p class=\"warn\"><strong>Not exact:</strong> %s</p>\n", esc(s))
	}
	for _, s := range r.Warnings {
		fmt.Fprintf(b, "<p class=\"warn\"><strong>Assumed:</strong> %s</p>\n", esc(s))
	}
	fmt.Fprintf(b, "<p class=\"dim\">%d inputs, %d requests: %d skipped lines, %d unrouted, %d beyond %v",
		r.Inputs, r.Requests, r.Skipped, r.Unrouted, r.OutOfSpan, sim.MaxRecordedSpan)
	if !r.Start.IsZero() {
		fmt.Fprintf(b, "; from %s", esc(r.Start.Format(time.RFC3339)))
	}
	b.WriteString(".</p>\n")
	list := func(title string, items []string) {
		if len(items) == 0 {
			return
		}
		fmt.Fprintf(b, "<h2>%s</h2>\n<ul>\n", esc(title))
		for _, s := range items {
			fmt.Fprintf(b, "<li>%s</li>\n", esc(s))
		}
		b.WriteString("</ul>\n")
	}
	list("Inputs not read to their end", r.Errors)
	list(fmt.Sprintf("Skipped lines (%d; the first shown)", r.Skipped), r.SkipSamples)
	list(fmt.Sprintf("Requests no route took (%d; the first shown)", r.Unrouted), r.UnroutedSamples)
	for _, svc := range r.Services {
		fmt.Fprintf(b, "\n<h2>Service %s</h2>\n<table>\n<thead><tr><th></th>", esc(svc.Name))
		if len(r.Values) == 0 {
			b.WriteString("<th>recorded</th>")
		}
		for _, v := range r.Values {
			fmt.Fprintf(b, "<th>%s=%d</th>", esc(r.Setting), v)
		}
		b.WriteString("</tr></thead>\n<tbody>\n")
		for _, row := range scaleRows {
			b.WriteString(`<tr><td class="name">` + esc(row.name) + "</td>")
			for _, c := range svc.Columns {
				b.WriteString("<td>" + esc(row.val(c)) + "</td>")
			}
			b.WriteString("</tr>\n")
		}
		b.WriteString("</tbody>\n</table>\n")
		if svc.Timeline == nil || len(svc.Timeline.Instances) == 0 || len(svc.Timeline.Instances[0]) == 0 {
			continue
		}
		svg, err := sim.InlineSVG(func(w io.Writer) error { return sim.WriteTimeFigure(w, r.scaleFigure(svc), sim.SVG) })
		if err != nil {
			return err
		}
		fmt.Fprintf(b, "<figure>\n<figcaption>%s: instances, pending requests and 429s over time</figcaption>\n%s\n</figure>\n", esc(svc.Name), svg)
	}
	b.WriteString("\n<p class=\"dim\">instances: starting, ready or draining at the end of each second; pending: requests that waited for an instance; " +
		"429s: requests turned away after waiting at max instances.</p>\n" +
		"<p class=\"dim\">Written by <code>tollgate replay --html</code>.</p>\n</body>\n</html>\n")
	return b.Flush()
}
