package liveview

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

func sec(n int) time.Time { return t0.Add(time.Duration(n) * time.Second) }

func TestDecisionsPerSecond(t *testing.T) {
	r := New(Options{History: 5})
	read := r.Series("ecs", "cluster-read")
	if r.Series("ecs", "cluster-read") != read {
		t.Fatal("the same names made a second series")
	}
	write := r.Series("ecs", "cluster-write")
	for s := 1; s <= 7; s++ {
		for range s {
			read.Count(true)
		}
		write.Count(false)
		if s == 3 {
			write.Error()
		}
		r.Tick(sec(s))
	}
	d := r.Decisions(time.Time{})
	if len(d.Times) != 5 || !d.Times[0].Equal(sec(3)) || !d.Times[4].Equal(sec(7)) {
		t.Fatalf("times %v, want the last 5 seconds 3..7", d.Times)
	}
	want := []uint64{3, 4, 5, 6, 7}
	for i, v := range d.Series[0].Allowed {
		if v != want[i] {
			t.Errorf("allowed[%d] = %d, want %d", i, v, want[i])
		}
	}
	if d.Series[1].Service != "ecs" || d.Series[1].Category != "cluster-write" {
		t.Errorf("series 1 is %s/%s", d.Series[1].Service, d.Series[1].Category)
	}
	if got := d.Series[1].Throttled; got[0] != 1 || got[4] != 1 {
		t.Errorf("throttled %v, want 1 a second", got)
	}
	if got := d.Series[1].Errors; got[0] != 1 || got[1] != 0 {
		t.Errorf("errors %v, want [1 0 0 0 0]", got)
	}
	since := r.Decisions(sec(5))
	if len(since.Times) != 2 || since.Series[0].Allowed[0] != 6 {
		t.Errorf("since second 5: %v %v, want seconds 6 and 7", since.Times, since.Series[0].Allowed)
	}
	if got := r.Decisions(sec(7)); len(got.Times) != 0 || len(got.Series[0].Allowed) != 0 {
		t.Errorf("since the newest point: %v, want nothing", got.Times)
	}
}

func TestTickCoversTheGap(t *testing.T) {
	r := New(Options{})
	s := r.Series("ecs", "c")
	r.Tick(sec(1))
	s.Count(true)
	r.Tick(sec(1)) // not after the previous tick: ignored
	r.Tick(sec(4))
	d := r.Decisions(time.Time{})
	if len(d.Times) != 2 || d.Durations[0] != time.Second || d.Durations[1] != 3*time.Second || d.Series[0].Allowed[1] != 1 {
		t.Fatalf("got %v %v %v, want a first point of 1 s and a second of 3 s holding the decision", d.Times, d.Durations, d.Series[0].Allowed)
	}
}

func TestHotOverTheWindow(t *testing.T) {
	r := New(Options{HotWindow: 3, HotCapacity: 4})
	for range 5 {
		r.Throttled(acct(7))
	}
	r.Throttled(acct(1))
	r.Tick(sec(1))
	for range 2 {
		r.Throttled(acct(1))
	}
	r.Tick(sec(2))
	hot, window, dropped := r.Hot(10)
	if window != 2*time.Second || len(hot) != 2 || dropped != 0 {
		t.Fatalf("window %v, %d keys, %d dropped; want 2s, 2 and none", window, len(hot), dropped)
	}
	if hot[0].Key != acct(7) || hot[0].Throttled != 5 || hot[0].PerSecond != 2.5 || hot[0].ErrorBound != 0 {
		t.Errorf("hottest %+v, want account 7 with 5 (2.5/s), exact", hot[0])
	}
	if hot[1].Key != acct(1) || hot[1].Throttled != 3 {
		t.Errorf("second %+v, want account 1 with 3", hot[1])
	}
	// Two more ticks push second 1 out of the 3-second window.
	r.Tick(sec(3))
	r.Tick(sec(4))
	hot, window, _ = r.Hot(1)
	if window != 3*time.Second || len(hot) != 1 || hot[0].Key != acct(1) || hot[0].Throttled != 2 {
		t.Errorf("after the window moved: %v %+v, want account 1 with 2 over 3s", window, hot)
	}
}

// TestHotBoundsWhenFull throttles more distinct keys than a summary holds:
// every reported key's range must contain its true count.
func TestHotBoundsWhenFull(t *testing.T) {
	r := New(Options{HotWindow: 4, HotCapacity: 3})
	truth := map[int]uint64{}
	for s := range 4 {
		for i := range 6 {
			n := (i*7 + s*3) % 5
			for range n {
				r.Throttled(acct(i))
			}
			truth[i] += uint64(n)
		}
		r.Tick(sec(s + 1))
	}
	hot, _, _ := r.Hot(100)
	for _, h := range hot {
		var i int
		for k := range truth {
			if acct(k) == h.Key {
				i = k
			}
		}
		if tr := truth[i]; h.Throttled < tr || h.Throttled-h.ErrorBound > tr {
			t.Errorf("%s: true %d outside [%d, %d]", h.Key.Account, tr, h.Throttled-h.ErrorBound, h.Throttled)
		}
	}
}

