// Command pending opens many concurrent HTTP requests at once, each on a
// connection of its own, and reports how each was answered: the client
// side of bench/autoscale-long.sh's "20,000 pending clients" row.
//
//	pending -url http://127.0.0.1:8080/crowd/ -n 20000 -timeout 10m
//
// Every outcome is keyed by where the request was when it ended (an
// httptrace of each request): "dial" (no connection yet), "connected"
// (the connection was up but the request not fully written), "sent" (the
// request written, no response header yet) or "answered" (a status
// line came back). So a failure says which side of the request it
// happened on: an EOF after "sent" is the server closing a connection it
// had read, one before is a connection it never read.
//
// Two things keep the client from being the bottleneck it measures. At
// most -dials clients are between dialling and having written their
// request at once (the rest wait their turn before dialling): a real
// client writes its request the moment it is connected, while 20,000
// goroutines dialling at once on a loaded 2-core machine took up to 5 s
// from the kernel's handshake to the write, and the server's 5 s header
// timeout closed those connections (EOF, "server closed idle
// connection", resets). And the clients are spread over as many
// processes as their open-file limit needs (one connection each, plus a
// few descriptors per process); the processes report to the first,
// which prints the total.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// outcome is one request's end: its phase, its answer or error, and
// when its connection came up, its request was written, and it ended,
// each from the start of the run.
type outcome struct {
	key                string
	conn, wrote, ended time.Duration
}

// stats sums the outcomes of one key: how many, and the earliest and
// latest of each time (a zero conn or wrote time is one that did not
// happen and is not counted).
type stats struct {
	Count              int
	EndedMin, EndedMax time.Duration
	ConnMin, ConnMax   time.Duration
	WroteMin, WroteMax time.Duration
}

func (s *stats) merge(o stats) {
	if s.Count == 0 {
		*s = o
		return
	}
	s.Count += o.Count
	s.EndedMin, s.EndedMax = min(s.EndedMin, o.EndedMin), max(s.EndedMax, o.EndedMax)
	s.ConnMin, s.ConnMax = minSet(s.ConnMin, o.ConnMin), max(s.ConnMax, o.ConnMax)
	s.WroteMin, s.WroteMax = minSet(s.WroteMin, o.WroteMin), max(s.WroteMax, o.WroteMax)
}

// minSet is the smaller of a and b, a zero one (unset) not counting.
func minSet(a, b time.Duration) time.Duration {
	if a == 0 || (b != 0 && b < a) {
		return b
	}
	return a
}

// tally gathers the outcomes by key.
type tally struct {
	mu   sync.Mutex
	Keys map[string]*stats
}

func (t *tally) add(o outcome) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.Keys[o.key]
	if s == nil {
		s = &stats{}
		t.Keys[o.key] = s
	}
	s.merge(stats{Count: 1, EndedMin: o.ended, EndedMax: o.ended, ConnMin: o.conn, ConnMax: o.conn, WroteMin: o.wrote, WroteMax: o.wrote})
}

func main() {
	url := flag.String("url", "", "the URL every client GETs")
	n := flag.Int("n", 1000, "concurrent clients")
	timeout := flag.Duration("timeout", 10*time.Minute, "bound on each request")
	dials := flag.Int("dials", 500, "most clients dialling or writing their request at once")
	procs := flag.Int("procs", 0, "processes to spread the clients over (0: as many as the open-file limit needs)")
	child := flag.Bool("child", false, "run the clients and print their tally as JSON (what -procs starts)")
	flag.Parse()
	if *url == "" || *n < 1 || *dials < 1 {
		fmt.Fprintln(os.Stderr, "pending: give -url, -n ≥ 1 and -dials ≥ 1")
		os.Exit(2)
	}
	limit := raiseFileLimit()
	start := time.Now()
	if *child {
		t := run(*url, *n, *dials, *timeout, start)
		if err := json.NewEncoder(os.Stdout).Encode(t.Keys); err != nil {
			fmt.Fprintln(os.Stderr, "pending:", err)
			os.Exit(1)
		}
		return
	}
	if *procs < 1 {
		*procs = (*n + perProcess(limit) - 1) / perProcess(limit)
	}
	if *n/(*procs)+perProcessSpare > int(min(limit, 1<<30)) {
		fmt.Fprintf(os.Stderr, "pending: the open-file limit (%d) is below %d clients' connections a process; the last dials will fail with EMFILE\n", limit, *n/(*procs))
	}
	total := map[string]*stats{}
	if *procs == 1 {
		total = run(*url, *n, *dials, *timeout, start).Keys
	} else if err := spread(total, *procs, *url, *n, *dials, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "pending:", err)
		os.Exit(1)
	}
	keys := make([]string, 0, len(total))
	var slowest time.Duration
	for k, s := range total {
		keys = append(keys, k)
		slowest = max(slowest, s.EndedMax)
	}
	sort.Strings(keys)
	fmt.Printf("clients %d in %v (slowest %v), %d processes, open-file limit %d each, at most %d dialling at once:\n",
		*n, time.Since(start).Round(time.Millisecond), slowest.Round(time.Millisecond), *procs, limit, *dials)
	r := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	for _, k := range keys {
		s := total[k]
		fmt.Printf("  %s: %d, ended %v–%v; connected %v–%v, written %v–%v (from the start of the run)\n", k, s.Count,
			r(s.EndedMin), r(s.EndedMax), r(s.ConnMin), r(s.ConnMax), r(s.WroteMin), r(s.WroteMax))
	}
}

