package pool_test

// End-to-end tests of a service's request bounds (request timeout, pending
// bound) and of slow and failed starts, against real instance processes.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/autoscale"
	"github.com/tollgate/tollgate/internal/logtest"
	"github.com/tollgate/tollgate/internal/testservice"
	"github.com/tollgate/tollgate/pool"
	"github.com/tollgate/tollgate/pool/process"
)

// startPoolBehind is startPool with a server that has tollgate serve's
// short read and write timeouts (scaled down), which proxied requests must
// not be cut by.
func startPoolBehind(t *testing.T, spec pool.ServiceSpec, read, write time.Duration) (*pool.Pool, string) {
	t.Helper()
	p := pool.New(pool.Options{Logger: testLog(t)})
	if err := p.Apply([]pool.ServiceSpec{spec}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	srv := httptest.NewUnstartedServer(p.Handler(spec.Name))
	srv.Config.ReadHeaderTimeout = 5 * time.Second
	srv.Config.ReadTimeout, srv.Config.WriteTimeout = read, write
	srv.Start()
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		cancel()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			t.Errorf("Run did not return within 60 s of its context ending")
		}
	})
	return p, srv.URL
}

// TestProcessRequestTimeoutReplacesServerTimeouts: behind a server with
// 1 s read and write timeouts, a 4 s request is answered (the request
// timeout of 8 s bounds it instead), and one longer than the request
// timeout is answered 504, not cut.
func TestProcessRequestTimeoutReplacesServerTimeouts(t *testing.T) {
	parallelE2E(t)
	_, url := startPoolBehind(t, pool.ServiceSpec{Name: "long", Runner: testRunner(t),
		Engine: autoscale.Config{MaxInstances: 1}, RequestTimeout: 8 * time.Second}, time.Second, time.Second)
	if code, body, _ := fetch(t, url+"/?latency=4s"); code != 200 || !strings.HasPrefix(body, "ok ") {
		t.Fatalf("a 4 s request behind 1 s server timeouts: %d %q", code, body)
	}
	start := time.Now()
	code, body, _ := fetch(t, url+"/?latency=30s")
	if code != http.StatusGatewayTimeout || !strings.Contains(body, "request timeout") {
		t.Fatalf("a 30 s request with an 8 s request timeout: %d %q", code, body)
	}
	if took := time.Since(start); took > 25*time.Second {
		t.Fatalf("answered after %v, not at the 8 s request timeout", took)
	}
}

// slowBody yields one byte every interval, n times.
type slowBody struct {
	n        int
	interval time.Duration
}

func (b *slowBody) Read(p []byte) (int, error) {
	if b.n == 0 {
		return 0, io.EOF
	}
	time.Sleep(b.interval)
	b.n--
	p[0] = 'x'
	return 1, nil
}

// TestProcessSlowUploadCutByTheRequestTimeoutIsNot200: an upload slower
// than the request timeout fails the proxied attempt; the client gets an
// error status, never the 200 with an empty body the server wrote when the
// error handler returned without answering.
func TestProcessSlowUploadCutByTheRequestTimeoutIsNot200(t *testing.T) {
	parallelE2E(t)
	_, url := startPoolBehind(t, pool.ServiceSpec{Name: "upload", Runner: testRunner(t),
		Engine: autoscale.Config{MaxInstances: 1}, RequestTimeout: 3 * time.Second}, 30*time.Second, 60*time.Second)
	if code, body, _ := fetch(t, url+"/"); code != 200 { // warm
		t.Fatalf("warm-up: %d %q", code, body)
	}
	resp, err := http.Post(url+"/echo", "application/octet-stream", &slowBody{n: 40, interval: 250 * time.Millisecond})
	if err != nil {
		return // the connection was cut: not a 200 either
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		t.Fatalf("an upload cut by the request timeout answered 200 %q", b)
	}
	if resp.StatusCode != http.StatusGatewayTimeout {
		t.Errorf("status %d %q, want 504", resp.StatusCode, b)
	}
}

