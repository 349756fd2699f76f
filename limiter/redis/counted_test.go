package redis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/limiter/limitertest"
)

// TestUncountedNodeDecidesClosed: a FailLocal store that has not counted
// the nodes sharing its Redis decides what Redis does not answer as an
// empty bucket (before, from a whole bucket: N nodes admitted N buckets),
// and is not ready while Redis answers until it has counted; with
// Options.Nodes set it decides from its share at once.
func TestUncountedNodeDecidesClosed(t *testing.T) {
	addr := closedAddr(t)
	ctx := context.Background()
	limit := bucket.MustLimit(50, 20)
	for _, nodes := range []int{0, 2} {
		s := newStore(t, goredis.NewClient(&goredis.Options{Addr: addr}), Options{Nodes: nodes, Timeout: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler), Now: limitertest.NewClock().Now})
		admitted := 0
		for range 60 {
			d, err := s.Take(ctx, "k", limit, 1)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed {
				admitted++
			}
		}
		want := map[int]int{0: 0, 2: 25}[nodes]
		if admitted != want || s.Counted() != (nodes > 0) {
			t.Errorf("Nodes %d, Redis unreachable: admitted %d of a 50-token bucket, counted %v; want %d", nodes, admitted, s.Counted(), want)
		}
	}
	if testing.Short() {
		return
	}
	srv := redistest.Start(t)
	s := newStore(t, newClient(t, srv), Options{Logger: slog.New(slog.DiscardHandler)})
	if h := s.Health(ctx); h.Ready || !strings.Contains(h.Status, "not yet counted") {
		t.Fatalf("Redis up, nodes not counted: %+v; want not ready, \"not yet counted\"", h)
	}
	if err := s.announce(ctx); err != nil {
		t.Fatal(err)
	}
	s.waitHealthy(t)
	if s.Nodes() != 1 {
		t.Fatalf("after announcing alone: shares among %d, want 1", s.Nodes())
	}
}

