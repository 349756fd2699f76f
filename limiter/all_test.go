package limiter_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/limiter/limitertest"
	"github.com/tollgate/tollgate/limiter/memory"
	redisstore "github.com/tollgate/tollgate/limiter/redis"
)

// nonAtomic hides the memory store's TakeAll, so limiter.TakeAll takes
// the path of stores that cannot take from several buckets at once.
type nonAtomic struct{ limiter.Limiter }

func stores() map[string]func(*limitertest.Clock) limiter.Limiter {
	return map[string]func(*limitertest.Clock) limiter.Limiter{
		"atomic": func(c *limitertest.Clock) limiter.Limiter { return memory.New(memory.Options{Now: c.Now}) },
		"look-then-take": func(c *limitertest.Clock) limiter.Limiter {
			return nonAtomic{memory.New(memory.Options{Now: c.Now})}
		},
	}
}

func remaining(t *testing.T, l limiter.Limiter, key string, limit bucket.Limit) int64 {
	t.Helper()
	d, err := l.Take(context.Background(), key, limit, 0)
	if err != nil {
		t.Fatal(err)
	}
	return d.Remaining
}

func TestTakeAllTakesNothingWhenOneBucketIsShort(t *testing.T) {
	for name, mk := range stores() {
		t.Run(name, func(t *testing.T) { testTakesNothingWhenShort(t, mk(limitertest.NewClock())) })
	}
}

// TestTakeAllOnRedis: the Redis store, which has no atomic multi-bucket
// take, is looked at first and refuses a short batch without taking.
func TestTakeAllOnRedis(t *testing.T) {
	srv := redistest.Start(t)
	client, err := redisstore.NewClient(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	st := redisstore.New(client, redisstore.Options{Now: limitertest.NewClock().Now, Timeout: 5 * time.Second})
	t.Cleanup(func() { st.Close() })
	if _, ok := limiter.Limiter(st).(limiter.Atomic); ok {
		t.Fatal("the Redis store became atomic: this test no longer covers the look-then-take path")
	}
	testTakesNothingWhenShort(t, st)
}

func testTakesNothingWhenShort(t *testing.T, l limiter.Limiter) {
	ecs, calls, tasks := bucket.MustLimit(100, 40), bucket.MustLimit(20, 20), bucket.MustLimit(100, 20)
	ctx := context.Background()
	reqs := []limiter.Request{{Key: "ecs", Limit: ecs, Tokens: 1}, {Key: "calls", Limit: calls, Tokens: 1}, {Key: "tasks", Limit: tasks, Tokens: 10}}
	out := make([]bucket.Decision, len(reqs))
	for i := range 10 {
		ok, err := limiter.TakeAll(ctx, l, reqs, out)
		if err != nil || !ok {
			t.Fatalf("batch %d: allowed %v, err %v; want allowed", i, ok, err)
		}
	}
	ok, err := limiter.TakeAll(ctx, l, reqs, out)
	if err != nil || ok {
		t.Fatalf("11th batch: allowed %v, err %v; want refused", ok, err)
	}
	if i := limiter.FirstDenied(out); i != 2 || out[2].RetryAfter <= 0 {
		t.Fatalf("refused by request %d (%+v), want 2, the tasks bucket, with a RetryAfter", i, out)
	}
	for _, d := range out {
		if d.Allowed {
			t.Fatalf("a refused batch reports an allowed decision: %+v", out)
		}
	}
	if out[0].Remaining != 90 || out[1].Remaining != 10 || out[0].RetryAfter != 0 {
		t.Errorf("a refused batch reports the buckets that were not short as %+v, %+v; want them untouched, 90 and 10", out[0], out[1])
	}
	if got := remaining(t, l, "ecs", ecs); got != 90 {
		t.Errorf("ecs bucket holds %d after 10 batches and a refused one, want 90", got)
	}
	if got := remaining(t, l, "calls", calls); got != 10 {
		t.Errorf("calls bucket holds %d, want 10", got)
	}
	reqs[2].Tokens = 0
	if ok, err := limiter.TakeAll(ctx, l, reqs[:2], out[:2]); err != nil || !ok {
		t.Fatalf("a batch without the tasks bucket: allowed %v, err %v", ok, err)
	}
}

func TestTakeAllSameKeyTwiceSeesItsEarlierTake(t *testing.T) {
	l := memory.New(memory.Options{Now: limitertest.NewClock().Now})
	lim := bucket.MustLimit(100, 20)
	reqs := []limiter.Request{{Key: "k", Limit: lim, Tokens: 60}, {Key: "k", Limit: lim, Tokens: 60}}
	out := make([]bucket.Decision, 2)
	if ok, err := l.TakeAll(context.Background(), reqs, out); err != nil || ok {
		t.Fatalf("60 + 60 from a bucket of 100: allowed %v, err %v; want refused", ok, err)
	}
	if got := remaining(t, l, "k", lim); got != 100 {
		t.Fatalf("bucket holds %d after a refused batch, want 100", got)
	}
	reqs[1].Tokens = 40
	if ok, err := l.TakeAll(context.Background(), reqs, out); err != nil || !ok {
		t.Fatalf("60 + 40: allowed %v, err %v; want allowed", ok, err)
	}
	if got := remaining(t, l, "k", lim); got != 0 {
		t.Fatalf("bucket holds %d after 60 + 40, want 0", got)
	}
}

func TestTakeAllRejectsInvalidBatches(t *testing.T) {
	for name, mk := range stores() {
		l := mk(limitertest.NewClock())
		_, err := limiter.TakeAll(context.Background(), l, []limiter.Request{{Key: "k", Limit: bucket.MustLimit(1, 1), Tokens: -1}}, make([]bucket.Decision, 1))
		if err == nil {
			t.Errorf("%s: a negative take was accepted", name)
		}
	}
}

// TestTakeAllIsAtomicUnderConcurrency: batches racing on a frozen clock
// admit exactly what the shortest bucket holds, and the other bucket
// loses exactly the admitted batches' tokens: none is taken half.
func TestTakeAllIsAtomicUnderConcurrency(t *testing.T) {
	l := memory.New(memory.Options{Now: limitertest.NewClock().Now, Shards: 4})
	wide, narrow := bucket.MustLimit(1000, 1), bucket.MustLimit(100, 1)
	reqs := []limiter.Request{{Key: "wide", Limit: wide, Tokens: 1}, {Key: "narrow", Limit: narrow, Tokens: 10}}
	var wg sync.WaitGroup
	var admitted atomic.Int64
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out := make([]bucket.Decision, 2)
			for range 50 {
				ok, err := l.TakeAll(context.Background(), reqs, out)
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					admitted.Add(1)
				}
				l.Take(context.Background(), "narrow", narrow, 0) // single takes share the locks
			}
		}()
	}
	wg.Wait()
	if got := admitted.Load(); got != 10 {
		t.Fatalf("%d batches of 10 admitted from a bucket of 100, want 10", got)
	}
	if got := remaining(t, l, "wide", wide); got != 990 {
		t.Fatalf("wide bucket holds %d after 10 admitted batches, want 990", got)
	}
}
