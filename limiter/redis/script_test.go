package redis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/limiter"
)

// randomLimit returns a limit whose window fits the script, from edge cases
// and random capacities and rates.
func randomLimit(r *rand.Rand) bucket.Limit {
	edges := []bucket.Limit{
		bucket.MustLimit(1, 1e9),                // interval 1 ns
		bucket.MustLimit(1<<52, 1e9),            // the largest capacity
		bucket.MustLimit(1, 1e9/float64(1<<52)), // the longest interval
		bucket.MustLimit(50, 20),
		bucket.MustLimit(20000, 1000),
		bucket.MustLimit(1, 0.5),
		bucket.MustLimit(7, 3), // interval rounded up to 333,333,334 ns
	}
	if r.IntN(4) == 0 {
		return edges[r.IntN(len(edges))]
	}
	for {
		capacity := int64(math.Exp(r.Float64()*math.Log(1e7))) + 1
		rate := math.Exp((r.Float64()*2 - 1) * math.Log(1e6))
		l, err := bucket.NewLimit(capacity, rate)
		if err == nil && CheckWindow(l) == nil {
			return l
		}
	}
}

// TestScriptMatchesBucket runs random takes, batched several to a key, on
// random states, limits and instants through the store, and checks every
// decision and every stored state against bucket.Limit.TakeAt.
func TestScriptMatchesBucket(t *testing.T) {
	srv := redistest.Start(t)
	client := newClient(t, srv)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(1, 2))
	var now int64
	s := newStore(t, client, Options{Now: func() time.Time { return time.Unix(0, now) }, Timeout: 10 * time.Second})
	for round := range 40 {
		switch round % 4 {
		case 0:
			now = r.Int64N(1e9) // near the epoch: states with no whole second
		default:
			now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano() + r.Int64N(int64(300*24*time.Hour))
		}
		type item struct {
			key   string
			limit bucket.Limit
			state int64 // before the round; 0 = absent
			model bucket.State
		}
		items := make([]item, 50)
		var reqs []limiter.Request
		var want []bucket.Decision
		pipe := client.Pipeline()
		for i := range items {
			it := &items[i]
			it.key = fmt.Sprintf("{script/%d}:%d", round, i)
			it.limit = randomLimit(r)
			w := it.limit.Capacity() * int64(it.limit.Interval())
			switch r.IntN(5) {
			case 0: // absent: full
			case 1:
				it.state = max(1, now-r.Int64N(3*w+1)) // full, set long ago
			default:
				it.state = max(1, now+r.Int64N(w+1)) // in debt
			}
			if it.state != 0 {
				pipe.Set(ctx, s.Key(it.key), strconv.FormatInt(it.state, 10), 0)
			}
			it.model = bucket.State(it.state)
			for range 1 + r.IntN(3) {
				var n int64
				switch r.IntN(4) {
				case 0:
					n = 0
				case 1:
					n = it.limit.Capacity() + r.Int64N(3)
				default:
					n = 1 + r.Int64N(min(it.limit.Capacity(), 1+r.Int64N(1000)))
				}
				var d bucket.Decision
				it.model, d = it.limit.TakeAt(it.model, now, n)
				reqs = append(reqs, limiter.Request{Key: it.key, Limit: it.limit, Tokens: n})
				want = append(want, d)
			}
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
		got := make([]bucket.Decision, len(reqs))
		if err := s.TakeBatch(ctx, reqs, got); err != nil {
			t.Fatal(err)
		}
		for i := range reqs {
			if got[i] != want[i] {
				t.Fatalf("round %d take %d (%v of %v, now %d): got %+v, want %+v", round, i, reqs[i].Tokens, reqs[i].Limit, now, got[i], want[i])
			}
		}
		for _, it := range items {
			v, err := client.Get(ctx, s.Key(it.key)).Result()
			switch {
			case int64(it.model) == it.state && it.state == 0:
				if err != goredis.Nil {
					t.Fatalf("round %d %s: untouched full bucket holds %q (%v)", round, it.key, v, err)
				}
			case err != nil:
				t.Fatalf("round %d %s: %v (state %d → %d, now %d)", round, it.key, err, it.state, it.model, now)
			case v != strconv.FormatInt(int64(it.model), 10):
				t.Fatalf("round %d %s: state %s, want %d (was %d, limit %v, now %d)", round, it.key, v, it.model, it.state, it.limit, now)
			}
			if int64(it.model) != it.state {
				pttl := client.PTTL(ctx, s.Key(it.key)).Val()
				// On a fake clock keys live a minute longer than their
				// state needs (take.lua's FAKE_CLOCK_GRACE_MS).
				ceil := time.Duration((int64(it.model)-now+999_999)/1_000_000)*time.Millisecond + time.Minute
				if pttl > ceil || pttl < ceil-30*time.Second {
					t.Fatalf("round %d %s: expires in %v, want %v (the instant it is full, plus a minute)", round, it.key, pttl, ceil)
				}
			}
		}
	}
	if st := s.Stats(); st.Fallback != 0 || st.Errors != 0 {
		t.Fatalf("stats %+v: decisions fell back", st)
	}
}

