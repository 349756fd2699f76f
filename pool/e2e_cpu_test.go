package pool_test

import (
	"context"
	"encoding/json"
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
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/autoscale"
	"github.com/tollgate/tollgate/internal/logtest"
	"github.com/tollgate/tollgate/pool"
)

// processCPU returns the user+system CPU time process pid has used, read
// from /proc/pid/stat independently of the pool's own measuring.
func processCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 { // fields 14 and 15 (utime, stime) are f[11], f[12]
		return 0, false
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	const clkTck = 100 // USER_HZ on Linux
	return time.Duration(u+st) * time.Second / clkTck, true
}

// TestProcessCPUDriverWins paces a CPU-heavy load (10 requests/s, each
// burning 10 ms of the instance's CPU: 0.1 cores whatever the machine's
// load, as the burn counts thread CPU time) at instances of 0.05 CPUs
// with max concurrency 80. The concurrency driver asks for 1 instance;
// the CPU driver asks ceil((CPU / 0.05) / 0.6). The test measures the
// instances' CPU itself from /proc and checks that the pool recommends
// what the SPEC's CPU formula gives for it, within a generous range
// (the engine's window and the test's differ slightly, and the tolerance
// band may hold a count), and that the CPU driver decided.
func TestProcessCPUDriverWins(t *testing.T) {
	t.Parallel() // no turn in e2eSlots: it starts at once (see TestMain)
	const (
		cpus         = 0.05
		maxInstances = 10
		perRequest   = 10 * time.Millisecond
		interval     = 100 * time.Millisecond
		measure      = 30 * time.Second
	)
	r := testRunner(t)
	logs := &logtest.Buffer{}
	reg := prometheus.NewRegistry()
	p := pool.New(pool.Options{Logger: slog.New(slog.NewJSONHandler(logs, nil)), Registry: reg})
	if err := p.Apply([]pool.ServiceSpec{{Name: "burn", Runner: r, Engine: autoscale.Config{
		MaxConcurrency: 80, CPUsPerInstance: cpus, MinInstances: 1, MaxInstances: maxInstances,
	}}}); err != nil {
		t.Fatal(err)
	}
	runCtx, stopRun := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- p.Run(runCtx) }()
	t.Cleanup(func() { stopRun(); <-runDone })
	srv := httptest.NewServer(p.Handler("burn"))
	t.Cleanup(srv.Close)
	url := srv.URL
	waitFor(t, 60*time.Second, "min instance not ready", func() bool { return readyCount(p) == 1 })

	// CPU time per instance process: at the start of the window (or when
	// first seen) and the latest reading.
	type reading struct{ first, last time.Duration }
	cpu := map[int]*reading{}
	sampleCPU := func() {
		for _, pid := range pids(p) {
			c, ok := processCPU(pid)
			if !ok {
				continue
			}
			if rd := cpu[pid]; rd != nil {
				rd.last = max(rd.last, c)
			} else {
				cpu[pid] = &reading{first: c, last: c}
			}
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var inFlight, failures atomic.Int64
	wg.Go(func() {
		tk := time.NewTicker(interval)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
			}
			if inFlight.Load() >= 40 { // bounded: a starved instance is not buried
				continue
			}
			inFlight.Add(1)
			wg.Go(func() {
				defer inFlight.Add(-1)
				req, _ := http.NewRequestWithContext(ctx, "GET", url+"/burn?cpu="+perRequest.String(), nil)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					failures.Add(1)
				}
			})
		}
	})
	sampleCPU()
	start := time.Now()
	for time.Since(start) < measure {
		time.Sleep(500 * time.Millisecond)
		sampleCPU()
	}
	elapsed := time.Since(start)
	st := p.Status()[0]
	sampleCPU()
	cancel()
	wg.Wait()
	if n := failures.Load(); n > 0 {
		t.Errorf("%d requests failed", n)
	}

	var used time.Duration
	for _, rd := range cpu {
		used += rd.last - rd.first
	}
	cores := used.Seconds() / elapsed.Seconds()
	want := min(int(math.Ceil(cores/cpus/autoscale.DefaultCPUTarget)), maxInstances)
	lo, hi := max(2, int(math.Floor(0.6*float64(want)))), min(maxInstances, int(math.Ceil(1.5*float64(want)))+1)
	t.Logf("measured %.3f cores over %v on %d processes: the CPU formula gives %d; pool recommends %d (%s)",
		cores, elapsed.Round(time.Second), len(cpu), want, st.Recommended, st.Driver)
	if st.Driver != "cpu" {
		t.Errorf("driver %q, want cpu: the concurrency driver asks for 1 instance, the CPU driver for %d", st.Driver, want)
	}
	if st.Recommended < lo || st.Recommended > hi {
		t.Errorf("recommended %d instances for %.3f cores at %v CPUs each and target %v: want %d (accepting %d–%d)",
			st.Recommended, cores, cpus, autoscale.DefaultCPUTarget, want, lo, hi)
	}

	// One log line per scale change: from → to, the driver and the
	// metric values that decided it, consistent with the formula.
	var ups int
	for _, line := range strings.Split(logs.String(), "\n") {
		var rec struct {
			Msg      string   `json:"msg"`
			From     *int     `json:"from"`
			To       *int     `json:"to"`
			Driver   string   `json:"driver"`
			Reason   string   `json:"reason"`
			CPU1m    *float64 `json:"cpu_1m"`
			NeedCPU  *float64 `json:"need_cpu"`
			NeedConc *float64 `json:"need_concurrency"`
		}
		if json.Unmarshal([]byte(line), &rec) != nil || rec.Msg != "scale" {
			continue
		}
		if rec.From == nil || rec.To == nil || rec.CPU1m == nil || rec.NeedCPU == nil || rec.NeedConc == nil {
			t.Errorf("scale log line without from, to or metric values: %s", line)
			continue
		}
		if rec.Driver != "cpu" || *rec.To <= *rec.From {
			continue
		}
		ups++
		if rec.Reason != "metrics" {
			t.Errorf("scale line: reason %q, want metrics: %s", rec.Reason, line)
		}
		// Both are logged rounded to 3 decimals.
		if got := *rec.CPU1m / cpus / autoscale.DefaultCPUTarget; math.Abs(got-*rec.NeedCPU) > 0.0005/cpus/autoscale.DefaultCPUTarget+0.001 {
			t.Errorf("scale line: need_cpu %v, but cpu_1m %v gives %.3f: %s", *rec.NeedCPU, *rec.CPU1m, got, line)
		}
		if *rec.To != min(maxInstances, int(math.Ceil(*rec.NeedCPU-1e-9))) {
			t.Errorf("scale line: to %d, but need_cpu %v rounds up to %d: %s", *rec.To, *rec.NeedCPU, int(math.Ceil(*rec.NeedCPU)), line)
		}
	}
	if ups == 0 {
		t.Errorf("no scale log line going up with driver cpu; log:\n%s", logs.String())
	}

	// Deliver 5's metrics, per service and per instance.
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, mf := range mfs {
		have[mf.GetName()] = true
		if mf.GetName() == "tollgate_pool_scaling_driver" {
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "driver" && l.GetValue() == "cpu" && m.GetGauge().GetValue() != 1 {
						t.Errorf("tollgate_pool_scaling_driver{driver=cpu} = %v, want 1", m.GetGauge().GetValue())
					}
				}
			}
		}
	}
	for _, name := range []string{
		"tollgate_pool_instances", "tollgate_pool_recommended_instances", "tollgate_pool_scaling_driver",
		"tollgate_pool_pending_requests", "tollgate_pool_rejected_total", "tollgate_pool_cold_start_seconds",
		"tollgate_pool_pending_wait_seconds", "tollgate_pool_instance_concurrency", "tollgate_pool_instance_cpu_cores",
	} {
		if !have[name] {
			t.Errorf("metric %s not exported", name)
		}
	}
	if v := metricValue(t, reg, "tollgate_pool_instance_cpu_cores"); v <= 0 {
		t.Errorf("tollgate_pool_instance_cpu_cores sums to %v under a CPU-burning load", v)
	}
}

