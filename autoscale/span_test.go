package autoscale

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// TestJitteredTicksReadAConstantLoad: two instances hold a constant
// concurrency of 4 and 2 (0.3 and 0.1 cores) for 12 minutes, measured and
// ticked on a fake clock that advances 1 s ± up to 900 ms per tick, as a
// loaded pool's ticker runs late. Each measurement covers the time since
// the previous one. The averages must read 6 requests and 0.4 cores at
// every tick: put into one second per sample they read 4.7 to 5.2.
func TestJitteredTicksReadAConstantLoad(t *testing.T) {
	e := newEngine(t, Config{MaxConcurrency: 10, MaxInstances: 10})
	ids := readyInstances(t, e, sec(0), 2)
	e.Route(sec(0)) // a request in flight: the service is not idle
	conc := []float64{4, 2}
	cpu := []float64{0.3, 0.1}
	rng := rand.New(rand.NewPCG(29, 3))
	const tol = 0.01
	prev := sec(0)
	worst := 0.0
	for k := 0; prev.Before(sec(720)); k++ {
		jitter := time.Duration((rng.Float64()*2 - 1) * float64(900*time.Millisecond))
		now := prev.Add(time.Second + jitter)
		for i, id := range ids {
			if err := e.ObserveSpan(prev, now, id, cpu[i], conc[i]); err != nil {
				t.Fatalf("tick %d at %v: %v", k, now.Sub(t0), err)
			}
		}
		prev = now
		m := e.Metrics(now)
		e.Tick(now)
		if e.nowSec < 1 {
			continue // no complete second yet
		}
		for _, got := range []float64{m.Concurrency6s, m.Concurrency1m, m.Concurrency10m} {
			worst = max(worst, math.Abs(got-6))
		}
		if math.Abs(m.Concurrency1m-6) > tol || math.Abs(m.Concurrency10m-6) > tol || math.Abs(m.Concurrency6s-6) > tol ||
			math.Abs(m.CPU1m-0.4) > tol || math.Abs(m.CPU10m-0.4) > tol {
			t.Fatalf("tick %d at %v (jitter %v): concurrency 6 s %.4f, 1 min %.4f, 10 min %.4f, CPU 1 min %.4f, 10 min %.4f; want 6 and 0.4",
				k, now.Sub(t0), jitter, m.Concurrency6s, m.Concurrency1m, m.Concurrency10m, m.CPU1m, m.CPU10m)
		}
	}
	t.Logf("largest error of the concurrency averages: %.4f", worst)
}

// TestObserveSpanSplitsBySecond: a 1.5 s span from 0.75 s puts a quarter
// of a second's usage in second 0, a whole one in second 1 and a quarter
// in second 2; a span overlapping the previous one counts only its new
// part; an empty one records nothing; a backwards one is invalid.
func TestObserveSpanSplitsBySecond(t *testing.T) {
	e := newEngine(t, Config{})
	id := readyInstances(t, e, sec(0), 1)[0]
	if err := e.ObserveSpan(sec(0.75), sec(2.25), id, 2, 4); err != nil {
		t.Fatal(err)
	}
	w := e.instances[id].win
	for s, want := range map[int64]pair{0: {500, 1000}, 1: {2000, 4000}, 2: {500, 1000}} {
		if got := w.buf[w.slot(s)]; got != want {
			t.Errorf("second %d holds %+v, want %+v", s, got, want)
		}
	}
	// [2, 3): only [2.25, 3) is new.
	if err := e.ObserveSpan(sec(2), sec(3), id, 2, 4); err != nil {
		t.Fatal(err)
	}
	if got, want := w.buf[w.slot(2)], (pair{2000, 4000}); got != want {
		t.Errorf("second 2 after the overlapping span holds %+v, want %+v", got, want)
	}
	if err := e.ObserveSpan(sec(3), sec(3), id, 2, 4); err != nil {
		t.Fatalf("empty span: %v", err)
	}
	if err := e.ObserveSpan(sec(4), sec(3.5), id, 2, 4); !errors.Is(err, ErrInvalidSample) {
		t.Fatalf("backwards span: %v, want ErrInvalidSample", err)
	}
	if err := e.ObserveSpan(sec(3), sec(4), 99, 2, 4); !errors.Is(err, ErrUnknownInstance) {
		t.Fatalf("unknown instance: %v, want ErrUnknownInstance", err)
	}
	// At 5.1 s the averages end at second 4; no span covers seconds 3
	// and 4, which read as no usage: over seconds 0 … 4 the instance
	// averaged (1 + 4 + 4 + 0 + 0) / 5 requests.
	if m := e.Metrics(sec(5.1)); math.Abs(m.Concurrency1m-9.0/5) > 1e-9 {
		t.Fatalf("1 min concurrency %v, want %v", m.Concurrency1m, 9.0/5)
	}
	e.Tick(sec(700))
	if err := e.ObserveSpan(sec(3), sec(50), id, 1, 1); !errors.Is(err, ErrStaleSample) {
		t.Fatalf("span 650 s old: %v, want ErrStaleSample", err)
	}
}
