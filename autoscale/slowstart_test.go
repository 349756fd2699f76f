package autoscale

import "testing"

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
