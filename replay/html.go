package replay

// This file writes a report as one self-contained HTML page, in the look
// of sim's reports. As sim's, it is written without html/template (see
// sim/html.go: templates would keep every exported method in the binary),
// every value through html.EscapeString.

import (
	"bufio"
	"bytes"
	"cmp"
	"fmt"
	"html"
	"io"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/sim"
)

// WriteHTML writes r as one HTML page that loads nothing: the counts, the
// table of buckets, what was skipped or not known, and the overrides.
func (r *Report) WriteHTML(w io.Writer) error {
	b := bufio.NewWriter(w)
	esc := func(s string) string { return html.EscapeString(s) }
	b.WriteString("<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n" +
		"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>tollgate replay</title>\n")
	b.WriteString(sim.ReportStyle())
	b.WriteString("</head>\n<body>\n<h1>tollgate replay</h1>\n")
	fmt.Fprintf(b, "<p class=\"dim\">%d inputs, %d records: %d calls replayed, %d skipped; %d buckets, %d throttled%s.</p>\n",
		r.Inputs, r.Records, r.Replayed, r.Skipped, r.BucketCount, r.ThrottledBuckets, esc(r.shown()))
	for _, s := range r.Inexact {
		fmt.Fprintf(b, "<p class=\"warn\"><strong>Not exact:</strong> %s</p>\n", esc(s))
	}
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
	list(fmt.Sprintf("Skipped records (%d; the first shown)", r.Skipped), r.SkipSamples)
	list("Calls of services the config does not have", countLines(r.UnknownServices))
	list("Calls of actions the config does not know", countLines(r.UnknownActions))

	b.WriteString("\n<style>table#buckets td.name,table.who td.name{max-width:24em;white-space:normal;overflow-wrap:anywhere}" +
		"table#buckets{font-size:85%}table#buckets td,table#buckets th{padding:2px 5px}table#buckets th{white-space:normal;vertical-align:bottom}" +
		"table#buckets td.rec{font-weight:600}table#buckets td.acct{white-space:nowrap}</style>\n")
	b.WriteString("\n<h2>Buckets</h2>\n<table id=\"buckets\">\n<thead><tr><th>account</th><th>region</th><th>category</th><th>limit</th>" +
		"<th>calls</th><th>throttled</th><th>admits all</th><th>99.9 % rate</th><th>99.9 % burst at rate</th>" +
		"<th>after retries</th><th>in log</th><th>worst minute</th><th>first minute</th><th>burst at rate</th><th>group</th></tr></thead>\n<tbody>\n")
	td := func(s string) { b.WriteString("<td>" + esc(s) + "</td>") }
	num := func(n int64) { td(strconv.FormatInt(n, 10)) }
	for _, k := range r.Buckets {
		b.WriteString("<tr>")
		b.WriteString(`<td class="name acct">` + esc(k.Account) + "</td>")
		td(k.Region)
		td(k.Service + "/" + k.Category)
		td(fmt.Sprintf("%d/%g", k.Burst, k.Rate))
		num(k.Calls)
		num(k.Throttled)
		b.WriteString(`<td class="rec">` + esc(k.admits()) + "</td>")
		td(k.rate999())
		td(orNone(k.Burst999 > 0, strconv.FormatInt(k.Burst999, 10)))
		num(k.Failed)
		num(k.Recorded)
		if k.FirstMinute.IsZero() {
			td("-")
			td("-")
		} else {
			td(fmt.Sprintf("%s (%d)", k.WorstMinute.Format("01-02 15:04"), k.WorstCount))
			td(k.FirstMinute.Format("01-02 15:04"))
		}
		num(k.BurstAtRate)
		td(k.Group)
		b.WriteString("</tr>\n")
	}
	b.WriteString("</tbody>\n</table>\n")
	if tl := r.Timeline; tl != nil && len(tl.Buckets) > 0 {
		svg, err := sim.InlineSVG(func(w io.Writer) error { return sim.WriteTimeFigure(w, timelineFigure(tl), sim.SVG) })
		if err != nil {
			return err
		}
		fmt.Fprintf(b, "<figure>\n<figcaption>Calls and calls throttled (without retries) per %s against the quota, the %d most throttled buckets</figcaption>\n%s\n</figure>\n",
			esc(stepName(tl.Step)), len(tl.Buckets), svg)
		if ws := tl.worstMinutes(worstMinutes); len(ws) > 0 {
			fmt.Fprintf(b, "<h2>The worst minutes</h2>\n<table id=\"minutes\">\n<thead><tr><th>minute (UTC)</th><th>account</th><th>region</th><th>category</th><th>calls</th><th>throttled</th><th>quota a minute</th></tr></thead>\n<tbody>\n")
			for _, w := range ws {
				k := tl.Buckets[w.bucket]
				fmt.Fprintf(b, "<tr><td>%s</td><td class=\"name\">%s</td><td>%s</td><td>%s</td><td>%d</td><td>%d</td><td>%s</td></tr>\n",
					w.at.Format("2006-01-02 15:04"), esc(k.Account), esc(k.Region), esc(k.Service+"/"+k.Category), w.calls, w.throttled,
					strconv.FormatFloat(k.Rate*60, 'f', -1, 64))
			}
			b.WriteString("</tbody>\n</table>\n")
		}
	}
	b.WriteString("<p class=\"dim\">throttled: without retries; after retries: calls that still failed with their group's retries; " +
		"in log: the log's own throttling errors; burst at rate: the smallest burst admitting every call at the configured rate; " +
		"admits all: the limit the overrides below set, the smallest rate (to the nanosecond of interval) with the larger of the burst and the most calls at one instant; " +
		"99.9 %: the smallest rate with that burst, and burst at the configured rate, throttling at most 0.1 % of the calls.</p>\n")
	r.writeWhoHTML(b, esc)
	var ov bytes.Buffer
	if err := r.WriteOverrides(&ov); err != nil {
		return err
	}
	if ov.Len() > 0 {
		b.WriteString("\n<h2>Overrides</h2>\n<p class=\"dim\">Paste into the config of <code>tollgate serve</code>: every call replayed would have been admitted.</p>\n<pre class=\"scenario\">")
		b.WriteString(esc(ov.String()))
		b.WriteString("</pre>\n")
	}
	b.WriteString("\n<p class=\"dim\">Written by <code>tollgate replay --html</code>.</p>\n</body>\n</html>\n")
	return b.Flush()
}

