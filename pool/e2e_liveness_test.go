package pool_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/autoscale"
	"github.com/tollgate/tollgate/internal/logtest"
	"github.com/tollgate/tollgate/internal/testservice"
	"github.com/tollgate/tollgate/pool"
)

// liveCheck probes /healthz every second (Cloud Run's shortest period
// and timeout); three failures in a row make an instance unhealthy, so
// that a probe slowed past its timeout on a loaded machine does not.
var liveCheck = &pool.Liveness{Path: "/healthz", Period: time.Second, Timeout: time.Second, FailureThreshold: 3}

// runLivePool runs p with spec until the test ends, logging JSON into
// logs, and serves its handler.
func runLivePool(t *testing.T, p *pool.Pool, spec pool.ServiceSpec) string {
	t.Helper()
	if err := p.Apply([]pool.ServiceSpec{spec}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	srv := httptest.NewServer(p.Handler(spec.Name))
	t.Cleanup(func() {
		srv.Listener.Close()
		srv.CloseClientConnections()
		srv.Close()
		cancel()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			t.Errorf("Run did not return within 60 s of its context ending")
		}
	})
	return srv.URL
}

// overMax is tollgate_pool_instances_over_max for revision and reason,
// and whether the series exists.
func overMax(t *testing.T, reg *prometheus.Registry, revision, reason string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "tollgate_pool_instances_over_max" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["revision"] == revision && labels["reason"] == reason {
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

// logLine is the first JSON log line whose msg starts with prefix.
func logLine(t *testing.T, logs *logtest.Buffer, prefix string) map[string]any {
	t.Helper()
	for _, line := range strings.Split(logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && strings.HasPrefix(m["msg"].(string), prefix) {
			return m
		}
	}
	return nil
}

// TestProcessUnhealthyInstanceReplacedOverMax: at max instances 1, the
// only instance starts failing its liveness check while it runs a long
// request. A replacement starts beside it, over max, and takes the next
// request; the long request still completes 200 on the old instance;
// tollgate_pool_instances_over_max{reason="unhealthy"} is 1 meanwhile and
// 0 once the old instance has stopped, which it does when its request has
// finished. The log says which instance, why, and the bound.
func TestProcessUnhealthyInstanceReplacedOverMax(t *testing.T) {
	parallelE2E(t)
	logs := &logtest.Buffer{}
	reg := prometheus.NewRegistry()
	p := pool.New(pool.Options{Logger: slog.New(slog.NewJSONHandler(logs, nil)), Registry: reg})
	url := runLivePool(t, p, pool.ServiceSpec{Name: "live", Runner: testRunner(t), Liveness: liveCheck,
		Engine: autoscale.Config{MaxInstances: 1}, RequestTimeout: time.Minute})
	code, body, _ := fetch(t, url+"/first")
	if code != 200 || !strings.HasPrefix(body, "ok ") {
		t.Fatalf("first request: %d %q", code, body)
	}
	old := body
	if v, ok := overMax(t, reg, "live-00001", "unhealthy"); !ok || v != 0 {
		t.Fatalf("over max for unhealthy instances before any: %v (series %v), want 0", v, ok)
	}
	long := make(chan string, 1)
	go func() {
		c, b, _ := fetch(t, url+"/long?latency=20s")
		long <- strconv.Itoa(c) + " " + b
	}()
	waitFor(t, 30*time.Second, "the long request never ran", func() bool { return p.Status()[0].InFlight == 1 })
	if code, body, _ := fetch(t, url+"/sicken"); code != 200 || body != "sick\n" {
		t.Fatalf("/sicken: %d %q", code, body)
	}
	waitFor(t, 30*time.Second, "the unhealthy instance never counted over max", func() bool {
		v, _ := overMax(t, reg, "live-00001", "unhealthy")
		return v == 1
	})
	code, body, _ = fetch(t, url+"/next")
	if code != 200 || !strings.HasPrefix(body, "ok ") || body == old {
		t.Fatalf("a request once the instance was unhealthy: %d %q, want 200 from another instance than %q", code, body, old)
	}
	select {
	case got := <-long:
		t.Fatalf("the long request ended before the replacement answered: %s; the test proves nothing", got)
	default:
	}
	if v, _ := overMax(t, reg, "live-00001", "unhealthy"); v != 1 {
		t.Fatalf("over max while the unhealthy instance runs its request beside the replacement: %v, want 1", v)
	}
	if got := <-long; got != "200 "+old {
		t.Fatalf("the long request on the unhealthy instance: %q, want %q", got, "200 "+old)
	}
	waitFor(t, 30*time.Second, "over max not back to 0 once the request finished", func() bool {
		v, ok := overMax(t, reg, "live-00001", "unhealthy")
		return ok && v == 0
	})
	for _, in := range p.Status()[0].Instances {
		if in.Name == "live-00001-1" {
			t.Fatalf("the unhealthy instance still listed after its request finished: %+v", in)
		}
	}
	line := logLine(t, logs, "instance unhealthy")
	if line == nil {
		t.Fatalf("no log line for the unhealthy instance:\n%s", logs.String())
	}
	if line["instance"] != "live-00001-1" || line["reason"] != "unhealthy" || line["bound"] != float64(time.Minute) ||
		line["over_max"] != true || line["in_flight"] != float64(1) || !strings.Contains(line["error"].(string), "status 500") {
		t.Fatalf("log line of the unhealthy instance: %v", line)
	}
	if line := logLine(t, logs, "instance stopped"); line == nil || line["instance"] != "live-00001-1" || line["reason"] != "unhealthy: its requests finished" {
		t.Fatalf("stop of the unhealthy instance logged as %v", line)
	}
}

// TestProcessUnhealthyInstanceStoppedAtItsBound: an instance whose
// liveness probes hang (no answer within the timeout) while it runs a
// request far longer than the bound (3 s here, for 15 minutes) is stopped
// at the bound, killed after its stop grace as it ignores SIGTERM: the
// request gets the pool's 502 for an instance that exited while serving
// it, never a 200, and a new request is served by the replacement.
func TestProcessUnhealthyInstanceStoppedAtItsBound(t *testing.T) {
	parallelE2E(t)
	logs := &logtest.Buffer{}
	reg := prometheus.NewRegistry()
	p := pool.NewWithOverMaxGrace(pool.Options{Logger: slog.New(slog.NewJSONHandler(logs, nil)), Registry: reg}, 3*time.Second)
	url := runLivePool(t, p, pool.ServiceSpec{Name: "stuck", Runner: testRunner(t, testservice.EnvIgnoreSIGTERM+"=1"),
		Liveness: liveCheck, Engine: autoscale.Config{MaxInstances: 1}, RequestTimeout: 5 * time.Minute, StopGrace: time.Second})
	if code, _, _ := fetch(t, url+"/first"); code != 200 {
		t.Fatalf("first request: %d", code)
	}
	pid := pids(p)[0]
	long := make(chan string, 1)
	start := time.Now()
	go func() {
		c, b, _ := fetch(t, url+"/long?latency=3m")
		long <- strconv.Itoa(c) + " " + b
	}()
	waitFor(t, 30*time.Second, "the long request never ran", func() bool { return p.Status()[0].InFlight == 1 })
	if code, _, _ := fetch(t, url+"/sicken?hang=1"); code != 200 {
		t.Fatalf("/sicken: %d", code)
	}
	var got string
	select {
	case got = <-long:
	case <-time.After(90 * time.Second):
		t.Fatal("the long request on the stuck unhealthy instance was not ended by the 3 s bound within 90 s")
	}
	if !strings.HasPrefix(got, "502 ") || !strings.Contains(got, "exited while serving the request (stopped at its bound") {
		t.Fatalf("the request on the instance stopped at its bound: %q, want 502 saying it exited", got)
	}
	if took := time.Since(start); took > 80*time.Second {
		t.Fatalf("ended after %v", took)
	}
	waitFor(t, 30*time.Second, "the stuck instance's process still runs", func() bool { return !alive(pid) })
	waitFor(t, 30*time.Second, "over max not back to 0", func() bool {
		v, ok := overMax(t, reg, "stuck-00001", "unhealthy")
		return ok && v == 0
	})
	if code, body, _ := fetch(t, url+"/after"); code != 200 || !strings.HasPrefix(body, "ok ") {
		t.Fatalf("after the stop: %d %q", code, body)
	}
	line := logLine(t, logs, "unhealthy instance stopped at its bound")
	if line == nil || line["instance"] != "stuck-00001-1" || line["in_flight"] != float64(1) || line["bound"] != float64(3*time.Second) {
		t.Fatalf("log line of the stop at the bound: %v\n%s", line, logs.String())
	}
	if line := logLine(t, logs, "instance unhealthy"); line == nil || !strings.Contains(line["error"].(string), "no answer within the 1s timeout") {
		t.Fatalf("the unhealthy line does not say the probe timed out: %v", line)
	}
}

// TestProcessCrashLoopRunsAtMostMax: instances that crash after one
// request each, at max instances 2 under four clients. Each crash's
// replacement is an ordinary start: the instances the pool runs never
// exceed max plus those over max with a reason (none here), and the
// loop went round several times.
func TestProcessCrashLoopRunsAtMostMax(t *testing.T) {
	parallelE2E(t)
	reg := prometheus.NewRegistry()
	p := pool.New(pool.Options{Logger: testLog(t), Registry: reg})
	const maxInstances = 2
	url := runLivePool(t, p, pool.ServiceSpec{Name: "loop", Runner: testRunner(t, testservice.EnvCrashAfter+"=1"),
		Liveness: liveCheck, Engine: autoscale.Config{MaxInstances: maxInstances}, RequestTimeout: 30 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var answered, ok200 atomic.Int64
	for range 4 {
		wg.Go(func() {
			for ctx.Err() == nil {
				c, _, _ := fetchCtx(ctx, url+"/x?latency=100ms")
				if c != 0 {
					answered.Add(1)
				}
				if c == 200 {
					ok200.Add(1)
				}
			}
		})
	}
	seen := map[string]bool{}
	most := 0
	for end := time.Now().Add(12 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		st := p.Status()[0]
		over, _ := overMax(t, reg, "loop-00001", "unhealthy")
		running := 0
		for _, in := range st.Instances {
			seen[in.Name] = true
			if in.PID > 0 && alive(in.PID) {
				running++
			}
		}
		if n := len(st.Instances) - int(over); n > most {
			most = n
		}
		if running > maxInstances+int(over) {
			t.Errorf("%d instance processes running at max instances %d with %v over max: %+v", running, maxInstances, over, st.Instances)
		}
	}
	cancel()
	wg.Wait()
	if most > maxInstances {
		t.Fatalf("the pool listed %d instances beyond those over max, at max instances %d", most, maxInstances)
	}
	if len(seen) < 4 || ok200.Load() < 3 {
		t.Fatalf("%d instances started and %d requests answered 200 (of %d): the crash loop did not go round", len(seen), ok200.Load(), answered.Load())
	}
}

// fetchCtx is fetch under ctx, with 0 for a request that failed.
func fetchCtx(ctx context.Context, url string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// TestProcessRetiredRevisionWaitsForItsUnhealthyInstance: an unhealthy
// instance's request, which the engine no longer counts, keeps its
// revision draining when a new revision replaces it. The instance
// ignores SIGTERM and has a 1 s stop grace, so a revision that looked
// idle and stopped it would cut the request (502); it completes 200.
func TestProcessRetiredRevisionWaitsForItsUnhealthyInstance(t *testing.T) {
	parallelE2E(t)
	p := pool.New(pool.Options{Logger: testLog(t), RolloutTimeout: time.Minute})
	spec := func(r pool.Runner, template string) pool.ServiceSpec {
		return pool.ServiceSpec{Name: "rv", Runner: r, Template: template, Liveness: liveCheck,
			Engine: autoscale.Config{MaxInstances: 1}, RequestTimeout: time.Minute, StopGrace: time.Second}
	}
	url := runLivePool(t, p, spec(testRunner(t, testservice.EnvIgnoreSIGTERM+"=1"), "a"))
	code, old, _ := fetch(t, url+"/first")
	if code != 200 {
		t.Fatalf("first request: %d %q", code, old)
	}
	long := make(chan string, 1)
	go func() {
		c, b, _ := fetch(t, url+"/long?latency=15s")
		long <- strconv.Itoa(c) + " " + b
	}()
	waitFor(t, 30*time.Second, "the long request never ran", func() bool { return p.Status()[0].InFlight == 1 })
	if code, _, _ := fetch(t, url+"/sicken"); code != 200 {
		t.Fatalf("/sicken: %d", code)
	}
	waitFor(t, 30*time.Second, "the instance was never listed unhealthy", func() bool {
		for _, in := range p.Status()[0].Instances {
			if in.Name == "rv-00001-1" && in.State == "unhealthy" && in.InFlight == 1 {
				return true
			}
		}
		return false
	})
	if err := p.Apply([]pool.ServiceSpec{spec(testRunner(t), "b")}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the new revision never took the traffic", func() bool {
		st, err := p.Revisions("rv")
		return err == nil && len(st.Revisions) == 1 && st.Revisions[0].Name == "rv-00002" && st.Revisions[0].Ready == 1
	})
	time.Sleep(3 * time.Second) // three ticks of the retired revision
	select {
	case got := <-long:
		t.Fatalf("the long request ended before the old revision had ticked as retired: %s; the test proves nothing", got)
	default:
	}
	if got := <-long; got != "200 "+old {
		t.Fatalf("the request on the retired revision's unhealthy instance: %q, want %q", got, "200 "+old)
	}
	waitFor(t, 30*time.Second, "the retired revision's instances never stopped", func() bool {
		for _, in := range p.Status()[0].Instances {
			if strings.HasPrefix(in.Name, "rv-00001") {
				return false
			}
		}
		return true
	})
}