// TestDropsWhenFull throttles more than the buffers hold with nothing
// folding them: the excess is dropped and counted, and the estimates widen
// to keep the true counts inside their ranges.
func TestDropsWhenFull(t *testing.T) {
	r := New(Options{HotWindow: 2})
	hot, cold := acct(7), acct(8)
	room := len(r.shards) * (shardBuffer / recordLen(hot)) // records that fit
	n := 3 * room
	for range n {
		r.Throttled(hot)
	}
	r.Throttled(cold)
	if got := r.Dropped(); got != 0 {
		t.Errorf("Dropped() = %d before any fold, want 0 (it counts folded shards)", got)
	}
	r.Tick(sec(1))
	keys, _, dropped := r.Hot(10)
	if d := r.Dropped(); d != dropped || d < uint64(n-room) || d > uint64(n) {
		t.Fatalf("dropped %d (Dropped() %d) of %d; want the same, at least the %d that cannot fit", dropped, d, n+1, n-room)
	}
	if len(keys) == 0 || keys[0].Key != hot {
		t.Fatalf("hot keys %+v, want account 7 first", keys)
	}
	// Every throttle was either counted or dropped, and a dropped one may
	// have been any key's.
	counted := uint64(n) + 1 - dropped
	var sum uint64
	for _, k := range keys {
		sum += k.Throttled - dropped
	}
	if sum != counted {
		t.Errorf("counted %d, want %d", sum, counted)
	}
	if h := keys[0]; h.Throttled < uint64(n) || h.Throttled-h.ErrorBound > uint64(n) {
		t.Errorf("account 7 truly %d, reported [%d, %d]", n, h.Throttled-h.ErrorBound, h.Throttled)
	}
	// The buffers were emptied: the next second counts everything.
	for range 5 {
		r.Throttled(cold)
	}
	r.Tick(sec(2))
	r.Tick(sec(3)) // second 1 leaves the window
	keys, _, dropped = r.Hot(10)
	if dropped != 0 || len(keys) != 1 || keys[0].Key != cold || keys[0].Throttled != 5 || keys[0].ErrorBound != 0 {
		t.Errorf("after the drops left the window: %+v, %d dropped; want account 8 with exactly 5", keys, dropped)
	}
	if d := r.Dropped(); d != dropped+uint64(n)+1-counted {
		t.Errorf("Dropped() = %d, want the total since start %d", d, uint64(n)+1-counted)
	}
}

// TestHalfFullWakesRun checks that a buffer passing half full asks Run
// to fold, and that fewer keys do not.
func TestHalfFullWakesRun(t *testing.T) {
	r := New(Options{})
	k := acct(7)
	r.Throttled(k)
	if len(r.wake) != 0 {
		t.Fatal("one key woke Run")
	}
	// Enough for a shard to pass half full, not enough to fill one.
	for range len(r.shards) * (shardBuffer / 2 / recordLen(k)) * 3 / 2 {
		r.Throttled(k)
	}
	if len(r.wake) != 1 {
		t.Fatal("no shard woke Run")
	}
}

// TestRunCountsBursts sends, while Run runs, more than the buffers hold,
// in bursts of three quarters of it, waiting (widely) after each until Run
// has folded it (on a half-full buffer, or at the next tick): nothing is
// dropped and every throttle is counted.
func TestRunCountsBursts(t *testing.T) {
	r := New(Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.Run(ctx) }()
	k := acct(7)
	pending := func() (n int) {
		for i := range r.shards {
			sh := &r.shards[i]
			sh.mu.Lock()
			n += len(sh.buf)
			sh.mu.Unlock()
		}
		return n
	}
	burst := len(r.shards) * (shardBuffer / 2 / recordLen(k)) * 3 / 2
	for range 3 {
		for range burst {
			r.Throttled(k)
		}
		for deadline := time.Now().Add(30 * time.Second); pending() > 0; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d bytes still buffered after 30 s", pending())
			}
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	r.Tick(time.Now().Add(time.Hour))
	keys, _, dropped := r.Hot(2)
	if dropped != 0 || len(keys) != 1 || keys[0].Key != k || keys[0].Throttled != uint64(3*burst) || keys[0].ErrorBound != 0 {
		t.Errorf("hot %+v, %d dropped; want account 7 with exactly %d", keys, dropped, 3*burst)
	}
}

