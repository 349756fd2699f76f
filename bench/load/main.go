// Command load is tollgate's load generator. It drives a `tollgate serve`
// through the native API, its batch endpoint, the AWS JSON path or Envoy's
// rate limit protocol over gRPC (-mode rls, which drives envoy ratelimit
// just as well: -grpc ADDR -pid PID), or drives gubernator's gRPC
// GetRateLimits with the same load (-mode gubernator -grpc ADDR -pid PID), closed
// loop (each of c workers sends its next request when the last one is
// answered) or paced at a fixed total rate, and reports decisions per
// second, latency percentiles and, when it knows the server's process,
// decisions per server CPU-second. -mode get sends plain GETs to -url as
// given (a proxy's throughput: each 200 counts as one decision).
//
//	go build -tags grpcnotrace -o /tmp/tollgate ./cmd/tollgate
//	go run ./bench/load -spawn /tmp/tollgate -mode take -c 16 -d 10s
//	go run ./bench/load -url http://127.0.0.1:8080 -pid 1234 -mode batch -batch 100 -c 64
//	go run ./bench/load -spawn /tmp/tollgate -mode batch -batch 1000 -pad-body 1048576 -c 64
//	go run ./bench/load -write-credentials /tmp/creds -keys 10000
//	go run ./bench/load -spawn /tmp/tollgate -serve-args "--credentials /tmp/creds" -mode aws -sign -c 16
//
// The last sends maximum-size batches (1,000 takes, padded with
// whitespace to the default --max-body of 1 MiB); with a known server
// process the report ends with the server's peak and final RSS. Answers
// 503 (the server's in-flight bound) are counted as shed, not errors.
//
// With -spawn it starts the server itself on a free loopback port and
// stops it at the end; with -url and -pid it measures a running one.
//
// The server's CPU time comes from /proc in clock ticks of 10 ms, so a
// short run on a busy machine measures it to a few ticks: the report
// gives the server's CPU seconds and ticks, and a figure per server
// CPU-second only when the server used at least -min-server-cpu (200
// ticks, 2 s) over the measured window; below that it says so, on
// standard error, and to run longer. The default -d is 20 s: a server
// that gets even a tenth of a core has its 200 ticks, and at the half to
// whole core a server usually gets here, 1,000-2,000 ticks (a tick either
// side of the window is then at most 0.2 %).
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

type options struct {
	grpc     string // -mode rls
	conns    int
	storePid int
	url      string
	pid      int
	spawn    string
	mode     string
	batch    int
	c        int
	duration time.Duration
	warmup   time.Duration
	rate     float64
	keys     int
	store    string
	extra    string
	padBody  int
	actions  []string
	minCPU   time.Duration
	cpus     string // -spawn-cpus
	sign     bool   // -sign
}

