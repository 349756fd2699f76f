package autoscale

import (
	"testing"
	"time"
)

// TestSlowFirstStartStartsOneInstance: a request from zero on a service
// whose instances take 45 s to start, with no cold start measured yet. The
// instance starting for t seconds shows the cold start is at least t, so
// the pending wait (3.5 × that) never runs out while it is on its way: no
// hedge instance every 10 s (four started in 40 s before), no 429 at max
// instances, and the request runs once it is ready.
func TestSlowFirstStartStartsOneInstance(t *testing.T) {
	for _, maxInst := range []int{100, 3} {
		e := newEngine(t, Config{MaxInstances: maxInst})
		e.Tick(sec(0))
		res := e.Route(sec(0.5))
		if res.Outcome != Queued || !res.Started {
			t.Fatalf("max %d: first request %+v, want queued on a new instance", maxInst, res)
		}
		for k := 1; k <= 45; k++ {
			d := e.Tick(sec(float64(k)))
			if len(d.Started) > 0 || len(d.Rejected) > 0 {
				t.Fatalf("max %d: second %d: started %v, rejected %v while the first instance is starting (expected cold start %v)",
					maxInst, k, d.Started, d.Rejected, e.ExpectedColdStart())
			}
		}
		if got := e.ExpectedColdStart(); got != sec(45).Sub(sec(0.5)) {
			t.Fatalf("max %d: expected cold start %v after 44.5 s starting", maxInst, got)
		}
		ev, err := e.InstanceReady(sec(45.5), res.Instance)
		if err != nil {
			t.Fatal(err)
		}
		if len(ev.Dispatched) != 1 || ev.Dispatched[0].Request != res.Request {
			t.Fatalf("max %d: ready: dispatched %v", maxInst, ev.Dispatched)
		}
		if st := e.Stats(); st.Ready != 1 || st.Starting != 0 {
			t.Fatalf("max %d: %+v, want one instance", maxInst, st)
		}
	}
}

// TestBackgroundCPUDoesNotFlapTheCountToZero: an idle instance whose own
// background CPU comes and goes (5 % one second, nothing the next) kept the
// CPU driver alternating between 1 and 0, and the recommended count with
// it. Zero is decided by requests only: the count stays 1 until the idle
// timeout, then drops to 0 with Idle set.
func TestBackgroundCPUDoesNotFlapTheCountToZero(t *testing.T) {
	e := newEngine(t, Config{IdleTimeout: 5 * time.Minute})
	r := e.Route(sec(0))
	e.InstanceReady(sec(1), r.Instance)
	e.RequestDone(sec(2), r.Request)
	for s := 3; s < 302; s++ {
		cpu := 0.0
		if s%40 < 20 {
			cpu = 0.05
		}
		e.Observe(sec(float64(s)), r.Instance, cpu, 0)
		if d := e.Tick(sec(float64(s) + 0.5)); d.Count != 1 || d.Idle {
			t.Fatalf("second %d (cpu %v): count %d idle %v, want 1 until the idle timeout", s, cpu, d.Count, d.Idle)
		}
	}
	d := e.Tick(sec(302.5))
	if d.Count != 0 || !d.Idle || len(d.Stopped) != 1 {
		t.Fatalf("after the idle timeout: %+v", d)
	}
}

// TestIdleTimeoutToMinInstancesIsIdle: the drop to min instances at the
// idle timeout says so (it was logged as a bound).
func TestIdleTimeoutToMinInstancesIsIdle(t *testing.T) {
	e := newEngine(t, Config{MinInstances: 1, IdleTimeout: time.Minute})
	ids := readyInstances(t, e, sec(0), 3)
	for s := 0; s < 60; s++ {
		for _, id := range ids {
			e.Observe(sec(float64(s)), id, 0.6, 0) // CPU asks for 3
		}
		if d := e.Tick(sec(float64(s))); d.Idle {
			t.Fatalf("second %d: idle before the timeout", s)
		}
	}
	d := e.Tick(sec(60))
	if d.Count != 1 || !d.Idle {
		t.Fatalf("at the idle timeout: %+v, want min instances 1 with Idle", d)
	}
}
