package pool_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/autoscale"
	"github.com/tollgate/tollgate/pool"
	"github.com/tollgate/tollgate/pool/process"
)

// steadyLoad keeps clients requests in a loop on url+"/env" until stop
// is called, and counts the answers by the revision that gave them
// (K_REVISION), or by status and body when not 200.
type steadyLoad struct {
	mu   sync.Mutex
	by   map[string]int
	stop func()
	n    atomic.Int64
}

func startLoad(t *testing.T, url string, clients int) *steadyLoad {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l := &steadyLoad{by: map[string]int{}}
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for ctx.Err() == nil {
				what := answerOf(ctx, url+"/env")
				if ctx.Err() != nil {
					return
				}
				l.mu.Lock()
				l.by[what]++
				l.mu.Unlock()
				l.n.Add(1)
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	l.stop = func() { cancel(); wg.Wait() }
	t.Cleanup(l.stop)
	return l
}

// answerOf is the revision that answered a GET of url, or what went wrong.
func answerOf(ctx context.Context, url string) string {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "error: " + err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var env map[string]string
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &env) != nil {
		return resp.Status + " " + strings.TrimSpace(string(body))
	}
	return env["K_REVISION"]
}

// counts returns the answers so far and starts counting afresh.
func (l *steadyLoad) counts() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.by
	l.by = map[string]int{}
	return out
}

// TestProcessBrokenRevisionNeverTakesTraffic reloads a service under
// steady load with a command that exits at once (/bin/false), its
// rollout timeout 3 s: the rollout fails, and every request, before and
// well after the timeout, is answered by the old revision; a PUT giving
// the broken revision 10 % is refused with 409 after the timeout and
// moves nothing. Then a good third revision takes over and the first is
// retired; a rollback PUT naming it runs it again and moves the traffic
// back.
func TestProcessBrokenRevisionNeverTakesTraffic(t *testing.T) {
	parallelE2E(t)
	var logs lockedBuffer
	p := pool.New(pool.Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	spec := pool.ServiceSpec{Name: "br", Template: "good", Engine: autoscale.Config{MaxConcurrency: 4, MaxInstances: 4},
		Runner: testRunner(t), RolloutTimeout: 3 * time.Second}
	if err := p.Apply([]pool.ServiceSpec{spec}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- p.Run(ctx) }()
	svc := httptest.NewServer(p.Handler("br"))
	mux := http.NewServeMux()
	mux.Handle("PUT /v1/admin/pools/{service}/traffic", p.RevisionsHandler())
	admin := httptest.NewServer(mux)
	t.Cleanup(func() {
		admin.Close()
		svc.Close()
		cancel()
		<-runDone
	})
	load := startLoad(t, svc.URL, 3)
	waitFor(t, 60*time.Second, "br-00001 never answered", func() bool { return load.n.Load() >= 10 })
	if c := load.counts(); len(c) != 1 || c["br-00001"] == 0 {
		t.Fatalf("answers before the reload: %v; want br-00001's only", c)
	}

	broken, err := process.New(process.Options{Command: "/bin/false", Readiness: process.Readiness{Timeout: time.Minute}, Logger: testLog(t)})
	if err != nil {
		t.Fatal(err)
	}
	spec.Template, spec.Runner = "broken", broken
	if err := p.Apply([]pool.ServiceSpec{spec}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the rollout of br-00002 never failed", func() bool {
		ts, err := p.Revisions("br")
		return err == nil && len(ts.Revisions) == 2 && ts.Revisions[1].State == "failed"
	})
	time.Sleep(3 * time.Second) // past the timeout, under load
	ts, err := p.Revisions("br")
	if err != nil {
		t.Fatal(err)
	}
	if r := ts.Revisions; !r[0].LatestReady || r[0].Percent != 100 || r[1].LatestReady || !r[1].Latest || r[1].Ready != 0 {
		t.Fatalf("after the failed rollout: %+v; want br-00001 the latest ready at 100 %%, br-00002 the latest, failed", r)
	}
	if recs := logs.records(t, "rollout failed: the new revision had no instance ready within the rollout timeout; traffic stays where it was"); len(recs) != 1 || recs[0]["revision"] != "br-00002" {
		t.Fatalf("log records of the failed rollout: %v", recs)
	}

	// A PUT giving the broken revision 10 %: refused at the timeout.
	put := func(body string) (int, string) {
		req, _ := http.NewRequest(http.MethodPut, admin.URL+"/v1/admin/pools/br/traffic", strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("PUT: %v", err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := put(`{"traffic": [{"revision": "br-00001", "percent": 90}, {"revision": "br-00002", "percent": 10}]}`); code != http.StatusConflict {
		t.Fatalf("PUT of 10 %% to the broken revision: %d %s; want 409", code, body)
	}
	if c := load.counts(); len(c) != 1 || c["br-00001"] == 0 {
		t.Fatalf("answers from the reload to now: %v; want br-00001's only", c)
	}

	// A good third revision takes over; br-00001 is retired and kept.
	spec.Template, spec.Runner = "good again", testRunner(t)
	if err := p.Apply([]pool.ServiceSpec{spec}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "br-00003 never took the traffic, or br-00001 was not retired", func() bool {
		ts, err := p.Revisions("br")
		return err == nil && len(ts.Revisions) == 1 && ts.Revisions[0].Name == "br-00003" && len(ts.Retired) == 2
	})
	waitFor(t, 30*time.Second, "no answer from br-00003", func() bool { return load.counts()["br-00003"] > 0 })

	// The rollback: a PUT naming the retired revision.
	if code, body := put(`{"traffic": [{"revision": "br-00001", "percent": 100}]}`); code != http.StatusOK {
		t.Fatalf("rollback PUT: %d %s", code, body)
	}
	time.Sleep(time.Second) // the requests routed before the move finish
	load.counts()
	time.Sleep(2 * time.Second)
	if c := load.counts(); len(c) != 1 || c["br-00001"] == 0 {
		t.Fatalf("answers after the rollback: %v; want br-00001's only", c)
	}
}