// TestProcessSlowStartStartsOneInstance: a first request to a service whose
// instances take 12 s to listen, with no cold start measured yet: it waits
// for the one instance on its way (the 10 s hedge knows it has been
// starting longer than the 2 s guess) and is answered; no second instance.
func TestProcessSlowStartStartsOneInstance(t *testing.T) {
	parallelE2E(t)
	p, url, _ := startPool(t, pool.ServiceSpec{Name: "slow", Runner: testRunner(t, testservice.EnvStartupDelay+"=12s"),
		Engine: autoscale.Config{MaxInstances: 3}})
	if code, body, _ := fetch(t, url+"/"); code != 200 || !strings.HasPrefix(body, "ok ") {
		t.Fatalf("first request: %d %q", code, body)
	}
	if st := p.Status()[0]; len(st.Instances) != 1 {
		t.Fatalf("%d instances for one request: %+v", len(st.Instances), st.Instances)
	}
}

// TestProcessFailedStartAnswers503AtOnce: a command that exits before it
// listens (exit status 2) fails the waiting request with 503 and the
// reason as soon as the start has failed, and so do the requests during
// the crash-loop backoff, instead of a 504 after the pending wait.
func TestProcessFailedStartAnswers503AtOnce(t *testing.T) {
	parallelE2E(t)
	_, url, _ := startPool(t, pool.ServiceSpec{Name: "nope", Runner: testRunner(t, testservice.EnvExit+"=2"),
		Engine: autoscale.Config{MaxInstances: 1}})
	for i := range 4 {
		start := time.Now()
		code, body, _ := fetch(t, url+"/")
		if code != http.StatusServiceUnavailable || !strings.Contains(body, "exited before ready") || !strings.Contains(body, "exit status 2") {
			t.Fatalf("request %d: %d %q, want 503 with the reason", i, code, body)
		}
		if took := time.Since(start); took > 8*time.Second {
			t.Fatalf("request %d answered after %v: not at once", i, took)
		}
	}
}

// TestProcessPendingBound: with max_pending 2, one request in flight on the
// only slot and two waiting, the next is answered 429 at once with
// Retry-After, and the waiting ones are still served.
func TestProcessPendingBound(t *testing.T) {
	parallelE2E(t)
	p, url, _ := startPool(t, pool.ServiceSpec{Name: "bounded", Runner: testRunner(t),
		Engine: autoscale.Config{MaxConcurrency: 1, MaxInstances: 1}, MaxPending: 2})
	if code, _, _ := fetch(t, url+"/"); code != 200 {
		t.Fatalf("warm-up: %d", code)
	}
	var wg sync.WaitGroup
	codes := make([]int, 3)
	for i := range codes {
		wg.Go(func() {
			resp, err := http.Get(url + "/?latency=3s")
			if err != nil {
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			codes[i] = resp.StatusCode
		})
		waitFor(t, 20*time.Second, "request not in flight or pending", func() bool {
			st := p.Status()[0]
			return st.InFlight+st.Pending == i+1
		})
	}
	start := time.Now()
	code, body, hdr := fetch(t, url+"/")
	if code != http.StatusTooManyRequests || hdr.Get("Retry-After") == "" || !strings.Contains(body, "max_pending") {
		t.Fatalf("beyond max pending: %d %q Retry-After %q", code, body, hdr.Get("Retry-After"))
	}
	if took := time.Since(start); took > 8*time.Second {
		t.Fatalf("429 after %v: not at once", took)
	}
	wg.Wait()
	if fmt.Sprint(codes) != "[200 200 200]" {
		t.Fatalf("in flight and pending requests: %v, want all 200", codes)
	}
}

// TestProcessTwentyConcurrentAtMaxConcurrencyTenNeedFour is the simulator's
// TestTwentyConcurrentAtMaxConcurrencyTenNeedFour against real instances:
// 20 requests always in flight, max concurrency 10, the 60 % target:
// 20 / 6 = 3.33 needs 4 instances, held for 10 s.
func TestProcessTwentyConcurrentAtMaxConcurrencyTenNeedFour(t *testing.T) {
	parallelE2E(t)
	p, url, _ := startPool(t, pool.ServiceSpec{Name: "twenty", Runner: testRunner(t), Engine: autoscale.Config{
		MaxConcurrency: 10, MaxInstances: 8,
	}})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, "GET", url+"/work?latency=1s", nil)
				if resp, err := http.DefaultClient.Do(req); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		})
	}
	defer func() { cancel(); wg.Wait() }()
	held := 0
	deadline := time.Now().Add(2 * time.Minute)
	for held < 10 {
		if time.Now().After(deadline) {
			st := p.Status()[0]
			t.Fatalf("under 20 concurrent requests: recommended %d (%s), %d in flight; want 4 held for 10 s", st.Recommended, st.Driver, st.InFlight)
		}
		time.Sleep(time.Second)
		if st := p.Status()[0]; st.Recommended == 4 {
			held++
		} else {
			held = 0
		}
	}
}

