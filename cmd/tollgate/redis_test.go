package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
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
	// A store timeout no loaded machine reaches: every decision is Redis's.
	a := startServer(t, "--store", rs.URL(), "--store-timeout", "10s")
	b := startServer(t, "--store", rs.URL(), "--store-timeout", "10s")
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

// TestThreeServeNodesAreGloballyExact hammers one bucket (100 burst, 50
// per second) through three `tollgate serve` processes on one Redis for
// at least 3 s and until 20 takes were denied (at most a minute: a machine
// loaded with the race detector's runs answered fewer than the 267 a
// second a bucket of 200 per second needed to be saturated in 3 s):
// together they admit no more than capacity + rate·T, and no fewer
// than capacity + rate·S less the clients' requests in flight, where S is
// the time the bucket was surely not full (so no refill was lost). S is
// measured, not assumed: a denial decided at d means the bucket held under
// one token at d, and a bucket that low needs 1.98 s of refill to be full
// again; early on, more admissions than refill since the start mean the
// same. So a machine too loaded to keep the bucket saturated lowers the
// floor by exactly the refill it could have lost, and a node that denies
// or loses tokens it should not still fails.
func TestThreeServeNodesAreGloballyExact(t *testing.T) {
	t.Parallel() // its own servers, files and markers
	rs := redistest.Start(t)
	cfg := filepath.Join(t.TempDir(), "tollgate.yaml")
	os.WriteFile(cfg, []byte(`services:
  - name: bench
    categories:
      - {name: hot, capacity: 100, refill_per_second: 50, actions: [Hit]}
`), 0o644)
	var addrs []string
	for range 3 {
		// A store timeout no loaded machine reaches: every decision is Redis's.
		addrs = append(addrs, startServer(t, "--config", cfg, "--store", rs.URL(), "--store-timeout", "10s").addr)
	}
	const (
		body     = `{"service":"bench","account":"shared","region":"us-east-1","action":"Hit"}`
		capacity = 100
		rate     = 50.0                    // tokens per second
		refill   = 1950 * time.Millisecond // under the 1.98 s from under one token to full
		clients  = 3 * 4
		denied   = 20 // denials that end the run, after minRun
		minRun   = 3 * time.Second
		maxRun   = time.Minute
	)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	type call struct{ sent, recv time.Time }
	var (
		mu                  sync.Mutex
		admits, denials     []call
		firstRecv, lastSend time.Time
	)
	ctx, cancel := context.WithTimeout(context.Background(), maxRun)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	wg.Go(func() { // ends the run once it has lasted minRun and seen enough denials
		tk := time.NewTicker(50 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
			}
			mu.Lock()
			enough := len(denials) >= denied
			mu.Unlock()
			if enough && time.Since(start) >= minRun {
				cancel()
				return
			}
		}
	})
	for _, addr := range addrs {
		for range clients / len(addrs) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					sent := time.Now()
					req, _ := http.NewRequestWithContext(ctx, "POST", "http://"+addr+"/v1/take", strings.NewReader(body))
					resp, err := client.Do(req)
					if err != nil {
						if ctx.Err() == nil {
							t.Errorf("take: %v", err)
						}
						return // the run ended
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					c := call{sent, time.Now()}
					mu.Lock()
					switch resp.StatusCode {
					case 200:
						admits = append(admits, c)
					case 429:
						denials = append(denials, c)
					default:
						mu.Unlock()
						t.Errorf("status %d", resp.StatusCode)
						return
					}
					if firstRecv.IsZero() || c.recv.Before(firstRecv) {
						firstRecv = c.recv
					}
					if c.sent.After(lastSend) {
						lastSend = c.sent
					}
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	end := time.Now()
	if t.Failed() {
		return
	}
	for _, addr := range addrs {
		_, metrics := get(t, "http://"+addr+"/metrics")
		if regexp.MustCompile(`tollgate_store_decisions_total\{source="failure_policy"\} [1-9]`).MatchString(metrics) {
			t.Fatalf("node %s decided by its failure policy, not by Redis", addr)
		}
	}
	if len(denials) == 0 {
		t.Fatal("nothing was denied: the bucket was never saturated")
	}
	// Upper bound: every decision falls between start and end.
	got := len(admits)
	upper := capacity + rate*end.Sub(start).Seconds()
	if float64(got) > upper {
		t.Fatalf("three nodes admitted %d, more than capacity + rate·T = %.1f", got, upper)
	}
	// Lower bound, on a 1 ms grid from start to the send of the last
	// denial D: a cell counts towards S when the bucket was surely not
	// full throughout it. Then the admissions decided by D are more than
	// capacity - 1 + rate·S (the bucket held under one token at D), and
	// at most one request per client was decided but not answered.
	lastDenial := denials[0].sent
	for _, d := range denials {
		if d.sent.After(lastDenial) {
			lastDenial = d.sent
		}
	}
	const cell = time.Millisecond
	n := int(lastDenial.Sub(start) / cell) // cells wholly before D
	cover := make([]int, n+1)              // difference array of denial witnesses
	for _, d := range denials {
		// Decided within [sent, recv]: not full over [recv, sent+refill].
		from := int((d.recv.Sub(start) + cell - 1) / cell)
		to := int(d.sent.Add(refill).Sub(start) / cell) // cells [from, to)
		if from < to && from < n {
			cover[from]++
			cover[min(to, n)]--
		}
	}
	recvs := make([]time.Time, len(admits))
	for i, a := range admits {
		recvs[i] = a.recv
	}
	slices.SortFunc(recvs, func(a, b time.Time) int { return a.Compare(b) })
	surely, witnesses, answered := 0, 0, 0
	for i := range n {
		witnesses += cover[i]
		at := start.Add(time.Duration(i) * cell)
		for answered < len(recvs) && !recvs[answered].After(at) {
			answered++
		}
		// More admitted by the cell's start than refilled by its end.
		drained := float64(answered) > rate*(at.Add(cell).Sub(start)).Seconds()
		if witnesses > 0 || drained {
			surely++
		}
	}
	s := (time.Duration(surely) * cell).Seconds()
	lower := capacity - 1 + rate*s - clients
	t.Logf("admitted %d, denied %d; bound %.0f (T ≤ %.3fs); floor %.0f (bucket surely not full %.3fs of %.3fs; first answer %.3fs, last send %.3fs)",
		got, len(denials), upper, end.Sub(start).Seconds(), lower, s, lastDenial.Sub(start).Seconds(), firstRecv.Sub(start).Seconds(), lastSend.Sub(start).Seconds())
	if float64(got) < lower {
		t.Fatalf("three nodes admitted %d, fewer than capacity + rate·S less in-flight = %.1f: tokens were lost while the bucket was saturated", got, lower)
	}
}

// TestServeFollowsTheFailurePolicyAndRecovers stops Redis (killed, then
// SIGSTOP) under a serve node configured fail-closed: takes are denied and
// /readyz answers 503, then, once Redis is back, takes are decided by
// Redis again without a restart and /readyz answers 200.
func TestServeFollowsTheFailurePolicyAndRecovers(t *testing.T) {
	t.Parallel() // its own servers, files and markers
	for _, mode := range []string{"killed", "SIGSTOP"} {
		t.Run(mode, func(t *testing.T) {
			rs := redistest.Start(t)
			cfg := filepath.Join(t.TempDir(), "tollgate.yaml")
			// 300ms: long enough for a loaded machine while Redis is up,
			// short enough that a paused Redis costs little.
			os.WriteFile(cfg, []byte("services:\n  - preset: ecs\nstore:\n  url: "+rs.URL()+"\n  timeout: 300ms\n  on_failure: closed\n"), 0o644)
			s := startServer(t, "--config", cfg)
			req := `{"service":"ecs","account":"1","region":"us-east-1","action":"ListClusters"}`
			waitFor(t, "a take decided by Redis", func() bool { status, _ := take(t, s.addr, req); return status == 200 })
			waitFor(t, "/readyz 200 with redis up", func() bool {
				status, body := get(t, "http://"+s.addr+"/readyz")
				return status == 200 && strings.Contains(body, "store: redis up (on failure: closed)")
			})
			if mode == "killed" {
				rs.Stop()
			} else {
				rs.Pause()
			}
			if status, body := take(t, s.addr, req); status != 429 {
				t.Fatalf("fail-closed with Redis down: %d %s, want 429", status, body)
			}
			s.waitLog(t, "redis store unavailable")
			waitFor(t, "/readyz 503 with redis down", func() bool {
				status, body := get(t, "http://"+s.addr+"/readyz")
				return status == 503 && strings.Contains(body, "store: redis down (on failure: closed)")
			})
			if mode == "killed" {
				rs.Restart()
			} else {
				rs.Resume()
			}
			waitFor(t, "decisions back on Redis", func() bool {
				status, _ := take(t, s.addr, req)
				if status != 200 && status != 429 {
					t.Fatalf("while Redis comes back: status %d", status)
				}
				return status == 200
			})
			s.waitLog(t, "redis store available again")
			waitFor(t, "/readyz 200 after recovery", func() bool { status, _ := get(t, "http://"+s.addr+"/readyz"); return status == 200 })
			_, metrics := get(t, "http://"+s.addr+"/metrics")
			for _, series := range []*regexp.Regexp{
				regexp.MustCompile(`tollgate_store_decisions_total\{source="failure_policy"\} [1-9]`),
				regexp.MustCompile(`tollgate_store_decisions_total\{source="redis"\} [1-9]`),
			} {
				if !series.MatchString(metrics) {
					t.Errorf("/metrics lacks %s", series)
				}
			}
		})
	}
}

// startJSONServer starts `tollgate serve --log-format json` on a random
// port and waits for its "listening" line; every line of standard error is
// kept in the returned server's logs channel, which closes when the process
// exits.
func startJSONServer(t *testing.T, args ...string) *server {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"serve", "--listen", "127.0.0.1:0", "--log-format", "json"}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	s := &server{cmd: cmd, logs: make(chan string, 10000)}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			var rec struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "listening" {
				found <- rec.Addr
			}
			s.logs <- line
		}
		close(s.logs)
	}()
	select {
	case s.addr = <-found:
	case <-time.After(30 * time.Second):
		t.Fatal("server did not log its address within 30 s")
	}
	return s
}

