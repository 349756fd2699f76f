package autoscale

import (
	"math"
	"math/rand/v2"
	"testing"
)

// refWindow is the obvious O(window) implementation the ring is checked
// against.
type refWindow struct {
	spans   []int64
	size    int64
	vals    map[int64]pair
	first   int64
	last    int64
	started bool
}

func newRefWindow(spans ...int64) *refWindow {
	return &refWindow{spans: spans, size: spans[len(spans)-1], vals: map[int64]pair{}}
}

func (r *refWindow) put(sec int64, v pair, replace bool) bool {
	if !r.started {
		r.started, r.first, r.last = true, sec, sec
	}
	r.last = max(r.last, sec)
	if sec <= r.last-r.size {
		return false
	}
	r.first = min(r.first, sec)
	if replace {
		r.vals[sec] = v
	} else {
		old := r.vals[sec]
		old.add(v)
		r.vals[sec] = old
	}
	return true
}

func (r *refWindow) average(k int, now int64) (float64, float64) {
	if !r.started {
		return 0, 0
	}
	r.last = max(r.last, now)
	covered := min(r.last-r.first+1, r.spans[k])
	var sum pair
	for s := r.last - r.spans[k] + 1; s <= r.last; s++ {
		if s >= r.first {
			sum.add(r.vals[s])
		}
	}
	d := float64(covered) * milli
	return float64(sum.cpu) / d, float64(sum.conc) / d
}

// checkWindowAgainstReference runs ops drawn from rng on both windows and
// fails on the first disagreement.
func checkWindowAgainstReference(t *testing.T, rng *rand.Rand, steps int) {
	t.Helper()
	w := newWindow(6, 60, 600)
	ref := newRefWindow(6, 60, 600)
	now := int64(rng.IntN(2000)) - 1000 // negative seconds too
	for i := 0; i < steps; i++ {
		switch op := rng.IntN(10); {
		case op < 5: // advance a little, sometimes a lot
			gap := int64(rng.IntN(3))
			if rng.IntN(50) == 0 {
				gap = int64(rng.IntN(1500))
			}
			now += gap
		case op < 9: // a sample now or a little late
			sec := now - int64(rng.IntN(5))
			if rng.IntN(40) == 0 {
				sec = now - int64(rng.IntN(700))
			}
			v := pair{cpu: int64(rng.IntN(4000)), conc: int64(rng.IntN(100000))}
			replace := rng.IntN(2) == 0
			_, ok := w.put(sec, v, replace)
			okRef := ref.put(sec, v, replace)
			if ok != okRef {
				t.Fatalf("step %d: put(%d) accepted=%v, reference %v", i, sec, ok, okRef)
			}
			now = max(now, sec)
		default:
			for k := range 3 {
				c, q := w.average(k, now)
				cr, qr := ref.average(k, now)
				if math.Abs(c-cr) > 1e-9 || math.Abs(q-qr) > 1e-9 {
					t.Fatalf("step %d: span %d at %d: got (%v, %v), reference (%v, %v)", i, ref.spans[k], now, c, q, cr, qr)
				}
			}
		}
	}
}

func TestWindowMatchesReference(t *testing.T) {
	for seed := range uint64(20) {
		checkWindowAgainstReference(t, rand.New(rand.NewPCG(seed, 7)), 3000)
	}
}

func FuzzWindow(f *testing.F) {
	f.Add(uint64(1), uint64(2), int64(0), int64(1))
	f.Add(uint64(99), uint64(0), int64(-5), int64(700))
	for _, c := range windowExtremes {
		f.Add(uint64(3), uint64(4), c[0], c[1])
	}
	f.Fuzz(func(t *testing.T, a, b uint64, first, second int64) {
		checkWindowAgainstReference(t, rand.New(rand.NewPCG(a, b)), 500)
		checkWindowExtremes(t, first, second)
	})
}

