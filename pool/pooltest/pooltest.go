// Package pooltest is the conformance suite every [runner.Runner] runs
// against itself (local processes, and later Kubernetes pods), so the
// pool can rely on all runners alike.
//
// The suite's instances run the test service of internal/testservice
// (or, for a runner of containers, an image of it), configured through
// its environment knobs; a runner's test supplies a [Factory] that makes
// a runner of that service with a given [Config].
package pooltest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/internal/testservice"
	"github.com/tollgate/tollgate/pool/runner"
)

// Config is what a subtest asks of the runner it gets.
type Config struct {
	// Env holds KEY=value pairs for the test service's environment: its
	// knobs (testservice.EnvCPU, …).
	Env []string
	// ReadyPath is the HTTP readiness path; empty means a TCP check.
	ReadyPath string
	// ReadyTimeout is the readiness timeout; zero means the runner's
	// default.
	ReadyTimeout time.Duration
	// StopGrace is the runner's stop grace; zero means its default.
	StopGrace time.Duration
}

// Factory returns a runner of the test service configured by cfg. It
// fails t when it cannot.
type Factory func(t *testing.T, cfg Config) runner.Runner

// Wait is how long the suite waits for anything that should happen soon:
// generous, so that the suite holds on a loaded machine.
const Wait = 60 * time.Second

// Run runs the conformance suite against runners made by newRunner.
func Run(t *testing.T, newRunner Factory) {
	tests := []struct {
		name string
		fn   func(t *testing.T, newRunner Factory)
	}{
		{"StartReadyServe", testStartReadyServe},
		{"CloudRunEnv", testCloudRunEnv},
		{"ReadyWaitsForStartup", testReadyWaitsForStartup},
		{"ReadyHTTPPath", testReadyHTTPPath},
		{"ReadyTimeout", testReadyTimeout},
		{"ReadyContext", testReadyContext},
		{"ExitBeforeReady", testExitBeforeReady},
		{"CrashClosesDone", testCrash},
		{"Stop", testStop},
		{"StopKillsAfterGrace", testStopKills},
		{"StopBeforeReady", testStopBeforeReady},
		{"CPUTimeGrows", testCPUTime},
		{"ConcurrentInstances", testConcurrent},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newRunner)
		})
	}
}

var ids struct {
	mu sync.Mutex
	n  int
}

// Spec returns a fresh InstanceSpec of service "svc" (unique instance ID).
func Spec() runner.InstanceSpec {
	ids.mu.Lock()
	defer ids.mu.Unlock()
	ids.n++
	return runner.InstanceSpec{Service: "svc", Revision: "svc-00001", ID: "i" + strconv.Itoa(ids.n)}
}

// Start starts an instance of spec with r and stops it when t ends.
func Start(t testing.TB, r runner.Runner, spec runner.InstanceSpec) runner.Instance {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
	inst, err := r.Start(ctx, spec)
	if err != nil {
		t.Fatalf("Start(%+v): %v", spec, err)
	}
	t.Cleanup(func() {
		if err := inst.Stop(time.Second); err != nil {
			t.Errorf("Stop at cleanup: %v", err)
		}
	})
	return inst
}

// Ready waits up to Wait for inst to be ready and fails t otherwise.
func Ready(t testing.TB, inst runner.Instance) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
	if err := inst.Ready(ctx); err != nil {
		t.Fatalf("Ready: %v", err)
	}
}

// Get sends GET path to inst and returns the status and body.
func Get(t testing.TB, inst runner.Instance, path string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+inst.Addr()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		t.Fatalf("GET %s: reading the body: %v", path, err)
	}
	return resp.StatusCode, string(b)
}

// WaitDone waits up to Wait for inst to be done and fails t otherwise.
func WaitDone(t testing.TB, inst runner.Instance) {
	t.Helper()
	select {
	case <-inst.Done():
	case <-time.After(Wait):
		t.Fatalf("instance not done within %v", Wait)
	}
}

func testStartReadyServe(t *testing.T, newRunner Factory) {
	inst := Start(t, newRunner(t, Config{}), Spec())
	if _, _, err := net.SplitHostPort(inst.Addr()); err != nil {
		t.Fatalf("Addr() = %q: %v", inst.Addr(), err)
	}
	Ready(t, inst)
	code, body := Get(t, inst, "/")
	if code != http.StatusOK || !strings.HasPrefix(body, "ok ") {
		t.Fatalf("GET / = %d %q, want 200 ok", code, body)
	}
	if pid := inst.PID(); pid != 0 && body != fmt.Sprintf("ok %d\n", pid) {
		t.Errorf("GET / answered by %q, want the instance's pid %d", body, pid)
	}
	select {
	case <-inst.Done():
		t.Fatalf("Done closed while serving: %v", inst.Err())
	default:
	}
	if err := inst.Err(); err != nil {
		t.Errorf("Err() while running = %v, want nil", err)
	}
}

