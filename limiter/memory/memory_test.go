package memory

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/limiter/limitertest"
)

func TestConformance(t *testing.T) {
	limitertest.Run(t, func(t *testing.T, c *limitertest.Clock) limiter.Limiter {
		return New(Options{Now: c.Now})
	})
}

func TestConformanceOneShard(t *testing.T) {
	limitertest.Run(t, func(t *testing.T, c *limitertest.Clock) limiter.Limiter {
		return New(Options{Now: c.Now, Shards: 1})
	})
}

func TestTakeOnTrackedKeyAllocatesNothing(t *testing.T) {
	c := limitertest.NewClock()
	s := New(Options{Now: c.Now})
	limit := bucket.MustLimit(1_000_000, 1_000_000)
	ctx := context.Background()
	key := "{ecs/123456789012}:us-east-1:cluster-read"
	s.Take(ctx, key, limit, 1)
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := s.Take(ctx, key, limit, 1); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("Take on a tracked key allocates %v times", allocs)
	}
}

// TestForgetsFullBuckets floods the store with distinct keys over a
// simulated minute and checks that it only holds about what is in debt.
func TestForgetsFullBuckets(t *testing.T) {
	c := limitertest.NewClock()
	s := New(Options{Now: c.Now, Shards: 16})
	limit := bucket.MustLimit(50, 20) // a single take is repaid in 50ms
	ctx := context.Background()
	const perMs = 100
	maxLen := 0
	for ms := range 20_000 {
		for i := range perMs {
			s.Take(ctx, fmt.Sprintf("k%d-%d", ms, i), limit, 1)
		}
		c.Advance(time.Millisecond)
		maxLen = max(maxLen, s.Len())
	}
	// In debt at any instant: the keys of the last 50 ms, 5,000. The bound
	// from the package doc: twice that plus 256 per shard.
	if bound := 2*50*perMs + 256*16; maxLen > bound {
		t.Fatalf("store held up to %d buckets for 2M distinct keys; bound %d", maxLen, bound)
	}
	c.Advance(time.Second)
	s.Sweep()
	if n := s.Len(); n != 0 {
		t.Fatalf("after every bucket refilled, %d remain", n)
	}
}

func TestFullBucketIsForgottenAndEqualsAbsent(t *testing.T) {
	c := limitertest.NewClock()
	s := New(Options{Now: c.Now, Shards: 1})
	ctx := context.Background()
	limit := bucket.MustLimit(5, 1)
	s.Take(ctx, "a", limit, 5)
	c.Advance(5 * time.Second)
	s.Sweep()
	if s.Len() != 0 {
		t.Fatal("a refilled bucket is still held")
	}
	d, _ := s.Take(ctx, "a", limit, 0)
	if d.Remaining != 5 {
		t.Fatalf("forgotten bucket reads %d tokens, want full 5", d.Remaining)
	}
}

// A flood of distinct keys on a long refill window (one hit a day each)
// stays within MaxBuckets and MaxKeyBytes; the evictions are counted and
// fall on the buckets closest to full, so a client deep in debt keeps its
// state through the flood.
func TestBoundedUnderAFloodOfKeys(t *testing.T) {
	c := limitertest.NewClock()
	const maxBuckets, maxBytes = 1024, 64 << 10
	s := New(Options{Now: c.Now, Shards: 4, MaxBuckets: maxBuckets, MaxKeyBytes: maxBytes})
	day := bucket.MustLimit(10, 10.0/86400) // 10 a day
	ctx := context.Background()
	heavy := "heavy-client"
	for range 10 {
		s.Take(ctx, heavy, day, 1)
	}
	value := string(make([]byte, 100))
	for i := range 20_000 {
		if _, err := s.Take(ctx, fmt.Sprintf("flood-%d-%s", i, value), day, 1); err != nil {
			t.Fatal(err)
		}
		if n := s.Len(); n > maxBuckets {
			t.Fatalf("after %d keys the store holds %d buckets, more than %d", i+1, n, maxBuckets)
		}
	}
	var bytes int64
	for i := range s.shards {
		bytes += s.shards[i].bytes
	}
	if bytes > maxBytes {
		t.Errorf("keys hold %d bytes, more than %d", bytes, maxBytes)
	}
	if s.Evicted() == 0 || s.Evicted() > 20_000 {
		t.Errorf("evicted %d", s.Evicted())
	}
	// The heavy client spent its whole day; it was not evicted.
	if d, _ := s.Take(ctx, heavy, day, 1); d.Allowed {
		t.Errorf("the client deep in debt was evicted: %+v", d)
	}
	// A key larger than a shard's budget is decided, not kept.
	huge := string(make([]byte, maxBytes))
	if d, _ := s.Take(ctx, huge, day, 1); !d.Allowed {
		t.Errorf("huge key: %+v", d)
	}
	// Unbounded when asked.
	u := New(Options{Now: c.Now, Shards: 1, MaxBuckets: -1, MaxKeyBytes: -1})
	for i := range 5000 {
		u.Take(ctx, fmt.Sprint(i), day, 1)
	}
	if u.Len() != 5000 || u.Evicted() != 0 {
		t.Errorf("unbounded store: %d buckets, %d evicted", u.Len(), u.Evicted())
	}
}