func main() {
	var o options
	flag.StringVar(&o.url, "url", "", "base URL of a running server (with -pid for CPU figures)")
	flag.IntVar(&o.pid, "pid", 0, "process id of the server at -url, to read its CPU time")
	flag.StringVar(&o.spawn, "spawn", "", "path of a tollgate binary to start on a free port")
	flag.StringVar(&o.store, "store", "memory", "--store for a spawned server")
	flag.StringVar(&o.extra, "serve-args", "", "more flags for a spawned server, space-separated (e.g. \"--store-pipelines 1\")")
	flag.StringVar(&o.mode, "mode", "take", "take (POST /v1/take), batch (POST /v1/take/batch), aws (AWS JSON 1.1 at /), get (GET -url as given: a proxy in front of any service), rls (Envoy's ShouldRateLimit over gRPC), gubernator (gubernator's GetRateLimits over gRPC) or gubernator-http (the same call as JSON, POST -url/v1/GetRateLimits)")
	flag.IntVar(&o.batch, "batch", 100, "takes per batch request in -mode batch; descriptors per call in -mode rls and gubernator (default 1 there)")
	flag.StringVar(&o.grpc, "grpc", "", "host:port of an Envoy rate limit service for -mode rls (tollgate's or envoy ratelimit's), or of gubernator for -mode gubernator")
	flag.IntVar(&o.conns, "grpc-conns", 4, "gRPC connections the workers share in -mode rls and gubernator")
	flag.IntVar(&o.storePid, "store-pid", 0, "process id of the server's store (redis-server), to report its CPU time over the measured window too")
	flag.IntVar(&o.c, "c", 16, "concurrent workers (connections)")
	flag.DurationVar(&o.duration, "d", 20*time.Second, "measured duration (long enough for -min-server-cpu of the server's CPU)")
	flag.DurationVar(&o.minCPU, "min-server-cpu", 2*time.Second, "least server CPU time over the measured window for a figure per server CPU-second (in 10 ms ticks: 2s is 200); below it the figure is refused")
	flag.StringVar(&o.cpus, "spawn-cpus", "", "run the -spawn server on these CPUs (taskset -c LIST), e.g. the ones the load generator is not on")
	actions := flag.String("actions", strings.Join(ecsActions, ","), "ECS actions the takes of -mode take, batch and aws pick from at random, comma-separated (the ECS preset buckets them by category: DescribeClusters alone is one bucket per account)")
	flag.DurationVar(&o.warmup, "warmup", time.Second, "unmeasured warm-up before it")
	flag.Float64Var(&o.rate, "rate", 0, "total requests per second, paced; 0 = closed loop as fast as answers come")
	flag.IntVar(&o.keys, "keys", 10000, "distinct accounts the takes spread over")
	flag.IntVar(&o.padBody, "pad-body", 0, "in -mode batch, pad each body with whitespace to this many bytes (e.g. 1048576, the default --max-body)")
	flag.BoolVar(&o.sign, "sign", false, "in -mode aws, sign each request with SigV4 (aws-sdk-go-v2's signer, at the run's start) as account N's key AKID<N> with secret secret-<N>, N its 12 digits, for a server with the --credentials file -write-credentials writes; the same requests are served unverified by a server without it")
	writeCreds := flag.String("write-credentials", "", "write the credentials file of -sign's -keys keys to this path and exit")
	flag.Parse()
	if *writeCreds != "" {
		if err := writeCredentials(*writeCreds, max(o.keys, 1)); err != nil {
			fmt.Fprintln(os.Stderr, "load:", err)
			os.Exit(1)
		}
		return
	}
	o.actions = strings.Split(*actions, ",")
	batchSet := false
	flag.Visit(func(f *flag.Flag) { batchSet = batchSet || f.Name == "batch" })
	if (o.mode == "rls" || o.mode == "gubernator") && !batchSet {
		o.batch = 1
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	if o.c < 1 || o.keys < 1 || o.batch < 1 || o.duration <= 0 {
		return errors.New("-c, -keys, -batch and -d must be positive")
	}
	if slices.Contains(o.actions, "") {
		return errors.New("-actions: an empty action")
	}
	switch o.mode {
	case "take", "batch", "aws", "rls", "gubernator", "gubernator-http", "get":
	default:
		return fmt.Errorf("-mode %q: want take, batch, aws, rls, gubernator, gubernator-http or get", o.mode)
	}
	if strings.HasPrefix(o.mode, "gubernator") && o.spawn != "" {
		return errors.New("-mode " + o.mode + " drives a running gubernator: give -grpc ADDR (or -url) and -pid PID, not -spawn")
	}
	if o.spawn != "" {
		stop, err := spawn(&o)
		if err != nil {
			return err
		}
		defer stop()
	}
	if o.mode == "rls" {
		closeConns, err := dialRLS(o.grpc, o.conns)
		if err != nil {
			return err
		}
		defer closeConns()
	} else if o.mode == "gubernator" {
		closeConns, err := dialGubernator(o.grpc, o.conns)
		if err != nil {
			return err
		}
		defer closeConns()
	} else if o.url == "" {
		return errors.New("give -url or -spawn")
	}
	client := &http.Client{Transport: &http.Transport{
		MaxIdleConns:        o.c,
		MaxIdleConnsPerHost: o.c,
		DisableCompression:  true,
	}}

	// Warm up: connections open, buckets created.
	if o.warmup > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), o.warmup)
		drive(ctx, client, o)
		cancel()
	}
	cpu0, _ := cpuTicks(o.pid)
	store0, _ := cpuTicks(o.storePid)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), o.duration)
	res := drive(ctx, client, o)
	cancel()
	elapsed := time.Since(start)
	cpu1, cpuErr := cpuTicks(o.pid)
	store1, storeErr := cpuTicks(o.storePid)

	lat := res.latencies
	slices.Sort(lat)
	perReq := 1
	if o.mode == "batch" || o.mode == "rls" || o.mode == "gubernator" {
		perReq = o.batch
	}
	decisions := float64(res.ok * perReq)
	fmt.Printf("mode=%s batch=%d c=%d rate=%g keys=%d duration=%v\n", o.mode, perReq, o.c, o.rate, o.keys, elapsed.Round(time.Millisecond))
	fmt.Printf("requests=%d errors=%d shed=%d decisions=%d (allowed=%d throttled=%d)\n", res.ok, res.errs, res.shed, int(decisions), res.allowed, res.throttled)
	fmt.Printf("requests/s=%.0f decisions/s=%.0f\n", float64(res.ok)/elapsed.Seconds(), decisions/elapsed.Seconds())
	if len(lat) > 0 {
		fmt.Printf("latency p50=%v p90=%v p99=%v p99.9=%v max=%v\n",
			pct(lat, 50), pct(lat, 90), pct(lat, 99), pct(lat, 99.9), lat[len(lat)-1])
	}
	if o.storePid != 0 && storeErr == nil {
		fmt.Printf("store_cpu_seconds=%.2f\n", float64(store1-store0)/ticksPerSecond)
	}
	if o.pid != 0 && cpuErr == nil {
		line, refusal := cpuReport(cpu1-cpu0, decisions, o.minCPU)
		fmt.Println(line)
		if refusal != "" {
			fmt.Fprintln(os.Stderr, "load:", refusal)
		}
	}
	if hwm, rss, err := memoryKB(o.pid); err == nil {
		fmt.Printf("server_peak_rss_mb=%.1f server_rss_mb=%.1f\n", float64(hwm)/1024, float64(rss)/1024)
	}
	if res.firstErr != nil {
		fmt.Printf("first error: %v\n", res.firstErr)
	}
	return nil
}

