// Package limitertest is the conformance suite every limiter.Limiter store
// runs against itself, so that all stores decide exactly alike.
package limitertest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/limiter"
)

// Clock is a fake clock for stores under test. It starts at a fixed instant
// and moves only when told to. Safe for concurrent use.
type Clock struct {
	ns atomic.Int64
}

// NewClock returns a clock reading 2026-01-01T00:00:00Z.
func NewClock() *Clock {
	c := &Clock{}
	c.ns.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}

// Now returns the clock's reading.
func (c *Clock) Now() time.Time { return time.Unix(0, c.ns.Load()) }

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// Factory returns a fresh, empty store that reads time from clock. Stores
// whose production clock is elsewhere (Redis TIME) use a test-only path
// that takes the time from clock.
type Factory func(t *testing.T, clock *Clock) limiter.Limiter

// Run runs the conformance suite against stores made by newStore. Every
// subtest gets its own store and clock; keys are unique per subtest.
func Run(t *testing.T, newStore Factory) {
	tests := []struct {
		name string
		fn   func(t *testing.T, l limiter.Limiter, c *Clock, key string)
	}{
		{"StartsFull", testStartsFull},
		{"RefillsToFullIn2500ms", testRefill},
		{"SustainedRate", testSustained},
		{"DeniedTakeConsumesNothing", testDeniedConsumesNothing},
		{"PeekChangesNothing", testPeek},
		{"KeysAreIndependent", testKeysIndependent},
		{"ExceedsCapacity", testExceedsCapacity},
		{"InvalidRequests", testInvalid},
		{"BatchIsSequential", testBatch},
		{"BatchMatchesSingles", testBatchMatchesSingles},
		{"CloudMap", testCloudMap},
		{"FractionalRate", testFractional},
		{"ConcurrentTakesAdmitExactlyCapacity", testConcurrent},
		{"LimitChangeKeepsState", testLimitChange},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := NewClock()
			l := newStore(t, c)
			tc.fn(t, l, c, fmt.Sprintf("{conformance/%s/%d}:us-east-1:cluster-read", tc.name, time.Now().UnixNano()))
		})
	}
}

var clusterRead = bucket.MustLimit(50, 20)

func take(t *testing.T, l limiter.Limiter, key string, limit bucket.Limit, n int64) bucket.Decision {
	t.Helper()
	d, err := l.Take(context.Background(), key, limit, n)
	if err != nil {
		t.Fatalf("Take(%q, %v, %d): %v", key, limit, n, err)
	}
	return d
}

func count(t *testing.T, l limiter.Limiter, key string, limit bucket.Limit, n int) int {
	t.Helper()
	ok := 0
	for range n {
		if take(t, l, key, limit, 1).Allowed {
			ok++
		}
	}
	return ok
}

func testStartsFull(t *testing.T, l limiter.Limiter, _ *Clock, key string) {
	d := take(t, l, key, clusterRead, 1)
	if !d.Allowed || d.Remaining != 49 || d.ResetAfter != 50*time.Millisecond || d.Limit != clusterRead {
		t.Fatalf("first take: %+v; want allowed, 49 left, full in 50ms", d)
	}
	if got := count(t, l, key, clusterRead, 49); got != 49 {
		t.Fatalf("admitted %d of the next 49", got)
	}
	d = take(t, l, key, clusterRead, 1)
	if d.Allowed || d.Remaining != 0 || d.RetryAfter != 50*time.Millisecond || d.ResetAfter != 2500*time.Millisecond {
		t.Fatalf("51st take: %+v; want denied, 0 left, retry in 50ms, full in 2.5s", d)
	}
}

func testRefill(t *testing.T, l limiter.Limiter, c *Clock, key string) {
	count(t, l, key, clusterRead, 50)
	c.Advance(2490 * time.Millisecond)
	if d := take(t, l, key, clusterRead, 0); d.Remaining != 49 {
		t.Fatalf("at 2.49 s: %d tokens, want 49", d.Remaining)
	}
	c.Advance(10 * time.Millisecond)
	if d := take(t, l, key, clusterRead, 0); d.Remaining != 50 || d.ResetAfter != 0 {
		t.Fatalf("at 2.5 s: %+v, want full", d)
	}
	// Tokens that arrive while full are discarded.
	c.Advance(time.Hour)
	if got := count(t, l, key, clusterRead, 60); got != 50 {
		t.Fatalf("after an hour idle admitted %d of 60, want 50", got)
	}
}

