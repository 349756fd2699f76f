package bucket

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

const sec = int64(time.Second)

// t0 is an arbitrary, realistic clock reading: tests never use time.Now.
var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC).UnixNano()

// clusterRead is the ECS "cluster read" category: capacity 50, refill 20/s.
var clusterRead = MustLimit(50, 20)

// takeN takes one token n times at instant now and counts the successes.
func takeN(l Limit, s *State, now int64, n int) int {
	ok := 0
	for range n {
		var d Decision
		*s, d = l.TakeAt(*s, now, 1)
		if d.Allowed {
			ok++
		}
	}
	return ok
}

func TestStartsFullFiftyAllowedFiftyFirstDenied(t *testing.T) {
	var s State
	if got := takeN(clusterRead, &s, t0, 50); got != 50 {
		t.Fatalf("a new cluster-read bucket admitted %d of 50 requests at once, want 50", got)
	}
	before := s
	s2, d := clusterRead.TakeAt(s, t0, 1)
	if d.Allowed {
		t.Fatal("51st request in the same instant was allowed")
	}
	if s2 != before {
		t.Fatalf("a denied take changed the state from %d to %d", before, s2)
	}
	if d.Remaining != 0 {
		t.Errorf("Remaining = %d after draining, want 0", d.Remaining)
	}
	if want := 50 * time.Millisecond; d.RetryAfter != want {
		t.Errorf("RetryAfter = %v, want %v (one token at 20/s)", d.RetryAfter, want)
	}
	if want := 2500 * time.Millisecond; d.ResetAfter != want {
		t.Errorf("ResetAfter = %v, want %v", d.ResetAfter, want)
	}
}

func TestEmptyBucketFullAfterExactly2500ms(t *testing.T) {
	var s State
	takeN(clusterRead, &s, t0, 50)

	_, at249 := clusterRead.TakeAt(s, t0+2490*int64(time.Millisecond), 0)
	if at249.Remaining != 49 || at249.ResetAfter != 10*time.Millisecond {
		t.Errorf("at 2.49 s: remaining %d, reset after %v; want 49 and 10ms (not yet full)", at249.Remaining, at249.ResetAfter)
	}
	if State(s).Full(time.Unix(0, t0+2490*int64(time.Millisecond))) {
		t.Error("bucket reads full at 2.49 s")
	}
	at25 := t0 + 2500*int64(time.Millisecond)
	if !s.Full(time.Unix(0, at25)) {
		t.Error("bucket not full at exactly 2.5 s")
	}
	if got := takeN(clusterRead, &s, at25, 51); got != 50 {
		t.Errorf("at 2.5 s the bucket admitted %d of 51 at once, want exactly 50", got)
	}
}

func TestSustained20PerSecondForeverAfterDraining(t *testing.T) {
	var s State
	takeN(clusterRead, &s, t0, 50)
	// One simulated hour at exactly the refill rate: every request passes,
	// and the bucket never climbs back.
	step := sec / 20
	for i := int64(1); i <= 3600*20; i++ {
		now := t0 + i*step
		var d Decision
		s, d = clusterRead.TakeAt(s, now, 1)
		if !d.Allowed {
			t.Fatalf("request %d at the sustained rate was denied", i)
		}
		if d.Remaining != 0 {
			t.Fatalf("request %d: bucket climbed back to %d tokens while used at the refill rate", i, d.Remaining)
		}
		if _, extra := clusterRead.TakeAt(s, now, 1); extra.Allowed {
			t.Fatalf("a 21st request per second was allowed at step %d", i)
		}
	}
}

func TestActionsShareOneBucket(t *testing.T) {
	// DescribeClusters and ListClusters share "cluster read": the split of
	// one second's requests between them does not matter, only the sum.
	for _, split := range []struct{ describe, list int }{{25, 25}, {30, 20}, {50, 0}, {0, 50}} {
		var s State
		got := takeN(clusterRead, &s, t0, split.describe) + takeN(clusterRead, &s, t0, split.list)
		if got != 50 {
			t.Errorf("%d DescribeClusters + %d ListClusters: %d allowed, want all 50", split.describe, split.list, got)
		}
	}
	var s State
	got := takeN(clusterRead, &s, t0, 50) + takeN(clusterRead, &s, t0, 50)
	if got != 50 {
		t.Errorf("50 + 50 in one second: %d allowed, want 50", got)
	}
}

