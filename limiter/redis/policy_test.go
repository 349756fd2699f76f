package redis

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/internal/logtest"
	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/limiter"
)

// TestFailurePoliciesWhenRedisStopsOrDies runs each failure policy against
// a redis-server paused with SIGSTOP (connections accepted, no answer: the
// store's timeout decides) and one killed (connections refused), then
// brought back. A bucket of 3 tokens that refills once an hour is emptied
// on Redis first; while Redis is away FailLocal admits 3 takes of it from
// the node's own bucket and then denies, FailOpen admits all, FailClosed
// none. The first decision by policy logs a warning at once; /readyz-style
// health reports the outage (not ready only under FailClosed); once Redis
// is back its decisions resume, and the outage logged lasts at least as
// long as the test held Redis down after the first decision by policy.
func TestFailurePoliciesWhenRedisStopsOrDies(t *testing.T) {
	t.Parallel() // its own redis-server(s) and stores
	if testing.Short() {
		t.Skip("stops and kills redis-server")
	}
	hourly := bucket.MustLimit(3, 1.0/3600)
	roomy := bucket.MustLimit(1_000_000, 1_000_000)
	for _, mode := range []string{"SIGSTOP", "killed"} {
		for _, policy := range []FailurePolicy{FailLocal, FailOpen, FailClosed} {
			t.Run(mode+"/"+policy.String(), func(t *testing.T) {
				t.Parallel() // each case stops or kills its own redis-server
				srv := redistest.Start(t)
				ctx := context.Background()
				// The setup store waits as long as a loaded machine needs.
				setup := newStore(t, newClient(t, srv), Options{Timeout: 10 * time.Second})
				for i := range 4 {
					d, err := setup.Take(ctx, "k", hourly, 1)
					if err != nil || d.Allowed != (i < 3) {
						t.Fatalf("setup take %d: %+v, %v", i, d, err)
					}
				}
				logs := newLogCounter()
				// Short enough to keep a paused Redis from slowing the test.
				s := newStore(t, newClient(t, srv), Options{FailurePolicy: policy, Nodes: 1, Timeout: 100 * time.Millisecond, Logger: slog.New(logs), LogInterval: time.Hour})
				s.waitHealthy(t)

				if mode == "SIGSTOP" {
					srv.Pause()
				} else {
					srv.Stop()
				}
				var down time.Time // the first decision by policy: the outage as the store sees it
				for i := range 5 {
					d, err := s.Take(ctx, "k", hourly, 1)
					if err != nil {
						t.Fatalf("take %d with Redis %s: %v", i, mode, err)
					}
					if i == 0 {
						down = time.Now()
						if n := logs.n(slog.LevelWarn); n != 1 {
							t.Fatalf("%d warnings after the first decision by policy, want 1 at once", n)
						}
					}
					var want bool
					switch policy {
					case FailLocal:
						want = i < 3
					case FailOpen:
						want = true
					}
					if d.Allowed != want {
						t.Fatalf("take %d with Redis %s under %v: %+v, want allowed %v", i, mode, policy, d, want)
					}
					if policy == FailLocal && !d.Allowed && (d.RetryAfter <= 59*time.Minute || d.Remaining != 0) {
						t.Fatalf("local denial: %+v, want a retry in about an hour", d)
					}
				}
				if st := s.Stats(); st.Fallback != 5 || st.Redis != 0 {
					t.Fatalf("stats %+v, want 5 decisions by policy", st)
				}
				if n := logs.n(slog.LevelWarn); n != 1 {
					t.Fatalf("%d warnings within the log interval, want 1", n)
				}
				s.resetHealth()
				h := s.Health(ctx)
				if h.Ready != (policy != FailClosed) || !strings.Contains(h.Status, "redis down") || !strings.Contains(h.Status, policy.String()) {
					t.Fatalf("health with Redis %s under %v: %+v", mode, policy, h)
				}
				time.Sleep(300 * time.Millisecond) // an outage measurably longer than a take

				if mode == "SIGSTOP" {
					srv.Resume()
				} else {
					srv.Restart()
				}
				held := time.Since(down)
				deadline := time.Now().Add(20 * time.Second)
				for r0 := s.Stats().Redis; s.Stats().Redis == r0; {
					if time.Now().After(deadline) {
						t.Fatalf("decisions still by policy 20 s after Redis came back")
					}
					s.Take(ctx, "probe", roomy, 1)
					time.Sleep(10 * time.Millisecond)
				}
				// Redis decides "k" again: still empty after SIGSTOP; after
				// the restart of a server without data, new and full,
				// except under FailLocal, which wrote back the 3 tokens it
				// admitted on its own while Redis was away: empty again.
				for deadline := time.Now().Add(20 * time.Second); ; {
					r0 := s.Stats().Redis
					d, err := s.Take(ctx, "k", hourly, 1)
					if err != nil {
						t.Fatal(err)
					}
					if s.Stats().Redis > r0 {
						if d.Allowed != (mode == "killed" && policy != FailLocal) {
							t.Fatalf("Redis's decision after %s: %+v", mode, d)
						}
						break
					}
					if time.Now().After(deadline) {
						t.Fatal("a take of k was not decided by Redis within 20 s")
					}
				}
				// A take timing out on a loaded machine may begin another
				// outage later; the first recovery line is this one's.
				if n := logs.n(slog.LevelInfo); n < 1 {
					t.Fatal("no recovery line")
				}
				outage := logs.firstAttr(slog.LevelInfo, "outage").Duration()
				if outage < held-time.Millisecond { // rounded to the ms
					t.Fatalf("logged outage %v, but Redis was away for at least %v", outage, held)
				}
				s.waitHealthy(t)
			})
		}
	}
}

