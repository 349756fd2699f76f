package redis

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/limiter/limitertest"
)

// runStore runs s.Run until t ends, and waits for it.
func runStore(t *testing.T, s *Store) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// waitNodes waits until every store has read want live nodes in Redis.
func waitNodes(t *testing.T, want int, stores ...*Store) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		ok := true
		for _, s := range stores {
			ok = ok && s.LiveNodes() == want
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			for _, s := range stores {
				t.Logf("store %s: %d live nodes read, shares among %d", s.NodeID(), s.LiveNodes(), s.Nodes())
			}
			t.Fatalf("stores did not all read %d live nodes within 30 s", want)
		}
	}
}

// TestTwoNodesOnDefaultsStayWithinTheBound: two stores on default
// settings (as two tollgate nodes without --store-nodes) share one Redis
// and hammer one bucket while Redis stalls for 80 ms three times a run
// (CLIENT PAUSE), 10 runs: together they never admit more than the
// bucket allows. (A stall this short, under the default 50 ms wait,
// leaves few takes to decide locally, each charged with the takes in
// flight: it over-admitted nothing here with a whole bucket per node
// either. TestTwoNodesShareABucketInAnOutage is the case that did.)
func TestTwoNodesOnDefaultsStayWithinTheBound(t *testing.T) {
	t.Parallel() // its own redis-server and stores
	if testing.Short() {
		t.Skip("stalls redis-server for 10 runs of 0.7 s")
	}
	srv := redistest.Start(t)
	opts := func(id string) Options { return Options{NodeID: id, Logger: slog.New(slog.DiscardHandler)} }
	a := newStore(t, newClient(t, srv), opts("a"))
	b := newStore(t, newClient(t, srv), opts("b"))
	runStore(t, a)
	runStore(t, b)
	waitNodes(t, 2, a, b)
	admin := newClient(t, srv)
	ctx := context.Background()
	// 100 at once, then one per ms: an 80 ms stall refills 80, less
	// than the capacity, so the bucket is never full while the takers
	// ask far more than its refill.
	limit := bucket.MustLimit(100, 1000)
	var over []string
	for run := range 10 {
		key := fmt.Sprintf("{nodes/%d}:us-east-1:cluster-read", run)
		t0, err := admin.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		var admitted, local atomic.Int64
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for _, s := range []*Store{a, b} {
			for range 3 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						select {
						case <-stop:
							return
						default:
						}
						f0 := s.Stats().Fallback
						d, err := s.Take(ctx, key, limit, 1)
						if err != nil {
							t.Error(err)
							return
						}
						if d.Allowed {
							admitted.Add(1)
						}
						if s.Stats().Fallback > f0 {
							local.Add(1)
						}
						time.Sleep(200 * time.Microsecond)
					}
				}()
			}
		}
		for range 3 {
			time.Sleep(150 * time.Millisecond)
			if err := admin.Do(ctx, "CLIENT", "PAUSE", "80", "ALL").Err(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(80 * time.Millisecond)
		}
		time.Sleep(20 * time.Millisecond)
		close(stop)
		wg.Wait()
		t1, err := admin.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		bound := limit.Capacity() + int64(t1.Sub(t0)/limit.Interval()) + 1
		t.Logf("run %d: admitted %d of a bound of %d in %v (%d decisions or more made locally)", run, admitted.Load(), bound, t1.Sub(t0).Round(time.Millisecond), local.Load())
		if admitted.Load() > bound {
			over = append(over, fmt.Sprintf("run %d: %d > %d", run, admitted.Load(), bound))
		}
	}
	if len(over) > 0 {
		t.Fatalf("two nodes admitted more than one bucket allows: %v", over)
	}
}

