package redis

import (
	"context"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/limiter"
)

// roundTrips is a go-redis hook counting what reaches the network: single
// commands and pipelines, the commands inside them, and the keys of the
// script calls among those (one per take of a distinct key).
type roundTrips struct {
	commands, pipelines, pipelined, scriptKeys atomic.Int64
}

func (h *roundTrips) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h *roundTrips) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		h.commands.Add(1)
		return next(ctx, cmd)
	}
}

func (h *roundTrips) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		h.pipelines.Add(1)
		h.pipelined.Add(int64(len(cmds)))
		for _, cmd := range cmds {
			if args := cmd.Args(); len(args) > 2 && (cmd.Name() == "evalsha" || cmd.Name() == "eval") {
				if n, ok := args[2].(int); ok {
					h.scriptKeys.Add(int64(n))
				}
			}
		}
		return next(ctx, cmds)
	}
}

func (h *roundTrips) total() int64 { return h.commands.Load() + h.pipelines.Load() }

func TestBatchIsOneRoundTrip(t *testing.T) {
	srv := redistest.Start(t)
	client := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
	defer client.Close()
	hook := &roundTrips{}
	client.AddHook(hook)
	s := newStore(t, client, Options{Timeout: 10 * time.Second})
	ctx := context.Background()
	limit := bucket.MustLimit(50, 20)
	reqs := make([]limiter.Request, 100)
	for i := range reqs {
		reqs[i] = limiter.Request{Key: fmt.Sprintf("{ecs/123456789012}:us-east-1:cat-%d", i%10), Limit: limit, Tokens: 1}
	}
	// The first batch also opens a connection (go-redis sends its
	// handshake then); count the second.
	if err := s.TakeBatch(ctx, reqs, make([]bucket.Decision, len(reqs))); err != nil {
		t.Fatal(err)
	}
	before := hook.total()
	if err := s.TakeBatch(ctx, reqs, make([]bucket.Decision, len(reqs))); err != nil {
		t.Fatal(err)
	}
	if got := hook.total() - before; got != 1 {
		t.Fatalf("a batch of 100 takes made %d round trips (%d commands, %d pipelines of %d commands), want 1",
			got, hook.commands.Load(), hook.pipelines.Load(), hook.pipelined.Load())
	}
}

func TestConcurrentTakesShareRoundTrips(t *testing.T) {
	srv := redistest.Start(t)
	// A proxy in front of Redis holds every connection's traffic until
	// released, so that takes pile up while the first is in flight.
	gate := make(chan struct{})
	proxy := holdingProxy(t, srv.Addr, gate)
	client := goredis.NewClient(&goredis.Options{Addr: proxy})
	defer client.Close()
	hook := &roundTrips{}
	client.AddHook(hook)
	s := newStore(t, client, Options{Timeout: 30e9, Pipelines: 1})
	ctx := context.Background()
	limit := bucket.MustLimit(50, 20)

	const callers = 64
	var wg sync.WaitGroup
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if d, err := s.Take(ctx, fmt.Sprintf("{acct-%d}:r:c", i), limit, 1); err != nil || !d.Allowed {
				t.Errorf("take %d: %+v %v", i, d, err)
			}
		}()
	}
	// Let the takes queue behind the first pipeline (held at the proxy;
	// it carries the takes whose goroutines ran before it went out), then
	// open the gate. Waiting longer than needed changes nothing.
	for deadline := time.Now().Add(30 * time.Second); int64(len(s.queue))+hook.scriptKeys.Load() < callers && time.Now().Before(deadline); {
		runtime.Gosched()
	}
	close(gate)
	wg.Wait()
	if got := hook.total(); got >= callers/4 {
		t.Fatalf("%d concurrent takes made %d round trips; want them coalesced into a few pipelines", callers, got)
	}
	t.Logf("%d concurrent takes in %d round trips", callers, hook.total())
}

func copyConn(dst, src net.Conn) { io.Copy(dst, src) }

// holdingProxy forwards TCP to addr, but only once gate is closed.
func holdingProxy(t *testing.T, addr string, gate <-chan struct{}) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				<-gate
				up, err := net.Dial("tcp", addr)
				if err != nil {
					return
				}
				defer up.Close()
				go copyConn(up, c)
				copyConn(c, up)
			}()
		}
	}()
	return ln.Addr().String()
}

// TestRunnableTakesJoinOneRoundTrip: on one core (GOMAXPROCS 1), takes
// whose goroutines are ready to run when the first is queued go out in
// the first's pipeline, not one pipeline each while a pipeline goroutine
// is idle. With the pipeline goroutines' yields, 5 bursts of 16 made 5
// pipelines in 19 runs of 20 and 7 in one; without them, 14 or 15 (a
// burst was 1, 1, then the other 14).
func TestRunnableTakesJoinOneRoundTrip(t *testing.T) {
	// Not parallel: GOMAXPROCS is the process's.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	srv := redistest.Start(t)
	client := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
	defer client.Close()
	hook := &roundTrips{}
	client.AddHook(hook)
	s := newStore(t, client, Options{Timeout: 30 * time.Second})
	ctx := context.Background()
	limit := bucket.MustLimit(50, 0.01) // no token refills during the test
	burst := func(round int) {
		var wg sync.WaitGroup
		for i := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if d, err := s.Take(ctx, fmt.Sprintf("{acct-%d}:r:c", i), limit, 1); err != nil || d.Remaining != int64(49-round) {
					t.Errorf("round %d, take %d: %+v %v", round, i, d, err)
				}
			}()
		}
		wg.Wait()
	}
	// The first bursts open the pipelines' connections (go-redis sends
	// its handshake then); count the next ones.
	burst(0)
	burst(1)
	const bursts = 5
	before := hook.pipelines.Load()
	for r := range bursts {
		burst(2 + r)
	}
	got := hook.pipelines.Load() - before
	t.Logf("%d bursts of 16 takes in %d pipelines", bursts, got)
	if got >= 2*bursts {
		t.Fatalf("%d bursts of 16 ready takes made %d pipelines; want about one each (fewer than 2 each)", bursts, got)
	}
}

// TestManyLimitsKeepTheirArguments: takes under more distinct limits than
// a pipeline goroutine keeps boxed (maxLimitArgs, after which it forgets
// them) are each decided under their own limit.
func TestManyLimitsKeepTheirArguments(t *testing.T) {
	t.Parallel() // its own redis-server and store
	srv := redistest.Start(t)
	s := newStore(t, newClient(t, srv), Options{Timeout: 30 * time.Second, Pipelines: 1})
	ctx := context.Background()
	const perBatch = 1000
	for b := range maxLimitArgs/perBatch + 2 {
		reqs := make([]limiter.Request, perBatch)
		out := make([]bucket.Decision, perBatch)
		for i := range reqs {
			capacity := int64(b*perBatch + i + 2)
			reqs[i] = limiter.Request{Key: fmt.Sprintf("{many}:%d", capacity), Limit: bucket.MustLimit(capacity, 0.01), Tokens: 2}
		}
		if err := s.TakeBatch(ctx, reqs, out); err != nil {
			t.Fatal(err)
		}
		for i, d := range out {
			if c := reqs[i].Limit.Capacity(); !d.Allowed || d.Remaining != c-2 {
				t.Fatalf("batch %d, take %d of 2 tokens from a bucket of %d: %+v", b, i, c, d)
			}
		}
	}
}