// TestScriptAcceptsStatesUpToMaxWindow is a differential test of the one
// bound Go and take.lua share: a limit whose window is exactly MaxWindow is
// accepted by Go, so the script decides (as bucket.Limit.TakeAt does) every
// state up to MaxWindow ahead of now, whatever the fraction of a second of
// now and of the state; a state farther ahead is not one the store writes,
// and the script refuses it; a window 1 ns longer is refused by Go.
func TestScriptAcceptsStatesUpToMaxWindow(t *testing.T) {
	srv := redistest.Start(t)
	client := newClient(t, srv)
	ctx := context.Background()
	var now int64
	s := newStore(t, client, Options{Now: func() time.Time { return time.Unix(0, now) }, Timeout: 10 * time.Second, FailurePolicy: FailOpen, Logger: slog.New(newLogCounter())})
	limits := []bucket.Limit{
		bucket.MustLimit(1, 1e9/float64(MaxWindow)), // one token per 2^52 ns
		bucket.MustLimit(1<<52, 1e9),                // 2^52 tokens, one per ns
		bucket.MustLimit(1<<26, 1e9/float64(1<<26)), // 2^26 tokens, one per 2^26 ns
	}
	for _, l := range limits {
		if w := time.Duration(l.Capacity()) * l.Interval(); w != MaxWindow {
			t.Fatalf("%v: window %v, want exactly MaxWindow", l, w)
		}
		if err := CheckWindow(l); err != nil {
			t.Fatalf("Go refuses %v: %v", l, err)
		}
	}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	i := 0
	for _, frac := range []int64{0, 1, 372_629_503, 372_629_504, 627_370_495, 627_370_496, 999_999_999} {
		for _, l := range limits {
			for _, ahead := range []int64{int64(MaxWindow) - int64(l.Interval()), int64(MaxWindow) - 1, int64(MaxWindow)} {
				i++
				now = base + frac
				key := fmt.Sprintf("{max}:%d", i)
				state := now + ahead
				client.Set(ctx, s.Key(key), strconv.FormatInt(state, 10), 0)
				for _, n := range []int64{0, 1} {
					_, want := l.TakeAt(bucket.State(state), now, n)
					before := s.Stats()
					got, err := s.Take(ctx, key, l, n)
					if err != nil {
						t.Fatal(err)
					}
					if st := s.Stats(); st.Redis != before.Redis+1 {
						t.Fatalf("%v, state %d ns ahead of now %d: the script did not decide (stats %+v)", l, ahead, now, st)
					}
					if got != want {
						t.Fatalf("%v, state %d ns ahead of now %d, take %d: script %+v, Go %+v", l, ahead, now, n, got, want)
					}
				}
			}
			// The store itself writes a state MaxWindow ahead: a full
			// take from a full bucket; the next take is decided too.
			i++
			key := fmt.Sprintf("{max}:%d", i)
			if d, err := s.Take(ctx, key, l, l.Capacity()); err != nil || !d.Allowed || d.ResetAfter != MaxWindow {
				t.Fatalf("%v: full take at now %d: %+v, %v", l, now, d, err)
			}
			before := s.Stats()
			if d, err := s.Take(ctx, key, l, 1); err != nil || d.Allowed || d.RetryAfter != l.Interval() {
				t.Fatalf("%v: take from the bucket the store emptied: %+v, %v", l, d, err)
			}
			if st := s.Stats(); st.Redis != before.Redis+1 {
				t.Fatalf("%v: the script refused the state it wrote (stats %+v)", l, st)
			}
			// 1 ns farther: refused by the script, decided by the policy.
			i++
			key = fmt.Sprintf("{max}:%d", i)
			client.Set(ctx, s.Key(key), strconv.FormatInt(now+int64(MaxWindow)+1, 10), 0)
			before = s.Stats()
			if _, err := s.Take(ctx, key, l, 1); err != nil {
				t.Fatal(err)
			}
			if st := s.Stats(); st.Errors != before.Errors+1 || st.Fallback != before.Fallback+1 {
				t.Fatalf("%v: a state MaxWindow+1 ns ahead was decided by the script (stats %+v)", l, st)
			}
		}
	}
	// One nanosecond more window is refused by Go before any script runs.
	for _, l := range []bucket.Limit{bucket.MustLimit(1<<52+1, 1e9), bucket.MustLimit(1, 1e9/float64(MaxWindow+1))} {
		if _, err := s.Take(ctx, "{max}:over", l, 1); !errors.Is(err, ErrUnsupportedLimit) {
			t.Fatalf("%v (window %v): %v, want ErrUnsupportedLimit", l, time.Duration(float64(l.Capacity())*float64(l.Interval())), err)
		}
	}
}
