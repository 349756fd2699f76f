package pool_test

import (
	"bufio"
	"bytes"
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
	"github.com/tollgate/tollgate/internal/testservice"
	"github.com/tollgate/tollgate/pool"
	"github.com/tollgate/tollgate/pool/traffic"
)

// lockedBuffer is a log sink safe for the pool's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// records returns the JSON log records whose msg is msg.
func (l *lockedBuffer) records(t *testing.T, msg string) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(l.b.Bytes()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		if rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

// TestProcessWarmRolloutThroughAdminAPI moves a loaded service from its
// first revision to its second, 10 → 50 → 100 %, through the admin
// endpoint: no request fails, and the log says that before each step
// the second revision had ready the instances its new share needs, at
// least one and, at 100 %, as many as the load called for.
func TestProcessWarmRolloutThroughAdminAPI(t *testing.T) {
	parallelE2E(t)
	var logs lockedBuffer
	p := pool.New(pool.Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil)), RolloutTimeout: 2 * time.Minute})
	eng := autoscale.Config{MaxConcurrency: 2, MaxInstances: 6}
	spec := pool.ServiceSpec{Name: "roll", Template: "gen1", Engine: eng,
		Runner: testRunner(t, "GENERATION=1", testservice.EnvLatency+"=100ms")}
	if err := p.Apply([]pool.ServiceSpec{spec}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- p.Run(ctx) }()
	svc := httptest.NewServer(p.Handler("roll"))
	mux := http.NewServeMux()
	mux.Handle("PUT /v1/admin/pools/{service}/traffic", p.RevisionsHandler())
	admin := httptest.NewServer(mux)
	t.Cleanup(func() {
		admin.Close()
		svc.Close()
		cancel()
		<-runDone
	})

	// Six clients in a loop keep about six requests in flight: three
	// instances' worth at two each.
	load, stopLoad := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var served, failed atomic.Int64
	var firstFailure atomic.Value
	for range 6 {
		wg.Go(func() {
			for load.Err() == nil {
				resp, err := http.Get(svc.URL + "/")
				if err != nil {
					if load.Err() == nil {
						failed.Add(1)
						firstFailure.CompareAndSwap(nil, err.Error())
					}
					continue
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					failed.Add(1)
					firstFailure.CompareAndSwap(nil, resp.Status+" "+string(body))
					continue
				}
				served.Add(1)
			}
		})
	}
	defer func() { stopLoad(); wg.Wait() }()
	waitFor(t, 60*time.Second, "roll-00001 never had 2 ready instances under load", func() bool {
		ts, err := p.Revisions("roll")
		return err == nil && ts.Revisions[0].Ready >= 2
	})

	// The second revision, tagged only: it takes no untagged request.
	spec.Template, spec.Runner = "gen2", testRunner(t, "GENERATION=2", testservice.EnvLatency+"=100ms")
	spec.Traffic = []traffic.Target{{RevisionName: "roll-00001", Percent: 100}, {RevisionName: "roll-00002", Tag: "next"}}
	if err := p.Apply([]pool.ServiceSpec{spec}); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		pct     int
		traffic string
	}{
		{10, `{"traffic": [{"revision": "roll-00001", "percent": 90}, {"revision": "roll-00002", "percent": 10, "tag": "next"}]}`},
		{50, `{"traffic": [{"revision": "roll-00001", "percent": 50}, {"revision": "roll-00002", "percent": 50, "tag": "next"}]}`},
		{100, `{"traffic": [{"revision": "roll-00002", "percent": 100}]}`},
	}
	for _, s := range steps {
		req, _ := http.NewRequest(http.MethodPut, admin.URL+"/v1/admin/pools/roll/traffic", strings.NewReader(s.traffic))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var ts pool.TrafficStatus
		err = json.NewDecoder(resp.Body).Decode(&ts)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || err != nil {
			t.Fatalf("PUT %d %%: %s, %v", s.pct, resp.Status, err)
		}
		for _, rs := range ts.Revisions {
			if rs.Name == "roll-00002" && rs.Percent != s.pct {
				t.Fatalf("PUT %d %% answered with roll-00002 at %d %%: it returns once the traffic has moved", s.pct, rs.Percent)
			}
		}
		time.Sleep(3 * time.Second) // each share serves a while
	}
	stopLoad()
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Errorf("%d of %d requests failed during the rollout; first: %v", n, n+served.Load(), firstFailure.Load())
	}
	if w := logs.records(t, "moving traffic before the receiving revision has the instances its share needs: they were not ready within the rollout timeout"); len(w) > 0 {
		t.Errorf("a step moved before its instances were ready: %v", w)
	}
	var got []map[string]any
	for _, r := range logs.records(t, "receiving revision ready before its share grew") {
		if r["revision"] == "roll-00002" {
			got = append(got, r)
		}
	}
	if len(got) != len(steps) {
		t.Fatalf("%d logged steps for roll-00002, want %d: %v", len(got), len(steps), got)
	}
	for i, r := range got {
		to, _ := r["to_percent"].(float64)
		need, _ := r["needed"].(float64)
		ready, _ := r["ready"].(float64)
		if int(to) != steps[i].pct || need < 1 || ready < need {
			t.Errorf("step %d: %v; want to_percent %d with ready ≥ needed ≥ 1", i, r, steps[i].pct)
		}
	}
	if need, _ := got[2]["needed"].(float64); need < 2 {
		t.Errorf("at 100 %% roll-00002 needed %v instances; the load kept at least 2 busy", need)
	}
	t.Logf("%d requests served; steps: %v", served.Load(), got)
}

// TestProcessNewRevisionOfIdleServiceGetsAnInstanceFirst rolls out a
// service scaled to zero: the new revision, taking 100 %, still has one
// instance ready before it becomes the latest ready revision, so that
// the next request does not wait for a cold start of a revision never
// seen to start.
func TestProcessNewRevisionOfIdleServiceGetsAnInstanceFirst(t *testing.T) {
	parallelE2E(t)
	var logs lockedBuffer
	p := pool.New(pool.Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	spec := pool.ServiceSpec{Name: "idle", Template: "gen1", Runner: testRunner(t, "GENERATION=1")}
	probe := pool.ServiceSpec{Name: "probe", Template: "probe", Runner: testRunner(t)}
	if err := p.Apply([]pool.ServiceSpec{spec, probe}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- p.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-runDone })
	// A request served by the other service: the pool runs, and "idle"
	// has no instance.
	rec := httptest.NewRecorder()
	p.Handler("probe").ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("probe: %d %s", rec.Code, rec.Body)
	}
	if st := p.Status(); st[0].Name != "idle" || len(st[0].Instances) != 0 {
		t.Fatalf("idle has instances before the rollout: %+v", st[0])
	}
	spec.Template, spec.Runner = "gen2", testRunner(t, "GENERATION=2")
	if err := p.Apply([]pool.ServiceSpec{spec, probe}); err != nil {
		t.Fatal(err)
	}
	var moved []map[string]any
	waitFor(t, 60*time.Second, "idle-00002 never became the latest ready revision", func() bool {
		moved = logs.records(t, "the new revision is the latest ready; traffic rerouted")
		return len(moved) > 0
	})
	r := moved[0]
	need, _ := r["needed"].(float64)
	ready, _ := r["ready"].(float64)
	if r["revision"] != "idle-00002" || need != 1 || ready < 1 {
		t.Fatalf("the new revision took 100 %% with %v; want needed 1 and ready ≥ 1", r)
	}
}
