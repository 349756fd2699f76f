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
	Rows [][2]string
}

// WriteHTML writes one self-contained HTML page for a study's results: the
// summary table, the per-group table, every figure as inline SVG (the
// comparison first when there are several runs, then one per run), and
// each scenario as run, with its defaults applied. The page loads nothing
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
		rep.Scenarios = append(rep.Scenarios, describeScenario(r))
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

// describeScenario lists a run's scenario with its defaults applied, as
// label and value rows.
func describeScenario(r *Result) scenarioView {
	sc := r.Scenario
	v := scenarioView{Name: sc.Name}
	add := func(label, format string, args ...any) {
		v.Rows = append(v.Rows, [2]string{label, fmt.Sprintf(format, args...)})
	}
	add("duration", "%v", sc.Duration)
	add("target", "%s %s in account %s, %s", sc.Target.Service, sc.Target.Action, sc.Target.Account, sc.Target.Region)
	add("bucket", "capacity %d, refill %g per second", r.Limit.Capacity(), r.Limit.RefillPerSecond())
	for _, c := range sc.Clients {
		desc := fmt.Sprintf("%s arrivals at %g calls/s", c.Process, c.Rate)
		for _, st := range c.Steps {
			desc += fmt.Sprintf(", %g/s from %v", st.Rate, st.At)
		}
		if c.Burst > 0 {
			desc += fmt.Sprintf(", a burst of %d calls at %v", c.Burst, c.BurstAt)
		}
		if c.Action != "" {
			desc += ", calling " + c.Action
		}
		add("clients "+c.Name, "%s", desc)
	}
	rt := sc.Retry
	switch {
	case rt.Disabled:
		add("retry", "none: every call is one attempt")
	default:
		add("retry schedule", "%s", describeSchedule(rt))
		add("retry limits", "max attempts %s, deadline %s", orNone(rt.MaxAttempts), durOrNone(rt.Deadline))
		budget := string(rt.Budget.Kind)
		if budget == "" {
			budget = "none"
		} else if rt.Budget.Ratio != 0 || rt.Budget.Burst != 0 {
			budget += fmt.Sprintf(" (ratio %g, burst %g)", rt.Budget.Ratio, rt.Budget.Burst)
		}
		add("retry budget", "%s", budget)
		add("retry on", "throttles%s; Retry-After honoured: %v", map[bool]string{true: "", false: " and backend 429s"}[rt.No429], rt.UseRetryAfter)
	}
	b := sc.Backend
	if b.None {
		add("backend", "none: admitted calls succeed at once")
	} else {
		add("backend", "%s service times, mean %v, %g cores per request, cold start %v", b.Distribution, b.ServiceTime, b.CPUPerRequest, b.ColdStart)
		add("autoscaler", "policy %s; %s", b.Policy, describeAutoscale(b))
	}
	return v
}

func describeSchedule(rt Retry) string {
	if rt.Schedule == nil {
		return "retry.DefaultSchedule (exponential backoff with additive jitter, at most 32 s)"
	}
	return fmt.Sprintf("%T %+v", rt.Schedule, rt.Schedule)
}

func describeAutoscale(b Backend) string {
	s := fmt.Sprintf("%+v", b.Autoscale)
	return strings.TrimSuffix(strings.TrimPrefix(s, "{"), "}")
}

func orNone(n int) string {
	if n == 0 {
		return "none"
	}
	return strconv.Itoa(n)
}

func durOrNone(d time.Duration) string {
	if d < 0 {
		return "none"
	}
	return d.String()
}
