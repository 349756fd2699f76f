package redis

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/internal/testflags"
	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/limiter/limitertest"
)

var clusterRead = bucket.MustLimit(50, 20)

const ecsKey = "{ecs/123456789012}:us-east-1:cluster-read"

// logCounter is a slog.Handler counting records by level.
type logCounter struct {
	mu    sync.Mutex
	count map[slog.Level]int
	last  map[slog.Level]slog.Record
	all   []slog.Record
}

func newLogCounter() *logCounter {
	return &logCounter{count: map[slog.Level]int{}, last: map[slog.Level]slog.Record{}}
}

func (h *logCounter) Enabled(context.Context, slog.Level) bool { return true }
func (h *logCounter) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.count[r.Level]++
	h.last[r.Level] = r
	h.all = append(h.all, r)
	return nil
}

// dump logs every record h received, for a failing test's output.
func (h *logCounter) dump(t *testing.T) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.all {
		var b strings.Builder
		r.Attrs(func(a slog.Attr) bool {
			fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
			return true
		})
		t.Logf("%s %s %s%s", r.Time.Format("15:04:05.000"), r.Level, r.Message, b.String())
	}
}

func (h *logCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logCounter) WithGroup(string) slog.Handler      { return h }
func (h *logCounter) n(l slog.Level) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.count[l]
}

// closedAddr returns a loopback address nothing listens on.
// closedAddr is an address that refuses connections until t ends, its
// port held so that no other test's server can take it meanwhile.
func closedAddr(t *testing.T) string { return redistest.ClosedAddr(t) }

func TestKeyLayout(t *testing.T) {
	srv := redistest.Start(t)
	client := newClient(t, srv)
	ctx := context.Background()
	// A timeout no loaded machine reaches: every decision is Redis's.
	s := newStore(t, client, Options{Timeout: 10 * time.Second})
	if got, want := s.Key(ecsKey), "tg:{ecs/123456789012}:us-east-1:cluster-read"; got != want {
		t.Fatalf("Key = %q, want %q", got, want)
	}
	if got := New(client, Options{KeyPrefix: "gw1:"}).Key("k"); got != "gw1:k" {
		t.Fatalf("Key with prefix gw1: = %q", got)
	}
	before, err := client.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	// A token every 20 s: the bucket stays in debt for the whole test
	// however slowly the machine runs it.
	slow := bucket.MustLimit(50, 0.05)
	for range 50 {
		if d, err := s.Take(ctx, ecsKey, slow, 1); err != nil || !d.Allowed {
			t.Fatalf("take: %+v, %v", d, err)
		}
	}
	d, err := s.Take(ctx, ecsKey, slow, 1)
	if err != nil || d.Allowed || d.Remaining != 0 || d.RetryAfter <= 0 || d.RetryAfter > 20*time.Second {
		t.Fatalf("51st take on Redis TIME: %+v, %v", d, err)
	}
	after, _ := client.Time(ctx).Result()
	v, err := client.Get(ctx, "tg:"+ecsKey).Result()
	if err != nil {
		t.Fatal(err)
	}
	state, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("bucket holds %q, not a decimal bucket.State: %v", v, err)
	}
	// 50 takes from full: full again 1,000 s after the first take's TIME
	// (later if a token refilled meanwhile, which takes 20 s).
	lo, hi := before.Add(1000*time.Second).UnixNano(), after.Add(1000*time.Second).UnixNano()
	if state < lo || state > hi {
		t.Fatalf("state %d outside [%d, %d]: not Redis TIME + 1,000 s", state, lo, hi)
	}
	// The key expires at the instant the bucket is full (its PX is
	// rounded up to the millisecond). PTTL counts from the time Redis
	// cached for the command, which may trail TIME (read live) by a few
	// milliseconds on a loaded machine: 50 ms of slack above, still far
	// from any wrong expiry (a token's refill is 20 s).
	now, _ := client.Time(ctx).Result()
	pttl := client.PTTL(ctx, "tg:"+ecsKey).Val() // read after now: about state-now
	if want := time.Duration(state - now.UnixNano()); pttl > want+50*time.Millisecond || pttl < want-10*time.Second {
		t.Fatalf("bucket expires in %v, want at the instant it is full (in %v)", pttl, want)
	}
	// A peek of an unused bucket writes nothing.
	if _, err := s.Take(ctx, ecsKey+"-peek", slow, 0); err != nil {
		t.Fatal(err)
	}
	if n := client.Exists(ctx, "tg:"+ecsKey+"-peek").Val(); n != 0 {
		t.Fatal("a peek created a key")
	}
	if st := s.Stats(); st.Redis != 52 || st.Fallback != 0 || st.Cached != 0 {
		t.Fatalf("stats %+v, want 52 Redis decisions", st)
	}
}