// memoryKB reads a process's peak (VmHWM) and current (VmRSS) resident
// set size from /proc, in KiB.
func memoryKB(pid int) (hwm, rss int64, err error) {
	if pid == 0 {
		return 0, 0, errors.New("no pid")
	}
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		switch name {
		case "VmHWM":
			hwm = kb
		case "VmRSS":
			rss = kb
		}
	}
	return hwm, rss, nil
}

type result struct {
	ok, errs, shed     int
	allowed, throttled int
	latencies          []time.Duration
	firstErr           error
}

// drive runs the workers until ctx ends.
func drive(ctx context.Context, client *http.Client, o options) result {
	var mu sync.Mutex
	var total result
	var wg sync.WaitGroup
	var interval time.Duration
	if o.rate > 0 {
		interval = time.Duration(float64(time.Second) * float64(o.c) / o.rate)
	}
	for w := range o.c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var r result
			switch o.mode {
			case "rls":
				r = rlsWorker(ctx, rlsClients[w%len(rlsClients)], o, w, interval)
			case "gubernator":
				r = gubernatorWorker(ctx, gubernatorConns[w%len(gubernatorConns)], o, w, interval)
			default:
				r = worker(ctx, client, o, w, interval)
			}
			mu.Lock()
			total.ok += r.ok
			total.errs += r.errs
			total.shed += r.shed
			total.allowed += r.allowed
			total.throttled += r.throttled
			total.latencies = append(total.latencies, r.latencies...)
			if total.firstErr == nil {
				total.firstErr = r.firstErr
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return total
}

var ecsActions = []string{"DescribeClusters", "ListClusters", "ListTasks", "DescribeTasks", "DescribeServices", "ListServices"}

func worker(ctx context.Context, client *http.Client, o options, id int, interval time.Duration) result {
	rng := rand.New(rand.NewPCG(uint64(id), uint64(time.Now().UnixNano())))
	var r result
	r.latencies = make([]time.Duration, 0, 1<<16)
	next := time.Now()
	for ctx.Err() == nil {
		if interval > 0 {
			next = next.Add(interval)
			if d := time.Until(next); d > 0 {
				select {
				case <-time.After(d):
				case <-ctx.Done():
					return r
				}
			}
		}
		// A new body per request: the transport may still read the last
		// one (an early answer, or a retry through GetBody) after Do returns.
		req := buildRequest(ctx, o, rng, new(bytes.Buffer))
		// Paced, latency counts from when the request was due, not when
		// it went out: a server that falls behind delays the next send,
		// and that wait is latency too (no coordinated omission).
		t0 := time.Now()
		if interval > 0 {
			t0 = next
		}
		resp, err := client.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			r.errs++
			if r.firstErr == nil {
				r.firstErr = err
			}
			continue
		}
		payload, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil && ctx.Err() != nil {
			break
		}
		lat := time.Since(t0)
		switch {
		case resp.StatusCode == 200 && o.mode == "batch":
			a := bytes.Count(payload, []byte(`"allowed":true`))
			r.allowed += a
			r.throttled += o.batch - a
		case resp.StatusCode == 200 && o.mode == "gubernator-http":
			if err := countGubernatorJSON(payload, &r); err != nil {
				r.errs++
				if r.firstErr == nil {
					r.firstErr = err
				}
				continue
			}
		case resp.StatusCode == 200:
			r.allowed++
		case resp.StatusCode == 429 || (o.mode == "aws" && resp.StatusCode == 400 && resp.Header.Get("X-Amzn-ErrorType") == "ThrottlingException"):
			r.throttled++
		case resp.StatusCode == 503 && resp.Header.Get("Retry-After") != "":
			r.shed++ // the server's in-flight bound: refused at once
			continue
		default:
			r.errs++
			if r.firstErr == nil {
				r.firstErr = fmt.Errorf("HTTP %d: %s", resp.StatusCode, payload)
			}
			continue
		}
		r.ok++
		r.latencies = append(r.latencies, lat)
	}
	return r
}