func TestNilIsSafe(t *testing.T) {
	var r *Recorder
	s := r.Series("a", "b")
	s.Count(true)
	s.Error()
	r.Throttled(acct(1))
}

// TestConcurrent runs writers against ticks and views for the race
// detector, then checks that no decision was lost.
func TestConcurrent(t *testing.T) {
	r := New(Options{History: 1000})
	s := r.Series("ecs", "c")
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 2000 {
				s.Count(i%2 == 0)
				if i%2 == 1 {
					r.Throttled(acct(w))
				}
			}
		})
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for n := 1; ; n++ {
			select {
			case <-stop:
				return
			default:
			}
			// Ticks stop well short of the history (the last one comes
			// after the writers): however long the scheduler leaves the
			// writers waiting, no point they wrote falls out of the ring.
			// Here they tick up to about 200 times; views go on.
			if n < 500 {
				r.Tick(sec(n))
			}
			r.Decisions(time.Time{})
			r.Hot(5)
		}
	}()
	wg.Wait()
	close(stop)
	<-done
	r.Tick(sec(1 << 20))
	var allowed, throttled uint64
	for _, d := range r.Decisions(time.Time{}).Series {
		for i := range d.Allowed {
			allowed += d.Allowed[i]
			throttled += d.Throttled[i]
		}
	}
	if allowed != 4000 || throttled != 4000 {
		t.Errorf("recorded %d allowed and %d throttled, want 4000 each", allowed, throttled)
	}
}

func TestServices(t *testing.T) {
	var state []ServiceSample
	r := New(Options{History: 4, Services: func() []ServiceSample { return state }})
	scale := []ScaleDecision{{Time: sec(2), From: 1, To: 3, Driver: "concurrency", Reason: "need 2.6"}}
	steps := [][]ServiceSample{
		{{Name: "api", Instances: map[string]int{"ready": 1}, Recommended: 1, Driver: "min", Rejected: 0}},
		{{Name: "api", Instances: map[string]int{"ready": 1, "starting": 2}, Recommended: 3, Pending: 4, Driver: "concurrency", Rejected: 5, Scales: scale}},
		{{Name: "api", Instances: map[string]int{"ready": 3}, Recommended: 3, Driver: "concurrency", Rejected: 7, Scales: scale},
			{Name: "batch", Instances: map[string]int{"ready": 1}, Recommended: 1, Rejected: 2}},
		{{Name: "api", Instances: map[string]int{"ready": 3, "draining": 1}, Recommended: 2, Driver: "concurrency", Rejected: 1, Scales: scale}}, // started over
		{{Name: "api", Instances: map[string]int{"ready": 2}, Recommended: 2, Driver: "cpu", Rejected: 1}},
	}
	for i, st := range steps {
		state = st
		r.Tick(sec(i + 1))
	}
	got := r.Services(time.Time{})
	if len(got.Times) != 4 || len(got.Services) != 2 || got.Services[0].Name != "api" || got.Services[1].Name != "batch" {
		t.Fatalf("services %+v", got)
	}
	api := got.Services[0]
	if want := []int{2, 0, 0, 0}; !slices.Equal(api.Instances["starting"], want) {
		t.Errorf("api starting %v, want %v", api.Instances["starting"], want)
	}
	if want := []int{1, 3, 3, 2}; !slices.Equal(api.Instances["ready"], want) {
		t.Errorf("api ready %v, want %v", api.Instances["ready"], want)
	}
	// The first kept point's 429s are unknown once the ring dropped the
	// point before it: 0. Then 7-5, a restart at 1, and no change.
	if want := []uint64{0, 2, 1, 0}; !slices.Equal(api.Rejected, want) {
		t.Errorf("api rejected %v, want %v", api.Rejected, want)
	}
	if api.Driver != "cpu" || api.Scales != nil || api.Pending[0] != 4 || api.Recommended[3] != 2 {
		t.Errorf("api %+v: want the newest driver cpu, no scales, pending [4 …]", api)
	}
	if b := got.Services[1]; !slices.Equal(b.Rejected, []uint64{0, 2, 0, 0}) || !slices.Equal(b.Instances["ready"], []int{0, 1, 0, 0}) {
		t.Errorf("batch %+v: want 2 rejected when it appeared, ready only then", b)
	}
	if none := New(Options{}).Services(time.Time{}); none.Services != nil {
		t.Errorf("without Options.Services: %+v", none)
	}
}

// TestHotNegativeN: Hot with n below 1 returns no keys rather than
// panicking.
func TestHotNegativeN(t *testing.T) {
	r := New(Options{})
	r.Throttled(acct(1))
	r.Tick(sec(1))
	for _, n := range []int{0, -1} {
		if keys, _, _ := r.Hot(n); len(keys) != 0 {
			t.Fatalf("Hot(%d) = %v", n, keys)
		}
	}
}
