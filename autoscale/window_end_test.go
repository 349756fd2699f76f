package autoscale

import (
	"testing"
	"time"
)

// TestMetricsEndAtTheLastCompleteSecond holds 20 concurrent requests on 3
// instances (max concurrency 10) the way the pool and the simulator
// measure: each Tick observes the second that just ended, then decides, on
// a current second nothing has been observed for. The averages must read
// exactly 20 (they read 59/60 and 5/6 of it when the empty current second
// counted), and 20 / (10 × 60 %) = 3.33 needs 4 instances, outside the
// tolerance band of 3 (19.65 / 6 = 3.275 was held at 3).
func TestMetricsEndAtTheLastCompleteSecond(t *testing.T) {
	e := newEngine(t, Config{MaxConcurrency: 10, MinInstances: 3, MaxInstances: 10})
	ids := readyInstances(t, e, sec(0), 3)
	e.Tick(sec(0))
	per := []float64{7, 7, 6}
	var d Decision
	for k := 1; k <= 120; k++ {
		now := sec(float64(k) + 0.25)
		// The sample covers [k-1+0.25, k+0.25): the second of its middle.
		at := now.Add(-500 * time.Millisecond)
		for i, id := range ids {
			if err := e.Observe(at, id, 0, per[i]); err != nil {
				t.Fatal(err)
			}
		}
		m := e.Metrics(now)
		if m.Concurrency6s != 20 || m.Concurrency1m != 20 || m.Concurrency10m != 20 {
			t.Fatalf("second %d: 6 s %v, 1 min %v, 10 min %v; want exactly 20", k, m.Concurrency6s, m.Concurrency1m, m.Concurrency10m)
		}
		d = e.Tick(now)
		if d.Count != 4 {
			t.Fatalf("second %d: recommended %d, want 4 (%+v)", k, d.Count, m)
		}
	}
}

// TestMetricsCountTheCurrentSecondOnceObserved: a caller that observes the
// current second and then ticks has closed it; it counts.
func TestMetricsCountTheCurrentSecondOnceObserved(t *testing.T) {
	e := newEngine(t, Config{MaxConcurrency: 10})
	id := readyInstances(t, e, sec(0), 1)[0]
	for k := 0; k < 6; k++ {
		if err := e.Observe(sec(float64(k)), id, 0.5, 3); err != nil {
			t.Fatal(err)
		}
	}
	m := e.Metrics(sec(5))
	if m.Concurrency6s != 3 || m.Concurrency1m != 3 || m.CPU1m != 0.5 {
		t.Fatalf("observed through the current second: %+v, want 3 requests and 0.5 cores", m)
	}
	// A second later with nothing observed for it: the six seconds 0…5.
	m = e.Metrics(sec(6.5))
	if m.Concurrency6s != 3 || m.Concurrency1m != 3 {
		t.Fatalf("current second not yet observed: %+v, want the complete seconds' 3", m)
	}
	// Two seconds later: second 6 has passed with nothing observed, and
	// counts as zero: (5 × 3 + 0) / 6 and (6 × 3 + 0) / 7.
	m = e.Metrics(sec(7.5))
	if m.Concurrency6s != 2.5 || m.Concurrency1m != 18.0/7 {
		t.Fatalf("a passed second with no sample: %+v, want 2.5 and 18/7", m)
	}
}

// TestWindowAverageEndingBeforeItsEnd checks the average over the span
// ending one second before the window end against a direct sum, for every
// span including the longest (the ring keeps one second more for it).
func TestWindowAverageEndingBeforeItsEnd(t *testing.T) {
	w := newWindow(6, 60, 600)
	for s := int64(0); s < 1300; s++ {
		w.put(s, pair{cpu: s, conc: 2 * s}, true)
		for k, span := range []int64{6, 60, 600} {
			end := s - 1
			if end < 0 {
				if c, q := w.average(k, end); c != 0 || q != 0 {
					t.Fatalf("before the first sample: %v %v", c, q)
				}
				continue
			}
			lo := max(0, end-span+1)
			var sum int64
			for x := lo; x <= end; x++ {
				sum += x
			}
			want := float64(sum) / float64(end-lo+1) / milli
			c, q := w.average(k, end)
			if c != want || q != 2*want {
				t.Fatalf("second %d span %d ending %d: got %v %v, want %v %v", s, span, end, c, q, want, 2*want)
			}
		}
	}
}

// TestSeedCarriesTheOldRevisionsLoad: a new engine seeded from one that
// has held 30 concurrent requests for 5 minutes reads the same averages,
// so with max concurrency 10 it keeps 5 instances (30 / 6) rather than
// starting from empty windows.
func TestSeedCarriesTheOldRevisionsLoad(t *testing.T) {
	old := newEngine(t, Config{MaxConcurrency: 10})
	ids := readyInstances(t, old, sec(0), 5)
	for k := 1; k <= 300; k++ {
		for _, id := range ids {
			if err := old.Observe(sec(float64(k)-0.5), id, 0, 6); err != nil {
				t.Fatal(err)
			}
		}
		old.Tick(sec(float64(k)))
	}
	now := sec(300.25)
	want := old.Metrics(now)
	fresh := newEngine(t, Config{MaxConcurrency: 10})
	fresh.Tick(sec(290)) // made during the rollout, ten seconds before
	fresh.Seed(now, old.History(now))
	got := fresh.Metrics(now)
	if got.Concurrency1m != 30 || got.Concurrency10m != want.Concurrency10m || got.Concurrency6s != 30 {
		t.Fatalf("seeded averages %+v, want those of the old engine %+v", got, want)
	}
	if n := fresh.policy.Recommend(got).Count; n != 5 {
		t.Fatalf("seeded engine recommends %d, want 5", n)
	}
}