// TestProcessOOMKilledIsLoggedAndCounted: an instance limited to 64 MiB
// that allocates 256 MiB for a request is killed by the OOM killer; the
// request is answered 502 (never 200), and the exit is logged and counted
// with reason oom_killed.
func TestProcessOOMKilledIsLoggedAndCounted(t *testing.T) {
	parallelE2E(t)
	runLogs := &logtest.Buffer{}
	r, err := process.New(process.Options{
		Command:   testservice.Build(t),
		Env:       []string{testservice.EnvHost + "=127.0.0.1"},
		Readiness: process.Readiness{Timeout: time.Minute},
		Logger:    slog.New(slog.NewTextHandler(runLogs, nil)),
		Memory:    64 << 20,
	})
	if err != nil {
		t.Fatal(err)
	}
	if s := runLogs.String(); strings.Contains(s, "cpus and memory are not enforced") {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and the runner cannot enforce limits: %s", s)
		}
		t.Skipf("this machine cannot enforce cgroup limits (the runner said so): %s", s)
	}
	logs := &logtest.Buffer{}
	reg := prometheus.NewRegistry()
	p := pool.New(pool.Options{Logger: slog.New(slog.NewJSONHandler(logs, nil)), Registry: reg})
	if err := p.Apply([]pool.ServiceSpec{{Name: "small", Runner: r, Engine: autoscale.Config{MaxInstances: 1}}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	srv := httptest.NewServer(p.Handler("small"))
	t.Cleanup(srv.Close)

	if code, body, _ := fetch(t, srv.URL+"/alloc?mib=16"); code != 200 {
		t.Fatalf("16 MiB under a 64 MiB limit: %d %q", code, body)
	}
	if code, body, _ := fetch(t, srv.URL+"/alloc?mib=256"); code != http.StatusBadGateway {
		t.Fatalf("256 MiB under a 64 MiB limit: %d %q, want 502", code, body)
	}
	waitFor(t, 60*time.Second, "no exit counted", func() bool {
		return metricValue(t, reg, "tollgate_pool_instance_exits_total") > 0
	})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, mf := range mfs {
		if mf.GetName() != "tollgate_pool_instance_exits_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" {
					reasons = append(reasons, fmt.Sprintf("%s=%v", l.GetValue(), m.GetCounter().GetValue()))
				}
			}
		}
	}
	if fmt.Sprint(reasons) != "[oom_killed=1]" {
		t.Fatalf("exits counted %v, want [oom_killed=1]", reasons)
	}
	waitFor(t, 10*time.Second, "no exit logged with reason oom_killed", func() bool {
		return strings.Contains(logs.String(), `"reason":"oom_killed"`)
	})
}