func buildRequest(ctx context.Context, o options, rng *rand.Rand, body *bytes.Buffer) *http.Request {
	account := func() string { return fmt.Sprintf("%012d", rng.IntN(o.keys)) }
	action := func() string { return o.actions[rng.IntN(len(o.actions))] }
	var req *http.Request
	switch o.mode {
	case "take":
		fmt.Fprintf(body, `{"service":"ecs","account":"%s","region":"us-east-1","action":"%s"}`, account(), action())
		req, _ = http.NewRequestWithContext(ctx, http.MethodPost, o.url+"/v1/take", body)
		req.Header.Set("Content-Type", "application/json")
	case "batch":
		fmt.Fprintf(body, `{"service":"ecs","region":"us-east-1","requests":[`)
		for i := range o.batch {
			if i > 0 {
				body.WriteByte(',')
			}
			fmt.Fprintf(body, `{"account":"%s","action":"%s"}`, account(), action())
		}
		for body.Len()+2 < o.padBody {
			body.WriteByte(' ')
		}
		body.WriteString("]}")
		req, _ = http.NewRequestWithContext(ctx, http.MethodPost, o.url+"/v1/take/batch", body)
		req.Header.Set("Content-Type", "application/json")
	case "gubernator-http":
		// As -mode gubernator, in gubernator's JSON (protojson: int64 as
		// strings), through its grpc-gateway.
		fmt.Fprintf(body, `{"requests":[{"name":"load","unique_key":"account:%d","hits":"1","limit":"50","duration":"1000"}]}`, rng.IntN(o.keys))
		req, _ = http.NewRequestWithContext(ctx, http.MethodPost, o.url+"/v1/GetRateLimits", body)
		req.Header.Set("Content-Type", "application/json")
	case "get":
		req, _ = http.NewRequestWithContext(ctx, http.MethodGet, o.url, nil)
	case "aws":
		body.WriteString("{}")
		req, _ = http.NewRequestWithContext(ctx, http.MethodPost, o.url+"/", body)
		req.Header.Set("Content-Type", "application/x-amz-json-1.1")
		act, acct := action(), account()
		req.Header.Set("X-Amz-Target", "AmazonEC2ContainerServiceV20141113."+act)
		if o.sign {
			if err := signed.sign(req, acct, act); err != nil {
				panic(err) // the SDK's signer fails only on a nil request
			}
		} else {
			req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKID"+acct+
				"/20261129/us-east-1/ecs/aws4_request, SignedHeaders=content-type;host;x-amz-date;x-amz-target, Signature=00")
		}
	}
	return req
}

