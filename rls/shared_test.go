package rls

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/limiter/memory"
	redisstore "github.com/tollgate/tollgate/limiter/redis"
)

// hammerMinCalls is how many calls hammer makes at least, whatever the
// wall time: twice the capacity of every bucket hammered here, so the
// full bucket is always offered, even when a loaded machine lets the
// clients run only late.
const hammerMinCalls = 100

// hammer sends one descriptor from clients goroutines spread over the
// servers for about d of wall time (and at least hammerMinCalls calls),
// and returns the OK answers and the wall time from the first call to the
// last answer.
func hammer(t *testing.T, servers []*testServer, clients int, d time.Duration, domain string, pairs ...string) (ok int64, elapsed time.Duration) {
	t.Helper()
	var admitted, calls atomic.Int64
	var wg sync.WaitGroup
	begin := time.Now()
	for c := range clients {
		ts := servers[c%len(servers)]
		wg.Go(func() {
			req := &rlspb.RateLimitRequest{Domain: domain, Descriptors: []*ratelimitv3.RateLimitDescriptor{desc(pairs...)}}
			for calls.Add(1) <= hammerMinCalls || time.Since(begin) < d {
				r, err := ts.client.ShouldRateLimit(context.Background(), req)
				if err != nil {
					t.Error(err)
					return
				}
				if r.OverallCode == codeOK {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return admitted.Load(), time.Since(begin)
}

// checkExact asserts that admitted is at least the capacity (the full
// bucket is always admitted) and at most capacity + rate·elapsed.
func checkExact(t *testing.T, admitted int64, elapsed time.Duration, capacity int64, perSecond float64) {
	t.Helper()
	bound := capacity + int64(perSecond*elapsed.Seconds())
	t.Logf("admitted %d in %v (bound %d)", admitted, elapsed, bound)
	if admitted < capacity || admitted > bound {
		t.Errorf("admitted %d in %v: want between %d and capacity + rate·elapsed = %d", admitted, elapsed, capacity, bound)
	}
}

const concurrencyConfig = `
domain: c
descriptors:
  - key: k
    rate_limit: {unit: second, requests_per_unit: 50}
`

func TestConcurrencyExact(t *testing.T) {
	ts := start(t, Options{Config: mustParse(t, concurrencyConfig), Limiter: memory.New(memory.Options{})})
	ok, elapsed := hammer(t, []*testServer{ts}, 32, time.Second, "c", "k=one")
	checkExact(t, ok, elapsed, 50, 50)
}

func redisNode(t *testing.T, url string, cfg *Config) *testServer {
	t.Helper()
	store, err := redisstore.Open(url, redisstore.Options{Timeout: 10 * time.Second, FailurePolicy: redisstore.FailClosed})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return start(t, Options{Config: cfg, Limiter: store, MaxWindow: redisstore.MaxWindow})
}

// Several tollgate nodes on one Redis share one quota, as envoy
// ratelimit's nodes do.
func TestRedisNodesShareQuota(t *testing.T) {
	srv := redistest.Start(t)
	cfg := mustParse(t, concurrencyConfig, `
domain: m
descriptors:
  - key: k
    rate_limit: {unit: minute, requests_per_unit: 20}
`)
	nodes := []*testServer{redisNode(t, srv.URL(), cfg), redisNode(t, srv.URL(), cfg), redisNode(t, srv.URL(), cfg)}
	begin := time.Now()
	ok := 0
	for i := range 30 {
		if nodes[i%3].call(t, "m", desc("k=a")).OverallCode == codeOK {
			ok++
		}
	}
	checkExact(t, int64(ok), time.Since(begin), 20, 20.0/60)
	r := nodes[0].call(t, "m", withHits(desc("k=a"), 0))
	// Spent, but for the refill since (one every 3 s): a loaded machine
	// may take seconds over these calls.
	if refilled := uint32(time.Since(begin) / (3 * time.Second)); r.Statuses[0].LimitRemaining > 1+refilled {
		t.Errorf("a look after the quota is spent on three nodes: %v (at most %d refilled)", r.Statuses[0], refilled)
	}
	okN, elapsed := hammer(t, nodes, 24, time.Second, "c", "k=one")
	checkExact(t, okN, elapsed, 50, 50)
}

// On Redis Cluster each descriptor's bucket is its own hash tag: a request
// whose descriptors live in several slots is still decided in one batch.
func TestRedisCluster(t *testing.T) {
	t.Parallel() // its own redis-server and node
	srv := redistest.StartCluster(t)
	cfg := mustParse(t, example2)
	node := redisNode(t, "redis+cluster://"+srv.Addr, cfg)
	for i := range 5 {
		r := node.call(t, "messaging", desc("message_type=marketing", "to_number=1"), desc("to_number=1"), desc("to_number=2"))
		if r.OverallCode != codeOK || r.Statuses[0].LimitRemaining != uint32(4-i) || r.Statuses[2].LimitRemaining != uint32(99-i) {
			t.Fatalf("call %d: %v", i+1, r)
		}
	}
	if r := node.call(t, "messaging", desc("message_type=marketing", "to_number=1")); r.OverallCode != codeOver {
		t.Errorf("6th: %v", r)
	}
}

// failingStore is a store that cannot decide.
type failingStore struct{ limiter.Limiter }

func (failingStore) TakeBatch(context.Context, []limiter.Request, []bucket.Decision) error {
	return errors.New("store down")
}

func TestStoreFailure(t *testing.T) {
	ts := start(t, Options{Config: mustParse(t, concurrencyConfig), Limiter: failingStore{}})
	_, err := ts.client.ShouldRateLimit(context.Background(), &rlspb.RateLimitRequest{Domain: "c", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("k=a")}})
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "store down") {
		t.Errorf("store failure: %v, want Unavailable", err)
	}
	if got := counterValue(t, ts.metrics.storeErrors); got != 1 {
		t.Errorf("store_errors = %v", got)
	}
	// Descriptors with no bucket need no store.
	if r := ts.call(t, "c", desc("other=a")); r.OverallCode != codeOK {
		t.Errorf("no limit with the store down: %v", r)
	}
}