func TestWindowGapCountsAsZeroAfterFirstSample(t *testing.T) {
	w := newWindow(60, 600)
	w.put(100, pair{cpu: 1000, conc: 4000}, true) // 1 core, 4 requests at second 100
	// Before the first sample nothing counts: a one-second history.
	if cpu, _ := w.average(0, 100); cpu != 1 {
		t.Fatalf("1-min average of a 1 s history = %v, want 1", cpu)
	}
	// Nothing reported for seconds 101..129: they count as zero.
	if cpu, conc := w.average(0, 129); cpu != 1.0/30 || conc != 4.0/30 {
		t.Fatalf("1-min average after a 29 s gap = (%v, %v), want (1/30, 4/30)", cpu, conc)
	}
}

func TestWindowSlidesOutOldSeconds(t *testing.T) {
	w := newWindow(60, 600)
	for s := int64(0); s < 60; s++ {
		w.put(s, pair{cpu: 500}, true) // 0.5 cores for the first minute
	}
	if cpu, _ := w.average(0, 59); cpu != 0.5 {
		t.Fatalf("1-min average = %v, want 0.5", cpu)
	}
	// One minute later, the 1-min window is empty, the 10-min one half the
	// minute over two minutes of history.
	cpu1, _ := w.average(0, 119)
	cpu10, _ := w.average(1, 119)
	if cpu1 != 0 || cpu10 != 0.25 {
		t.Fatalf("after a silent minute: 1-min %v, 10-min %v; want 0 and 0.25", cpu1, cpu10)
	}
	// After more than a whole ring of silence everything is zero.
	if cpu, _ := w.average(1, 5000); cpu != 0 {
		t.Fatalf("10-min average after an hour of silence = %v, want 0", cpu)
	}
	if _, ok := w.put(5000-600, pair{cpu: 1}, true); ok {
		t.Fatal("a sample 600 s old was accepted")
	}
}

func TestWindowReplaceOverwritesTheSecond(t *testing.T) {
	w := newWindow(60, 600)
	w.put(10, pair{cpu: 300}, true)
	d, _ := w.put(10, pair{cpu: 800}, true)
	if d.cpu != 500 {
		t.Fatalf("delta = %d, want 500", d.cpu)
	}
	if cpu, _ := w.average(0, 10); cpu != 0.8 {
		t.Fatalf("average = %v, want 0.8", cpu)
	}
}

// checkWindowExtremes puts a sample at second a, then one at second b, and
// fails unless both calls return, b is accepted exactly when it is not a
// whole ring older than a, and every average stays within what was put.
func checkWindowExtremes(t *testing.T, a, b int64) {
	t.Helper()
	w := newWindow(6, 60, 600)
	w.put(a, pair{cpu: 1000, conc: 1000}, true)
	_, ok := w.put(b, pair{cpu: 2000, conc: 2000}, true)
	if want := b >= a || uint64(a)-uint64(b) < 600; ok != want {
		t.Fatalf("put(%d) after put(%d) accepted = %v, want %v", b, a, ok, want)
	}
	for k := range 3 {
		cpu, conc := w.average(k, max(a, b))
		if !(cpu >= 0 && cpu <= 3 && conc == cpu) {
			t.Fatalf("span %d after %d then %d: average (%v, %v)", w.spans[k], a, b, cpu, conc)
		}
	}
}

// windowExtremes are pairs of seconds whose difference overflows an int64,
// or that sit at its ends.
var windowExtremes = [][2]int64{
	{-1 << 62, 1 << 62},
	{math.MinInt64, math.MaxInt64},
	{math.MaxInt64, math.MinInt64},
	{math.MaxInt64 - 3, math.MaxInt64},
	{math.MinInt64, math.MinInt64 + 599},
	{math.MinInt64 + 599, math.MinInt64},
}

// TestWindowExtremeSecondsReturn: a jump of about 2^63 seconds used to
// loop once per second. Every call must simply return.
func TestWindowExtremeSecondsReturn(t *testing.T) {
	for _, c := range windowExtremes {
		checkWindowExtremes(t, c[0], c[1])
	}
	w := newWindow(60, 600)
	w.put(-1<<62, pair{cpu: 1000}, true)
	w.put(1<<62, pair{cpu: 60000}, true)
	// The jump resets the ring; the silent seconds count as zero.
	if cpu, _ := w.average(0, 1<<62); cpu != 1 {
		t.Fatalf("after a jump of 2^63 s the 1-min average = %v, want 1 (60 cores in one second of 60)", cpu)
	}
}
