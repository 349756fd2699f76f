package redis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/limiter"
)

// TestOutageAndRecovery stops redis-server under load, checks that both
// policies decide while it is down, restarts it on the same port, and
// checks that decisions come from Redis again within about a second, with
// no call ever returning an error. The second outage lasts 2 s.
func TestOutageAndRecovery(t *testing.T) {
	t.Parallel() // its own redis-server(s) and stores
	if testing.Short() {
		t.Skip("stops and restarts redis-server")
	}
	srv := redistest.Start(t)
	ctx := context.Background()
	logs := newLogCounter()
	policies := []FailurePolicy{FailOpen, FailClosed}
	stores := make([]*Store, len(policies))
	// A timeout far above any answer time under -race on a loaded
	// machine: the only outages are the ones this test makes (a stopped
	// server refuses at once).
	for i, p := range policies {
		stores[i] = newStore(t, newClient(t, srv), Options{FailurePolicy: p, Logger: slog.New(logs), LogInterval: time.Hour, Timeout: 10 * time.Second})
	}
	// Redis denies every take of tight after the first, and allows every
	// take of roomy: a decision that differs is the policy's.
	tight := bucket.MustLimit(1, 0.001)
	roomy := bucket.MustLimit(1_000_000, 1_000_000)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for _, s := range stores {
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				reqs := []limiter.Request{{Key: fmt.Sprintf("load/%d", g), Limit: roomy, Tokens: 1}, {Key: "load/x", Limit: roomy, Tokens: 1}}
				out := make([]bucket.Decision, len(reqs))
				for {
					select {
					case <-stop:
						return
					default:
					}
					var err error
					if g%2 == 0 {
						_, err = s.Take(ctx, fmt.Sprintf("load/%d", g), roomy, 1)
					} else {
						err = s.TakeBatch(ctx, reqs, out)
					}
					if err != nil {
						errs <- err
						return
					}
					time.Sleep(time.Millisecond) // a steady load, not a spin
				}
			}()
		}
	}
	defer func() {
		close(stop)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("take under load returned %v", err)
		}
	}()

	open, closed := stores[0], stores[1]
	mustTake := func(s *Store, key string, limit bucket.Limit) bucket.Decision {
		t.Helper()
		d, err := s.Take(ctx, key, limit, 1)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	mustTake(open, "tight", tight)
	if mustTake(open, "tight", tight).Allowed {
		t.Fatal("Redis allowed the second take of a 1-token bucket")
	}
	if !mustTake(closed, "roomy", roomy).Allowed {
		t.Fatal("Redis denied a roomy take")
	}

	for round := range 2 {
		srv.Stop()
		before := [2]Stats{open.Stats(), closed.Stats()}
		for range 20 {
			if !mustTake(open, "tight", tight).Allowed {
				t.Fatalf("round %d: fail-open denied while Redis is down", round)
			}
			if mustTake(closed, "roomy", roomy).Allowed {
				t.Fatalf("round %d: fail-closed allowed while Redis is down", round)
			}
		}
		for i, s := range []*Store{open, closed} {
			if st := s.Stats(); st.Fallback < before[i].Fallback+20 {
				t.Fatalf("round %d: %v store counted %d fallback decisions for 20 takes", round, policies[i], st.Fallback-before[i].Fallback)
			}
		}
		if n := logs.n(slog.LevelWarn); n != 2 {
			t.Fatalf("round %d: %d warnings, want one per store", round, n)
		}
		if round == 1 {
			// A longer outage under load, long enough for go-redis to
			// stop dialling on every command and probe once a second.
			time.Sleep(2 * time.Second)
		}

		srv.Restart()
		up := time.Now()
		recovered := [2]time.Duration{-1, -1}
		for recovered[0] < 0 || recovered[1] < 0 {
			if time.Since(up) > 20*time.Second {
				t.Fatalf("round %d: decisions still by policy 20 s after Redis returned", round)
			}
			for i, s := range []*Store{open, closed} {
				if recovered[i] >= 0 {
					continue
				}
				r0 := s.Stats().Redis
				s.Take(ctx, "probe", roomy, 1)
				if s.Stats().Redis > r0 {
					recovered[i] = time.Since(up)
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Logf("round %d: decisions back on Redis after %v (fail-open store), %v (fail-closed store)", round, recovered[0], recovered[1])
		// go-redis probes a refused server once a second; allow for a
		// loaded machine (load average 8 on two cores) on top.
		for i, d := range recovered {
			if d > 5*time.Second {
				t.Errorf("round %d: %v store went back to Redis after %v, want about 1 s", round, policies[i], d)
			}
		}
		// Back on Redis, which lost its data in the restart: a fresh
		// tight bucket admits one take, then denies.
		if !mustTake(open, "tight", tight).Allowed || mustTake(open, "tight", tight).Allowed {
			t.Fatalf("round %d: decisions after recovery are not Redis's", round)
		}
		if !mustTake(closed, "roomy", roomy).Allowed {
			t.Fatalf("round %d: fail-closed still denies after recovery", round)
		}
		if n := logs.n(slog.LevelInfo); n != 2*(round+1) {
			logs.dump(t)
			t.Fatalf("round %d: %d recovery log lines, want one per store per outage", round, n)
		}
		logs = resetWarnings(logs, stores)
	}
}

// resetWarnings gives the stores a fresh log counter and log interval, so
// the next outage logs again.
func resetWarnings(old *logCounter, stores []*Store) *logCounter {
	for _, s := range stores {
		s.lastLog.Store(-s.logEvery)
	}
	old.mu.Lock()
	defer old.mu.Unlock()
	old.count[slog.LevelWarn] = 0
	return old
}

// A pipeline sent before an outage ended that fails after it (its dial
// was still retrying when Redis came back) belongs to that outage: it
// logs no new outage and no second recovery. A pipeline sent after the
// recovery that fails begins a new outage, logged at once.
func TestAFailureSentBeforeRecoveryIsTheEndedOutages(t *testing.T) {
	logs := newLogCounter()
	s := New(goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1"}), Options{Logger: slog.New(logs), LogInterval: time.Hour})
	defer s.Close()
	down := errors.New("test: Redis is down")
	now := func() int64 { return int64(time.Since(s.epoch)) }

	s.noteDown(down, now())
	during := now() // a pipeline sent during the outage, answered late
	s.noteUp(now())
	if w, i := logs.n(slog.LevelWarn), logs.n(slog.LevelInfo); w != 1 || i != 1 {
		t.Fatalf("the outage: %d warnings, %d recoveries logged; want 1, 1", w, i)
	}
	s.noteDown(down, during)
	s.noteUp(now())
	if w, i := logs.n(slog.LevelWarn), logs.n(slog.LevelInfo); w != 1 || i != 1 {
		logs.dump(t)
		t.Fatalf("after a late failure of a pipeline sent during it: %d warnings, %d recoveries logged; want still 1, 1", w, i)
	}
	s.noteDown(down, now()) // sent after the recovery: a new outage
	s.noteUp(now())
	if w, i := logs.n(slog.LevelWarn), logs.n(slog.LevelInfo); w != 2 || i != 2 {
		logs.dump(t)
		t.Fatalf("a new outage: %d warnings, %d recoveries logged in all; want 2, 2", w, i)
	}
}
