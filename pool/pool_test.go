package pool

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tollgate/tollgate/autoscale"
)

func newTestPool(t *testing.T, specs ...ServiceSpec) (*Pool, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	p := New(Options{Logger: testLogger(t), Registry: reg, RolloutTimeout: 20 * time.Second, DrainTimeout: 20 * time.Second})
	if err := p.Apply(specs); err != nil {
		t.Fatal(err)
	}
	return p, reg
}

func TestScaleFromZeroRecordsColdStart(t *testing.T) {
	t.Parallel()
	r := &serverRunner{tag: "v1", startupDelay: 300 * time.Millisecond}
	p, reg := newTestPool(t, ServiceSpec{Name: "hello", Runner: r, Engine: autoscale.Config{MaxInstances: 3}})
	runPool(t, p)
	if n := r.starts.Load(); n != 0 {
		t.Fatalf("%d instances started before any request (min instances 0)", n)
	}
	code, body, _ := get(t, p.Handler("hello"), "/x")
	if code != 200 || !strings.HasPrefix(body, "v1 hello-00001 hello-00001-1 /x") {
		t.Fatalf("first request: %d %q", code, body)
	}
	if n := testutil.CollectAndCount(reg, "tollgate_pool_cold_start_seconds"); n != 1 {
		t.Fatalf("cold start series: %d", n)
	}
	// Observed before the instance took the request that started it.
	if n := histogramCount(t, reg, "tollgate_pool_cold_start_seconds"); n != 1 {
		t.Fatalf("%d cold starts observed once the first request was answered, want 1", n)
	}
	cs := p.Status()[0].ColdStart
	if cs < 0.3 {
		t.Fatalf("expected cold start %v s, want at least the 0.3 s startup delay", cs)
	}
}

func TestConcurrencyNeverAboveMaxConcurrency(t *testing.T) {
	t.Parallel()
	r := &serverRunner{tag: "v1"}
	inst := eightAtOnceOnOneInstance(t, r, r, 2)
	if m := inst.maxFlight.Load(); m > 2 || m < 1 {
		t.Fatalf("the instance ran %d requests at once; max concurrency is 2", m)
	}
}

func TestAtMaxInstancesPendingThen429(t *testing.T) {
	t.Parallel()
	r := &serverRunner{tag: "v1"}
	p, reg := newTestPool(t, ServiceSpec{Name: "s", Runner: r, Engine: autoscale.Config{MaxInstances: 1, MaxConcurrency: 1}})
	runPool(t, p)
	h := p.Handler("s")
	if code, _, _ := get(t, h, "/"); code != 200 { // warm: one ready instance
		t.Fatalf("warm-up: %d", code)
	}
	busy := make(chan int, 1)
	go func() { c, _, _ := get(t, h, "/?sleep=25s"); busy <- c }()
	eventually(t, 10*time.Second, "the slow request never started", func() bool { return p.Status()[0].InFlight == 1 })
	start := time.Now()
	code, body, hdr := get(t, h, "/")
	waited := time.Since(start)
	if code != http.StatusTooManyRequests || hdr.Get("Retry-After") == "" {
		t.Fatalf("at max instances: %d %q Retry-After %q", code, body, hdr.Get("Retry-After"))
	}
	// Retry-After is the pending wait the request had, at least 10 s.
	if ra, err := strconv.Atoi(hdr.Get("Retry-After")); err != nil || ra < int(autoscale.MinPendingWait/time.Second) {
		t.Fatalf("Retry-After %q, want the pending wait (at least %v) in seconds", hdr.Get("Retry-After"), autoscale.MinPendingWait)
	}
	if waited < autoscale.MinPendingWait-time.Second {
		t.Fatalf("rejected after %v: a request waits pending at least %v first", waited, autoscale.MinPendingWait)
	}
	if got := metricValue(t, reg, "tollgate_pool_rejected_total", "service", "s", "revision", "s-00001"); got != 1 {
		t.Fatalf("rejected counter %v", got)
	}
	_ = reg
}

