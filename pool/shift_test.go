package pool

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/autoscale"
	"github.com/tollgate/tollgate/pool/traffic"
)

// syncBuffer is a log sink safe for the pool's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestShiftStaysWhenTheRevisionNeverGetsReady gives half the traffic
// to a revision whose instances never get ready: SetTraffic waits the
// rollout timeout, then leaves the traffic where it was and says why, in
// the log, the admin answer (409, past its server's write timeout), the
// revision's state and tollgate_pool_rollouts_total. The tag-only deploy
// before it did not make the revision the latest ready either.
func TestShiftStaysWhenTheRevisionNeverGetsReady(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	reg := prometheus.NewRegistry()
	p := New(Options{Logger: slog.New(slog.NewTextHandler(&logs, nil)), Registry: reg, RolloutTimeout: 2 * time.Second})
	spec := ServiceSpec{Name: "s", Runner: &serverRunner{tag: "v1"}, Template: "a", Engine: autoscale.Config{MinInstances: 1}}
	if err := p.Apply([]ServiceSpec{spec}); err != nil {
		t.Fatal(err)
	}
	runPool(t, p)
	eventually(t, 20*time.Second, "s-00001 not ready", func() bool {
		ts, err := p.Revisions("s")
		return err == nil && ts.Revisions[0].Ready == 1
	})
	spec.Runner, spec.Template = &serverRunner{tag: "v2", startupDelay: time.Hour}, "b"
	spec.Engine.MinInstances = 0
	spec.Traffic = []traffic.Target{{RevisionName: "s-00001", Percent: 100}, {LatestRevision: true, Tag: "next"}}
	if err := p.Apply([]ServiceSpec{spec}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the tag-only rollout of s-00002 never failed", func() bool {
		ts, err := p.Revisions("s")
		return err == nil && len(ts.Revisions) == 2 && ts.Revisions[1].State == "failed"
	})
	ts, _ := p.Revisions("s")
	if r := ts.Revisions; !r[0].LatestReady || r[1].LatestReady || !r[1].Latest || !slices.Contains(r[0].Tags, "next") {
		t.Fatalf("after the failed tag-only rollout: %+v; want s-00001 the latest ready, with the latest's tag", r)
	}
	// Through the admin endpoint of a server whose write timeout (1 s) is
	// shorter than the wait: the answer still comes.
	mux := http.NewServeMux()
	mux.Handle("PUT /v1/admin/pools/{service}/traffic", p.RevisionsHandler())
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.WriteTimeout = time.Second
	srv.Start()
	defer srv.Close()
	start := time.Now()
	req, _ := http.NewRequest(http.MethodPut, srv.URL+"/v1/admin/pools/s/traffic",
		strings.NewReader(`{"traffic": [{"revision": "s-00001", "percent": 50}, {"revision": "s-00002", "percent": 50}]}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("PUT: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusConflict || !strings.Contains(string(body), "s-00002 had no instance ready") {
		t.Fatalf("PUT: %s %s %v; want 409 naming s-00002", resp.Status, body, err)
	}
	if d := time.Since(start); d < 2*time.Second {
		t.Errorf("the PUT returned after %v, before the rollout timeout (2 s)", d)
	}
	ts, err = p.Revisions("s")
	if err != nil {
		t.Fatal(err)
	}
	if len(ts.Revisions) != 2 || ts.Revisions[0].Percent != 100 || ts.Revisions[1].Percent != 0 || ts.Revisions[1].State != "failed" ||
		!strings.Contains(ts.Revisions[1].Message, "rollout timeout") {
		t.Fatalf("after the timeout: %+v; want s-00001 at 100 %% and s-00002 failed", ts.Revisions)
	}
	if len(ts.Traffic) != 2 || ts.Traffic[0].Percent != 100 {
		t.Fatalf("traffic in force after the refused change: %+v; want the config's", ts.Traffic)
	}
	if l := logs.String(); !strings.Contains(l, "traffic not moved") || !strings.Contains(l, "revision=s-00002") {
		t.Errorf("the log does not say the traffic stayed:\n%s", l)
	}
	if n := metricValue(t, reg, "tollgate_pool_rollouts_total", "service", "s", "revision", "s-00002", "outcome", "failed"); n != 2 {
		t.Errorf("tollgate_pool_rollouts_total{revision=s-00002,outcome=failed} = %v; want 2 (the deploy and the PUT)", n)
	}
	p.mu.RLock()
	rv := p.services["s"].revisionByName("s-00002")
	p.mu.RUnlock()
	min := rv.State().MinInstances
	if min != 0 {
		t.Errorf("s-00002's engine keeps min instances %d after the refused change; want its configured 0", min)
	}
}

// TestNewRevisionNamedWithAShareWaitsForItsInstance reloads with a new
// template and a traffic block giving the new revision, by name, half the
// requests: the split does not move until its instance (2 s to start) is
// ready, and no request fails meanwhile.
func TestNewRevisionNamedWithAShareWaitsForItsInstance(t *testing.T) {
	t.Parallel()
	spec := ServiceSpec{Name: "s", Runner: &serverRunner{tag: "v1"}, Template: "a", Engine: autoscale.Config{MinInstances: 1}}
	p, _ := newTestPool(t, spec)
	runPool(t, p)
	h := p.Handler("s")
	eventually(t, 20*time.Second, "s-00001 not ready", func() bool {
		_, b, _ := get(t, h, "/")
		return strings.HasPrefix(b, "v1 s-00001")
	})
	spec.Runner, spec.Template = &serverRunner{tag: "v2", startupDelay: 2 * time.Second}, "b"
	spec.Engine.MinInstances = 0
	spec.Traffic = []traffic.Target{{RevisionName: "s-00001", Percent: 50}, {RevisionName: "s-00002", Percent: 50}}
	if err := p.Apply([]ServiceSpec{spec}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; {
		if time.Now().After(deadline) {
			t.Fatal("the split never moved to s-00002 within 20 s")
		}
		ts, err := p.Revisions("s")
		if err != nil {
			t.Fatal(err)
		}
		rs := ts.Revisions[len(ts.Revisions)-1]
		if rs.Percent == 50 {
			if rs.Name != "s-00002" || rs.Ready < 1 {
				t.Fatalf("%s took 50 %% with %d instances ready; want s-00002 with one", rs.Name, rs.Ready)
			}
			break
		}
		if c, b, _ := get(t, h, "/"); c != 200 || !strings.HasPrefix(b, "v1 s-00001") {
			t.Fatalf("before the move: %d %q, want s-00001", c, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
