package process_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/pool"
	"github.com/tollgate/tollgate/pool/pooltest"
	"github.com/tollgate/tollgate/pool/process"
)

// skipUnenforced skips t where the runner said it cannot enforce limits
// (neither cgroup v2 nor v1 writable), except under CI=true, where this
// machine's cgroups are part of what CI checks.
func skipUnenforced(t *testing.T, log string) {
	t.Helper()
	if !strings.Contains(log, "cpus and memory are not enforced") {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true and the runner cannot enforce limits: %s", strings.TrimSpace(log))
	}
	t.Skipf("this machine cannot enforce cgroup limits (the runner said so): %s", strings.TrimSpace(log))
}

// TestCPULimit runs a busy loop of 3 s of CPU time in an instance limited
// to 0.5 CPUs: under cpu.max (v2) or cpu.cfs_quota_us (v1) it needs at
// least 6 s of wall time (asserted as 5 s), and the instance's measured
// utilisation stays at or under its 0.5 CPUs. Where the limit cannot be
// enforced the runner must say so once in the log, and the test skips.
func TestCPULimit(t *testing.T) {
	t.Parallel() // its own runner and instances
	log, buf := testLogger(t)
	r := newRunner(t, process.Options{Logger: log, CPUs: 0.5})
	skipUnenforced(t, buf.String())
	inst := pooltest.Start(t, r, pool.InstanceSpec{Service: "capped", Revision: "capped-00001", ID: "capped-1"})
	pooltest.Ready(t, inst)
	cpu0, ok := inst.CPUTime()
	if !ok {
		t.Fatal("no CPU time")
	}
	start := time.Now()
	pooltest.Get(t, inst, "/?cpu=3s")
	wall := time.Since(start)
	cpu1, _ := inst.CPUTime()
	if wall < 5*time.Second {
		t.Fatalf("3 s of CPU at 0.5 CPUs took %v of wall time: not limited", wall)
	}
	if util := float64(cpu1-cpu0) / float64(wall) / 0.5; util > 1.05 {
		t.Fatalf("utilisation %.0f %% of 0.5 CPUs", util*100)
	}
}

// TestCPULimitSupervised is TestCPULimit with the instance supervisor (as
// tollgate serve runs instances), fresh and on a warm spare, which is
// forked before the instance it takes: the spare's cgroup must carry the
// limit too. The two burn at once, each in its own cgroup (another busy
// instance only makes a limited one slower, never faster).
func TestCPULimitSupervised(t *testing.T) {
	t.Parallel() // its own runner and instances
	log, buf := testLogger(t)
	r := newRunner(t, process.Options{Logger: log, CPUs: 0.5, Supervisor: supervisor(t)})
	skipUnenforced(t, buf.String())
	fresh := pooltest.Start(t, r, pool.InstanceSpec{Service: "capped", Revision: "capped-00001", ID: "fresh"})
	walls := make(chan string, 2)
	for name, inst := range map[string]pool.Instance{"fresh": fresh, "on a spare": startOnSpare(t, r)} {
		pooltest.Ready(t, inst)
		go func() { // pooltest.Get would call t.Fatal off the test's goroutine
			start := time.Now()
			resp, err := http.Get("http://" + inst.Addr() + "/?cpu=2s")
			if err != nil {
				state := "still running"
				select {
				case <-inst.Done():
					state = fmt.Sprintf("exited: %v", inst.Err())
				case <-time.After(2 * time.Second):
				}
				walls <- fmt.Sprintf("%s: GET: %v (the instance %s)\nrunner log:\n%s", name, err, state, buf.String())
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if wall := time.Since(start); wall < 3500*time.Millisecond {
				walls <- fmt.Sprintf("%s: 2 s of CPU at 0.5 CPUs took %v of wall time: not limited", name, wall)
				return
			}
			walls <- ""
		}()
	}
	for range 2 {
		if msg := <-walls; msg != "" {
			t.Error(msg)
		}
	}
}

// TestMemoryLimitOOMKills: an instance limited to 64 MiB that allocates
// 256 MiB is killed by the kernel's OOM killer, and its exit says so
// (pool.ErrOOMKilled, which the pool logs and counts as oom_killed).
func TestMemoryLimitOOMKills(t *testing.T) {
	log, buf := testLogger(t)
	r := newRunner(t, process.Options{Logger: log, Memory: 64 << 20})
	skipUnenforced(t, buf.String())
	inst := pooltest.Start(t, r, pool.InstanceSpec{Service: "small", Revision: "small-00001", ID: "small-1"})
	pooltest.Ready(t, inst)
	if code, body := pooltest.Get(t, inst, "/alloc?mib=16"); code != 200 {
		t.Fatalf("16 MiB under a 64 MiB limit: %d %q", code, body)
	}
	resp, err := http.Get("http://" + inst.Addr() + "/alloc?mib=256")
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("256 MiB under a 64 MiB limit answered %d %q", resp.StatusCode, b)
	}
	select {
	case <-inst.Done():
	case <-time.After(pooltest.Wait):
		t.Fatal("the instance did not exit after going over its memory limit")
	}
	if err := inst.Err(); !errors.Is(err, pool.ErrOOMKilled) {
		t.Fatalf("exit %v, want one wrapping pool.ErrOOMKilled", err)
	}
}

// TestUnenforceableLimitsAreSaidOnce: a runner that cannot put instances
// in a cgroup of their own (NoCgroup here, no cgroup v2 elsewhere) says
// once that cpus and memory are not enforced, and instances still run.
func TestUnenforceableLimitsAreSaidOnce(t *testing.T) {
	log, buf := testLogger(t)
	r := newRunner(t, process.Options{Logger: log, CPUs: 0.5, Memory: 64 << 20, NoCgroup: true})
	for i := range 2 {
		inst := pooltest.Start(t, r, pool.InstanceSpec{Service: "free", Revision: "free-00001", ID: "free-" + string(rune('a'+i))})
		pooltest.Ready(t, inst)
		pooltest.Get(t, inst, "/")
		if err := inst.Stop(pooltest.Wait); err != nil {
			t.Fatal(err)
		}
	}
	if n := strings.Count(buf.String(), "cpus and memory are not enforced"); n != 1 {
		t.Fatalf("said %d times, want once:\n%s", n, buf.String())
	}
}