func TestCloudMapDiscoverInstances(t *testing.T) {
	l := MustLimit(20000, 1000)
	var s State
	if got := takeN(l, &s, t0, 20001); got != 20000 {
		t.Fatalf("DiscoverInstances burst admitted %d of 20001, want 20000", got)
	}
	_, d := l.TakeAt(s, t0+sec, 0)
	if d.Remaining != 1000 {
		t.Errorf("one second after draining: %d tokens, want 1000", d.Remaining)
	}
	if !s.Full(time.Unix(0, t0+20*sec)) || s.Full(time.Unix(0, t0+20*sec-1)) {
		t.Error("an empty 20,000/1,000 bucket must be full after exactly 20 s")
	}
}

func TestTakeLargerThanCapacityAlwaysFails(t *testing.T) {
	l := MustLimit(5, 1)
	s, d := l.TakeAt(0, t0, 6)
	if d.Allowed || d.RetryAfter != Never || s != 0 {
		t.Fatalf("take of 6 from capacity 5: allowed=%v retryAfter=%v state=%d; want denied, Never, unchanged", d.Allowed, d.RetryAfter, s)
	}
	if d.Remaining != 5 {
		t.Errorf("Remaining = %d, want 5 (nothing was taken)", d.Remaining)
	}
}

func TestMultiTokenTakeIsAllOrNothing(t *testing.T) {
	l := MustLimit(10, 1)
	s, d := l.TakeAt(0, t0, 7)
	if !d.Allowed || d.Remaining != 3 {
		t.Fatalf("take 7 of 10: allowed=%v remaining=%d", d.Allowed, d.Remaining)
	}
	s2, d := l.TakeAt(s, t0, 4)
	if d.Allowed || s2 != s {
		t.Fatal("take 4 with 3 left must fail and change nothing")
	}
	if d.RetryAfter != time.Second {
		t.Errorf("RetryAfter = %v, want 1s (one more token at 1/s)", d.RetryAfter)
	}
	if _, d = l.TakeAt(s, t0, 3); !d.Allowed {
		t.Error("take 3 with 3 left must succeed")
	}
}

func TestRetryAfterIsExact(t *testing.T) {
	var s State
	takeN(clusterRead, &s, t0, 50)
	_, d := clusterRead.TakeAt(s, t0, 10)
	if d.RetryAfter != 500*time.Millisecond {
		t.Fatalf("RetryAfter for 10 tokens = %v, want 500ms", d.RetryAfter)
	}
	if _, d := clusterRead.TakeAt(s, t0+int64(d.RetryAfter)-1, 10); d.Allowed {
		t.Error("take allowed 1 ns before RetryAfter")
	}
	if _, d := clusterRead.TakeAt(s, t0+int64(d.RetryAfter), 10); !d.Allowed {
		t.Error("take denied exactly at RetryAfter")
	}
}

func TestFractionalAndLargeRates(t *testing.T) {
	half := MustLimit(1, 0.5)
	s, d := half.TakeAt(0, t0, 1)
	if !d.Allowed {
		t.Fatal("first take of a 1/0.5 bucket denied")
	}
	if _, d = half.TakeAt(s, t0+2*sec-1, 1); d.Allowed {
		t.Error("0.5/s bucket refilled a token in under 2 s")
	}
	if _, d = half.TakeAt(s, t0+2*sec, 1); !d.Allowed {
		t.Error("0.5/s bucket had no token after 2 s")
	}

	mega := MustLimit(1_000_000, 1_000_000)
	s, d = mega.TakeAt(0, t0, 1_000_000)
	if !d.Allowed {
		t.Fatal("1e6 burst denied")
	}
	_, d = mega.TakeAt(s, t0+int64(time.Millisecond), 0)
	if d.Remaining != 1000 {
		t.Errorf("1e6/s bucket after 1 ms holds %d tokens, want 1000", d.Remaining)
	}
}