// timelineFigure is the figure of a timeline: a chart per bucket, its
// calls and calls throttled per bin against its quota (the refill rate's
// calls per bin), on a clock-time axis.
func timelineFigure(tl *Timeline) sim.TimeFigure {
	per := stepName(tl.Step)
	fig := sim.TimeFigure{XLabel: "UTC, " + tl.Start.UTC().Format("2006-01-02") + "; a point per " + per, Start: tl.Start, Step: tl.Step}
	for _, b := range tl.Buckets {
		quota := b.Rate * tl.Step.Seconds()
		fig.Panels = append(fig.Panels, sim.TimePanel{
			Title:  b.Account + " " + b.Region + " " + b.Service + "/" + b.Category,
			YLabel: "calls per " + per,
			Counts: true,
			Lines: []sim.TimeSeries{
				{Name: "calls", Values: floats(b.Calls)},
				{Name: "throttled", Values: floats(b.Throttled)},
			},
			Level:       quota,
			LevelLabel:  fmt.Sprintf("quota: %s per %s", strconv.FormatFloat(quota, 'f', -1, 64), per),
			LevelAlways: true,
		})
	}
	return fig
}

// timeAxis returns the label of a time axis from start in bins of step,
// and the width of a bin in the label's unit.
func timeAxis(start time.Time, step time.Duration) (string, float64) {
	unit, name := time.Second, "seconds"
	switch {
	case step >= 24*time.Hour:
		unit, name = 24*time.Hour, "days"
	case step >= time.Hour:
		unit, name = time.Hour, "hours"
	case step >= time.Minute:
		unit, name = time.Minute, "minutes"
	}
	return name + " from " + start.UTC().Format("2006-01-02 15:04:05") + " UTC", float64(step) / float64(unit)
}

// stepName names a bin's width: "second", "minute", "5 minutes".
func stepName(step time.Duration) string {
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{24 * time.Hour, "day"}, {time.Hour, "hour"}, {time.Minute, "minute"}, {time.Second, "second"}} {
		if step%u.d == 0 {
			if step == u.d {
				return u.name
			}
			return strconv.FormatInt(int64(step/u.d), 10) + " " + u.name + "s"
		}
	}
	return step.String()
}

func floats[T int | int64](xs []T) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = float64(x)
	}
	return out
}

// countLines returns "name: count" lines, the largest count first.
func countLines(m map[string]int64) []string {
	keys := slices.SortedFunc(maps.Keys(m), func(a, b string) int { return cmp.Or(cmp.Compare(m[b], m[a]), cmp.Compare(a, b)) })
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k + ": " + strconv.FormatInt(m[k], 10)
	}
	return out
}
