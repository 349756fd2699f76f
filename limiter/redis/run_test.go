package redis

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/internal/redistest"
)

// records returns the records of h at level l whose message contains sub.
func (h *logCounter) records(l slog.Level, sub string) []slog.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []slog.Record
	for _, r := range h.all {
		if r.Level == l && strings.Contains(r.Message, sub) {
			out = append(out, r)
		}
	}
	return out
}

// TestNeverReachedIsNotReady: a store that has never reached Redis is not
// ready unless its policy is open (before, a local or open store said
// ready); one that has reached Redis once stays ready under local while
// Redis is down, as before.
func TestNeverReachedIsNotReady(t *testing.T) {
	addr := closedAddr(t)
	ctx := context.Background()
	for policy, ready := range map[FailurePolicy]bool{FailLocal: false, FailOpen: true, FailClosed: false} {
		s := newStore(t, goredis.NewClient(&goredis.Options{Addr: addr}), Options{FailurePolicy: policy, Logger: slog.New(slog.DiscardHandler)})
		h := s.Health(ctx)
		if h.Ready != ready || !strings.Contains(h.Status, "never reached") || s.Reached() {
			t.Errorf("%v, never reached: %+v (reached %v); want ready %v and \"never reached\"", policy, h, s.Reached(), ready)
		}
	}
	if testing.Short() {
		return
	}
	srv := redistest.Start(t)
	s := newStore(t, newClient(t, srv), Options{Nodes: 1, Logger: slog.New(slog.DiscardHandler)})
	if h := s.Health(ctx); !h.Ready || !s.Reached() {
		t.Fatalf("Redis up: %+v (reached %v)", h, s.Reached())
	}
	srv.Stop()
	s.resetHealth()
	if h := s.Health(ctx); !h.Ready || !strings.Contains(h.Status, "redis down") {
		t.Fatalf("Redis down after it was reached, policy local: %+v; want ready, \"redis down\"", h)
	}
}

// TestNeverReachedLogsErrorsAtABoundedRate: Run logs an error at once
// while Redis has never answered, then again at most once per log
// interval (before, one warning at start said it); a store that reaches
// Redis logs none.
func TestNeverReachedLogsErrorsAtABoundedRate(t *testing.T) {
	t.Parallel() // its own stores
	logs := newLogCounter()
	const every = 300 * time.Millisecond
	// Announcing every 10 ms: far more often than the errors may come.
	s := newStore(t, goredis.NewClient(&goredis.Options{Addr: closedAddr(t)}), Options{Logger: slog.New(logs), LogInterval: every, NodeTTL: 30 * time.Millisecond})
	runStore(t, s)
	var errs []slog.Record
	for deadline := time.Now().Add(30 * time.Second); len(errs) < 3; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			logs.dump(t)
			t.Fatalf("%d errors in 30 s, want 3", len(errs))
		}
		errs = logs.records(slog.LevelError, "never answered")
	}
	for i := 1; i < len(errs); i++ {
		if gap := errs[i].Time.Sub(errs[i-1].Time); gap < every {
			logs.dump(t)
			t.Fatalf("errors %d and %d %v apart, under the log interval %v", i-1, i, gap, every)
		}
	}
	if testing.Short() {
		return
	}
	srv := redistest.Start(t)
	up := newLogCounter()
	r := newStore(t, newClient(t, srv), Options{Logger: slog.New(up), LogInterval: every, NodeTTL: 30 * time.Millisecond})
	runStore(t, r)
	waitNodes(t, 1, r)
	time.Sleep(2 * every)
	if n := up.n(slog.LevelError); n != 0 {
		up.dump(t)
		t.Fatalf("a store that reached Redis logged %d errors", n)
	}
}

