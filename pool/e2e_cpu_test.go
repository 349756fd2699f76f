package pool_test

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/autoscale"
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
	t.Parallel()
	const (
		cpus         = 0.05
		maxInstances = 10
		perRequest   = 10 * time.Millisecond
		interval     = 100 * time.Millisecond
		measure      = 30 * time.Second
	)
	r := testRunner(t)
	p, url, _ := startPool(t, pool.ServiceSpec{Name: "burn", Runner: r, Engine: autoscale.Config{
		MaxConcurrency: 80, CPUsPerInstance: cpus, MinInstances: 1, MaxInstances: maxInstances,
	}})
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
}