// perProcessSpare is the descriptors a process needs besides its
// clients' connections.
const perProcessSpare = 32

// perProcess is how many clients a process with the open-file limit
// holds.
func perProcess(limit uint64) int {
	return int(max(min(limit, 1<<30), 2*perProcessSpare)) - perProcessSpare
}

// raiseFileLimit raises the soft open-file limit to the hard one (Go
// does this too, but says nothing) and returns it.
func raiseFileLimit() uint64 {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0
	}
	lim.Cur = lim.Max
	_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	return lim.Cur
}

// run makes n requests at once, at most dials of them dialling or
// writing at a time, and tallies how they ended.
func run(url string, n, dials int, timeout time.Duration, start time.Time) *tally {
	// No dial timeout of its own (the request's bounds the dial too).
	tr := &http.Transport{DisableKeepAlives: true, MaxIdleConns: -1, Proxy: nil}
	client := &http.Client{Transport: tr, Timeout: timeout}
	res := &tally{Keys: map[string]*stats{}}
	turns := make(chan struct{}, dials)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() { res.add(fetch(client, url, start, turns)) })
	}
	wg.Wait()
	return res
}

// spread runs the clients in procs child processes of this program and
// merges their tallies into total.
func spread(total map[string]*stats, procs int, url string, n, dials int, timeout time.Duration) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this program to start its processes: %w", err)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make([]error, procs)
	for i := range procs {
		share := n / procs
		if i < n%procs {
			share++
		}
		wg.Go(func() {
			cmd := exec.Command(self, "-child", "-url", url, "-n", fmt.Sprint(share),
				"-dials", fmt.Sprint(max(1, dials/procs)), "-timeout", timeout.String())
			cmd.Stderr = os.Stderr
			out, err := cmd.Output()
			if err != nil {
				errs[i] = fmt.Errorf("process %d: %w", i, err)
				return
			}
			var keys map[string]*stats
			if err := json.Unmarshal(out, &keys); err != nil {
				errs[i] = fmt.Errorf("process %d's tally: %w", i, err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for k, s := range keys {
				if total[k] == nil {
					total[k] = &stats{}
				}
				total[k].merge(*s)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// fetch makes one request on a connection of its own and says how it
// ended.
func fetch(client *http.Client, url string, t time.Time, turns chan struct{}) outcome {
	turns <- struct{}{} // its turn to dial and write
	var turnOnce sync.Once
	endTurn := func() { turnOnce.Do(func() { <-turns }) }
	defer endTurn()
	var mu sync.Mutex
	var o outcome
	phase := "dial"
	trace := &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) {
			mu.Lock()
			o.conn, phase = time.Since(t), "connected"
			mu.Unlock()
		},
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			mu.Lock()
			if info.Err == nil {
				o.wrote, phase = time.Since(t), "sent"
			}
			mu.Unlock()
			endTurn()
		},
		GotFirstResponseByte: func() {
			mu.Lock()
			phase = "answered"
			mu.Unlock()
		},
	}
	req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), http.MethodGet, url, nil)
	resp, err := client.Do(req)
	var key string
	if err != nil {
		key = errorKey(err)
	} else {
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		key = fmt.Sprint(resp.StatusCode)
		if err != nil {
			key += " then body " + errorKey(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	o.ended = time.Since(t)
	o.key = phase + " " + key
	return o
}

// errorKey shortens an error to what tells outcomes apart: without the
// URL and the addresses, which differ per connection.
func errorKey(err error) string {
	s := err.Error()
	if strings.Contains(s, "server closed idle connection") {
		return "error server closed idle connection"
	}
	if i := strings.Index(s, "\": "); strings.HasPrefix(s, "Get \"") && i > 0 {
		s = s[i+3:] // Get "url": …
	}
	s = addrPattern.ReplaceAllString(s, "ADDR")
	if len(s) > 120 {
		s = s[:120]
	}
	return "error " + s
}

// addrPattern matches an IPv4 address and port.
var addrPattern = regexp.MustCompile(`\d+\.\d+\.\d+\.\d+:\d+`)
