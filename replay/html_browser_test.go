package replay

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tollgate/tollgate/internal/browsertest"
)

// TestHTMLInBrowser opens a replay's report in a 1,400 px window: the
// bucket table fits with its recommendation visible, the figure draws a
// chart a throttled bucket with distinct legend labels and a clock-time
// axis, the worst minutes and who-and-what tables are there, and nothing
// is logged as an error.
func TestHTMLInBrowser(t *testing.T) {
	br := browsertest.Start(t, 1400, 1000)
	var lines []string
	for _, l := range orderLines(t) {
		lines = append(lines, strings.Replace(l, `"userIdentity":{`, `"userAgent":"APN/1.0 HashiCorp/1.0 Terraform/1.9.0","sourceIPAddress":"198.51.100.7","userIdentity":{"arn":"arn:aws:sts::111122223333:assumed-role/terraform-deployer-with-a-long-name/ci-session",`, 1))
	}
	r, err := Run([]Input{input("trail.jsonl", joinLines(lines))}, Options{TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "replay.html")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.WriteHTML(f); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(br.Ctx, chromedp.Navigate("file://"+path), chromedp.WaitReady("body")); err != nil {
		t.Fatal(err)
	}
	raw, err := chromedp.Run(br.Ctx, chromedp.Evaluate[[]byte](`({
		pageWidth: document.documentElement.scrollWidth,
		tableRight: Math.round(document.querySelector("#buckets").getBoundingClientRect().right),
		recRight: Math.round(document.querySelector("#buckets td.rec").getBoundingClientRect().right),
		figures: document.querySelectorAll("figure svg").length,
		texts: [...document.querySelectorAll("figure svg text")].map((t) => t.textContent),
		minutes: document.querySelectorAll("#minutes tbody tr").length,
		who: document.querySelectorAll("table.who").length,
	})`))
	if err != nil {
		t.Fatal(err)
	}
	var page struct {
		PageWidth, TableRight, RecRight int
		Figures, Minutes, Who           int
		Texts                           []string
	}
	if err := json.Unmarshal(raw, &page); err != nil {
		t.Fatal(err)
	}
	if page.PageWidth > 1400 || page.TableRight > 1400 || page.RecRight > 1400 || page.RecRight == 0 {
		t.Errorf("at 1,400 px: page %d px wide, table to %d px, recommendation to %d px", page.PageWidth, page.TableRight, page.RecRight)
	}
	if page.Figures != 1 || page.Minutes == 0 || page.Who == 0 {
		t.Errorf("%d figures, %d worst minutes, %d who tables", page.Figures, page.Minutes, page.Who)
	}
	text := strings.Join(page.Texts, "\n")
	for _, want := range []string{"calls", "throttled", "quota: 20 per second", "quota: 40 per second", "12:00:00", "111122223333 us-east-1 ecs/cluster-read"} {
		if !strings.Contains(text, want) {
			t.Errorf("the figure lacks %q", want)
		}
	}
	for _, s := range page.Texts {
		if strings.Contains(s, "…") {
			t.Errorf("a label is cut: %q", s)
		}
	}
	if msgs := br.Errors(); len(msgs) > 0 {
		t.Errorf("the report logged errors:\n%s", strings.Join(msgs, "\n"))
	}
	if err := br.Screenshot(filepath.Join(t.ArtifactDir(), "replay-report.png")); err != nil {
		t.Fatal(err)
	}
}
