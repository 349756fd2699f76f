package node

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/internal/logtest"
	"github.com/tollgate/tollgate/internal/redistest"
	redisstore "github.com/tollgate/tollgate/limiter/redis"
)

// readyz returns the node's /readyz status and body.
func readyz(t *testing.T, n *Node) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + n.Addr().String() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestNotReadyUntilRedisFirstAnswers: a node whose Redis has not answered
// since it started answers /readyz 503 (200 before) and logs an error;
// once Redis answers, it is ready, and it announces itself in Redis (the
// count of live nodes is 1). With the open policy it is ready from the
// start.
func TestNotReadyUntilRedisFirstAnswers(t *testing.T) {
	t.Parallel() // its own redis-server and nodes
	srv := redistest.Start(t)
	srv.Stop() // the address refuses until Restart
	logs := &logtest.Buffer{}
	n := newTestNode(t, logs, Options{Store: config.Store{URL: srv.URL()}})
	run(t, n, logs)
	if status, body := readyz(t, n); status != http.StatusServiceUnavailable || !strings.Contains(body, "redis never reached (on failure: local)") {
		t.Fatalf("/readyz before Redis ever answered: %d %q, want 503", status, body)
	}
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(logs.String(), "level=ERROR msg=\"redis store has never answered"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no error that Redis never answered in 30 s:\n%s", logs.String())
		}
	}

	openLogs := &logtest.Buffer{}
	open := newTestNode(t, openLogs, Options{Store: config.Store{URL: srv.URL(), OnFailure: "open"}})
	run(t, open, openLogs)
	if status, body := readyz(t, open); status != http.StatusOK || !strings.Contains(body, "redis never reached (on failure: open)") {
		t.Fatalf("/readyz before Redis ever answered, policy open: %d %q, want 200", status, body)
	}

	srv.Restart()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		status, body := readyz(t, n)
		if status == http.StatusOK && strings.Contains(body, "redis up") && n.redis.LiveNodes() == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("30 s after Redis started: /readyz %d %q, %d live nodes read; want 200, redis up, 2 (both nodes)", status, body, n.redis.LiveNodes())
		}
	}
}

// TestStoreTimeoutBelowARoundTripIsRefused is issue 36's --store-timeout
// 1us: refused at start (before, two nodes each decided every take alone
// and admitted twice the limit) and, in the config file, at reload, with
// the reason; the floor is the config's and the Redis store's both.
func TestStoreTimeoutBelowARoundTripIsRefused(t *testing.T) {
	if config.MinStoreTimeout != redisstore.MinTimeout {
		t.Fatalf("config.MinStoreTimeout %v, redis.MinTimeout %v: one floor", config.MinStoreTimeout, redisstore.MinTimeout)
	}
	_, err := New(context.Background(), Options{Listen: "127.0.0.1:0", Store: config.Store{URL: "redis://127.0.0.1:1", Timeout: time.Microsecond}, Logger: slog.New(slog.DiscardHandler)})
	if !errors.Is(err, redisstore.ErrTimeoutTooShort) || !strings.Contains(err.Error(), "below 1ms") {
		t.Fatalf("New with a 1µs store timeout: %v", err)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "tollgate.yaml")
	if err := os.WriteFile(cfg, []byte("services:\n  - preset: ecs\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	logs := &logtest.Buffer{}
	n := newTestNode(t, logs, Options{ConfigPath: cfg})
	run(t, n, logs)
	if err := os.WriteFile(cfg, []byte("services:\n  - preset: ecs\nstore:\n  url: redis://127.0.0.1:1\n  timeout: 1us\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Reload(context.Background()); err == nil || !strings.Contains(err.Error(), "tollgate.yaml:5:12: store.timeout: 1us is below 1ms, less than a Redis round trip can take") {
		t.Fatalf("reload with store.timeout 1us: %v", err)
	}
}

// TestNotReadyUntilTheNodesAreCounted: a node on a Redis that answers but
// has not yet counted the nodes sharing it is not ready (it would decide
// closed whatever Redis did not answer); Run counts them at once, and
// the node is ready, tollgate_store_nodes 1. With --store-nodes set there
// is nothing to count.
func TestNotReadyUntilTheNodesAreCounted(t *testing.T) {
	t.Parallel() // its own redis-server and nodes
	srv := redistest.Start(t)
	logs := &logtest.Buffer{}
	n := newTestNode(t, logs, Options{Store: config.Store{URL: srv.URL(), Timeout: 10 * time.Second}})
	// Before Run (which serves /readyz too), the store's health.
	if h := n.redis.Health(context.Background()); h.Ready || !strings.Contains(h.Status, "not yet counted") {
		t.Fatalf("health before Run counted the nodes: %+v, want not ready, not yet counted", h)
	}
	run(t, n, logs)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		status, body := readyz(t, n)
		if status == http.StatusOK && strings.Contains(body, "redis up") && n.redis.Nodes() == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("30 s after Run: /readyz %d %q, sharing among %d; want 200, redis up, 1", status, body, n.redis.Nodes())
		}
	}
	fixed := newTestNode(t, &logtest.Buffer{}, Options{Store: config.Store{URL: srv.URL(), Timeout: 10 * time.Second}, StoreNodes: 3})
	if h := fixed.redis.Health(context.Background()); !h.Ready {
		t.Fatalf("health with --store-nodes 3, before Run: %+v, want ready", h)
	}
}
