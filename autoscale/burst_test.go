package autoscale

import (
	"testing"
	"time"
)

// burstEngine returns an engine with one ready instance of 4 slots (max 5
// instances, expected cold start 2 s) that has served n requests of d each,
// the last finishing at sec(1).
func burstEngine(t *testing.T, n int, d time.Duration) (*Engine, InstanceID) {
	t.Helper()
	e := newEngine(t, Config{MaxConcurrency: 4, MaxInstances: 5})
	id := readyInstances(t, e, sec(0), 1)[0]
	e.rec.Count = 1
	for range n {
		r := e.Route(sec(1).Add(-d))
		if _, err := e.RequestDone(sec(1), r.Request); err != nil {
			t.Fatal(err)
		}
	}
	return e, id
}

// TestLongBurstStartsInstancesOnDemand is the burst of the autoscale
// example: 20 requests of 5 s at once on one ready instance of 4 slots,
// when the only request seen took 1 ms. The first 4 are served; with
// nothing yet to say the others are long, the rest queue on the busy
// instance (a slot is expected in about 1 ms). Once the requests in flight
// have run longer than the mean (the instance has gone a second, then
// two, without a slot freeing), no slot is expected before a cold start:
// at the Tick of 2 s for all but the oldest, at 3 s for that one, the queued requests move to instances started on demand, up to
// max instances, and run when those are ready (at 4 s), not when the 5-second
// requests free their slots (6 s, 11 s, …) or at the 10-second pending
// wait.
func TestLongBurstStartsInstancesOnDemand(t *testing.T) {
	e, id := burstEngine(t, 1, time.Millisecond)
	var served, queued []RequestID
	for range 20 {
		r := e.Route(sec(1))
		switch {
		case r.Outcome == Served && r.Instance == id:
			served = append(served, r.Request)
		case r.Outcome == Queued && r.Instance == id && !r.Started:
			queued = append(queued, r.Request)
		default:
			t.Fatalf("burst request: %+v", r)
		}
	}
	if len(served) != 4 || len(queued) != 16 {
		t.Fatalf("%d served, %d queued; want 4 and 16", len(served), len(queued))
	}
	var started []InstanceID
	for s := 2.0; s <= 4; s++ {
		d := e.Tick(sec(s))
		started = append(started, d.Started...)
		if len(d.Rejected)+len(d.Dispatched) != 0 {
			t.Fatalf("tick at %vs: %+v", s, d.Events)
		}
		checkInvariants(t, e)
	}
	// 16 requests, 4 per starting instance: 4 instances, the max of 5.
	if len(started) != 4 {
		t.Fatalf("started %v, want 4 instances on demand", started)
	}
	if info, _ := e.Instance(id); info.Queued != 0 {
		t.Fatalf("busy instance %+v, want nothing still queued on it", info)
	}
	for _, s := range started {
		if info, _ := e.Instance(s); info.Queued != 4 {
			t.Fatalf("started %+v, want 4 queued", info)
		}
	}
	dispatched := 0
	for _, s := range started {
		ev, err := e.InstanceReady(sec(4), s)
		if err != nil {
			t.Fatal(err)
		}
		dispatched += len(ev.Dispatched)
	}
	if dispatched != 16 || e.Stats().Pending != 0 {
		t.Fatalf("at 4 s %d dispatched, %+v; want all 16 running", dispatched, e.Stats())
	}
	checkInvariants(t, e)
}

// TestRouteJudgesABusyInstanceByHowLongItHasBeenFull: a request arriving
// at an instance that has been full for 3 s without a slot freeing, when
// the mean seen is 1 ms, is not expected to get a slot within a cold start
// (2 s): it gets a new instance. One arriving after 0.5 s is queued.
func TestRouteJudgesABusyInstanceByHowLongItHasBeenFull(t *testing.T) {
	e, id := burstEngine(t, 1, time.Millisecond)
	for range 4 {
		e.Route(sec(1))
	}
	if r := e.Route(sec(1.5)); r.Outcome != Queued || r.Instance != id || r.Started {
		t.Fatalf("at 1.5 s: %+v, want queued on the busy instance %d", r, id)
	}
	r := e.Route(sec(4))
	if r.Outcome != Queued || !r.Started {
		t.Fatalf("at 4 s: %+v, want a new instance started on demand", r)
	}
	checkInvariants(t, e)
}

// TestShortBurstQueuesOnTheBusyInstance: the same burst when requests are
// known to take 10 ms queues on the busy instance (16 queued free in about
// 50 ms, far sooner than a cold start) and starts no instance.
func TestShortBurstQueuesOnTheBusyInstance(t *testing.T) {
	e, id := burstEngine(t, 100, 10*time.Millisecond)
	running := map[RequestID]bool{}
	for range 20 {
		r := e.Route(sec(1))
		if r.Instance != id || r.Started {
			t.Fatalf("burst request: %+v, want it on %d", r, id)
		}
		if r.Outcome == Served {
			running[r.Request] = true
		}
	}
	now := sec(1)
	for len(running) > 0 {
		now = now.Add(10 * time.Millisecond)
		for rid := range running {
			ev, err := e.RequestDone(now, rid)
			if err != nil {
				t.Fatal(err)
			}
			delete(running, rid)
			for _, d := range ev.Dispatched {
				running[d.Request] = true
			}
		}
	}
	if now.After(sec(1.1)) {
		t.Fatalf("burst done at %v, want by 1.1 s", now.Sub(t0))
	}
	if d := e.Tick(sec(2)); len(d.Started) != 0 || e.Stats().Starting != 0 {
		t.Fatalf("tick: %+v, want no instance started", d.Events)
	}
	checkInvariants(t, e)
}

// TestExpectedWait checks the estimate against its formula: with mean S
// = 100 ms over 4 slots and the instance full for F, a slot every
// max(S / 4, F).
func TestExpectedWait(t *testing.T) {
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	for _, c := range []struct {
		full float64 // ms
		q    int
		want time.Duration
	}{
		{0, 0, ms(25)},    // just filled: the fluid S / ACT
		{10, 0, ms(25)},   // full for less than S / ACT: still the fluid rate
		{10, 3, ms(100)},  // a whole round of 4 slots
		{300, 0, ms(300)}, // no slot freed for 300 ms: 300 ms more
		{300, 2, ms(900)}, // and as long for each next slot
	} {
		e := newEngine(t, Config{MaxConcurrency: 4})
		id := readyInstances(t, e, sec(0), 1)[0]
		e.rec.Count = 1
		r := e.Route(sec(0))
		e.RequestDone(sec(0.1), r.Request) // S = 100 ms
		for range 4 {
			e.Route(sec(1))
		}
		e.clock(sec(1).Add(ms(c.full)))
		if got := e.expectedWait(e.instances[id], c.q); got != c.want {
			t.Errorf("full %v ms, %d queued: wait %v, want %v", c.full, c.q, got, c.want)
		}
	}
}
