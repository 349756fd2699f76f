package node

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/internal/logtest"
	"github.com/tollgate/tollgate/internal/redistest"
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
