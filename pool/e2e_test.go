package pool_test

// End-to-end tests of the pool with real processes: the test service
// (internal/testservice) started by the process runner (pool/process).
// Deadlines are generous: these hold on a loaded 2-core machine.

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/autoscale"
	"github.com/tollgate/tollgate/internal/logtest"
	"github.com/tollgate/tollgate/internal/testflags"
	"github.com/tollgate/tollgate/internal/testservice"
	"github.com/tollgate/tollgate/pool"
	"github.com/tollgate/tollgate/pool/process"
)

// TestMain lifts go test's bound on parallel tests (GOMAXPROCS, 2 here)
// unless -parallel is given, and the real-process tests take turns in
// e2eSlots instead: they spend their time waiting on real instances'
// timers (the surplus rule's window, idle timeouts, cold starts), not on
// the CPU. The two longest (TestProcessSurplusInstanceStopsUnderLoad's
// surplus window, TestProcessCPUDriverWins's 30 s window) take no turn, so they
// start at once rather than behind the others, whatever order go test
// resumes paused tests in: with four turns for all, the surplus test
// started 17 s late and the package took 80 s. The in-process tests
// (fakes) are not bounded: they are cheap.
func TestMain(m *testing.M) {
	flag.Parse()
	testflags.ParallelDefault(64)
	testservice.Main(m)
}

// e2eSlots are the turns of the real-process tests (see TestMain).
var e2eSlots = make(chan struct{}, 4)

// parallelE2E marks t parallel and waits for a turn in e2eSlots, which
// it gives back once t and its cleanups have ended. The time waiting for
// a turn counts in t's reported duration.
func parallelE2E(t *testing.T) {
	t.Helper()
	t.Parallel()
	e2eSlots <- struct{}{}
	t.Cleanup(func() { <-e2eSlots })
}