// TestWarnsWithoutPersistence: Run warns once when Redis keeps neither an
// AOF nor RDB snapshots (redistest starts it with --save "" --appendonly
// no); not when it keeps either, nor when CONFIG is refused.
func TestWarnsWithoutPersistence(t *testing.T) {
	t.Parallel() // its own redis-server and stores
	if testing.Short() {
		t.Skip("starts redis-server")
	}
	srv := redistest.Start(t)
	ctx := context.Background()
	logs := newLogCounter()
	s := newStore(t, newClient(t, srv), Options{Logger: slog.New(logs)})
	runStore(t, s)
	for deadline := time.Now().Add(30 * time.Second); len(logs.records(slog.LevelWarn, "no persistence")) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			logs.dump(t)
			t.Fatal("no warning about a Redis without persistence in 30 s")
		}
	}
	if w := logs.records(slog.LevelWarn, "no persistence")[0]; !strings.Contains(w.Message, "restart of Redis refills every bucket") {
		t.Fatalf("warning %q does not say what a restart does", w.Message)
	}

	admin := newClient(t, srv)
	check := func(name string, client goredis.UniversalClient) {
		t.Helper()
		logs := newLogCounter()
		s := newStore(t, client, Options{Logger: slog.New(logs)})
		s.checkPersistence(ctx)
		if n, e := logs.n(slog.LevelWarn), logs.n(slog.LevelError); n != 0 || e != 0 {
			logs.dump(t)
			t.Fatalf("%s: %d warnings, %d errors; want none", name, n, e)
		}
	}
	// CONFIG refused to a user without it.
	if err := admin.Do(ctx, "ACL", "SETUSER", "noconfig", "on", ">secret", "~*", "+@all", "-config").Err(); err != nil {
		t.Fatal(err)
	}
	limited := goredis.NewClient(&goredis.Options{Addr: srv.Addr, Username: "noconfig", Password: "secret"})
	t.Cleanup(func() { limited.Close() })
	check("CONFIG refused", limited)
	if err := admin.ConfigSet(ctx, "save", "3600 1").Err(); err != nil {
		t.Fatal(err)
	}
	check("RDB snapshots", admin)
	if err := admin.ConfigSet(ctx, "save", "").Err(); err != nil {
		t.Fatal(err)
	}
	if err := admin.ConfigSet(ctx, "appendonly", "yes").Err(); err != nil {
		t.Fatal(err)
	}
	check("an append-only file", admin)
}

// TestSaysWhatARestartLoses: the store reads Redis's persistence settings
// and says, in its log and its health status, what a restart of Redis
// would lose: nothing with appendonly yes and appendfsync always; up to a
// second with everysec; the takes since the last snapshot with RDB only;
// and, CONFIG GET refused, what INFO persistence tells.
func TestSaysWhatARestartLoses(t *testing.T) {
	t.Parallel() // its own redis-server and stores
	if testing.Short() {
		t.Skip("starts redis-server")
	}
	srv := redistest.Start(t)
	ctx := context.Background()
	admin := newClient(t, srv)
	set := func(k, v string) {
		t.Helper()
		if err := admin.ConfigSet(ctx, k, v).Err(); err != nil {
			t.Fatal(err)
		}
	}
	says := func(client goredis.UniversalClient, want string) {
		t.Helper()
		s := newStore(t, client, Options{Nodes: 1, Timeout: 10 * time.Second, Logger: slog.New(slog.DiscardHandler)})
		s.checkPersistence(ctx)
		s.waitHealthy(t)
		if h := s.Health(ctx); !strings.Contains(s.Persistence(), want) || !strings.Contains(h.Status, "a restart of Redis "+want) {
			t.Fatalf("persistence %q, health %q; want %q", s.Persistence(), h.Status, want)
		}
	}
	says(admin, "loses every bucket (appendonly no, save \"\")")
	set("save", "3600 1")
	says(admin, "loses the takes since its last RDB snapshot (appendonly no, save \"3600 1\"")
	set("appendonly", "yes")
	set("appendfsync", "everysec")
	says(admin, "loses up to 1 s of takes")
	set("appendfsync", "always")
	says(admin, "loses nothing (appendonly yes, appendfsync always)")
	if err := admin.Do(ctx, "ACL", "SETUSER", "noconfig", "on", ">secret", "~*", "+@all", "-config").Err(); err != nil {
		t.Fatal(err)
	}
	limited := goredis.NewClient(&goredis.Options{Addr: srv.Addr, Username: "noconfig", Password: "secret"})
	t.Cleanup(func() { limited.Close() })
	says(limited, "loses at most what its append-only file's fsync policy allows (aof_enabled:1; appendfsync unknown: CONFIG GET refused)")
}
