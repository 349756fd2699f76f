// Package browsertest gives tests a headless Chromium driven with
// github.com/chromedp/chromedp, and records what the pages it opens log as
// errors.
//
// Tests skip with a message when no browser is installed, unless the
// environment sets CI=true (as .ci/run does), where a missing browser
// fails them. Each [Start] launches its own browser process, which the
// test's cleanup kills.
package browsertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Names are the executables Start looks for on $PATH, in order (Debian's
// package is chromium).
var Names = []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"}

// Timeout bounds every browser session: generous, for a loaded machine.
const Timeout = 90 * time.Second

// Browser is a running headless browser with one tab.
type Browser struct {
	// Ctx is the tab's context, for chromedp.Run.
	Ctx context.Context

	mu     sync.Mutex
	errors []string
}

// Start launches a headless browser with a window of width×height CSS
// pixels, or skips tb when none is installed (fails under CI=true).
func Start(tb testing.TB, width, height int) *Browser {
	tb.Helper()
	path := ""
	for _, name := range Names {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		msg := "no browser found (looked for " + strings.Join(Names, ", ") + "); install Debian's chromium to run this test"
		if os.Getenv("CI") == "true" {
			tb.Fatal(msg)
		}
		tb.Skip(msg)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.WindowSize(width, height),
		chromedp.NoSandbox, // containers and root; the pages are the test's own
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("force-device-scale-factor", "1"),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(allocCtx)
	ctx, cancelTimeout := context.WithTimeout(ctx, Timeout)
	b := &Browser{Ctx: ctx}
	// Console subscribes now, so nothing the pages write is missed; the
	// reader stops when the tab's context ends.
	messages := chromedp.Console(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.IsException() || m.Type == "error" || m.Type == "assert" {
				b.note(string(m.Type) + ": " + m.Text + " (" + m.URL + ")")
			}
		}
	}()
	tb.Cleanup(func() {
		cancelTimeout()
		cancelTab()
		<-done
		cancelAlloc() // kills the browser and waits for it
	})
	return b
}

func (b *Browser) note(msg string) {
	b.mu.Lock()
	b.errors = append(b.errors, msg)
	b.mu.Unlock()
}

// Errors returns what the pages logged as errors so far: console.error
// calls, uncaught exceptions, and the browser's own error log (failed
// loads, refused by the Content-Security-Policy, and such).
func (b *Browser) Errors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.errors...)
}

// Screenshot saves a PNG of the whole page to path.
func (b *Browser) Screenshot(path string) error {
	return b.save(path, chromedp.FullScreenshot(100))
}

// ScreenshotViewport saves a PNG of what the window shows to path.
func (b *Browser) ScreenshotViewport(path string) error {
	return b.save(path, chromedp.CaptureScreenshot())
}

func (b *Browser) save(path string, shot chromedp.Action[[]byte]) error {
	png, err := chromedp.Run(b.Ctx, shot)
	if err != nil {
		return fmt.Errorf("screenshot: %w", err)
	}
	return os.WriteFile(path, png, 0o644)
}
