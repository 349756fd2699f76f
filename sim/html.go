package sim

import (
	"bufio"
	"bytes"
	_ "embed"
	"fmt"
	"html"
	"io"
	"strconv"
	"strings"
)

// HTML is the format of WriteHTML's report: one self-contained page.
const HTML Format = "html"

// reportStyle is the page's <style> element, static.
//
//go:embed report_style.html
var reportStyle string

// The page is written by writeReport, not by html/template: executing any
// text/template reaches reflect.Value.MethodByName, and the Go linker then
// keeps every exported method of every type in the binary (its dead-code
// elimination cannot tell which one a template calls). In tollgate's one
// binary that was half of its 115 MB. Every value the page shows is
// element text, written through html.EscapeString, and the SVG figures
// are made by WritePlot, not from user input.

// report is what the page shows.
type report struct {
	Name, Description string
	Results           []*Result
	Figures           []figure
	Scenarios         []scenarioView
}

type figure struct {
	Caption string
	SVG     string // made by WritePlot, not from user input: written as is
}

type scenarioView struct {
	Name string
	YAML string
}

// WriteHTML writes one self-contained HTML page for a study's results: the
// summary table, the per-group table, the steps of the rollouts and
// traffic changes, every figure as inline SVG (the
// comparison first when there are several runs, then one per run), and
// each scenario as run, with its defaults applied, as the scenario file
// (WriteScenario) that runs it again. The page loads nothing
// from anywhere, so it reads offline, and it prints one figure per page.
func WriteHTML(w io.Writer, study *Study, results []*Result) error {
	rep := report{Name: study.Name, Description: study.Description, Results: results}
	if rep.Name == "" {
		rep.Name = "tollgate sim"
	}
	if len(results) > 1 {
		svg, err := inlineSVG(func(w io.Writer) error { return WriteComparisonPlot(w, results, SVG) })
		if err != nil {
			return err
		}
		rep.Figures = append(rep.Figures, figure{"All runs compared", svg})
	}
	for _, r := range results {
		svg, err := inlineSVG(func(w io.Writer) error { return WritePlot(w, r, SVG) })
		if err != nil {
			return err
		}
		rep.Figures = append(rep.Figures, figure{"Run " + r.Scenario.Name, svg})
		sv, err := describeScenario(r)
		if err != nil {
			return err
		}
		rep.Scenarios = append(rep.Scenarios, sv)
	}
	if err := writeReport(w, &rep); err != nil {
		return fmt.Errorf("sim: write HTML report: %w", err)
	}
	return nil
}

// inlineSVG renders a plot as SVG and drops what precedes the <svg>
// element (the XML declaration and a comment), which HTML does not want.
func inlineSVG(plot func(io.Writer) error) (string, error) {
	var buf bytes.Buffer
	if err := plot(&buf); err != nil {
		return "", err
	}
	s := buf.String()
	i := strings.Index(s, "<svg")
	if i < 0 {
		return "", fmt.Errorf("sim: plot is not SVG")
	}
	return s[i:], nil
}

// describeScenario writes a run's scenario with its defaults applied, as
// the scenario file that runs it again.
func describeScenario(r *Result) (scenarioView, error) {
	var buf bytes.Buffer
	if err := WriteScenario(&buf, r); err != nil {
		return scenarioView{}, err
	}
	return scenarioView{Name: r.Scenario.Name, YAML: buf.String()}, nil
}

func pct(v float64) string { return strconv.FormatFloat(100*v, 'f', 2, 64) }