func TestClientCancelLeavesPendingQueue(t *testing.T) {
	t.Parallel()
	r := &serverRunner{tag: "v1"}
	p, _ := newTestPool(t, ServiceSpec{Name: "s", Runner: r, Engine: autoscale.Config{MaxInstances: 1, MaxConcurrency: 1}})
	runPool(t, p)
	h := p.Handler("s")
	get(t, h, "/")
	go get(t, h, "/?sleep=8s")
	eventually(t, 10*time.Second, "slow request not in flight", func() bool { return p.Status()[0].InFlight == 1 })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { getCtx(ctx, h, "/"); close(done) }()
	eventually(t, 10*time.Second, "second request not pending", func() bool { return p.Status()[0].Pending == 1 })
	cancel()
	<-done
	if st := p.Status()[0]; st.Pending != 0 {
		t.Fatalf("pending after the client left: %d", st.Pending)
	}
}

func TestCrashAnswers502AndIsReplaced(t *testing.T) {
	t.Parallel()
	r := &serverRunner{tag: "v1"}
	p, reg := newTestPool(t, ServiceSpec{Name: "s", Runner: r, Engine: autoscale.Config{MaxInstances: 2}})
	runPool(t, p)
	h := p.Handler("s")
	res := make(chan string, 1)
	go func() { c, b, _ := get(t, h, "/?sleep=20s"); res <- itoa(c) + " " + b }()
	// Running on the instance, not only counted by the pool: a request
	// still connecting when the instance crashes could reach it between
	// the fake's closing of its connections and of its listener, and be
	// served in full (200 after 20 s) instead of failing with it.
	eventually(t, 10*time.Second, "request not in flight", func() bool { return p.Status()[0].InFlight == 1 && r.serving() == 1 })
	r.all()[0].crash()
	got := <-res
	if !strings.HasPrefix(got, "502 ") || !strings.Contains(got, "exited while serving") {
		t.Fatalf("request on a crashed instance: %q", got)
	}
	eventually(t, 10*time.Second, "the engine still lists the crashed instance", func() bool { return len(p.Status()[0].Instances) == 0 })
	if code, body, _ := get(t, h, "/"); code != 200 || !strings.Contains(body, "hello") && !strings.Contains(body, "s-00001-2") {
		t.Fatalf("after the crash: %d %q", code, body)
	}
	if got := metricValue(t, reg, "tollgate_pool_instance_exits_total", "service", "s", "revision", "s-00001", "reason", "crashed"); got != 1 {
		t.Fatalf("exits{crashed} = %v", got)
	}
	_ = reg
}