func testSustained(t *testing.T, l limiter.Limiter, c *Clock, key string) {
	count(t, l, key, clusterRead, 50)
	for i := range 200 {
		c.Advance(50 * time.Millisecond)
		if d := take(t, l, key, clusterRead, 1); !d.Allowed {
			t.Fatalf("take %d at the 20/s refill rate denied", i)
		}
		if d := take(t, l, key, clusterRead, 1); d.Allowed {
			t.Fatalf("take above the 20/s refill rate allowed at step %d", i)
		}
	}
}

func testDeniedConsumesNothing(t *testing.T, l limiter.Limiter, c *Clock, key string) {
	take(t, l, key, clusterRead, 45)
	for range 10 {
		if take(t, l, key, clusterRead, 6).Allowed {
			t.Fatal("take of 6 with 5 left allowed")
		}
	}
	if d := take(t, l, key, clusterRead, 5); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("denied takes consumed tokens: take 5 = %+v", d)
	}
	c.Advance(50 * time.Millisecond)
	if d := take(t, l, key, clusterRead, 1); !d.Allowed {
		t.Fatal("denied takes pushed the refill back")
	}
}

func testPeek(t *testing.T, l limiter.Limiter, _ *Clock, key string) {
	take(t, l, key, clusterRead, 20)
	for range 5 {
		if d := take(t, l, key, clusterRead, 0); !d.Allowed || d.Remaining != 30 {
			t.Fatalf("peek = %+v, want 30 left", d)
		}
	}
	if got := count(t, l, key, clusterRead, 31); got != 30 {
		t.Fatalf("after peeks admitted %d, want 30", got)
	}
}

func testKeysIndependent(t *testing.T, l limiter.Limiter, _ *Clock, key string) {
	count(t, l, key, clusterRead, 50)
	for _, other := range []string{key + "-eu-west-1", key + "-other-account"} {
		if got := count(t, l, other, clusterRead, 50); got != 50 {
			t.Errorf("%s admitted %d of 50 after %s was drained", other, got, key)
		}
	}
}

func testExceedsCapacity(t *testing.T, l limiter.Limiter, _ *Clock, key string) {
	d, err := l.Take(context.Background(), key, clusterRead, 51)
	if !errors.Is(err, bucket.ErrExceedsCapacity) {
		t.Fatalf("take 51 of 50: error %v, want ErrExceedsCapacity", err)
	}
	if d.Allowed || d.RetryAfter != bucket.Never {
		t.Fatalf("take 51 of 50: %+v, want denied with RetryAfter Never", d)
	}
	if got := count(t, l, key, clusterRead, 50); got != 50 {
		t.Fatalf("an impossible take consumed tokens: %d of 50 left", got)
	}
}

func testInvalid(t *testing.T, l limiter.Limiter, _ *Clock, key string) {
	ctx := context.Background()
	if _, err := l.Take(ctx, key, clusterRead, -1); !errors.Is(err, limiter.ErrInvalidRequest) {
		t.Errorf("negative take: %v", err)
	}
	if _, err := l.Take(ctx, key, bucket.Limit{}, 1); !errors.Is(err, limiter.ErrInvalidRequest) {
		t.Errorf("zero limit: %v", err)
	}
	if err := l.TakeBatch(ctx, make([]limiter.Request, 2), make([]bucket.Decision, 1)); !errors.Is(err, limiter.ErrInvalidRequest) {
		t.Errorf("mismatched batch: %v", err)
	}
	for _, bad := range []limiter.Request{{Key: key, Limit: clusterRead, Tokens: -1}, {Key: key, Tokens: 1}} {
		reqs := []limiter.Request{{Key: key, Limit: clusterRead, Tokens: 5}, bad}
		if err := l.TakeBatch(ctx, reqs, make([]bucket.Decision, 2)); !errors.Is(err, limiter.ErrInvalidRequest) {
			t.Errorf("batch with %+v: %v", bad, err)
		}
	}
	if got := count(t, l, key, clusterRead, 50); got != 50 {
		t.Fatalf("invalid requests consumed tokens: %d of 50 left", got)
	}
}

func testBatch(t *testing.T, l limiter.Limiter, _ *Clock, key string) {
	// DescribeClusters and ListClusters in one batch share the bucket:
	// 30 + 20 pass, then 50 + 50 (next batch) all fail.
	reqs := []limiter.Request{
		{Key: key, Limit: clusterRead, Tokens: 30},
		{Key: key, Limit: clusterRead, Tokens: 20},
		{Key: key, Limit: clusterRead, Tokens: 1},
		{Key: key + "-other", Limit: clusterRead, Tokens: 50},
		{Key: key, Limit: clusterRead, Tokens: 51},
	}
	out := make([]bucket.Decision, len(reqs))
	if err := l.TakeBatch(context.Background(), reqs, out); err != nil {
		t.Fatal(err)
	}
	want := []bool{true, true, false, true, false}
	for i, w := range want {
		if out[i].Allowed != w {
			t.Errorf("batch[%d] allowed = %v, want %v (%+v)", i, out[i].Allowed, w, out[i])
		}
	}
	if out[1].Remaining != 0 || out[0].Remaining != 20 {
		t.Errorf("remaining = %d, %d; want 20, 0", out[0].Remaining, out[1].Remaining)
	}
	if out[4].RetryAfter != bucket.Never {
		t.Errorf("oversized batch item RetryAfter = %v, want Never", out[4].RetryAfter)
	}
	if err := l.TakeBatch(context.Background(), nil, nil); err != nil {
		t.Errorf("empty batch: %v", err)
	}
}