// waitHealthy waits until Health reports Redis up and the store ready: a
// check may time out on a loaded machine, so it asks again for up to 20 s.
func (s *Store) waitHealthy(t *testing.T) {
	t.Helper()
	var h limiter.Health
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		s.resetHealth()
		if h = s.Health(context.Background()); h.Ready && strings.Contains(h.Status, "redis up") {
			return
		}
	}
	t.Fatalf("health: %+v; want redis up", h)
}

// resetHealth forgets the cached health check, for tests.
func (s *Store) resetHealth() {
	s.health.mu.Lock()
	s.health.at = time.Time{}
	s.health.mu.Unlock()
}

// firstAttr returns attribute key of the first record at level l.
func (h *logCounter) firstAttr(l slog.Level, key string) slog.Value {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.all {
		if r.Level != l {
			continue
		}
		var v slog.Value
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == key {
				v = a.Value
				return false
			}
			return true
		})
		return v
	}
	return slog.Value{}
}

// attr returns attribute key of the last record at level l.
func (h *logCounter) attr(l slog.Level, key string) slog.Value {
	h.mu.Lock()
	defer h.mu.Unlock()
	var v slog.Value
	h.last[l].Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v = a.Value
			return false
		}
		return true
	})
	return v
}

// TestClientLoggerIsSlogAndThrottled lets go-redis fail to dial a dead
// server many times with its logger set by SetClientLogger: it logs
// through slog (JSON here), one line per interval.
func TestClientLoggerIsSlogAndThrottled(t *testing.T) {
	var buf logtest.Buffer
	SetClientLogger(slog.New(slog.NewJSONHandler(&buf, nil)), time.Hour)
	t.Cleanup(func() { SetClientLogger(slog.New(slog.DiscardHandler), 0) })
	client, err := NewClient("redis://" + closedAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	s := newStore(t, client, Options{FailurePolicy: FailClosed, Timeout: 200 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	ctx := context.Background()
	for range 20 {
		if d, err := s.Take(ctx, "k", clusterRead, 1); err != nil || d.Allowed {
			t.Fatalf("take from a dead server under fail-closed: %+v, %v", d, err)
		}
	}
	if st := s.Stats(); st.Errors < 2 {
		t.Fatalf("stats %+v: go-redis had few chances to log", st)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("go-redis logged %d lines within the interval, want 1:\n%s", len(lines), buf.String())
	}
	var rec struct {
		Level, Msg, Message string
	}
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatalf("go-redis line is not the slog JSON handler's: %v: %s", err, lines[0])
	}
	if rec.Level != "WARN" || rec.Msg != "redis client" || !strings.Contains(rec.Message, "dial") {
		t.Fatalf("go-redis line %+v", rec)
	}
}

// TestClientLogCountsWhatItLeavesOut checks the throttle's count.
func TestClientLogCountsWhatItLeavesOut(t *testing.T) {
	logs := newLogCounter()
	l := &clientLog{log: slog.New(logs), every: time.Hour}
	for i := range 5 {
		l.Printf(context.Background(), "failed to dial %d", i)
	}
	if n := logs.n(slog.LevelWarn); n != 1 {
		t.Fatalf("%d lines within the interval, want 1", n)
	}
	l.last = l.last.Add(-time.Hour) // the interval has passed
	l.Printf(context.Background(), "failed again")
	if n := logs.n(slog.LevelWarn); n != 2 {
		t.Fatalf("%d lines after the interval, want 2", n)
	}
	if got := logs.attr(slog.LevelWarn, "suppressed").Int64(); got != 4 {
		t.Fatalf("suppressed = %d, want 4", got)
	}
	if got := logs.attr(slog.LevelWarn, "message").String(); got != "failed again" {
		t.Fatalf("message = %q", got)
	}
}

// TestOutageLogsAreThrottled checks the store's outage log on its own:
// the start of each of the first outages is logged at its first decision by
// policy, and its end once; beyond startLogBurst outages within the log
// interval (a flapping Redis) a start is not logged at once, and the next
// warning counts it.
func TestOutageLogsAreThrottled(t *testing.T) {
	logs := newLogCounter()
	s := newStore(t, goredisClient(t), Options{Logger: slog.New(logs), LogInterval: time.Hour})
	cause := errors.New("connection refused")
	for i := range startLogBurst {
		s.noteDown(cause, -1)
		s.noteDown(cause, -1)
		if n := logs.n(slog.LevelWarn); n != i+1 {
			t.Fatalf("outage %d: %d warnings, want %d: one at the start of each", i, n, i+1)
		}
		s.noteUp(int64(time.Since(s.epoch)))
		s.noteUp(int64(time.Since(s.epoch)))
		if n := logs.n(slog.LevelInfo); n != i+1 {
			t.Fatalf("outage %d: %d recovery lines, want %d", i, n, i+1)
		}
	}
	// One more outage within the hour: deferred, and its end not logged.
	s.noteDown(cause, -1)
	s.noteUp(int64(time.Since(s.epoch)))
	s.noteDown(cause, -1) // and another
	if w, i := logs.n(slog.LevelWarn), logs.n(slog.LevelInfo); w != startLogBurst || i != startLogBurst {
		t.Fatalf("%d warnings and %d recovery lines after a burst of outages, want %d and %d", w, i, startLogBurst, startLogBurst)
	}
	s.lastLog.Store(s.lastLog.Load() - int64(time.Hour)) // the hour has passed
	s.noteDown(cause, -1)
	if n := logs.n(slog.LevelWarn); n != startLogBurst+1 {
		t.Fatalf("%d warnings after the interval, want %d", n, startLogBurst+1)
	}
	if got := logs.attr(slog.LevelWarn, "outages").Uint64(); got != 2 {
		t.Fatalf("warning counts %d outages, want the 2 begun since the last one", got)
	}
	if got := logs.attr(slog.LevelWarn, "decisions").Uint64(); got != 4 {
		t.Fatalf("warning counts %d decisions, want the 4 since the last one", got)
	}
	s.noteUp(int64(time.Since(s.epoch)))
	if n := logs.n(slog.LevelInfo); n != startLogBurst+1 {
		t.Fatalf("%d recovery lines, want %d: the current outage's start was logged", n, startLogBurst+1)
	}
}

// goredisClient returns a client of an address nothing listens on.
func goredisClient(t *testing.T) goredis.UniversalClient {
	c := goredis.NewClient(&goredis.Options{Addr: closedAddr(t)})
	t.Cleanup(func() { c.Close() })
	return c
}

// TestLateAnswerDoesNotEndOutage: a caller stops waiting after the
// store's timeout, counted from when it queued its take, so the pipeline
// carrying that take may be answered after the caller began an outage.
// That answer, to a pipeline sent before the outage began, does not end it;
// an answer to one sent after does.
func TestLateAnswerDoesNotEndOutage(t *testing.T) {
	logs := newLogCounter()
	s := newStore(t, goredisClient(t), Options{Logger: slog.New(logs), LogInterval: time.Hour})
	sent := int64(time.Since(s.epoch))
	time.Sleep(time.Millisecond)
	s.noteDown(errTimeout, -1)
	s.noteUp(sent)
	if !s.down.Load() || logs.n(slog.LevelInfo) != 0 {
		t.Fatalf("a late answer to a pipeline sent before the outage ended it")
	}
	s.noteUp(int64(time.Since(s.epoch)))
	if s.down.Load() || logs.n(slog.LevelInfo) != 1 {
		t.Fatalf("an answer to a pipeline sent after the outage began did not end it")
	}
}
