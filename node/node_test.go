package node

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/logtest"
)

// newTestNode builds a node on a free port with its logs in logs.
func newTestNode(t *testing.T, logs *logtest.Buffer, opts Options) *Node {
	t.Helper()
	opts.Listen = "127.0.0.1:0"
	if opts.RLS.ConfigDir != "" {
		opts.RLS.GRPCListen = "127.0.0.1:0"
	}
	opts.Logger = slog.New(slog.NewTextHandler(logs, nil))
	n, err := New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close)
	return n
}

// run runs n until the test ends, and fails the test if Run fails or
// does not return within 60 s of its context ending.
func run(t *testing.T, n *Node, logs *logtest.Buffer) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v\n%s", err, logs.String())
			}
		case <-time.After(60 * time.Second):
			t.Errorf("Run still going 60 s after its context ended:\n%s", logs.String())
		}
	}
	t.Cleanup(stop)
	return stop
}

func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestNodeServesReloadsAndStops builds a node without the binary: it
// serves, Reload applies a changed config file, and Run returns nil once
// its context ends, with OnShutdown called.
func TestNodeServesReloadsAndStops(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "tollgate.yaml", "services:\n  - preset: ecs\n")
	var logs logtest.Buffer
	shutdown := make(chan struct{})
	n := newTestNode(t, &logs, Options{ConfigPath: cfg, OnShutdown: func() { close(shutdown) }})
	stop := run(t, n, &logs)

	resp, err := http.Get("http://" + n.Addr().String() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "ok\n" {
		t.Fatalf("/healthz: %d %q", resp.StatusCode, body)
	}
	if _, ok := n.Gateway().Config().Service("cloudmap"); ok {
		t.Fatal("the config has no cloudmap service yet")
	}

	writeFile(t, dir, "tollgate.yaml", "services:\n  - preset: ecs\n  - preset: cloudmap\n")
	reloaded, err := n.Reload(context.Background())
	if err != nil || !slices.Equal(reloaded, []string{PartConfig}) {
		t.Fatalf("Reload = %v, %v", reloaded, err)
	}
	if _, ok := n.Gateway().Config().Service("cloudmap"); !ok {
		t.Fatal("Reload did not apply the new config")
	}

	writeFile(t, dir, "tollgate.yaml", "services:\n  - preset: nope\n")
	reloaded, err = n.Reload(context.Background())
	if err == nil || len(reloaded) != 0 || !strings.Contains(err.Error(), `tollgate.yaml:2:13: services[0].preset: unknown preset "nope"`) {
		t.Fatalf("Reload of a bad file = %v, %v", reloaded, err)
	}
	if _, ok := n.Gateway().Config().Service("cloudmap"); !ok {
		t.Fatal("a bad file replaced the config")
	}
	stop()
	select {
	case <-shutdown:
	default:
		t.Error("OnShutdown was not called")
	}
	if !strings.Contains(logs.String(), "msg=stopped") {
		t.Errorf("no \"stopped\" log line:\n%s", logs.String())
	}
}

// TestRunStopsEverythingWhenTheServerFails: when one goroutine of Run
// fails (here the HTTP server, its listener closed under it), the others
// stop and Run returns that error instead of waiting for its context.
func TestRunStopsEverythingWhenTheServerFails(t *testing.T) {
	var logs logtest.Buffer
	n := newTestNode(t, &logs, Options{DrainDelay: time.Hour})
	n.ln.Close()
	done := make(chan error, 1)
	go func() { done <- n.Run(context.Background()) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "serving:") {
			t.Fatalf("Run: %v; want the server's error", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("Run still going 60 s after its server failed (the drain delay must not hold it):\n%s", logs.String())
	}
	if n.stopping.Err() == nil {
		t.Error("a failed goroutine did not start shutdown")
	}
}