// waitFor polls cond for up to 30 s (a loaded machine), failing t if it
// never holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 30 s", what)
		}
	}
}

// TestServeLocalPolicyWithRedisUnreachable starts a node whose Redis is
// not there, with the default failure policy and JSON logs: a node that
// could not count the nodes sharing its Redis denies every take (issue
// 36: it decided from a whole bucket, as if alone); with --store-nodes 1
// each key is throttled by the node's own bucket (3 takes, then 429),
// /readyz answers
// 503 saying Redis was never reached (200 before, with one warning), an
// error says so at once and at most every 10 s, and every log line,
// go-redis's included, is JSON, go-redis's at most one per 10 s. A node
// with --store-on-failure open is ready all the same.
func TestServeLocalPolicyWithRedisUnreachable(t *testing.T) {
	t.Parallel()                    // its own servers, files and markers
	dead := redistest.ClosedAddr(t) // refuses, and no other test's server can take it
	cfg := filepath.Join(t.TempDir(), "tollgate.yaml")
	os.WriteFile(cfg, []byte(`services:
  - name: bench
    categories:
      - {name: hot, capacity: 3, refill_per_second: 0.001, actions: [Hit]}
`), 0o644)
	start := time.Now()
	uncounted := startServer(t, "--config", cfg, "--store", "redis://"+dead)
	if status, resp := take(t, uncounted.addr, `{"service":"bench","account":"a","region":"us-east-1","action":"Hit"}`); status != 429 {
		t.Fatalf("a node that has not counted the nodes, Redis unreachable: %d %s, want 429", status, resp)
	}
	s := startJSONServer(t, "--config", cfg, "--store", "redis://"+dead, "--store-nodes", "1")
	for _, key := range []string{"a", "b"} {
		body := `{"service":"bench","account":"` + key + `","region":"us-east-1","action":"Hit"}`
		for i := range 5 {
			status, resp := take(t, s.addr, body)
			if want := map[bool]int{true: 200, false: 429}[i < 3]; status != want {
				t.Fatalf("account %s take %d with Redis unreachable: %d %s, want %d (the node's own bucket)", key, i, status, resp, want)
			}
		}
	}
	status, body := get(t, "http://"+s.addr+"/readyz")
	if status != 503 || !strings.Contains(body, "store: redis never reached (on failure: local)") {
		t.Fatalf("/readyz = %d %q, want 503 and redis never reached", status, body)
	}
	open := startJSONServer(t, "--config", cfg, "--store", "redis://"+dead, "--store-on-failure", "open")
	if status, body := get(t, "http://"+open.addr+"/readyz"); status != 200 || !strings.Contains(body, "store: redis never reached (on failure: open)") {
		t.Fatalf("/readyz with --store-on-failure open = %d %q, want 200", status, body)
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	var lines []string
	for line := range s.logs {
		lines = append(lines, line)
	}
	elapsed := time.Since(start)
	client, warned, errored := 0, false, 0
	for _, line := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("log line is not JSON: %s", line)
			continue
		}
		switch rec["msg"] {
		case "redis client":
			client++
		case "redis store has never answered since start: every take is decided by the failure policy":
			errored++
			if rec["level"] != "ERROR" || rec["readiness"] != "not ready until it answers" {
				t.Errorf("never-reached line: %s", line)
			}
		case "redis store unavailable, deciding by failure policy":
			warned = true
			if rec["policy"] != "local" {
				t.Errorf("warning names policy %v", rec["policy"])
			}
		}
	}
	if !warned {
		t.Errorf("no warning that Redis is unavailable in %d lines", len(lines))
	}
	if max := 1 + int(elapsed/(10*time.Second)); client < 1 || client > max {
		t.Errorf("%d go-redis lines in %v, want 1 to %d", client, elapsed, max)
	}
	if max := 1 + int(elapsed/(10*time.Second)); errored < 1 || errored > max {
		t.Errorf("%d errors that Redis never answered in %v, want 1 to %d", errored, elapsed, max)
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

// TestServeRefusesAStoreTimeoutBelowARoundTrip: --store-timeout 1us
// (issue 36: two nodes admitted twice the limit, each deciding alone) is
// refused at start with the reason, before anything listens.
func TestServeRefusesAStoreTimeoutBelowARoundTrip(t *testing.T) {
	code, _, errs := runCmd("serve", "--listen", "127.0.0.1:0", "--store", "redis://127.0.0.1:1", "--store-timeout", "1us")
	if code == 0 || !strings.Contains(errs, "--store-timeout 1µs is below 1ms, less than a Redis round trip can take") {
		t.Fatalf("serve --store-timeout 1us: exit %d, %q", code, errs)
	}
}
