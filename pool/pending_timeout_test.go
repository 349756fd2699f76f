package pool

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/autoscale"
)

// A request that waited pending until the request timeout gets its 504,
// and the client's next request on the same kept-alive connection is
// served: the deadline that ended the wait also cut the server's watch
// on that connection (which cancels every later request's context on
// it), so the 504 closes it and the client opens a new one.
func TestPendingTimeoutLeavesTheConnectionUsable(t *testing.T) {
	t.Parallel()
	// The instance takes 6 s to start, the request timeout is 2 s: the
	// first request times out waiting for it, whatever the machine's load.
	r := &serverRunner{startupDelay: 6 * time.Second}
	p, _ := newTestPool(t, ServiceSpec{Name: "s", Runner: r, RequestTimeout: 2 * time.Second,
		Engine: autoscale.Config{MaxInstances: 1, MaxConcurrency: 1}})
	runPool(t, p)
	front := httptest.NewServer(p.Handler("s"))
	t.Cleanup(front.Close)

	tr := &http.Transport{MaxIdleConnsPerHost: 1}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	resp, err := client.Get(front.URL + "/wait")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusGatewayTimeout || !strings.Contains(string(body), "no instance became available") {
		t.Fatalf("%d %q, want 504 for the pending wait", resp.StatusCode, body)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if st := p.Status(); len(st[0].Instances) == 1 && st[0].Instances[0].State == "ready" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the instance was not ready within 60 s: %+v", p.Status())
		}
	}
	resp, err = client.Get(front.URL + "/next")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the next request on the client's connection: %d %q, want 200", resp.StatusCode, body)
	}
}