// startPool applies spec to a new pool, runs it until the test ends, and
// returns it with an HTTP server in front of its handler.
func startPool(t *testing.T, spec pool.ServiceSpec) (*pool.Pool, string, func()) {
	t.Helper()
	p := pool.New(pool.Options{Logger: testLog(t)})
	if err := p.Apply([]pool.ServiceSpec{spec}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	srv := httptest.NewServer(p.Handler(spec.Name))
	var once sync.Once
	stop := func() {
		once.Do(func() {
			// The listener first: a client's GET cut by
			// CloseClientConnections on a reused connection is retried by
			// net/http's Transport, and a retry the server still accepted
			// (TestProcessAtMaxInstancesPendingThen429's 40 s request) held
			// srv.Close for its whole latency.
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
	}
	t.Cleanup(stop)
	return p, srv.URL, stop
}

func fetch(t *testing.T, url string) (int, string, http.Header) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// alive reports whether a process exists (and is not a zombie).
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func pids(p *pool.Pool) []int {
	var out []int
	for _, s := range p.Status() {
		for _, in := range s.Instances {
			if in.PID > 0 {
				out = append(out, in.PID)
			}
		}
	}
	return out
}

func readyCount(p *pool.Pool) int {
	n := 0
	for _, in := range p.Status()[0].Instances {
		if in.State == "ready" {
			n++
		}
	}
	return n
}

func TestProcessScaleFromZeroRecordsColdStart(t *testing.T) {
	parallelE2E(t)
	r := testRunner(t, testservice.EnvStartupDelay+"=1s")
	p, url, _ := startPool(t, pool.ServiceSpec{Name: "zero", Runner: r, Engine: autoscale.Config{MaxInstances: 2}})
	time.Sleep(1500 * time.Millisecond)
	if n := len(p.Status()[0].Instances); n != 0 {
		t.Fatalf("%d instances before any request with min instances 0", n)
	}
	start := time.Now()
	code, body, _ := fetch(t, url+"/hello")
	if code != 200 || !strings.HasPrefix(body, "ok ") {
		t.Fatalf("first request: %d %q", code, body)
	}
	if took := time.Since(start); took < time.Second {
		t.Fatalf("first request answered in %v, before the 1 s startup delay of the instance it started", took)
	}
	st := p.Status()[0]
	if st.ColdStart < 1 {
		t.Fatalf("expected cold start %.3f s: the 1 s start was not recorded", st.ColdStart)
	}
	if len(st.Instances) != 1 || st.Instances[0].PID == 0 || st.Instances[0].Port == 0 {
		t.Fatalf("instances: %+v", st.Instances)
	}
}

// TestProcessScalesToFormulaThenToZero holds a steady concurrency of 6
// requests on instances with max concurrency 4: the SPEC's concurrency
// driver asks ceil((6 / 4) / 0.6) = 3 instances. When the load stops,
// the surplus and then every instance stop after the idle timeout.
func TestProcessScalesToFormulaThenToZero(t *testing.T) {
	parallelE2E(t)
	r := testRunner(t)
	p, url, _ := startPool(t, pool.ServiceSpec{Name: "load", Runner: r, Engine: autoscale.Config{
		MaxConcurrency: 4, MaxInstances: 6, IdleTimeout: 3 * time.Second,
	}})
	const clients = 6
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var failures atomic.Int64
	for range clients {
		wg.Go(func() {
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, "GET", url+"/work?latency=500ms", nil)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					failures.Add(1)
				}
			}
		})
	}
	want := int(math.Ceil(float64(clients) / 4 / autoscale.DefaultConcurrencyTarget))
	var got pool.ServiceStatus
	deadline := time.Now().Add(60 * time.Second)
	for {
		got = p.Status()[0]
		if got.Recommended == want && readyCount(p) == want {
			break
		}
		if time.Now().After(deadline) {
			cancel()
			wg.Wait()
			t.Fatalf("under %d concurrent requests: recommended %d (%s), %d ready; want %d", clients, got.Recommended, got.Driver, readyCount(p), want)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if got.Driver != "concurrency" && got.Driver != "act" {
		t.Errorf("driver %q, want concurrency or act", got.Driver)
	}
	for _, in := range got.Instances {
		if in.InFlight > 4 {
			t.Errorf("instance %s has %d requests in flight, over max concurrency 4", in.Name, in.InFlight)
		}
	}
	running := pids(p)
	cancel()
	wg.Wait()
	if n := failures.Load(); n > 0 {
		t.Errorf("%d requests failed under load", n)
	}
	waitFor(t, 60*time.Second, "instances did not scale to zero after the idle timeout", func() bool {
		return len(p.Status()[0].Instances) == 0
	})
	for _, pid := range running {
		if alive(pid) {
			t.Errorf("instance process %d still running after scale to zero", pid)
		}
	}
}

func TestProcessAtMaxInstancesPendingThen429(t *testing.T) {
	parallelE2E(t)
	r := testRunner(t)
	p, url, _ := startPool(t, pool.ServiceSpec{Name: "full", Runner: r, Engine: autoscale.Config{MaxConcurrency: 1, MaxInstances: 1}})
	if code, _, _ := fetch(t, url+"/"); code != 200 {
		t.Fatalf("warm-up: %d", code)
	}
	go http.Get(url + "/slow?latency=40s")
	waitFor(t, 20*time.Second, "slow request not in flight", func() bool { return p.Status()[0].InFlight == 1 })
	start := time.Now()
	code, body, hdr := fetch(t, url+"/")
	waited := time.Since(start)
	if code != http.StatusTooManyRequests || hdr.Get("Retry-After") == "" {
		t.Fatalf("at max instances: %d %q, Retry-After %q", code, body, hdr.Get("Retry-After"))
	}
	if ra, err := strconv.Atoi(hdr.Get("Retry-After")); err != nil || ra < int(autoscale.MinPendingWait/time.Second) {
		t.Fatalf("Retry-After %q, want the pending wait (at least %v) in seconds", hdr.Get("Retry-After"), autoscale.MinPendingWait)
	}
	if waited < 9*time.Second {
		t.Fatalf("answered 429 after %v, without waiting pending first (at least %v)", waited, autoscale.MinPendingWait)
	}
}

func TestProcessCrashedInstanceIsReplaced(t *testing.T) {
	parallelE2E(t)
	r := testRunner(t, testservice.EnvCrashAfter+"=2")
	_, url, _ := startPool(t, pool.ServiceSpec{Name: "crashy", Runner: r, Engine: autoscale.Config{MaxInstances: 1}})
	seen := map[string]bool{}
	for i := range 5 {
		code, body := 0, ""
		// A request sent while the crashed instance is being replaced may
		// be answered 502; the next one is served by the replacement.
		waitFor(t, 60*time.Second, "no instance answered after a crash", func() bool {
			code, body, _ = fetch(t, url+"/")
			return code == 200
		})
		seen[strings.TrimSpace(body)] = true
		_ = i
	}
	if len(seen) < 2 {
		t.Fatalf("5 requests to instances that crash after 2 were all served by %v: no replacement", seen)
	}
}

func TestProcessIgnoringSIGTERMIsKilledAfterGrace(t *testing.T) {
	parallelE2E(t)
	r := testRunner(t, testservice.EnvIgnoreSIGTERM+"=1")
	p, url, stop := startPool(t, pool.ServiceSpec{Name: "stubborn", Runner: r, StopGrace: 2 * time.Second, Engine: autoscale.Config{MaxInstances: 1}})
	if code, _, _ := fetch(t, url+"/"); code != 200 {
		t.Fatalf("first request: %d", code)
	}
	pid := pids(p)[0]
	start := time.Now()
	stop()
	took := time.Since(start)
	if alive(pid) {
		t.Fatalf("instance %d ignoring SIGTERM still runs after the pool stopped", pid)
	}
	if took < 1500*time.Millisecond {
		t.Fatalf("stopped in %v: the instance ignores SIGTERM, so it should have had its 2 s grace", took)
	}
	_ = syscall.SIGTERM
}

// TestProcessCrashLoopBacksOff: a command that exits at once is restarted
// with growing waits between attempts, counted in metrics.
func TestProcessCrashLoopBacksOff(t *testing.T) {
	parallelE2E(t)
	reg := prometheus.NewRegistry()
	p := pool.New(pool.Options{Logger: testLog(t), Registry: reg})
	if err := p.Apply([]pool.ServiceSpec{{Name: "loop", Runner: testRunner(t, testservice.EnvExit+"=3"), Engine: autoscale.Config{MaxInstances: 1}}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	defer func() { cancel(); <-done }()
	srv := httptest.NewServer(p.Handler("loop"))
	defer srv.Close()
	// Each request is answered 503 as soon as the start it waits for has
	// failed (or at once during the backoff); a client that keeps asking
	// keeps the instance restarting.
	go func() {
		for ctx.Err() == nil {
			if resp, err := http.Get(srv.URL + "/"); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	exits := func() float64 {
		return metricValue(t, reg, "tollgate_pool_instance_exits_total")
	}
	waitFor(t, 60*time.Second, "fewer than 4 failed starts", func() bool { return exits() >= 4 })
	if b := metricValue(t, reg, "tollgate_pool_restart_backoff_seconds"); b < 1 {
		t.Fatalf("restart backoff %v s after %v failures in a row", b, exits())
	}
	// Backoff bounds the rate: 4 more failures take at least 4+8+16 s
	// beyond the first waits, so far fewer than one attempt a second.
	n := exits()
	time.Sleep(5 * time.Second)
	if more := exits() - n; more > 3 {
		t.Fatalf("%v failed starts in 5 s despite the backoff", more)
	}
}

// metricValue sums the series of one metric family in reg.
func metricValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return sum
}

// TestProcessNewRevisionRollsOut: a reload that keeps what runs keeps the
// instance; one that changes the environment starts a new revision, moves
// traffic once it is ready and stops the old instance, with every request
// answered meanwhile.
func TestProcessNewRevisionRollsOut(t *testing.T) {
	parallelE2E(t)
	spec := pool.ServiceSpec{Name: "rev", Runner: testRunner(t, "GENERATION=1"), Template: "gen1", Engine: autoscale.Config{MinInstances: 1, MaxInstances: 3}}
	p, url, _ := startPool(t, spec)
	waitFor(t, 60*time.Second, "min instance not ready", func() bool { return readyCount(p) == 1 })
	oldPID := pids(p)[0]

	spec.Engine.MaxInstances = 4
	if err := p.Apply([]pool.ServiceSpec{spec}); err != nil {
		t.Fatal(err)
	}
	if got := pids(p); len(got) != 1 || got[0] != oldPID {
		t.Fatalf("a bounds reload changed the instances: %v, had %d", got, oldPID)
	}

	ctx, cancel := context.WithCancel(context.Background())
	var bad atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			resp, err := http.Get(url + "/")
			if err != nil || resp.StatusCode != 200 {
				bad.Add(1)
			}
			if resp != nil {
				resp.Body.Close()
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	spec.Runner, spec.Template = testRunner(t, "GENERATION=2"), "gen2"
	if err := p.Apply([]pool.ServiceSpec{spec}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "traffic never moved to the new revision", func() bool {
		st := p.Status()[0]
		return st.Revision == "rev-00002" && len(st.Instances) >= 1
	})
	waitFor(t, 60*time.Second, "the old revision's process still runs", func() bool { return !alive(oldPID) })
	cancel()
	wg.Wait()
	if n := bad.Load(); n > 0 {
		t.Errorf("%d requests failed during the rollout", n)
	}
	code, body, _ := fetch(t, url+"/env")
	if code != 200 || !strings.Contains(body, `"GENERATION":"2"`) || !strings.Contains(body, `"K_REVISION":"rev-00002"`) {
		t.Fatalf("after the rollout the instance has %d %s", code, body)
	}
}

// TestProcessLifecycleIsLoggedOnce runs one instance through package
// process under a pool sharing one Info-level JSON log: "instance ready"
// and "instance stopped" appear once each, from the pool, with the
// attributes the pool knows (pid, address, cold start; why it stopped).
func TestProcessLifecycleIsLoggedOnce(t *testing.T) {
	parallelE2E(t)
	logs := &logtest.Buffer{}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	r, err := process.New(process.Options{
		Command:   testservice.Build(t),
		Env:       []string{testservice.EnvHost + "=127.0.0.1"},
		Readiness: process.Readiness{Timeout: time.Minute},
		StopGrace: 10 * time.Second,
		Logger:    log,
	})
	if err != nil {
		t.Fatal(err)
	}
	p := pool.New(pool.Options{Logger: log})
	if err := p.Apply([]pool.ServiceSpec{{Name: "logged", Runner: r, Engine: autoscale.Config{MinInstances: 1, MaxInstances: 1}}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	waitFor(t, 60*time.Second, "min instance not ready", func() bool { return readyCount(p) == 1 })
	cancel()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("Run did not return within 60 s of its context ending")
	}
	count := map[string]int{}
	for _, line := range strings.Split(logs.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		msg, _ := rec["msg"].(string)
		count[msg]++
		var want []string
		switch msg {
		case "instance ready":
			want = []string{"instance", "pid", "addr", "cold_start"}
		case "instance stopped":
			want = []string{"instance", "pid", "reason", "took"}
		}
		for _, k := range want {
			if _, ok := rec[k]; !ok {
				t.Errorf("%q line without %s: %s", msg, k, line)
			}
		}
	}
	if count["instance ready"] != 1 || count["instance stopped"] != 1 {
		t.Fatalf("logged \"instance ready\" %d times and \"instance stopped\" %d times, want once each; log:\n%s",
			count["instance ready"], count["instance stopped"], logs.String())
	}
}
