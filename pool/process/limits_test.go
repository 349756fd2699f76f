package process_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/pool"
	"github.com/tollgate/tollgate/pool/pooltest"
	"github.com/tollgate/tollgate/pool/process"
)

// TestCPULimit runs a busy loop of 3 s of CPU time in an instance limited
// to 0.5 CPUs: under cpu.max it needs at least 6 s of wall time (asserted
// as 5 s), and the instance's measured utilisation stays at or under its
// 0.5 CPUs. Where the limit cannot be enforced the runner must say so once
// in the log, and the test skips.
func TestCPULimit(t *testing.T) {
	t.Parallel() // its own runner and instances
	log, buf := testLogger(t)
	r := newRunner(t, process.Options{Logger: log, CPUs: 0.5})
	if strings.Contains(buf.String(), "cpus and memory are not enforced") {
		t.Skipf("this machine cannot enforce cgroup limits (the runner said so): %s", strings.TrimSpace(buf.String()))
	}
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