func testCloudRunEnv(t *testing.T, newRunner Factory) {
	spec := Spec()
	inst := Start(t, newRunner(t, Config{Env: []string{"GREETING=hello world"}}), spec)
	Ready(t, inst)
	_, body := Get(t, inst, "/env")
	var env map[string]string
	if err := json.Unmarshal([]byte(body), &env); err != nil {
		t.Fatalf("/env: %v: %q", err, body)
	}
	_, port, _ := net.SplitHostPort(inst.Addr())
	want := map[string]string{
		"PORT":            port,
		"K_SERVICE":       spec.Service,
		"K_REVISION":      spec.Revision,
		"K_CONFIGURATION": spec.Service,
		"GREETING":        "hello world",
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("instance's %s = %q, want %q", k, env[k], v)
		}
	}
}

func testReadyWaitsForStartup(t *testing.T, newRunner Factory) {
	const delay = time.Second
	start := time.Now()
	inst := Start(t, newRunner(t, Config{Env: []string{testservice.EnvStartupDelay + "=" + delay.String()}}), Spec())
	Ready(t, inst)
	if took := time.Since(start); took < delay {
		t.Errorf("ready after %v, before the service listened (startup delay %v)", took, delay)
	}
	if code, _ := Get(t, inst, "/"); code != http.StatusOK {
		t.Errorf("GET / after Ready = %d", code)
	}
}

func testReadyHTTPPath(t *testing.T, newRunner Factory) {
	// The service listens at once but /healthz fails for a second: a TCP
	// check would pass at once, the HTTP check must not.
	const after = time.Second
	start := time.Now()
	inst := Start(t, newRunner(t, Config{ReadyPath: "/healthz", Env: []string{testservice.EnvHealthyAfter + "=" + after.String()}}), Spec())
	Ready(t, inst)
	if took := time.Since(start); took < after {
		t.Errorf("ready after %v, before /healthz answered 200 (healthy after %v)", took, after)
	}
	if code, _ := Get(t, inst, "/healthz"); code != http.StatusOK {
		t.Errorf("GET /healthz after Ready = %d", code)
	}
}

func testReadyTimeout(t *testing.T, newRunner Factory) {
	inst := Start(t, newRunner(t, Config{ReadyTimeout: time.Second, Env: []string{testservice.EnvStartupDelay + "=1h"}}), Spec())
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
	err := inst.Ready(ctx)
	if err == nil {
		t.Fatal("Ready of a service that never listens = nil")
	}
	if ctx.Err() != nil {
		t.Fatalf("Ready ended by the test's context, not the readiness timeout: %v", err)
	}
	if err2 := inst.Ready(ctx); err2 == nil {
		t.Error("second Ready after the timeout = nil")
	}
}

func testReadyContext(t *testing.T, newRunner Factory) {
	inst := Start(t, newRunner(t, Config{Env: []string{testservice.EnvStartupDelay + "=1h"}}), Spec())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := inst.Ready(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Ready(cancelled ctx) = %v, want context.Canceled", err)
	}
	select {
	case <-inst.Done():
		t.Error("a cancelled Ready stopped the instance")
	default:
	}
}

func testExitBeforeReady(t *testing.T, newRunner Factory) {
	inst := Start(t, newRunner(t, Config{Env: []string{testservice.EnvExit + "=3"}}), Spec())
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
	if err := inst.Ready(ctx); err == nil || ctx.Err() != nil {
		t.Fatalf("Ready of an instance that exits at once = %v (ctx %v), want an error before the deadline", err, ctx.Err())
	}
	WaitDone(t, inst)
	if err := inst.Err(); err == nil {
		t.Error("Err() after exit status 3 = nil")
	}
}

func testCrash(t *testing.T, newRunner Factory) {
	inst := Start(t, newRunner(t, Config{Env: []string{testservice.EnvCrashAfter + "=2"}}), Spec())
	Ready(t, inst)
	Get(t, inst, "/")
	select {
	case <-inst.Done():
		t.Fatalf("done after 1 of 2 requests: %v", inst.Err())
	default:
	}
	Get(t, inst, "/")
	WaitDone(t, inst)
	if err := inst.Err(); err == nil {
		t.Error("Err() after a crash = nil")
	}
	if err := inst.Stop(time.Second); err != nil {
		t.Errorf("Stop after a crash = %v", err)
	}
	if err := inst.Err(); err == nil {
		t.Error("Err() after a crash and then Stop = nil; Stop must not hide the crash")
	}
}

