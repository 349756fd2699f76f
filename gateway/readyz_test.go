package gateway

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/limiter/memory"
	redisstore "github.com/tollgate/tollgate/limiter/redis"
)

// TestReadyzReportsTheStore checks /readyz's body names the store and its
// state, and that a Redis store that has never reached Redis makes the
// node not ready unless its failure policy is open (a node that never
// reached its store says so loudly, not a false 200).
func TestReadyzReportsTheStore(t *testing.T) {
	t.Parallel()                    // its own servers
	dead := redistest.ClosedAddr(t) // refuses, and no other test's server can take it
	client := goredis.NewClient(&goredis.Options{Addr: dead, MaxRetries: -1})
	defer client.Close()
	redis := func(p redisstore.FailurePolicy) limiter.Limiter {
		s := redisstore.New(client, redisstore.Options{FailurePolicy: p, Timeout: 5 * time.Second, Logger: slog.New(slog.DiscardHandler)})
		t.Cleanup(func() { s.Close() })
		return s
	}
	for _, tc := range []struct {
		name   string
		store  limiter.Limiter
		status int
		body   []string
	}{
		{"memory", memory.New(memory.Options{}), 200, []string{"ready\n", "store: memory\n"}},
		{"redis-closed", redis(redisstore.FailClosed), 503, []string{"not ready\n", "store: redis never reached (on failure: closed)\n"}},
		{"redis-local", redis(redisstore.FailLocal), 503, []string{"not ready\n", "store: redis never reached (on failure: local)\n"}},
		{"redis-open", redis(redisstore.FailOpen), 200, []string{"ready\n", "store: redis never reached (on failure: open)\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := New(Options{Limiter: tc.store})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(g)
			defer srv.Close()
			resp, err := http.Get(srv.URL + "/readyz")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("/readyz = %d %q, want %d", resp.StatusCode, b, tc.status)
			}
			for _, want := range tc.body {
				if !strings.Contains(string(b), want) {
					t.Fatalf("/readyz body %q lacks %q", b, want)
				}
			}
			if !strings.HasPrefix(string(b), tc.body[0]) {
				t.Fatalf("/readyz body %q does not start with %q", b, tc.body[0])
			}
			g.SetReady(false)
			resp, err = http.Get(srv.URL + "/readyz")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 503 {
				t.Fatalf("/readyz while shutting down = %d, want 503", resp.StatusCode)
			}
		})
	}
}