func TestOpenAndPing(t *testing.T) {
	t.Parallel() // its own redis-server and stores
	srv := redistest.Start(t)
	ctx := context.Background()
	s, err := Open(srv.URL()+"/3", Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	// A bucket in debt for an hour: its key exists for the whole test.
	hourly := bucket.MustLimit(1, 1.0/3600)
	if d, err := s.Take(ctx, ecsKey, hourly, 1); err != nil || !d.Allowed {
		t.Fatalf("take: %+v, %v", d, err)
	}
	db0 := newClient(t, srv)
	db3, err := NewClient(srv.URL() + "/3")
	if err != nil {
		t.Fatal(err)
	}
	defer db3.Close()
	if db0.Exists(ctx, s.Key(ecsKey)).Val() != 0 || db3.Exists(ctx, s.Key(ecsKey)).Val() != 1 {
		t.Fatal("the bucket is not in database 3 of the URL")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(ctx); err == nil {
		t.Fatal("Ping on a store whose client Close closed succeeded")
	}
	if _, err := Open("memcached://x", Options{}); !errors.Is(err, ErrInvalidURL) {
		t.Fatalf("Open with a bad URL: %v", err)
	}
	down := New(newClient(t, srv), Options{})
	defer down.Close()
	srv.Stop()
	if err := down.Ping(ctx); err == nil {
		t.Fatal("Ping succeeded with Redis stopped")
	}
}

func TestUnsupportedLimit(t *testing.T) {
	s := New(goredis.NewClient(&goredis.Options{Addr: closedAddr(t)}), Options{})
	defer s.Close()
	long := bucket.MustLimit(1<<30, 1) // refills in 34 years
	_, err := s.Take(context.Background(), "k", long, 1)
	if !errors.Is(err, ErrUnsupportedLimit) || !errors.Is(err, limiter.ErrInvalidRequest) {
		t.Fatalf("Take with a 34-year window: %v", err)
	}
	err = s.TakeBatch(context.Background(), []limiter.Request{{Key: "k", Limit: clusterRead, Tokens: 1}, {Key: "k", Limit: long, Tokens: 1}}, make([]bucket.Decision, 2))
	if !errors.Is(err, ErrUnsupportedLimit) {
		t.Fatalf("TakeBatch with a 34-year window: %v", err)
	}
	if st := s.Stats(); st != (Stats{}) {
		t.Fatalf("invalid requests were decided: %+v", st)
	}
}

func TestFailurePolicyWhenUnreachable(t *testing.T) {
	addr := closedAddr(t)
	for _, policy := range []FailurePolicy{FailLocal, FailOpen, FailClosed} {
		t.Run(policy.String(), func(t *testing.T) {
			client := goredis.NewClient(&goredis.Options{Addr: addr})
			defer client.Close()
			logs := newLogCounter()
			clock := limitertest.NewClock() // for the local buckets
			// One node: its share is the whole bucket.
			s := New(client, Options{FailurePolicy: policy, Nodes: 1, Logger: slog.New(logs), LogInterval: time.Hour, Timeout: 10 * time.Millisecond, Now: clock.Now})
			defer s.Close()
			ctx := context.Background()
			for i := range 30 {
				d, err := s.Take(ctx, ecsKey, clusterRead, 2)
				if err != nil {
					t.Fatalf("take %d: %v", i, err)
				}
				if i == 0 {
					if n := logs.n(slog.LevelWarn); n != 1 {
						t.Fatalf("%d warnings after the first decision by policy, want 1 at once", n)
					}
				}
				var want bucket.Decision
				switch policy {
				case FailOpen:
					want = bucket.Decision{Allowed: true, Limit: clusterRead, Remaining: 48, ResetAfter: 100 * time.Millisecond}
				case FailClosed:
					want = bucket.Decision{Limit: clusterRead, RetryAfter: 100 * time.Millisecond, ResetAfter: 2500 * time.Millisecond}
				case FailLocal:
					// The node's own bucket: 25 takes of 2, then none.
					if i < 25 {
						want = bucket.Decision{Allowed: true, Limit: clusterRead, Remaining: int64(48 - 2*i), ResetAfter: time.Duration(i+1) * 100 * time.Millisecond}
					} else {
						want = bucket.Decision{Limit: clusterRead, RetryAfter: 100 * time.Millisecond, ResetAfter: 2500 * time.Millisecond}
					}
				}
				if d != want {
					t.Fatalf("take %d: %+v, want %+v", i, d, want)
				}
			}
			out := make([]bucket.Decision, 2)
			err := s.TakeBatch(ctx, []limiter.Request{{Key: "a", Limit: clusterRead, Tokens: 1}, {Key: "b", Limit: clusterRead, Tokens: 51}}, out)
			if err != nil {
				t.Fatal(err)
			}
			if out[0].Allowed != (policy != FailClosed) || out[1].Allowed || out[1].RetryAfter != bucket.Never {
				t.Fatalf("batch: %+v", out)
			}
			if d, err := s.Take(ctx, "c", clusterRead, 51); !errors.Is(err, bucket.ErrExceedsCapacity) || d.RetryAfter != bucket.Never {
				t.Fatalf("oversized take while unreachable: %+v, %v", d, err)
			}
			if st := s.Stats(); st.Fallback != 33 || st.Redis != 0 || st.Errors == 0 {
				t.Fatalf("stats %+v, want 33 fallback decisions and errors counted", st)
			}
			if n := logs.n(slog.LevelWarn); n != 1 {
				t.Fatalf("%d warnings for 33 fallback decisions within the log interval, want 1", n)
			}
		})
	}
}

// TestTimeout checks the per-call timeout against a server that accepts
// connections and never answers, with a client that ignores contexts.
func TestTimeout(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	client := goredis.NewClient(&goredis.Options{Addr: l.Addr().String(), ReadTimeout: time.Minute, WriteTimeout: time.Minute, MaxRetries: -1})
	t.Cleanup(func() { client.Close() })
	s := newStore(t, client, Options{FailurePolicy: FailClosed, Timeout: 20 * time.Millisecond, Logger: slog.New(newLogCounter())})
	start := time.Now()
	d, err := s.Take(context.Background(), ecsKey, clusterRead, 1)
	if err != nil || d.Allowed {
		t.Fatalf("take from a silent server: %+v, %v; want denied by fail-closed", d, err)
	}
	// The client would wait a minute; the store's 20 ms timeout decides.
	if el := time.Since(start); el > 10*time.Second {
		t.Fatalf("take waited %v for a silent server", el)
	}
	if st := s.Stats(); st.Fallback != 1 {
		t.Fatalf("stats %+v, want 1 fallback", st)
	}

	// A caller's own context ending first is an error, not a decision.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	s2 := newStore(t, client, Options{Timeout: time.Hour})
	// Registered last, so it runs first: the stores' Close waits for
	// their pipelines, which wait for the connections to end.
	t.Cleanup(func() {
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	if _, err := s2.Take(ctx, ecsKey, clusterRead, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("take with an ending context: %v", err)
	}
	if err := s2.TakeBatch(ctx, []limiter.Request{{Key: "k", Limit: clusterRead, Tokens: 1}}, make([]bucket.Decision, 1)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("batch with an ended context: %v", err)
	}
	if st := s2.Stats(); st.Fallback != 0 {
		t.Fatalf("stats %+v: a caller's deadline was decided by policy", st)
	}
}

func TestClosed(t *testing.T) {
	s := New(goredis.NewClient(&goredis.Options{Addr: closedAddr(t)}), Options{})
	s.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Take(context.Background(), "k", clusterRead, 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("Take after Close: %v", err)
	}
}

func TestCorruptStateFallsBack(t *testing.T) {
	srv := redistest.Start(t)
	client := newClient(t, srv)
	ctx := context.Background()
	s := newStore(t, client, Options{FailurePolicy: FailClosed, Timeout: 10 * time.Second, Logger: slog.New(newLogCounter())})
	for _, v := range []string{"garbage", "-5", "12345678901234567890123"} {
		client.Set(ctx, s.Key("bad"), v, 0)
		if d, err := s.Take(ctx, "bad", clusterRead, 1); err != nil || d.Allowed {
			t.Fatalf("take on a key holding %q: %+v, %v", v, d, err)
		}
	}
	if st := s.Stats(); st.Errors != 3 || st.Fallback != 3 {
		t.Fatalf("stats %+v, want 3 errors", st)
	}
	// The script error stays with its own takes.
	out := make([]bucket.Decision, 2)
	if err := s.TakeBatch(ctx, []limiter.Request{{Key: "bad", Limit: clusterRead, Tokens: 1}, {Key: "{other}", Limit: clusterRead, Tokens: 1}}, out); err != nil {
		t.Fatal(err)
	}
	if out[0].Allowed {
		t.Fatalf("batch: %+v", out)
	}
}

func TestScriptReloadedAfterFlush(t *testing.T) {
	srv := redistest.Start(t)
	client := newClient(t, srv)
	ctx := context.Background()
	s := newStore(t, client, Options{Timeout: 10 * time.Second})
	slow := bucket.MustLimit(50, 0.01) // no token refills during the test
	for i := range 3 {
		if err := client.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if d, err := s.Take(ctx, ecsKey, slow, 1); err != nil || !d.Allowed || d.Remaining != int64(49-i) {
			t.Fatalf("take %d after SCRIPT FLUSH: %+v, %v", i, d, err)
		}
	}
	if st := s.Stats(); st.Redis != 3 || st.Fallback != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestDenyCacheOnRedisTime(t *testing.T) {
	srv := redistest.Start(t)
	client := newClient(t, srv)
	ctx := context.Background()
	s := newStore(t, client, Options{DenyCache: true, Timeout: 10 * time.Second})
	slow := bucket.MustLimit(5, 0.01) // a token every 100 s
	for range 5 {
		s.Take(ctx, ecsKey, slow, 1)
	}
	for range 10 {
		d, err := s.Take(ctx, ecsKey, slow, 1)
		if err != nil || d.Allowed || d.Remaining != 0 || d.RetryAfter <= 50*time.Second || d.RetryAfter > 100*time.Second {
			t.Fatalf("take on an empty bucket: %+v, %v", d, err)
		}
	}
	// The fifth take left the bucket empty: the cache denied all ten.
	if st := s.Stats(); st.Redis != 5 || st.Cached != 10 {
		t.Fatalf("stats %+v, want 5 decisions by Redis and 10 cached denials", st)
	}
	// The cache knows the state, not a denial: a limit with room left is
	// asked of Redis, and so are peeks.
	bigger := bucket.MustLimit(50, 0.01)
	if d, err := s.Take(ctx, ecsKey, bigger, 1); err != nil || !d.Allowed {
		t.Fatalf("take under a larger limit: %+v, %v", d, err)
	}
	if _, err := s.Take(ctx, ecsKey, slow, 0); err != nil {
		t.Fatalf("peek: %v", err)
	}
	if st := s.Stats(); st.Redis != 7 || st.Cached != 10 {
		t.Fatalf("stats %+v, want 7 decisions by Redis", st)
	}
	// Batches consult the cache item by item.
	out := make([]bucket.Decision, 3)
	reqs := []limiter.Request{{Key: ecsKey, Limit: slow, Tokens: 1}, {Key: "fresh", Limit: slow, Tokens: 1}, {Key: ecsKey, Limit: slow, Tokens: 2}}
	if err := s.TakeBatch(ctx, reqs, out); err != nil {
		t.Fatal(err)
	}
	if out[0].Allowed || !out[1].Allowed || out[2].Allowed {
		t.Fatalf("batch: %+v", out)
	}
	if st := s.Stats(); st.Redis != 8 || st.Cached != 12 {
		t.Fatalf("stats %+v, want 8 decisions by Redis and 12 cached", st)
	}
}

// TestDenyCacheStopsAtTheNextToken checks on a fake clock that the cache
// stops denying before the next token exists, and asks Redis from then on.
func TestDenyCacheStopsAtTheNextToken(t *testing.T) {
	srv := redistest.Start(t)
	client := newClient(t, srv)
	ctx := context.Background()
	c := limitertest.NewClock()
	// A timeout no loaded machine reaches (the default 50 ms may pass
	// while the first take opens a connection): every decision the test
	// counts is Redis's or the cache's.
	s := newStore(t, client, Options{DenyCache: true, Now: c.Now, Timeout: 10 * time.Second})
	limit := bucket.MustLimit(10, 1) // a token every second
	if d, _ := s.Take(ctx, "k", limit, 10); !d.Allowed {
		t.Fatal("burst denied")
	}
	c.Advance(900 * time.Millisecond)
	if d, _ := s.Take(ctx, "k", limit, 1); d.Allowed || d.RetryAfter != 100*time.Millisecond {
		t.Fatalf("at 0.9 s: %+v", d)
	}
	if st := s.Stats(); st.Cached != 1 {
		t.Fatalf("stats %+v, want the take at 0.9 s denied locally", st)
	}
	// Within the last 1/1024 of the wait the cache defers to Redis.
	c.Advance(100*time.Millisecond - time.Millisecond/2)
	if d, _ := s.Take(ctx, "k", limit, 1); d.Allowed {
		t.Fatalf("0.5 ms before the token: %+v", d)
	}
	if st := s.Stats(); st.Cached != 1 || st.Redis != 2 {
		t.Fatalf("stats %+v, want the take near the token asked of Redis", st)
	}
	c.Advance(time.Millisecond / 2)
	if d, _ := s.Take(ctx, "k", limit, 1); !d.Allowed {
		t.Fatalf("at the token: %+v", d)
	}
}

func TestDenyCacheForgetsFullBuckets(t *testing.T) {
	c := newDenyCache()
	limit := bucket.MustLimit(1, 1000) // full 1 ms after each take
	for ms := range int64(2000) {
		for i := range 100 {
			c.store(strconv.Itoa(int(ms))+"/"+strconv.Itoa(i), (ms+1)*1e6, ms*1e6)
		}
	}
	// In debt at any instant: the keys of the last millisecond.
	if n := c.len(); n > 2*denyMinSweep*denyShards {
		t.Fatalf("cache holds %d entries for 200,000 keys of which 100 are empty", n)
	}
	if _, ok := c.lookup("1999/5", limit, 1, 1999*1e6+5e5); !ok {
		t.Fatal("a fresh entry was swept")
	}
}

func TestParseFailurePolicy(t *testing.T) {
	if (Options{}).FailurePolicy != FailLocal {
		t.Fatal("the zero policy is not FailLocal")
	}
	for short, p := range map[string]FailurePolicy{"local": FailLocal, "open": FailOpen, "closed": FailClosed} {
		if q, err := ParseFailurePolicy(short); err != nil || q != p {
			t.Fatalf("%s: %v, %v", short, q, err)
		}
	}
	for _, p := range []FailurePolicy{FailLocal, FailOpen, FailClosed} {
		b, err := p.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var q FailurePolicy
		if err := q.UnmarshalText(b); err != nil || q != p {
			t.Fatalf("%s round trip: %v, %v", b, q, err)
		}
	}
	var q FailurePolicy
	if err := q.UnmarshalText([]byte("fail-maybe")); !errors.Is(err, ErrInvalidPolicy) {
		t.Fatalf("fail-maybe: %v", err)
	}
	if _, err := FailurePolicy(7).MarshalText(); !errors.Is(err, ErrInvalidPolicy) {
		t.Fatalf("policy 7: %v", err)
	}
	if FailurePolicy(7).String() != "FailurePolicy(7)" {
		t.Fatal(FailurePolicy(7).String())
	}
}

func FuzzParseFailurePolicy(f *testing.F) {
	for _, s := range []string{"fail-open", "fail-closed", "fail-local", "local", "open", "closed", "", "FAIL-OPEN", "fail-open "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseFailurePolicy(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidPolicy) {
				t.Fatalf("%q: error %v does not wrap ErrInvalidPolicy", s, err)
			}
			return
		}
		if p.String() != s && "fail-"+p.String() != s {
			t.Fatalf("%q parsed as %v", s, p)
		}
	})
}

// quietRedisLog drops go-redis's own log lines (dial failures) in tests.
type quietRedisLog struct{}

func (quietRedisLog) Printf(context.Context, string, ...any) {}

// TestMain starts every parallel test at once unless -parallel is given
// (go test's default is GOMAXPROCS, 2 here): each has its own
// redis-server, and they mostly wait on it, its stops and restarts.
func TestMain(m *testing.M) {
	goredis.SetLogger(quietRedisLog{})
	flag.Parse()
	testflags.ParallelDefault(16)
	os.Exit(m.Run())
}
