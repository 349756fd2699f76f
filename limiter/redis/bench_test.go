package redis

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/limiter"
)

// benchAccounts is the number of accounts the benchmarks spread takes
// over: at 100,000 decisions/s each bucket sees about one take a second,
// well under its 20/s refill, so nearly every take is allowed and writes.
const benchAccounts = 100_000

var benchAPIs = func() []string {
	apis := make([]string, 100)
	for i := range apis {
		apis[i] = "api-" + strconv.Itoa(i)
	}
	return apis
}()

// BenchmarkTake measures decisions per second against a local
// redis-server, with 1, 16 and 64 goroutines calling Take (batch=1) or
// TakeBatch with 10 or 100 takes of one account's buckets.
func BenchmarkTake(b *testing.B) {
	srv := redistest.Start(b)
	for _, batch := range []int{1, 10, 100} {
		for _, callers := range []int{1, 16, 64} {
			b.Run(fmt.Sprintf("batch=%d/callers=%d", batch, callers), func(b *testing.B) {
				benchTake(b, srv, Options{Timeout: time.Second}, batch, callers)
			})
		}
	}
}

// BenchmarkTakePipelines varies the number of pipelines in flight.
func BenchmarkTakePipelines(b *testing.B) {
	srv := redistest.Start(b)
	for _, callers := range []int{1, 16, 64} {
		for _, p := range []int{1, 2, 4, 8} {
			b.Run(fmt.Sprintf("pipelines=%d/batch=1/callers=%d", p, callers), func(b *testing.B) {
				benchTake(b, srv, Options{Timeout: time.Second, Pipelines: p}, 1, callers)
			})
		}
	}
}

func benchTake(b *testing.B, srv *redistest.Server, opts Options, batch, callers int) {
	client := newClient(b, srv)
	s := newStore(b, client, opts)
	ctx := context.Background()
	limit := bucket.MustLimit(50, 20)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for g := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 7))
			reqs := make([]limiter.Request, batch)
			out := make([]bucket.Decision, batch)
			for next.Add(1) <= int64(b.N) {
				account := fmt.Sprintf("{ecs/%012d}:us-east-1:", r.IntN(benchAccounts))
				if batch == 1 {
					if _, err := s.Take(ctx, account+"cluster-read", limit, 1); err != nil {
						errs <- err
						return
					}
					continue
				}
				for i := range reqs {
					reqs[i] = limiter.Request{Key: account + benchAPIs[i], Limit: limit, Tokens: 1}
				}
				if err := s.TakeBatch(ctx, reqs, out); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	st := s.Stats()
	if st.Fallback != 0 {
		b.Fatalf("%d decisions fell back to the policy", st.Fallback)
	}
	b.ReportMetric(float64(b.N*batch)/el.Seconds(), "decisions/s")
}

// BenchmarkRedisBenchmarkCeiling runs redis-benchmark with the store's
// script via EVALSHA, one take per call, on the same kind of keys. With 16
// calls pipelined per connection (P=16) it is the ceiling of one Redis core
// for this script; without (P=1) it matches the calls in flight of the
// same number of callers of the store. Each iteration is one redis-benchmark
// run of 200,000 calls.
func BenchmarkRedisBenchmarkCeiling(b *testing.B) {
	bin, err := exec.LookPath("redis-benchmark")
	if err != nil {
		b.Skip("redis-benchmark not installed")
	}
	srv := redistest.Start(b)
	client := newClient(b, srv)
	sha, err := client.ScriptLoad(context.Background(), takeSource).Result()
	if err != nil {
		b.Fatal(err)
	}
	_, port, _ := strings.Cut(srv.Addr, ":")
	for _, run := range []struct{ conns, pipeline int }{{16, 16}, {64, 16}, {1, 1}, {16, 1}, {64, 1}} {
		b.Run(fmt.Sprintf("c=%d/P=%d", run.conns, run.pipeline), func(b *testing.B) {
			args := []string{"-h", "127.0.0.1", "-p", port, "-n", "200000", "-c", strconv.Itoa(run.conns), "-P", strconv.Itoa(run.pipeline),
				"-r", strconv.Itoa(benchAccounts), "--csv",
				"EVALSHA", sha, "1", "tg:{ecs/__rand_int__}:us-east-1:cluster-read", "", "1", "50", "50000000", "1"}
			b.Logf("%s %s", bin, strings.Join(args, " "))
			var rps float64
			for range b.N {
				out, err := exec.Command(bin, args...).CombinedOutput()
				if err != nil {
					b.Fatalf("%v: %s", err, out)
				}
				v, err := parseRPS(out)
				if err != nil {
					b.Fatal(err)
				}
				rps += v
			}
			b.ReportMetric(rps/float64(b.N), "decisions/s")
		})
	}
}

// parseRPS reads the requests per second from redis-benchmark --csv.
func parseRPS(out []byte) (float64, error) {
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Split(sc.Text(), ",")
		if len(f) >= 2 && strings.HasPrefix(f[0], `"EVALSHA`) {
			return strconv.ParseFloat(strings.Trim(f[1], `"`), 64)
		}
	}
	return 0, fmt.Errorf("no EVALSHA result in redis-benchmark output: %s", out)
}
