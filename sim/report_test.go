package sim

import (
	"bytes"
	"encoding/csv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/autoscale"
)

func smallResults(t *testing.T) []*Result {
	var out []*Result
	for _, p := range []PolicyName{CloudRun, KPA} {
		out = append(out, mustRun(t, Scenario{
			Name:     string(p),
			Duration: 20 * time.Second,
			Clients:  []Clients{{Rate: 30, Burst: 60, BurstAt: 5 * time.Second}},
			Backend:  Backend{Policy: p},
		}))
	}
	return out
}

func TestWriteCSVHasOneRowPerSecond(t *testing.T) {
	res := smallResults(t)[0]
	var b bytes.Buffer
	if err := WriteCSV(&b, res); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 21 || strings.Join(rows[0], ",") != strings.Join(CSVHeader, ",") {
		t.Fatalf("%d rows, header %v", len(rows), rows[0])
	}
	// Second 0: 30 calls at 1/30 s spacing, all admitted by the full bucket.
	if rows[1][0] != "0" || rows[1][1] != "30" || rows[1][4] != "30" || rows[1][5] != "0" {
		t.Fatalf("row 0: %v", rows[1])
	}
	for _, row := range rows {
		if len(row) != len(CSVHeader) {
			t.Fatalf("row %v", row)
		}
	}
}

func TestWriteSummaryRowPerRun(t *testing.T) {
	var b bytes.Buffer
	if err := WriteSummary(&b, smallResults(t)); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "throttled") ||
		!strings.HasPrefix(strings.Join(strings.Fields(lines[1]), " "), "cloudrun 660 ") ||
		!strings.HasPrefix(strings.Join(strings.Fields(lines[2]), " "), "kpa 660 ") {
		t.Fatalf("%s", b.String())
	}
}

func TestWriteSummaryGroupsTable(t *testing.T) {
	res := mustRun(t, Scenario{
		Name:     "two",
		Duration: 5 * time.Second,
		Clients:  []Clients{{Name: "steady", Rate: 10}, {Name: "herd", Burst: 80}},
		Retry:    Retry{Disabled: true},
		Backend:  Backend{None: true},
	})
	var b bytes.Buffer
	if err := WriteSummary(&b, []*Result{res}); err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, l := range strings.Split(b.String(), "\n") {
		rows = append(rows, strings.Join(strings.Fields(l), " "))
	}
	// The herd at 0 takes the 50 tokens before the steady group's first
	// call, which is throttled; then 20 tokens a second cover 10 calls.
	want := []string{
		"run clients calls ok % failed unfinished retries throttled 429 ok mean ok p99",
		"two steady 50 98.00 1 0 0 1 0 - -",
		"two herd 80 62.50 30 0 0 30 0 - -",
	}
	if len(rows) < 6 || strings.Join(rows[3:6], "\n") != strings.Join(want, "\n") {
		t.Fatalf("%s", b.String())
	}
}

// TestWhatARunDoesNotHaveIsNotShownAsZero: with no backend and no
// retries, the tables show "-" for latencies and instances and say why,
// and the comparison leaves out the retries, instances and latency
// panels rather than drawing them empty; with a backend, all are there.
func TestWhatARunDoesNotHaveIsNotShownAsZero(t *testing.T) {
	bare := mustRun(t, Scenario{Name: "bare", Duration: 5 * time.Second, Clients: []Clients{{Rate: 30}},
		Retry: Retry{Disabled: true}, Backend: Backend{None: true}})
	var b bytes.Buffer
	if err := WriteSummary(&b, []*Result{bare}); err != nil {
		t.Fatal(err)
	}
	row := strings.Fields(strings.Split(b.String(), "\n")[1])
	if got := strings.Join(row[len(row)-5:], " "); got != "- - - - -" {
		t.Errorf("latencies and instances %q, want - - - - -:\n%s", got, b.String())
	}
	if !strings.Contains(b.String(), "-: not in the run") {
		t.Errorf("no note says what - means:\n%s", b.String())
	}
	var cmp bytes.Buffer
	if err := WriteComparisonPlot(&cmp, []*Result{bare, bare}, SVG); err != nil {
		t.Fatal(err)
	}
	for _, absent := range []string{"retries per second", "ready instances", "latency"} {
		if bytes.Contains(cmp.Bytes(), []byte(absent)) {
			t.Errorf("comparison of runs without %s draws it", absent)
		}
	}
	served := mustRun(t, Scenario{Name: "served", Duration: 5 * time.Second, Clients: []Clients{{Rate: 5}}})
	b.Reset()
	if err := WriteSummary(&b, []*Result{served}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), " - ") || strings.Contains(b.String(), "not in the run") {
		t.Errorf("a run with a backend shows -:\n%s", b.String())
	}
	cmp.Reset()
	if err := WriteComparisonPlot(&cmp, []*Result{bare, served}, SVG); err != nil {
		t.Fatal(err)
	}
	for _, present := range []string{"retries per second", "ready instances", "latency"} {
		if !bytes.Contains(cmp.Bytes(), []byte(present)) {
			t.Errorf("comparison with a served run lacks %s", present)
		}
	}
}

