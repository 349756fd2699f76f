package redis

import (
	"context"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/internal/redistest"
)

// TestStallContinuesFromRedisState: a node empties a bucket through Redis;
// then Redis stalls (SIGSTOP). The takes it cannot answer are decided from
// the state Redis last reported, an empty bucket, not from a full one
// (which admitted a whole extra burst on every stall before).
func TestStallContinuesFromRedisState(t *testing.T) {
	if testing.Short() {
		t.Skip("pauses redis-server")
	}
	srv := redistest.Start(t)
	hourly := bucket.MustLimit(3, 1.0/3600)
	s := newStore(t, newClient(t, srv), Options{Timeout: 100 * time.Millisecond, Nodes: 1, Logger: slog.New(slog.DiscardHandler)})
	ctx := context.Background()
	// Emptied through Redis: wait as long as a loaded machine needs.
	for i := 0; i < 3; {
		r0 := s.Stats().Redis
		d, err := s.Take(ctx, "k", hourly, 1)
		if err != nil {
			t.Fatal(err)
		}
		if s.Stats().Redis > r0 {
			if !d.Allowed {
				t.Fatalf("Redis denied take %d of a fresh 3-token bucket", i)
			}
			i++
		} else if d.Allowed {
			i++ // decided locally from what Redis said: also counted
		}
	}
	srv.Pause()
	t.Cleanup(srv.Resume)
	for i := range 5 {
		r0 := s.Stats().Redis
		d, err := s.Take(ctx, "k", hourly, 1)
		if err != nil {
			t.Fatal(err)
		}
		if s.Stats().Redis > r0 {
			t.Fatalf("take %d was decided by a paused Redis", i)
		}
		if d.Allowed {
			t.Fatalf("take %d with Redis paused: %+v; allowed from a bucket Redis reported empty", i, d)
		}
	}
}

// TestBreakerFailsFast: with Redis paused, a few takes wait their timeout
// and fail; then the breaker opens and takes are decided at once (before,
// every take waited the full timeout). Once Redis is back, the prober
// closes the breaker and Redis decides again.
func TestBreakerFailsFast(t *testing.T) {
	if testing.Short() {
		t.Skip("pauses redis-server")
	}
	srv := redistest.Start(t)
	s := newStore(t, newClient(t, srv), Options{Timeout: 300 * time.Millisecond, MaxTimeout: 300 * time.Millisecond, Nodes: 1, Logger: slog.New(slog.DiscardHandler)})
	s.waitHealthy(t)
	ctx := context.Background()
	srv.Pause()
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			srv.Resume()
		}
	})
	start := time.Now()
	const takes = 40 // 12 s at 300 ms each
	for i := range takes {
		if _, err := s.Take(ctx, "k"+strconv.Itoa(i%3), clusterRead, 1); err != nil {
			t.Fatal(err)
		}
	}
	el := time.Since(start)
	if !s.open() {
		t.Fatalf("breaker closed after %d takes with Redis paused", takes)
	}
	if el > 6*time.Second {
		t.Fatalf("%d takes with Redis paused took %v: they did not fail fast", takes, el)
	}
	if st := s.Stats(); st.Fallback != takes || st.Errors < breakerFailures {
		t.Fatalf("stats %+v", st)
	}
	srv.Resume()
	resumed = true
	deadline := time.Now().Add(20 * time.Second)
	for s.open() {
		if time.Now().After(deadline) {
			t.Fatal("breaker still open 20 s after Redis resumed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for deadline := time.Now().Add(20 * time.Second); ; {
		r0 := s.Stats().Redis
		if _, err := s.Take(ctx, "k", clusterRead, 1); err != nil {
			t.Fatal(err)
		}
		if s.Stats().Redis > r0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no decision by Redis 20 s after the breaker closed")
		}
	}
}

// TestScriptWriteBack: a take of -k tokens charges k without a check, up
// to an empty bucket, and is reported allowed.
func TestScriptWriteBack(t *testing.T) {
	srv := redistest.Start(t)
	client := newClient(t, srv)
	ctx := context.Background()
	now := int64(1_700_000_000) * 1e9
	iv := int64(clusterRead.Interval())
	run := func(key string, n int64) []int64 {
		t.Helper()
		v, err := takeScript.Run(ctx, client, []string{key}, strconv.FormatInt(now, 10), 1, clusterRead.Capacity(), iv, n).Int64Slice()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := run("wb", -5); v[0] != 1 || v[1] != 45 || v[3] != 5*iv {
		t.Fatalf("write-back of 5 on a full bucket: %v, want allowed, 45 left, full in 5 intervals", v)
	}
	if v := run("wb", -100); v[0] != 1 || v[1] != 0 || v[3] != 50*iv {
		t.Fatalf("write-back of 100 more: %v, want an empty bucket, no deeper", v)
	}
	if v := run("wb", 1); v[0] != 0 {
		t.Fatalf("take after the write-backs: %v, want denied", v)
	}
	st, err := client.Get(ctx, "wb").Int64()
	if err != nil || st != now+50*iv {
		t.Fatalf("stored state %d (%v), want now + burst", st, err)
	}
}