// writeReport writes the page of rep.
func writeReport(w io.Writer, rep *report) error {
	b := bufio.NewWriter(w)
	text := func(s string) { b.WriteString(html.EscapeString(s)) }
	// row writes one table row of cells, already escaped or numbers.
	row := func(cells ...string) {
		b.WriteString("<tr>")
		for _, c := range cells {
			b.WriteString(c)
		}
		b.WriteString("</tr>\n")
	}
	td := func(s string) string { return "<td>" + html.EscapeString(s) + "</td>" }
	num := func(n int) string { return "<td>" + strconv.Itoa(n) + "</td>" }

	b.WriteString("<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n" +
		"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>")
	text(rep.Name)
	b.WriteString(" · tollgate sim</title>\n")
	b.WriteString(reportStyle)
	b.WriteString("</head>\n<body>\n<h1>")
	text(rep.Name)
	b.WriteString("</h1>\n")
	if rep.Description != "" {
		b.WriteString(`<p class="dim">`)
		text(rep.Description)
		b.WriteString("</p>")
	}
	b.WriteString("\n\n<h2>Summary</h2>\n<table id=\"summary\">\n" +
		"<thead><tr><th>run</th><th>calls</th><th>ok %</th><th>failed</th><th>unfinished</th><th>attempts</th><th>retries</th><th>throttled</th><th>429</th><th>ok mean</th><th>ok p50</th><th>ok p99</th><th>peak inst</th><th>inst·s</th></tr></thead>\n<tbody>\n")
	for _, r := range rep.Results {
		s := r.Summary
		row(td(r.Scenario.Name), num(s.Calls), td(pct(s.SuccessRate)), num(s.Failed), num(s.Unfinished),
			num(s.Attempts), num(s.Retries), num(s.Throttled), num(s.Rejected),
			td(latencyCell(r, s.MeanLatency)), td(latencyCell(r, s.P50Latency)), td(latencyCell(r, s.P99Latency)),
			td(instancesCell(r, s.PeakInstances)), td(instancesCell(r, s.InstanceSeconds)))
	}
	b.WriteString("</tbody>\n</table>\n" +
		"<p class=\"dim\">ok: calls that succeeded; latencies are those of successful calls, end to end, retries included; 429: attempts the autoscaled backend rejected.</p>\n\n" +
		"<h2>Per client group</h2>\n<table id=\"groups\">\n" +
		"<thead><tr><th>run</th><th>clients</th><th>calls</th><th>ok %</th><th>failed</th><th>unfinished</th><th>retries</th><th>throttled</th><th>429</th><th>ok mean</th><th>ok p99</th></tr></thead>\n<tbody>\n")
	for _, r := range rep.Results {
		for _, g := range r.Groups {
			row(td(r.Scenario.Name), `<td class="name">`+html.EscapeString(g.Name)+"</td>", num(g.Calls),
				td(pct(g.SuccessRate)), num(g.Failed), num(g.Unfinished), num(g.Retries),
				num(g.Throttled), num(g.Rejected), td(latencyCell(r, g.MeanLatency)), td(latencyCell(r, g.P99Latency)))
		}
	}
	b.WriteString("</tbody>\n</table>\n")
	writeTrafficTable(b, rep.Results)
	if note := notModelledNote(rep.Results); note != "" {
		b.WriteString(`<p class="dim">`)
		text(note)
		b.WriteString("</p>\n")
	}
	b.WriteString("\n<h2>Figures</h2>\n")
	for _, f := range rep.Figures {
		b.WriteString("<figure>\n<figcaption>")
		text(f.Caption)
		b.WriteString("</figcaption>\n")
		b.WriteString(f.SVG)
		b.WriteString("\n</figure>\n")
	}
	b.WriteString("\n\n<h2>Scenarios as run</h2>\n" +
		"<p class=\"dim\">Each run's settings with every default written out, as a scenario file: save one as <code>run.yaml</code> and <code>tollgate sim --scenario run.yaml</code> runs it again, with the same results.</p>\n")
	for _, sv := range rep.Scenarios {
		b.WriteString("<h3>")
		text(sv.Name)
		b.WriteString("</h3>\n<pre class=\"scenario\">")
		text(sv.YAML)
		b.WriteString("</pre>\n")
	}
	b.WriteString("\n<p class=\"dim\">Written by <code>tollgate sim --format html</code>.</p>\n</body>\n</html>\n")
	return b.Flush()
}

// ReportStyle returns the <style> element of WriteHTML's pages, for other
// self-contained reports (package replay's) to look the same.
func ReportStyle() string { return reportStyle }