func TestPlotsArePNGAndSVG(t *testing.T) {
	res := smallResults(t)
	var png, svg, cmp bytes.Buffer
	if err := WritePlot(&png, res[0], PNG); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(png.Bytes(), []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatal("not a PNG")
	}
	if err := WritePlot(&svg, res[0], SVG); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(svg.Bytes(), []byte("<svg")) || !bytes.Contains(svg.Bytes(), []byte("throttled")) {
		t.Fatal("not an SVG with a legend")
	}
	if err := WriteComparisonPlot(&cmp, res, SVG); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(cmp.Bytes(), []byte("kpa")) {
		t.Fatal("comparison lacks a run's legend")
	}
	if err := WritePlot(&png, res[0], "gif"); err == nil {
		t.Fatal("gif accepted")
	}
}

func TestPlotMarksTheLoadAndLimitsAndNamesEmptySeries(t *testing.T) {
	res := smallResults(t)
	var svg, cmp bytes.Buffer
	if err := WritePlot(&svg, res[0], SVG); err != nil {
		t.Fatal(err)
	}
	// The burst at 5 s and the bucket's refill are marked; the 429
	// series, zero all run, says so in the legend.
	for _, want := range []string{"burst of 60 at 5 s", "refill 20/s", "429 (all 0)"} {
		if !bytes.Contains(svg.Bytes(), []byte(want)) {
			t.Errorf("plot lacks %q", want)
		}
	}
	if err := WriteComparisonPlot(&cmp, res, SVG); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(cmp.Bytes(), []byte("burst of 60 at 5 s")) {
		t.Error("comparison plot lacks the burst")
	}
	// Under the refill rate nothing is throttled: that panel says so, and
	// the instances panel, near max instances, marks it.
	quiet := mustRun(t, Scenario{Duration: 20 * time.Second, Clients: []Clients{{Rate: 5}},
		Backend: Backend{Autoscale: autoscale.Config{MinInstances: 2, MaxInstances: 2}}})
	cmp.Reset()
	if err := WriteComparisonPlot(&cmp, []*Result{quiet, quiet}, SVG); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"throttled calls per second — none in this figure", "max instances 2"} {
		if !bytes.Contains(cmp.Bytes(), []byte(want)) {
			t.Errorf("comparison plot lacks %q", want)
		}
	}
}

func TestNiceTicks(t *testing.T) {
	labels := func(tk niceTicks, lo, hi float64) []string {
		var out []string
		for _, x := range tk.Ticks(lo, hi) {
			if x.Label != "" {
				out = append(out, x.Label)
			}
		}
		return out
	}
	for _, c := range []struct {
		integer bool
		lo, hi  float64
		want    string
	}{
		{true, -15, 510, "0 100 200 300 400 500"},
		{true, -0.03, 1.08, "0 1"},   // an empty panel, or one instance
		{true, -0.06, 2.16, "0 1 2"}, // never 0.5 instances
		{true, -6, 599, "0 100 200 300 400 500"},
		{false, -0.1, 3.6, "0.0 0.5 1.0 1.5 2.0 2.5 3.0 3.5"},
		{false, 0, 100, "0 20 40 60 80 100"},
	} {
		if got := strings.Join(labels(niceTicks{integer: c.integer}, c.lo, c.hi), " "); got != c.want {
			t.Errorf("ticks(%v, %v, integer %v) = %s, want %s", c.lo, c.hi, c.integer, got, c.want)
		}
	}
	if ticks := (niceTicks{}).Ticks(1, 1); ticks != nil {
		t.Errorf("empty range gave %v", ticks)
	}
}