func testBatchMatchesSingles(t *testing.T, l limiter.Limiter, c *Clock, key string) {
	// The same sequence through singles (key A) and one batch per instant
	// (key B) yields the same decisions.
	a, b := key+"-single", key+"-batch"
	limit := bucket.MustLimit(10, 4)
	seq := []int64{3, 4, 2, 5, 1, 0, 7, 10, 2, 2}
	for step := range 6 {
		reqs := make([]limiter.Request, len(seq))
		for i, n := range seq {
			reqs[i] = limiter.Request{Key: b, Limit: limit, Tokens: n}
		}
		out := make([]bucket.Decision, len(seq))
		if err := l.TakeBatch(context.Background(), reqs, out); err != nil {
			t.Fatal(err)
		}
		for i, n := range seq {
			if d := take(t, l, a, limit, n); d != out[i] {
				t.Fatalf("step %d item %d: single %+v, batch %+v", step, i, d, out[i])
			}
		}
		c.Advance(700 * time.Millisecond)
	}
}

func testCloudMap(t *testing.T, l limiter.Limiter, c *Clock, key string) {
	limit := bucket.MustLimit(20000, 1000)
	if d := take(t, l, key, limit, 20000); !d.Allowed {
		t.Fatal("20,000 DiscoverInstances at once denied")
	}
	if d := take(t, l, key, limit, 1); d.Allowed {
		t.Fatal("20,001st allowed")
	}
	c.Advance(time.Second)
	if d := take(t, l, key, limit, 1000); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("1,000 per second after draining: %+v", d)
	}
}

func testFractional(t *testing.T, l limiter.Limiter, c *Clock, key string) {
	limit := bucket.MustLimit(1, 0.5)
	take(t, l, key, limit, 1)
	c.Advance(1999 * time.Millisecond)
	if take(t, l, key, limit, 1).Allowed {
		t.Fatal("0.5/s refilled in under 2 s")
	}
	c.Advance(time.Millisecond)
	if !take(t, l, key, limit, 1).Allowed {
		t.Fatal("0.5/s had no token after 2 s")
	}
}

func testConcurrent(t *testing.T, l limiter.Limiter, _ *Clock, key string) {
	var wg sync.WaitGroup
	var allowed atomic.Int64
	errs := make(chan error, 1)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 25 {
				d, err := l.Take(context.Background(), key, clusterRead, 1)
				if err != nil {
					select {
					case errs <- err:
					default:
					}
					return
				}
				if d.Allowed {
					allowed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	if got := allowed.Load(); got != 50 {
		t.Fatalf("200 concurrent takes at one instant admitted %d, want exactly 50", got)
	}
}

// testLimitChange: a reload changes a bucket's limit without resetting it.
// Raised, the debt is read at the new rate; lowered below what is owed, the
// bucket reads empty (never negative) until the debt is paid.
func testLimitChange(t *testing.T, l limiter.Limiter, c *Clock, key string) {
	big, small := bucket.MustLimit(100, 1), bucket.MustLimit(10, 1)
	take(t, l, key, big, 100)
	if d := take(t, l, key, small, 0); !d.Allowed || d.Remaining != 0 || d.ResetAfter != 100*time.Second {
		t.Fatalf("look after a decrease: %+v; want allowed, 0 left, full in 100s", d)
	}
	if d := take(t, l, key, small, 1); d.Allowed || d.Remaining != 0 || d.RetryAfter != 91*time.Second {
		t.Fatalf("take after a decrease: %+v; want denied, 0 left, retry in 91s", d)
	}
	c.Advance(91 * time.Second)
	if d := take(t, l, key, small, 1); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("take once the debt is down to the new capacity: %+v", d)
	}
	raised := bucket.MustLimit(1000, 10)
	if d := take(t, l, key, raised, 0); d.Remaining != 900 {
		t.Fatalf("look after an increase: %+v; want 900 (10 s of debt at 10/s is 100 tokens)", d)
	}
}