// TestFourNodesOneStartedInAnOutage is issue 36's case: three nodes share
// a Redis and count each other; Redis dies (a crash: connections refused)
// and a fourth node starts during the outage; all four take from one
// bucket until each is denied. 10 runs, on a fake clock (nothing refills,
// so the allowance is exactly the capacity whatever the machine's load):
// together they never admit more than the bucket holds. The fourth, which
// could not count the nodes, admits nothing and is not ready until Redis
// is back; before, it decided from a whole bucket of its own.
func TestFourNodesOneStartedInAnOutage(t *testing.T) {
	t.Parallel() // its own redis-server and stores
	if testing.Short() {
		t.Skip("kills and restarts redis-server 10 times")
	}
	srv := redistest.Start(t)
	clock := limitertest.NewClock()
	ctx := context.Background()
	opts := func(id string) Options {
		// Default settings but the timeout: with Redis up, every take
		// must be Redis's however loaded the machine.
		return Options{NodeID: id, Now: clock.Now, Timeout: 5 * time.Second, Logger: slog.New(slog.DiscardHandler)}
	}
	// Clients that do not retry a refused connection: the breaker opens
	// after three failed pipelines, not after go-redis's retries.
	client := func() goredis.UniversalClient {
		c := goredis.NewClient(&goredis.Options{Addr: srv.Addr, MaxRetries: -1})
		t.Cleanup(func() { c.Close() })
		return c
	}
	var three []*Store
	for _, id := range []string{"a", "b", "c"} {
		s := newStore(t, client(), opts(id))
		runStore(t, s)
		three = append(three, s)
	}
	limit := bucket.MustLimit(100, 1)
	// announce has every store announce itself now rather than at its
	// next tick (Run's announcements go on beside it), retrying while a
	// restarted Redis comes up.
	announce := func(stores ...*Store) {
		t.Helper()
		for _, s := range stores {
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				err := s.announce(ctx)
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("store %s could not announce itself within 30 s: %v", s.NodeID(), err)
				}
			}
		}
	}
	for run := range 10 {
		announce(three...)
		waitNodes(t, 3, three...)
		key := fmt.Sprintf("{outage4/%d}:us-east-1:cluster-read", run)
		// Each store's breaker closes (its prober sees Redis back within
		// 100 ms, later on a loaded machine) before it takes 10 by Redis.
		for _, s := range three {
			for deadline := time.Now().Add(30 * time.Second); s.open(); time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("run %d: store %s still in an outage 30 s after Redis came back", run, s.NodeID())
				}
			}
		}
		byRedis := func(s *Store, n int64) {
			t.Helper()
			r0 := s.Stats().Redis
			d, err := s.Take(ctx, key, limit, n)
			if err != nil || !d.Allowed || s.Stats().Redis != r0+1 {
				t.Fatalf("run %d: store %s took %d with Redis up: %+v, %v, decided by Redis: %v", run, s.NodeID(), n, d, err, s.Stats().Redis > r0)
			}
		}
		admitted := 0
		for _, s := range three {
			byRedis(s, 10)
			admitted += 10
		}
		for _, s := range three { // each learns what the others took
			byRedis(s, 0)
		}
		srv.Stop()
		late := New(client(), opts(fmt.Sprintf("d%d", run)))
		lateCtx, stopLate := context.WithCancel(ctx)
		lateDone := make(chan error, 1)
		go func() { lateDone <- late.Run(lateCtx) }()
		if h := late.Health(ctx); h.Ready {
			t.Errorf("run %d: the node started in the outage is ready: %+v", run, h)
		}
		var mu sync.Mutex
		by := map[string]int{}
		var wg sync.WaitGroup
		for _, s := range append(three[:3:3], late) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				n := 0
				for range limit.Capacity() + 1 {
					d, err := s.Take(ctx, key, limit, 1)
					if err != nil {
						t.Error(err)
						return
					}
					if !d.Allowed {
						break
					}
					n++
				}
				mu.Lock()
				by[s.NodeID()] = n
				mu.Unlock()
			}()
		}
		wg.Wait()
		for _, n := range by {
			admitted += n
		}
		t.Logf("run %d: admitted %d of %d (in the outage: %v)", run, admitted, limit.Capacity(), by)
		if admitted > int(limit.Capacity()) {
			t.Errorf("run %d: four nodes admitted %d from a %d-token bucket (in the outage: %v)", run, admitted, limit.Capacity(), by)
		}
		if by[late.NodeID()] != 0 {
			t.Errorf("run %d: the node started in the outage admitted %d before counting the nodes", run, by[late.NodeID()])
		}
		for _, s := range three {
			if by[s.NodeID()] == 0 {
				t.Errorf("run %d: store %s, which counted 3 nodes, admitted nothing of the 70 tokens left", run, s.NodeID())
			}
		}
		srv.Restart()
		// Back: the late node counts the others and becomes ready.
		announce(append(three[:3:3], late)...)
		if late.Nodes() != 4 {
			t.Fatalf("run %d: the late node shares among %d nodes once Redis is back, want 4", run, late.Nodes())
		}
		late.waitHealthy(t)
		stopLate()
		if err := <-lateDone; err != nil {
			t.Fatal(err)
		}
		late.Close()
	}
}

// TestTimeoutBelowTheFloorIsRefused: Open refuses a take timeout below
// MinTimeout (issue 36: --store-timeout 1us decided every take without
// Redis), and RoundTrip measures a real server's round trip.
func TestTimeoutBelowTheFloorIsRefused(t *testing.T) {
	_, err := Open("redis://127.0.0.1:1", Options{Timeout: time.Microsecond})
	if !errors.Is(err, ErrTimeoutTooShort) {
		t.Fatalf("Open with a 1µs timeout: %v; want ErrTimeoutTooShort", err)
	}
	s, err := Open("redis://127.0.0.1:1", Options{Timeout: MinTimeout})
	if err != nil {
		t.Fatalf("Open with a %v timeout: %v", MinTimeout, err)
	}
	s.Close()
	if testing.Short() {
		return
	}
	srv := redistest.Start(t)
	s = newStore(t, newClient(t, srv), Options{Timeout: 10 * time.Second})
	rtt, err := s.RoundTrip(context.Background(), 5)
	if err != nil || rtt <= 0 || rtt >= s.Timeout() || !s.Reached() {
		t.Fatalf("RoundTrip: %v, %v (reached %v); want a positive round trip under %v", rtt, err, s.Reached(), s.Timeout())
	}
}
