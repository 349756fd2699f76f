package sim

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tollgate/tollgate/internal/browsertest"
)

// TestHTMLInBrowser opens a report from disk in a headless browser: its
// tables and every figure must render, with no error logged.
func TestHTMLInBrowser(t *testing.T) {
	br := browsertest.Start(t, 1200, 900)
	st, results := htmlStudy(t)
	st.Runs[0].Name = "additive-jitter" // the README's screenshot
	results[0].Scenario.Name = "additive-jitter"
	path := filepath.Join(t.TempDir(), "report.html")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteHTML(f, st, results); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(br.Ctx, chromedp.Navigate("file://"+path), chromedp.WaitVisible("#summary")); err != nil {
		t.Fatal(err)
	}
	raw, err := chromedp.Run(br.Ctx, chromedp.Evaluate[[]byte](`({
		title: document.querySelector("h1").textContent,
		summaryRows: document.querySelectorAll("#summary tbody tr").length,
		groupRows: document.querySelectorAll("#groups tbody tr").length,
		firstRun: document.querySelector("#summary tbody tr td").textContent,
		figures: [...document.querySelectorAll("figure svg")].map((s) => {
			const r = s.getBoundingClientRect();
			return [Math.round(r.width), Math.round(r.height), s.querySelectorAll("path").length];
		}),
	})`))
	if err != nil {
		t.Fatal(err)
	}
	var page struct {
		Title       string
		SummaryRows int
		GroupRows   int
		FirstRun    string
		Figures     [][3]int
	}
	if err := json.Unmarshal(raw, &page); err != nil {
		t.Fatal(err)
	}
	groups := 0
	for _, r := range results {
		groups += len(r.Groups)
	}
	if page.Title != st.Name || page.SummaryRows != len(results) || page.GroupRows != groups || page.FirstRun != "additive-jitter" {
		t.Errorf("page %+v, want title %q, %d runs, %d groups", page, st.Name, len(results), groups)
	}
	if len(page.Figures) != len(results)+1 {
		t.Errorf("%d figures rendered, want %d", len(page.Figures), len(results)+1)
	}
	for i, fig := range page.Figures {
		if fig[0] < 500 || fig[1] < 200 || fig[2] < 10 {
			t.Errorf("figure %d renders %dx%d px with %d paths: too small or empty", i, fig[0], fig[1], fig[2])
		}
	}
	if msgs := br.Errors(); len(msgs) > 0 {
		t.Errorf("the report logged errors:\n%s", strings.Join(msgs, "\n"))
	}
	shot := filepath.Join(t.ArtifactDir(), "sim-report.png")
	if err := br.ScreenshotViewport(shot); err != nil {
		t.Fatal(err)
	}
	full := filepath.Join(t.ArtifactDir(), "sim-report-full.png")
	if err := br.Screenshot(full); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots: %s, %s", shot, full)
	if dir := os.Getenv("TOLLGATE_SCREENSHOTS"); dir != "" {
		if err := br.ScreenshotViewport(filepath.Join(dir, "sim-report.png")); err != nil {
			t.Fatal(err)
		}
	}
}
