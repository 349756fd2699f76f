package browsertest

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestErrorsAreCaught opens a page that logs an error, throws, and fails
// to load an image: Errors must report all three, or the browser tests'
// "no console errors" would prove nothing.
func TestErrorsAreCaught(t *testing.T) {
	b := Start(t, 800, 600)
	page := `<!doctype html><title>t</title><img src="http://127.0.0.1:1/missing.png">` +
		`<script>console.error("boom-logged"); setTimeout(() => { throw new Error("boom-thrown"); });</script>`
	if err := chromedp.Do(b.Ctx, chromedp.Navigate("data:text/html,"+url.PathEscape(page))); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		all := strings.Join(b.Errors(), "\n")
		if strings.Contains(all, "boom-logged") && strings.Contains(all, "boom-thrown") && strings.Contains(all, "missing.png") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("errors seen: %q; want the console.error, the exception and the failed load", all)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
