package sim

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"strconv"
	"strings"
	"time"
)

// HTML is the format of WriteHTML's report: one self-contained page.
const HTML Format = "html"

//go:embed report.html.tmpl
var reportSource string

var reportTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"pct": func(v float64) string { return strconv.FormatFloat(100*v, 'f', 2, 64) },
	"dur": func(d time.Duration) string { return roundDuration(d).String() },
}).Parse(reportSource))

// report is what the template draws.
type report struct {
	Name, Description string
	Results           []*Result
	Figures           []figure
	Scenarios         []scenarioView
}

type figure struct {
	Caption string
	SVG     template.HTML // made by WritePlot, not from user input
}

type scenarioView struct {
	Name string
	YAML string
}

// WriteHTML writes one self-contained HTML page for a study's results: the
// summary table, the per-group table, every figure as inline SVG (the
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
	if err := reportTemplate.Execute(w, rep); err != nil {
		return fmt.Errorf("sim: write HTML report: %w", err)
	}
	return nil
}

// inlineSVG renders a plot as SVG and drops what precedes the <svg>
// element (the XML declaration and a comment), which HTML does not want.
func inlineSVG(plot func(io.Writer) error) (template.HTML, error) {
	var buf bytes.Buffer
	if err := plot(&buf); err != nil {
		return "", err
	}
	s := buf.String()
	i := strings.Index(s, "<svg")
	if i < 0 {
		return "", fmt.Errorf("sim: plot is not SVG")
	}
	return template.HTML(s[i:]), nil
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