// TestNoDriftOverADay runs buckets at exactly their refill rate for a
// simulated day and counts what they admitted: integer state keeps it exact.
func TestNoDriftOverADay(t *testing.T) {
	for _, tc := range []struct {
		capacity int64
		rate     float64
		step     time.Duration // time between takes
		take     int64         // tokens per take, rate·step
	}{
		{50, 20, 50 * time.Millisecond, 1},
		{1, 0.5, 2 * time.Second, 1},
		{20000, 1000, time.Second, 1000},
		{1_000_000, 1_000_000, time.Second, 1_000_000},
		{200, 40, 25 * time.Millisecond, 1},
	} {
		l := MustLimit(tc.capacity, tc.rate)
		var s State
		now := t0
		var d Decision
		s, d = l.TakeAt(s, now, tc.capacity) // drain
		if !d.Allowed {
			t.Fatalf("%v: drain denied", l)
		}
		granted := tc.capacity
		day := int64(24 * time.Hour)
		for now+int64(tc.step) <= t0+day {
			now += int64(tc.step)
			s, d = l.TakeAt(s, now, tc.take)
			if !d.Allowed {
				t.Fatalf("%v: take at the refill rate denied after %v", l, time.Duration(now-t0))
			}
			granted += tc.take
		}
		want := tc.capacity + int64(math.Round(tc.rate*86400))
		if granted != want {
			t.Errorf("%v: granted %d over a day, want %d", l, granted, want)
		}
		if _, d = l.TakeAt(s, now, 1); d.Allowed {
			t.Errorf("%v: a token too many after a day of use at the refill rate", l)
		}
	}
}

// TestRoundedRateNeverExceedsConfigured covers rates whose token interval
// is not a whole number of nanoseconds, such as ECS "agent modify" (120/s,
// 8,333,333.3 ns): the interval is rounded up, so a greedy client gets at
// most the configured rate and, over a whole day, at most one token less.
func TestRoundedRateNeverExceedsConfigured(t *testing.T) {
	for _, tc := range []struct {
		capacity int64
		rate     float64
		interval time.Duration
		poll     time.Duration
	}{
		{3, 3, 333333334, 100 * time.Millisecond},
		{200, 120, 8333334, 100 * time.Millisecond},
		{10, 7, 142857143, 100 * time.Millisecond},
	} {
		l := MustLimit(tc.capacity, tc.rate)
		if l.Interval() != tc.interval {
			t.Fatalf("%v: interval = %d, want %d (rounded up)", l, l.Interval(), tc.interval)
		}
		var s State
		granted := int64(0)
		for now := t0; now <= t0+int64(24*time.Hour); now += int64(tc.poll) {
			// A greedy client takes everything the bucket holds.
			_, peek := l.TakeAt(s, now, 0)
			if peek.Remaining == 0 {
				continue
			}
			var d Decision
			if s, d = l.TakeAt(s, now, peek.Remaining); !d.Allowed {
				t.Fatalf("%v: taking the %d tokens a peek reported was denied", l, peek.Remaining)
			}
			granted += peek.Remaining
		}
		bound := tc.capacity + int64(tc.rate*86400)
		if granted > bound || granted < bound-1 {
			t.Errorf("%v: granted %d in a day, want within [%d, %d]", l, granted, bound-1, bound)
		}
	}
}

func TestNewLimitRejectsInvalid(t *testing.T) {
	for _, tc := range []struct {
		capacity int64
		rate     float64
	}{
		{0, 1}, {-1, 1}, {1, 0}, {1, -1}, {1, math.NaN()}, {1, math.Inf(1)}, {1, 2e9}, {math.MaxInt64, 1}, {1, 1e-12},
	} {
		if _, err := NewLimit(tc.capacity, tc.rate); !errors.Is(err, ErrInvalidLimit) {
			t.Errorf("NewLimit(%d, %v) error = %v, want ErrInvalidLimit", tc.capacity, tc.rate, err)
		}
	}
}

// reference is a naive floating-point token bucket: the textbook model the
// integer arithmetic must agree with.
type reference struct {
	capacity, rate, tokens float64
	last                   float64 // seconds
}

func (r *reference) take(now float64, n int64) bool {
	r.tokens = math.Min(r.capacity, r.tokens+(now-r.last)*r.rate)
	r.last = now
	if float64(n) <= r.tokens+1e-9 {
		r.tokens -= float64(n)
		return true
	}
	return false
}