func TestIdleToZeroAndShutdownStopsAll(t *testing.T) {
	t.Parallel()
	r := &serverRunner{tag: "v1"}
	p, _ := newTestPool(t, ServiceSpec{Name: "s", Runner: r, Engine: autoscale.Config{IdleTimeout: 2 * time.Second}})
	stop := runPool(t, p)
	if code, _, _ := get(t, p.Handler("s"), "/"); code != 200 {
		t.Fatal(code)
	}
	eventually(t, 20*time.Second, "the idle instance was not stopped", func() bool { return r.running() == 0 })
	if !r.all()[0].stopped.Load() {
		t.Fatal("instance exited without Stop")
	}
	// Min instances 2 on reload: both start; shutdown stops both.
	if err := p.Apply([]ServiceSpec{{Name: "s", Runner: r, Engine: autoscale.Config{MinInstances: 2, IdleTimeout: 2 * time.Second}}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "min instances 2 not started", func() bool { return r.running() == 2 })
	stop()
	if n := r.running(); n != 0 {
		t.Fatalf("%d instances still running after Run returned", n)
	}
}

func TestReloadKeepsInstancesAndNewRevisionRollsOut(t *testing.T) {
	t.Parallel()
	r1 := &serverRunner{tag: "v1"}
	p, _ := newTestPool(t, ServiceSpec{Name: "s", Runner: r1, Template: "a", Engine: autoscale.Config{MinInstances: 1}})
	runPool(t, p)
	h := p.Handler("s")
	eventually(t, 20*time.Second, "min instance not ready", func() bool {
		return p.Status()[0].Instances != nil && len(p.Status()[0].Instances) == 1 && p.Status()[0].Instances[0].State == "ready"
	})
	_, before, _ := get(t, h, "/")

	// Same template, new bounds: same instance.
	if err := p.Apply([]ServiceSpec{{Name: "s", Runner: &serverRunner{tag: "unused"}, Template: "a", Engine: autoscale.Config{MinInstances: 1, MaxInstances: 5}}}); err != nil {
		t.Fatal(err)
	}
	_, after, _ := get(t, h, "/")
	if after != before {
		t.Fatalf("reload with new bounds changed the instance: %q then %q", before, after)
	}
	if r1.running() != 1 {
		t.Fatalf("%d instances after a bounds reload", r1.running())
	}
	// An invalid config is rejected and changes nothing.
	err := p.Apply([]ServiceSpec{{Name: "s", Runner: r1, Template: "a", Engine: autoscale.Config{MinInstances: 9, MaxInstances: 5}}})
	if !errors.Is(err, autoscale.ErrInvalidConfig) {
		t.Fatalf("invalid reload: %v", err)
	}

	// New template: a new revision starts, takes traffic, the old stops.
	r2 := &serverRunner{tag: "v2"}
	if err := p.Apply([]ServiceSpec{{Name: "s", Runner: r2, Template: "b", Engine: autoscale.Config{MinInstances: 1}}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "traffic never moved to the new revision", func() bool {
		_, b, _ := get(t, h, "/")
		return strings.HasPrefix(b, "v2 s-00002")
	})
	eventually(t, 20*time.Second, "the old revision's instance was not stopped", func() bool { return r1.running() == 0 })
}

func TestRemovedServiceDrainsAndForgetsItsSeries(t *testing.T) {
	t.Parallel()
	r := &serverRunner{tag: "v1"}
	p, reg := newTestPool(t, ServiceSpec{Name: "gone", Runner: r, Engine: autoscale.Config{MaxInstances: 2}})
	runPool(t, p)
	if code, _, _ := get(t, p.Handler("gone"), "/"); code != 200 {
		t.Fatal(code)
	}
	eventually(t, 10*time.Second, "no series for the service", func() bool {
		n, _ := testutil.GatherAndCount(reg, "tollgate_pool_instances")
		return n > 0
	})
	if err := p.Apply(nil); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := get(t, p.Handler("gone"), "/"); code != http.StatusServiceUnavailable {
		t.Fatalf("a removed service answered %d", code)
	}
	eventually(t, 20*time.Second, "the removed service's instance still runs", func() bool { return r.running() == 0 })
	eventually(t, 20*time.Second, "the removed service's series are still exported", func() bool {
		n, _ := testutil.GatherAndCount(reg, "tollgate_pool_instances", "tollgate_pool_recommended_instances")
		return n == 0
	})
}

// histogramCount sums the sample counts of histogram family name in reg.
func histogramCount(t *testing.T, reg *prometheus.Registry, name string) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				n += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return n
}

// failingRunner fails every start at once, recording when each began.
type failingRunner struct {
	mu     sync.Mutex
	starts []time.Time
}

func (r *failingRunner) Start(context.Context, InstanceSpec) (Instance, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.starts = append(r.starts, time.Now())
	return nil, errors.New("no such command")
}

func (r *failingRunner) times() []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.starts)
}

// TestReplacementBackoffCountsTheFailure: the start after the second
// failure in a row comes backoffBase after it at the soonest, the one
// after the third twice that; the one after the first failure does not
// wait.
func TestReplacementBackoffCountsTheFailure(t *testing.T) {
	t.Parallel()
	r := &failingRunner{}
	p, _ := newTestPool(t, ServiceSpec{Name: "s", Runner: r, Engine: autoscale.Config{MaxInstances: 1}})
	runPool(t, p)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// A failed start answers its waiting requests 503 at once, so a client
	// that keeps asking keeps the starts coming, at the backoff's pace.
	go func() {
		for ctx.Err() == nil {
			getCtx(ctx, p.Handler("s"), "/")
			time.Sleep(50 * time.Millisecond)
		}
	}()
	eventually(t, 60*time.Second, "fewer than 4 starts", func() bool { return len(r.times()) >= 4 })
	ts := r.times()
	if gap := ts[2].Sub(ts[1]); gap < time.Second-100*time.Millisecond {
		t.Fatalf("third start %v after the second failure, want a backoff of %v", gap, time.Second)
	}
	if gap := ts[3].Sub(ts[2]); gap < 2*time.Second-100*time.Millisecond {
		t.Fatalf("fourth start %v after the third failure, want a backoff of %v", gap, 2*time.Second)
	}
}

