package autoscale

import (
	"errors"
	"math"
	"testing"
	"time"
	"unsafe"
)

func TestObserveRejectsTimesFarFromTheEngine(t *testing.T) {
	e := newEngine(t, Config{})
	id := readyInstances(t, e, sec(0), 1)[0]
	for _, at := range []time.Time{time.Unix(-1<<62, 0), time.Unix(1<<62, 0)} {
		if err := e.Observe(at, id, 1, 1); !errors.Is(err, ErrInvalidSample) {
			t.Fatalf("Observe at %v: %v, want ErrInvalidSample", at, err)
		}
	}
	if err := e.Observe(sec(1), id, 0.5, 2); err != nil {
		t.Fatal(err)
	}
	m := e.Metrics(sec(1))
	if !m.Now.Equal(sec(1)) || m.CPU1m != 0.5 || m.Concurrency1m != 2 {
		t.Fatalf("after rejected far samples: now %v, CPU1m %v, conc1m %v; want %v, 0.5, 2", m.Now, m.CPU1m, m.Concurrency1m, sec(1))
	}
}

func TestEngineSecondsCountFromItsFirstCall(t *testing.T) {
	e := newEngine(t, Config{})
	id := readyInstances(t, e, sec(0.5), 1)[0] // engine second 0 is [0.5 s, 1.5 s)
	if err := e.Observe(sec(0.9), id, 1, 1); err != nil {
		t.Fatal(err)
	}
	if err := e.Observe(sec(1.2), id, 3, 1); err != nil { // same engine second: replaces
		t.Fatal(err)
	}
	if m := e.Metrics(sec(1.2)); m.CPU1m != 3 {
		t.Fatalf("CPU1m = %v, want 3 (one engine second holding the later sample)", m.CPU1m)
	}
}

// stepWall returns t with its wall clock moved by d and its monotonic clock
// reading unchanged: what time.Now returns after the system clock is
// stepped. The time package offers no way to build such a value, so this
// edits the wall field of a time.Time that carries a monotonic reading (the
// layout of go1.26: bit 63 has-monotonic, bits 62–30 seconds since 1885,
// bits 29–0 nanoseconds). It fails tb if the result is not what it should
// be, so a change of layout shows up here.
func stepWall(tb testing.TB, t time.Time, d time.Duration) time.Time {
	tb.Helper()
	if d%time.Second != 0 {
		tb.Fatalf("stepWall by %v: whole seconds only", d)
	}
	s := t
	wall := (*uint64)(unsafe.Pointer(&s))
	if *wall&(1<<63) == 0 {
		tb.Fatal("stepWall: time has no monotonic reading")
	}
	*wall = uint64(int64(*wall) + int64(d/time.Second)<<30)
	if s.Sub(t) != 0 || s.Round(0).Sub(t.Round(0)) != d {
		tb.Fatalf("stepWall: monotonic difference %v, wall difference %v; want 0 and %v", s.Sub(t), s.Round(0).Sub(t.Round(0)), d)
	}
	return s
}

// TestEngineWindowsFollowTheMonotonicClock: the wall clock steps back 20
// minutes while the monotonic clock runs on. Samples must stay fresh, the
// metrics must keep their value, and no instance may be stopped for it.
func TestEngineWindowsFollowTheMonotonicClock(t *testing.T) {
	base := time.Now() // carries a monotonic reading
	at := func(s int) time.Time { return base.Add(time.Duration(s) * time.Second) }
	e := newEngine(t, Config{MaxInstances: 10})
	ids := readyInstances(t, e, at(0), 4)
	e.rec.Count = 4
	e.Route(at(0)) // a request in flight: the service is not idle
	const cpu = 0.6
	for s := 0; s < 200; s++ {
		now := at(s)
		if s >= 100 {
			now = stepWall(t, now, -20*time.Minute)
		}
		for _, id := range ids {
			if err := e.Observe(now, id, cpu, 1); err != nil {
				t.Fatalf("second %d (wall clock stepped back: %v): %v", s, s >= 100, err)
			}
		}
		d := e.Tick(now)
		if len(d.Stopped)+len(d.Draining) > 0 || d.Count != 4 {
			t.Fatalf("second %d: %+v", s, d)
		}
		if m := e.Metrics(now); math.Abs(m.CPU1m-4*cpu) > 1e-9 {
			t.Fatalf("second %d: CPU1m = %v, want %v", s, m.CPU1m, 4*cpu)
		}
	}
}

// TestObserveStaleForTheServiceWindow: the instance's own window lags (its
// last sample is old) while the service window has moved on with Tick. A
// sample 650 s old must be rejected, not half-recorded.
func TestObserveStaleForTheServiceWindow(t *testing.T) {
	e := newEngine(t, Config{MinInstances: 1})
	id := readyInstances(t, e, sec(0), 1)[0]
	if err := e.Observe(sec(0), id, 1, 1); err != nil {
		t.Fatal(err)
	}
	e.Tick(sec(750))
	if err := e.Observe(sec(100), id, 2, 2); !errors.Is(err, ErrStaleSample) {
		t.Fatalf("sample 650 s old: %v, want ErrStaleSample", err)
	}
	if cpu, _ := e.instances[id].win.average(1, 750); cpu != 0 {
		t.Fatalf("instance 10-min CPU = %v after a rejected sample, want 0", cpu)
	}
	// 599 s old is still inside both 10-minute windows.
	if err := e.Observe(sec(151), id, 6, 6); err != nil {
		t.Fatalf("sample 599 s old: %v", err)
	}
	m := e.Metrics(sec(750))
	if cpu, _ := e.instances[id].win.average(1, 750); cpu != m.CPU10m || cpu != 6.0/600 {
		t.Fatalf("10-min CPU: instance %v, service %v; want both %v", cpu, m.CPU10m, 6.0/600)
	}
}