func testStop(t *testing.T, newRunner Factory) {
	inst := Start(t, newRunner(t, Config{}), Spec())
	Ready(t, inst)
	if err := inst.Stop(Wait); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	select {
	case <-inst.Done():
	default:
		t.Fatal("Done not closed when Stop returned")
	}
	if err := inst.Err(); err != nil {
		t.Errorf("Err() after Stop = %v, want nil", err)
	}
	if err := inst.Stop(Wait); err != nil {
		t.Errorf("second Stop = %v", err)
	}
}

func testStopKills(t *testing.T, newRunner Factory) {
	const grace = time.Second
	inst := Start(t, newRunner(t, Config{StopGrace: Wait, Env: []string{testservice.EnvIgnoreSIGTERM + "=1"}}), Spec())
	Ready(t, inst)
	start := time.Now()
	stopped := make(chan error, 1)
	go func() { stopped <- inst.Stop(grace) }()
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("Stop: %v", err)
		}
	case <-time.After(Wait):
		t.Fatalf("Stop(%v) of an instance ignoring SIGTERM did not return within %v", grace, Wait)
	}
	if took := time.Since(start); took < grace {
		t.Errorf("Stop returned after %v, before the grace period %v", took, grace)
	}
	select {
	case <-inst.Done():
	default:
		t.Fatal("Done not closed when Stop returned")
	}
	if err := inst.Err(); err != nil {
		t.Errorf("Err() after Stop = %v, want nil", err)
	}
}

func testStopBeforeReady(t *testing.T, newRunner Factory) {
	inst := Start(t, newRunner(t, Config{Env: []string{testservice.EnvStartupDelay + "=1h"}}), Spec())
	if err := inst.Stop(Wait); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
	if err := inst.Ready(ctx); err == nil || ctx.Err() != nil {
		t.Errorf("Ready after Stop = %v (ctx %v), want an error at once", err, ctx.Err())
	}
	if err := inst.Err(); err != nil {
		t.Errorf("Err() after Stop = %v, want nil", err)
	}
}

func testCPUTime(t *testing.T, newRunner Factory) {
	const burn = 500 * time.Millisecond
	inst := Start(t, newRunner(t, Config{}), Spec())
	Ready(t, inst)
	before, ok := inst.CPUTime()
	if !ok {
		t.Skip("the runner cannot measure CPU time here")
	}
	if code, _ := Get(t, inst, "/?cpu="+burn.String()); code != http.StatusOK {
		t.Fatalf("GET /?cpu=%v = %d", burn, code)
	}
	after, ok := inst.CPUTime()
	if !ok {
		t.Fatal("CPUTime() not measurable after it was")
	}
	// The service burns exactly burn of thread CPU time; allow for the
	// 10 ms granularity of /proc.
	if grown := after - before; grown < burn-50*time.Millisecond {
		t.Errorf("CPUTime grew by %v over a request burning %v (from %v to %v)", grown, burn, before, after)
	}
	if err := inst.Stop(Wait); err != nil {
		t.Fatal(err)
	}
	if final, ok := inst.CPUTime(); ok && final < after {
		t.Errorf("CPUTime after Stop = %v, less than %v before", final, after)
	}
}

func testConcurrent(t *testing.T, newRunner Factory) {
	r := newRunner(t, Config{})
	const n = 4
	insts := make([]runner.Instance, n)
	var wg sync.WaitGroup
	for k := range insts {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), Wait)
			defer cancel()
			inst, err := r.Start(ctx, Spec())
			if err != nil {
				t.Errorf("Start: %v", err)
				return
			}
			insts[k] = inst
		})
	}
	wg.Wait()
	addrs := map[string]bool{}
	for _, inst := range insts {
		if inst == nil {
			t.FailNow()
		}
		t.Cleanup(func() { _ = inst.Stop(time.Second) })
		if addrs[inst.Addr()] {
			t.Errorf("two instances share %s", inst.Addr())
		}
		addrs[inst.Addr()] = true
	}
	for _, inst := range insts {
		Ready(t, inst)
		if code, _ := Get(t, inst, "/"); code != http.StatusOK {
			t.Errorf("GET / on %s = %d", inst.Addr(), code)
		}
	}
	for _, inst := range insts {
		wg.Go(func() {
			if err := inst.Stop(Wait); err != nil {
				t.Errorf("Stop: %v", err)
			}
		})
	}
	wg.Wait()
}