// warmRunner is a serverRunner that records Warm calls.
type warmRunner struct {
	serverRunner
	mu     sync.Mutex
	warms  []context.Context
	closed atomic.Int64
}

func (r *warmRunner) Warm(ctx context.Context, service string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.warms = append(r.warms, ctx)
}

func (r *warmRunner) Close() error {
	r.closed.Add(1)
	return nil
}

func (r *warmRunner) calls() []context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.warms)
}

// TestPoolWarmsAnIdleRunner: a revision with no instance to start warms
// its runner once, with a context that ends with the pool; one that
// starts min instances at once does not. Both runners are closed before
// Run returns.
func TestPoolWarmsAnIdleRunner(t *testing.T) {
	t.Parallel()
	idle, busy := &warmRunner{}, &warmRunner{}
	p, _ := newTestPool(t,
		ServiceSpec{Name: "idle", Runner: idle},
		ServiceSpec{Name: "busy", Runner: busy, Engine: autoscale.Config{MinInstances: 1}})
	stop := runPool(t, p)
	eventually(t, 20*time.Second, "the idle service's runner was not warmed", func() bool { return len(idle.calls()) == 1 })
	eventually(t, 20*time.Second, "the min instance did not start", func() bool { return busy.running() == 1 })
	if n := len(busy.calls()); n != 0 {
		t.Fatalf("a runner starting its min instance was warmed %d times", n)
	}
	ctx := idle.calls()[0]
	if ctx.Err() != nil {
		t.Fatal("Warm's context ended while the pool runs")
	}
	if idle.closed.Load() != 0 {
		t.Fatal("the runner was closed while its revision runs")
	}
	stop()
	if ctx.Err() == nil {
		t.Fatal("Warm's context outlived the pool")
	}
	if a, b := idle.closed.Load(), busy.closed.Load(); a != 1 || b != 1 {
		t.Fatalf("runners closed %d and %d times by the time Run returned, want once each", a, b)
	}
}

// sharedRunner is a serverRunner whose instances n tollgate replicas
// share (pool.Sharer).
type sharedRunner struct {
	*serverRunner
	n atomic.Int64
}

func (r *sharedRunner) Sharers() int { return int(r.n.Load()) }

// With its instances shared by two replicas, the pool sends an instance
// at most half its maximum concurrency; the rest wait.
func TestSharedInstanceGetsItsShareOfConcurrency(t *testing.T) {
	t.Parallel()
	r := &sharedRunner{serverRunner: &serverRunner{tag: "v1"}}
	r.n.Store(2)
	inst := eightAtOnceOnOneInstance(t, r, r.serverRunner, 4)
	if m := inst.maxFlight.Load(); m != 2 {
		t.Fatalf("the instance ran %d requests at once; its share of max concurrency 4 among 2 replicas is 2", m)
	}
}

// eightAtOnceOnOneInstance sends 8 requests of 300 ms at once to a
// service of one instance at most, run by runner (whose instances sr
// records), with maxConcurrency; every one must be answered 200. It
// returns the instance.
func eightAtOnceOnOneInstance(t *testing.T, runner Runner, sr *serverRunner, maxConcurrency int) *serverInstance {
	t.Helper()
	p, _ := newTestPool(t, ServiceSpec{Name: "s", Runner: runner, Engine: autoscale.Config{MaxInstances: 1, MaxConcurrency: maxConcurrency}})
	runPool(t, p)
	var wg sync.WaitGroup
	codes := make([]int, 8)
	for i := range codes {
		wg.Go(func() { codes[i], _, _ = get(t, p.Handler("s"), "/?sleep=300ms") })
	}
	wg.Wait()
	for i, c := range codes {
		if c != 200 {
			t.Errorf("request %d: %d", i, c)
		}
	}
	inst := sr.all()
	if len(inst) != 1 {
		t.Fatalf("%d instances at max instances 1", len(inst))
	}
	return inst[0]
}