func pct(sorted []time.Duration, p float64) time.Duration {
	i := int(float64(len(sorted)-1) * p / 100)
	return sorted[i].Round(time.Microsecond)
}

// ticksPerSecond is the unit of the CPU times in /proc/PID/stat: clock
// ticks, USER_HZ, 100 a second on Linux.
const ticksPerSecond = 100

// cpuReport is the report's line on the server's CPU over the measured
// window: its CPU seconds and ticks and, from at least minCPU of it, the
// decisions per server CPU-second. Below minCPU the figure is left out
// (a few ticks either side make it swing by their share) and refusal
// says why, and to run longer.
func cpuReport(ticks int64, decisions float64, minCPU time.Duration) (line, refusal string) {
	line = fmt.Sprintf("server_cpu_seconds=%.2f server_cpu_ticks=%d", float64(ticks)/ticksPerSecond, ticks)
	minTicks := int64(minCPU.Seconds() * ticksPerSecond)
	if ticks < max(minTicks, 1) {
		return line, fmt.Sprintf("no decisions per server CPU-second: the server used %.2f s of CPU (%d ticks of 10 ms), fewer than the %d ticks (%v) a figure needs (-min-server-cpu); run longer (a larger -d, or D=... for the bench scripts)",
			float64(ticks)/ticksPerSecond, ticks, max(minTicks, 1), minCPU)
	}
	return line + fmt.Sprintf(" decisions_per_server_cpu_second=%.0f", decisions*ticksPerSecond/float64(ticks)), ""
}

// cpuTicks reads a process's user+system CPU time from /proc, in clock
// ticks (ticksPerSecond).
func cpuTicks(pid int) (int64, error) {
	if pid == 0 {
		return 0, errors.New("no pid")
	}
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, err
	}
	// Fields after the command name (which is in parentheses).
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return utime + stime, nil
}

// spawn starts `tollgate serve` on a free loopback port and sets o.url and
// o.pid; the returned function stops it.
func spawn(o *options) (func(), error) {
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--store", o.store}, strings.Fields(o.extra)...)
	if o.mode == "rls" {
		if !strings.Contains(o.extra, "--grpc-listen") {
			args = append(args, "--grpc-listen", "127.0.0.1:0")
		}
		if !strings.Contains(o.extra, "--rls-config") {
			args = append(args, "--rls-config", "bench/rls") // run from the repository's root
		}
	}
	cmd := exec.Command(o.spawn, args...)
	if o.cpus != "" {
		// taskset sets the affinity and execs the server: the pid is the server's.
		cmd = exec.Command("taskset", append([]string{"-c", o.cpus, o.spawn}, args...)...)
	}
	cmd.Stdout = os.Stderr
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	addrRe := regexp.MustCompile(`msg=listening addr=(\S+)`)
	if o.mode == "rls" {
		addrRe = regexp.MustCompile(`msg="envoy rate limit service listening" addr=(\S+)`)
	}
	sc := bufio.NewScanner(stderr)
	found := make(chan string, 1)
	go func() {
		for sc.Scan() {
			if m := addrRe.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
	}()
	select {
	case addr := <-found:
		o.url = "http://" + addr
		if o.mode == "rls" {
			o.grpc, o.url = addr, ""
		}
		o.pid = cmd.Process.Pid
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		return nil, errors.New("spawned server did not report its address")
	}
	return func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	}, nil
}