// TestLiveNodesCountAndExpire: nodes announce themselves on a fake clock;
// a node that stops announcing is counted out after its TTL, and the
// divisor falls only once no higher count was seen for a TTL. An explicit
// Options.Nodes wins over the count.
func TestLiveNodesCountAndExpire(t *testing.T) {
	t.Parallel() // its own redis-server and stores
	srv := redistest.Start(t)
	clock := limitertest.NewClock()
	opts := func(id string, nodes int) Options {
		return Options{NodeID: id, Nodes: nodes, Now: clock.Now, NodeTTL: 6 * time.Second, Logger: slog.New(slog.DiscardHandler)}
	}
	a := newStore(t, newClient(t, srv), opts("a", 0))
	b := newStore(t, newClient(t, srv), opts("b", 0))
	fixed := newStore(t, newClient(t, srv), opts("fixed", 5))
	ctx := context.Background()
	announce := func(s *Store) {
		t.Helper()
		if err := s.announce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if a.Nodes() != 0 || a.LiveNodes() != 0 || a.Counted() || !fixed.Counted() {
		t.Fatalf("before any announcement: shares among %d, %d live, counted %v (fixed: %v); want 0, 0, false (true)", a.Nodes(), a.LiveNodes(), a.Counted(), fixed.Counted())
	}
	announce(a)
	announce(b)
	announce(a)
	if a.LiveNodes() != 2 || a.Nodes() != 2 || b.LiveNodes() != 2 {
		t.Fatalf("two nodes: a read %d (shares among %d), b read %d; want 2", a.LiveNodes(), a.Nodes(), b.LiveNodes())
	}
	announce(fixed)
	if fixed.LiveNodes() != 3 || fixed.Nodes() != 5 {
		t.Fatalf("with Nodes 5: read %d, shares among %d; want 3, 5", fixed.LiveNodes(), fixed.Nodes())
	}
	// b and fixed stop announcing; a goes on.
	clock.Advance(4 * time.Second)
	announce(a)
	if a.LiveNodes() != 3 {
		t.Fatalf("4 s on: %d live, want 3 (within the TTL)", a.LiveNodes())
	}
	clock.Advance(3 * time.Second) // b's and fixed's announcements expired at 6 s
	announce(a)
	if a.LiveNodes() != 1 || a.Nodes() != 3 {
		t.Fatalf("7 s on: %d live, shares among %d; want 1 live and still 3 (seen within a TTL)", a.LiveNodes(), a.Nodes())
	}
	clock.Advance(7 * time.Second)
	announce(a)
	if a.LiveNodes() != 1 || a.Nodes() != 1 {
		t.Fatalf("a TTL after the last count of 3: %d live, shares among %d; want 1, 1", a.LiveNodes(), a.Nodes())
	}
	// A node that leaves is counted out at once.
	announce(b)
	if b.LiveNodes() != 2 {
		t.Fatalf("b back: %d live, want 2", b.LiveNodes())
	}
	b.leave()
	announce(a)
	if a.LiveNodes() != 1 {
		t.Fatalf("after b left: %d live, want 1", a.LiveNodes())
	}
}

// TestTwoNodesShareABucketInAnOutage: two stores on default settings
// count each other in Redis and take 20 tokens of a 100-token bucket
// through it; then Redis stops answering (SIGSTOP) and each takes, decided
// locally, until it is denied. On a fake clock nothing refills, so
// together they may admit the 80 tokens Redis had left, and admit exactly
// that: 40 each, half of what each knew was left. Before, each decided
// from all of it, and the pair admitted 160.
func TestTwoNodesShareABucketInAnOutage(t *testing.T) {
	t.Parallel() // its own redis-server and stores
	if testing.Short() {
		t.Skip("pauses redis-server")
	}
	srv := redistest.Start(t)
	clock := limitertest.NewClock()
	opts := func(id string) Options {
		// Default settings but the timeout: the default 50 ms can decide
		// locally under the race detector on a loaded machine, and the
		// takes with Redis up must be Redis's.
		return Options{NodeID: id, Now: clock.Now, Timeout: 500 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)}
	}
	a := newStore(t, newClient(t, srv), opts("a"))
	b := newStore(t, newClient(t, srv), opts("b"))
	runStore(t, a)
	runStore(t, b)
	waitNodes(t, 2, a, b)
	ctx := context.Background()
	limit := bucket.MustLimit(100, 1)
	const key = "{outage/123456789012}:us-east-1:cluster-read"
	byRedis := func(s *Store, n int64) {
		t.Helper()
		r0 := s.Stats().Redis
		d, err := s.Take(ctx, key, limit, n)
		if err != nil {
			t.Fatal(err)
		}
		if s.Stats().Redis != r0+1 || !d.Allowed {
			t.Fatalf("a take of %d with Redis up: %+v, decided by Redis: %v; want allowed by Redis", n, d, s.Stats().Redis > r0)
		}
	}
	byRedis(a, 10)
	byRedis(b, 10)
	byRedis(a, 0) // a learns what b took
	srv.Pause()
	t.Cleanup(srv.Resume)
	total := 0
	for _, s := range []*Store{a, b} {
		n := 0
		for ; n <= int(limit.Capacity()); n++ {
			d, err := s.Take(ctx, key, limit, 1)
			if err != nil {
				t.Fatal(err)
			}
			if !d.Allowed {
				break
			}
		}
		t.Logf("store %s, sharing among %d nodes: admitted %d with Redis paused", s.NodeID(), s.Nodes(), n)
		if n == 0 {
			t.Errorf("store %s admitted nothing of the 80 tokens left", s.NodeID())
		}
		total += n
	}
	if total > 80 {
		t.Fatalf("the two stores admitted %d tokens with Redis paused; 80 were left", total)
	}
}

// TestNodesOnACluster: on Redis Cluster, nodes announce themselves and
// count each other as on one server (the set is one key, in one slot),
// and the persistence check reads a node's settings.
func TestNodesOnACluster(t *testing.T) {
	t.Parallel() // its own redis-server and stores
	srv := redistest.StartCluster(t)
	ctx := context.Background()
	var stores []*Store
	logs := newLogCounter()
	for _, id := range []string{"a", "b"} {
		client, err := NewClient("redis+cluster://" + srv.Addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { client.Close() })
		s := newStore(t, client, Options{NodeID: id, Timeout: 5 * time.Second, Logger: slog.New(logs)})
		if err := s.announce(ctx); err != nil {
			t.Fatal(err)
		}
		stores = append(stores, s)
	}
	if n := stores[1].LiveNodes(); n != 2 {
		t.Fatalf("the second node read %d live nodes, want 2", n)
	}
	stores[0].checkPersistence(ctx)
	if len(logs.records(slog.LevelWarn, "no persistence")) != 1 {
		logs.dump(t)
		t.Fatal("no warning about a cluster node without persistence")
	}
}