// TestProcessSurplusInstanceStopsUnderLoad: 6 concurrent clients on max
// concurrency 4 bring 3 instances (ceil((6 / 4) / 0.6)); when 5 of them
// stop, the recommendation falls and the instance no longer recommended
// is stopped by the surplus rule (its surplus window under 10 %
// utilisation: 15 s here, Cloud Run's minute by default; the engine's
// tests hold the minute on a fake clock) while the remaining client keeps
// being served. The idle timeout is 10 minutes, so it is the surplus
// rule, not idleness, that stops it.
func TestProcessSurplusInstanceStopsUnderLoad(t *testing.T) {
	t.Parallel() // no turn in e2eSlots: it starts at once (see TestMain)
	r := testRunner(t)
	p, url, _ := startPool(t, pool.ServiceSpec{Name: "surplus", Runner: r, Engine: autoscale.Config{
		MaxConcurrency: 4, MaxInstances: 6, IdleTimeout: 10 * time.Minute, SurplusWindow: 15 * time.Second,
	}})
	var failures atomic.Int64
	client := func(ctx context.Context) {
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
	}
	var wg sync.WaitGroup
	burst, stopBurst := context.WithCancel(context.Background())
	steady, stopSteady := context.WithCancel(context.Background())
	defer func() { stopBurst(); stopSteady(); wg.Wait() }()
	wg.Go(func() { client(steady) })
	for range 5 {
		wg.Go(func() { client(burst) })
	}
	waitFor(t, 90*time.Second, "6 clients never brought 3 ready instances", func() bool { return readyCount(p) >= 3 })
	before := pids(p)
	stopBurst()
	t.Logf("3 ready (%v); 5 of 6 clients stopped", before)
	waitFor(t, 240*time.Second, "the surplus instance was not stopped under the remaining load", func() bool {
		return readyCount(p) < 3
	})
	st := p.Status()[0]
	if st.Recommended >= 3 {
		t.Errorf("recommended %d after the load fell to one client", st.Recommended)
	}
	if readyCount(p) < 1 {
		t.Errorf("no instance left while a client still sends requests")
	}
	gone := 0
	waitFor(t, 30*time.Second, "a stopped instance's process still runs", func() bool {
		gone = 0
		for _, pid := range before {
			if !alive(pid) {
				gone++
			}
		}
		return gone >= 1
	})
	if n := failures.Load(); n > 0 {
		t.Errorf("%d requests failed", n)
	}
}