// TestAgreesWithReferenceModel drives random take sequences through both
// models. Times are whole milliseconds and rates divide 1e9 so that the
// float model is itself exact to well within its tolerance.
func TestAgreesWithReferenceModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	rates := []float64{0.5, 1, 5, 10, 20, 40, 80, 1000}
	for trial := 0; trial < 300; trial++ {
		capacity := int64(1 + rng.IntN(200))
		rate := rates[rng.IntN(len(rates))]
		l := MustLimit(capacity, rate)
		ref := &reference{capacity: float64(capacity), rate: rate, tokens: float64(capacity)}
		var s State
		nowMs := int64(0)
		for i := 0; i < 2000; i++ {
			nowMs += int64(rng.IntN(3) * rng.IntN(200))
			n := int64(rng.IntN(int(capacity) + 2))
			var d Decision
			s, d = l.TakeAt(s, t0+nowMs*int64(time.Millisecond), n)
			want := ref.take(float64(nowMs)/1000, n)
			if d.Allowed != want {
				t.Fatalf("trial %d (%v) step %d: take %d at %d ms: allowed=%v, reference says %v (ref tokens %.6f)",
					trial, l, i, n, nowMs, d.Allowed, want, ref.tokens)
			}
			if got := d.Remaining; got != int64(math.Floor(ref.tokens+1e-9)) {
				t.Fatalf("trial %d (%v) step %d: remaining %d, reference %.6f", trial, l, i, got, ref.tokens)
			}
		}
	}
}

// TestGrantedNeverExceedsCapacityPlusRateTimesT checks the defining bound of
// a token bucket over every interval of a random greedy trace: in any window
// of length T no more than capacity + rate·T tokens are granted.
func TestGrantedNeverExceedsCapacityPlusRateTimesT(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 50; trial++ {
		capacity := int64(1 + rng.IntN(60))
		rate := []float64{0.5, 1, 3, 7, 20, 333}[rng.IntN(6)]
		l := MustLimit(capacity, rate)
		type grant struct{ at, n int64 }
		var grants []grant
		var s State
		now := t0
		for i := 0; i < 600; i++ {
			now += int64(rng.IntN(int(2 * sec / int64(math.Ceil(rate)))))
			n := int64(1 + rng.IntN(int(capacity)))
			var d Decision
			if s, d = l.TakeAt(s, now, n); d.Allowed {
				grants = append(grants, grant{now, n})
			}
		}
		for i := range grants {
			sum := int64(0)
			for j := i; j < len(grants); j++ {
				sum += grants[j].n
				window := float64(grants[j].at-grants[i].at) / 1e9
				if float64(sum) > float64(capacity)+rate*window+1e-9 {
					t.Fatalf("%v: %d tokens granted within %.9fs, bound %.3f", l, sum, window, float64(capacity)+rate*window)
				}
			}
		}
	}
}

func TestQuotaDecreaseReadsEmptyUntilTheDebtIsPaid(t *testing.T) {
	big, small := MustLimit(100, 1), MustLimit(10, 1)
	s, _ := big.TakeAt(0, t0, 100) // full in 100 s under the old limit
	s2, d := small.TakeAt(s, t0, 0)
	if !d.Allowed || d.Remaining != 0 || d.ResetAfter != 100*time.Second || s2 != s {
		t.Fatalf("look after the decrease: %+v; want allowed, 0 left, full in 100s, state kept", d)
	}
	if _, d = small.TakeAt(s, t0, 1); d.Allowed || d.Remaining != 0 || d.RetryAfter != 91*time.Second {
		t.Fatalf("take after the decrease: %+v; want denied, 0 left, retry in 91s", d)
	}
	if _, d = small.TakeAt(s, t0+91*sec, 1); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("take once the debt is paid down to the new capacity: %+v", d)
	}
	if _, d = small.TakeAt(s, t0, 11); d.Allowed || d.Remaining != 0 || d.RetryAfter != Never {
		t.Fatalf("oversized take after the decrease: %+v", d)
	}
}

func BenchmarkTake(b *testing.B) {
	var s State
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		now += 1000
		s, _ = clusterRead.TakeAt(s, now, 1)
	}
}
