package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	"github.com/aws/smithy-go"

	"github.com/tollgate/tollgate/internal/redistest"
)

// TestTwoServeNodesShareOneBucket points one real ECS client at two
// `tollgate serve` nodes on one Redis, alternating: together they admit
// what one cluster-read bucket admits, 50 plus what refills meanwhile.
func TestTwoServeNodesShareOneBucket(t *testing.T) {
	rs := redistest.Start(t)
	a := startServer(t, "--store", rs.URL())
	b := startServer(t, "--store", rs.URL())
	client := func(addr string) *ecs.Client {
		return ecs.New(ecs.Options{
			Region:       "us-east-1",
			BaseEndpoint: aws.String("http://" + addr),
			Credentials:  credentials.NewStaticCredentialsProvider("AKIDTWONODES", "secret", ""),
			Retryer:      aws.NopRetryer{},
		})
	}
	clients := []*ecs.Client{client(a.addr), client(b.addr)}
	ctx := context.Background()
	start := time.Now()
	ok, perNode := 0, [2]int{}
	for i := range 80 {
		_, err := clients[i%2].DescribeClusters(ctx, &ecs.DescribeClustersInput{})
		if err == nil {
			ok++
			perNode[i%2]++
			continue
		}
		var apiErr smithy.APIError
		if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "ThrottlingException" {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	elapsed := time.Since(start)
	bound := 50 + int(elapsed.Seconds()*20) + 1
	if ok < 50 || ok > bound {
		t.Fatalf("two nodes admitted %d of 80 in %v; want 50 plus refill (at most %d)", ok, elapsed, bound)
	}
	if perNode[0] == 0 || perNode[1] == 0 {
		t.Fatalf("admissions per node %v: both nodes should have served", perNode)
	}
}

// TestThreeServeNodesAreGloballyExact hammers one bucket (100 burst, 1,000
// per second) through three `tollgate serve` processes on one Redis for
// 3 s: together they admit no more than capacity + rate·T, and at least
// 95 % of it.
func TestThreeServeNodesAreGloballyExact(t *testing.T) {
	rs := redistest.Start(t)
	cfg := filepath.Join(t.TempDir(), "tollgate.yaml")
	os.WriteFile(cfg, []byte(`services:
  - name: bench
    categories:
      - {name: hot, capacity: 100, refill_per_second: 1000, actions: [Hit]}
`), 0o644)
	var addrs []string
	for range 3 {
		addrs = append(addrs, startServer(t, "--config", cfg, "--store", rs.URL()).addr)
	}
	const body = `{"service":"bench","account":"shared","region":"us-east-1","action":"Hit"}`
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	var admitted, denied atomic.Int64
	var firstRecv, lastSend atomic.Int64 // for the lower bound on T
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for _, addr := range addrs {
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					sent := time.Now()
					req, _ := http.NewRequestWithContext(ctx, "POST", "http://"+addr+"/v1/take", strings.NewReader(body))
					resp, err := client.Do(req)
					if err != nil {
						return // the run ended
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					recv := time.Now()
					switch resp.StatusCode {
					case 200:
						admitted.Add(1)
					case 429:
						denied.Add(1)
					default:
						t.Errorf("status %d", resp.StatusCode)
						return
					}
					firstRecv.CompareAndSwap(0, recv.UnixNano())
					lastSend.Store(max(lastSend.Load(), sent.UnixNano()))
				}
			}()
		}
	}
	wg.Wait()
	end := time.Now()
	// Every decision falls between the first send and the last receive, so
	// T is at most end-start; and the run's decisions span at least from
	// the first answer to the last send.
	tUpper := end.Sub(start).Seconds()
	tLower := time.Duration(lastSend.Load() - firstRecv.Load()).Seconds()
	got := admitted.Load()
	upper := 100 + 1000*tUpper
	lower := 0.95 * (100 + 1000*tLower)
	t.Logf("admitted %d, denied %d; bound %.0f (T ≤ %.3fs), 95%% floor %.0f (T ≥ %.3fs)", got, denied.Load(), upper, tUpper, lower, tLower)
	if float64(got) > upper {
		t.Fatalf("three nodes admitted %d, more than capacity + rate·T = %.1f", got, upper)
	}
	if float64(got) < lower {
		t.Fatalf("three nodes admitted %d, under 95%% of the bound (%.1f)", got, lower)
	}
	if denied.Load() == 0 {
		t.Fatal("nothing was denied: the bucket was never saturated")
	}
}

// TestServeFollowsTheFailurePolicyAndRecovers stops Redis under a serve
// node configured fail-closed: takes are denied, then, once Redis is back,
// decided by Redis again without a restart.
func TestServeFollowsTheFailurePolicyAndRecovers(t *testing.T) {
	rs := redistest.Start(t)
	cfg := filepath.Join(t.TempDir(), "tollgate.yaml")
	os.WriteFile(cfg, []byte("services:\n  - preset: ecs\nstore:\n  url: "+rs.URL()+"\n  timeout: 20ms\n  on_failure: closed\n"), 0o644)
	s := startServer(t, "--config", cfg)
	req := `{"service":"ecs","account":"1","region":"us-east-1","action":"ListClusters"}`
	if status, body := take(t, s.addr, req); status != 200 {
		t.Fatalf("with Redis up: %d %s", status, body)
	}
	rs.Stop()
	if status, body := take(t, s.addr, req); status != 429 {
		t.Fatalf("fail-closed with Redis down: %d %s, want 429", status, body)
	}
	s.waitLog(t, "redis store unavailable")
	rs.Restart()
	deadline := time.Now().Add(5 * time.Second)
	for {
		status, _ := take(t, s.addr, req)
		if status == 200 {
			break
		}
		if status != 429 {
			t.Fatalf("while Redis restarts: status %d", status)
		}
		if time.Now().After(deadline) {
			t.Fatal("decisions did not come back to Redis within 5 s of its restart")
		}
	}
	s.waitLog(t, "redis store available again")
	_, metrics := get(t, "http://"+s.addr+"/metrics")
	for _, series := range []string{`tollgate_store_decisions_total{source="failure_policy"} 1` + "\n", `tollgate_store_decisions_total{source="redis"}`} {
		if !strings.Contains(metrics, series) {
			t.Errorf("/metrics lacks %q", series)
		}
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
