package autoscale

import (
	"testing"
	"time"
)

// TestRouteAfterLongRunningRequestsStillStartsInstances: 26,000 requests
// of 100 hours each sum to more ns than an int64 holds (2,600 h × 1,000
// concurrent ≈ 107 days of 1,000 requests). The mean request time must stay
// 100 h, so a request arriving at a full instance is not queued there (a
// slot would take hours to free) but gets a new instance on demand.
func TestRouteAfterLongRunningRequestsStillStartsInstances(t *testing.T) {
	const conc = 1000
	e := newEngine(t, Config{MaxConcurrency: conc, MaxInstances: 10})
	now := sec(0)
	readyInstances(t, e, now, 1)
	ids := make([]RequestID, conc)
	for range 26 {
		for i := range ids {
			r := e.Route(now)
			if r.Outcome != Served {
				t.Fatalf("request %d: %+v", i, r)
			}
			ids[i] = r.Request
		}
		now = now.Add(100 * time.Hour)
		for _, id := range ids {
			if _, err := e.RequestDone(now, id); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range conc {
		e.Route(now)
	}
	if r := e.Route(now); !r.Started || r.Outcome != Queued {
		t.Fatalf("request at a full instance after 100-hour requests: %+v; want a new instance started", r)
	}
	if _, wait := e.shortestWait(); wait <= 0 {
		t.Fatalf("expected wait at the busiest instance = %v, want positive", wait)
	}
}

// TestExpectedColdStartOfVeryLongStarts: three starts of 100 years each sum
// to more ns than an int64 holds; their mean is still 100 years.
func TestExpectedColdStartOfVeryLongStarts(t *testing.T) {
	e := newEngine(t, Config{})
	e.clock(sec(0))
	const century = 100 * 365 * 24 * time.Hour
	ins := []*instance{e.startInstance(sec(0)), e.startInstance(sec(0)), e.startInstance(sec(0))}
	for _, in := range ins {
		if _, err := e.InstanceReady(sec(0).Add(century), in.id); err != nil {
			t.Fatal(err)
		}
	}
	if got := e.ExpectedColdStart(); got != century {
		t.Fatalf("ExpectedColdStart = %v, want %v", got, century)
	}
}
