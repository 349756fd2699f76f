package sim

import (
	"bytes"
	"html"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func htmlStudy(t *testing.T) (*Study, []*Result) {
	t.Helper()
	st, err := Preset("ecs-burst")
	if err != nil {
		t.Fatal(err)
	}
	st.Runs[0].Name = `jitter <b>&</b>` // must come out escaped
	results, err := st.Run()
	if err != nil {
		t.Fatal(err)
	}
	return st, results
}

func TestWriteHTML(t *testing.T) {
	st, results := htmlStudy(t)
	var buf bytes.Buffer
	if err := WriteHTML(&buf, st, results); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	if n := strings.Count(page, "<svg"); n != len(results)+1 {
		t.Errorf("%d inline SVG figures, want %d (one per run and the comparison)", n, len(results)+1)
	}
	if strings.Contains(page, "<?xml") {
		t.Error("the page still holds an XML declaration from the SVG")
	}
	summary := page[strings.Index(page, `<table id="summary">`):]
	summary = summary[:strings.Index(summary, "</table>")]
	if n := strings.Count(summary, "<tr>"); n != len(results)+1 {
		t.Errorf("summary has %d rows, want a header and %d runs", n, len(results))
	}
	if want := "<td>" + strconv.Itoa(results[1].Summary.Calls) + "</td><td>" + strconv.FormatFloat(100*results[1].Summary.SuccessRate, 'f', 2, 64) + "</td>"; !strings.Contains(summary, want) {
		t.Errorf("summary lacks run 2's calls and success rate %s", want)
	}
	groups := 0
	for _, r := range results {
		groups += len(r.Groups)
	}
	gt := page[strings.Index(page, `<table id="groups">`):]
	gt = gt[:strings.Index(gt, "</table>")]
	if n := strings.Count(gt, "<tr>"); n != groups+1 {
		t.Errorf("group table has %d rows, want a header and %d groups", n, groups)
	}
	if strings.Contains(page, "<b>&</b>") || !strings.Contains(page, "jitter &lt;b&gt;&amp;&lt;/b&gt;") {
		t.Error("a run name was not escaped")
	}
	for _, want := range []string{"Scenarios as run", "capacity: 50", "refill_per_second: 20", "name: burst", "base: 1s", "max: 32s"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	// Each scenario as run is a file that runs the same run again.
	pres := regexp.MustCompile(`(?s)<pre class="scenario">(.*?)</pre>`).FindAllStringSubmatch(page, -1)
	if len(pres) != len(results) {
		t.Fatalf("%d scenarios on the page, want %d", len(pres), len(results))
	}
	for i, m := range pres {
		again, err := ParseStudy("page.yaml", []byte(html.UnescapeString(m[1])))
		if err != nil {
			t.Fatalf("scenario %d of the page does not parse: %v\n%s", i, err, m[1])
		}
		r, err := Run(again.Runs[0])
		if err != nil {
			t.Fatal(err)
		}
		if r.Scenario.Name != results[i].Scenario.Name || !reflect.DeepEqual(r.Summary, results[i].Summary) {
			t.Errorf("scenario %d of the page runs %q %+v, want %q %+v", i, r.Scenario.Name, r.Summary, results[i].Scenario.Name, results[i].Summary)
		}
	}
	// Self-contained: no attribute loads anything; the only URLs are XML
	// namespaces.
	if m := regexp.MustCompile(`(?i)(src|href)\s*=`).FindString(page); m != "" {
		t.Errorf("the page loads something: %s", m)
	}
	for _, u := range regexp.MustCompile(`https?://[^"' )]+`).FindAllString(page, -1) {
		if u != "http://www.w3.org/2000/svg" && u != "http://www.w3.org/1999/xlink" {
			t.Errorf("the page names %s", u)
		}
	}
	for _, bad := range []string{"<nil>", "{Unit:", "CPUTarget:"} {
		if strings.Contains(page, bad) {
			t.Errorf("the page shows a Go value: %q", bad)
		}
	}
}
