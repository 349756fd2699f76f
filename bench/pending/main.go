// Command pending opens many concurrent HTTP requests at once, each on a
// connection of its own, and reports how each was answered: the client
// side of bench/autoscale-long.sh's "20,000 pending clients" row.
//
//	pending -url http://127.0.0.1:8080/crowd/ -n 20000 -timeout 10m
//
// Every outcome is keyed by where the request was when it ended (an
// httptrace of each request): "dial" (no connection yet), "written" (the
// connection was up but the request not fully written), "sent" (the
// request written, no response header yet) or "answered" (a status
// line came back). So a failure says which side of the request it
// happened on: an EOF after "sent" is the server closing a connection it
// had read, one before is a connection it never read.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// outcome is one request's end: its phase, its answer or error, and
// when its connection came up, its request was written, and it ended.
type outcome struct {
	key                string
	conn, wrote, ended time.Duration
}

// tally gathers the outcomes by key.
type tally struct {
	mu    sync.Mutex
	count map[string]int
	first map[string]outcome
	last  map[string]outcome
	// connMax and wroteMax are the slowest connection and write seen
	// per key, each from the start of its request.
	connMax, wroteMax map[string]time.Duration
}

func newTally() *tally {
	return &tally{count: map[string]int{}, first: map[string]outcome{}, last: map[string]outcome{},
		connMax: map[string]time.Duration{}, wroteMax: map[string]time.Duration{}}
}

func (t *tally) add(o outcome) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.count[o.key]++
	if f, ok := t.first[o.key]; !ok || o.ended < f.ended {
		t.first[o.key] = o
	}
	if o.ended > t.last[o.key].ended {
		t.last[o.key] = o
	}
	t.connMax[o.key] = max(t.connMax[o.key], o.conn)
	t.wroteMax[o.key] = max(t.wroteMax[o.key], o.wrote)
}

func main() {
	url := flag.String("url", "", "the URL every client GETs")
	n := flag.Int("n", 1000, "concurrent clients")
	timeout := flag.Duration("timeout", 10*time.Minute, "bound on each request")
	flag.Parse()
	if *url == "" || *n < 1 {
		fmt.Fprintln(os.Stderr, "pending: give -url and -n ≥ 1")
		os.Exit(2)
	}
	// One connection per client: the process needs n descriptors and a
	// few for itself. Fewer is the client's own limit, not the server's.
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil {
		lim.Cur = lim.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
		_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
		if lim.Cur < uint64(*n)+16 {
			fmt.Fprintf(os.Stderr, "pending: the open-file limit (%d) is below %d clients' connections; the last dials will fail with EMFILE\n", lim.Cur, *n)
		}
	}
	// No dial timeout of its own (the request's bounds the dial too).
	tr := &http.Transport{DisableKeepAlives: true, MaxIdleConns: -1, Proxy: nil}
	client := &http.Client{Transport: tr, Timeout: *timeout}
	res := newTally()
	var wg sync.WaitGroup
	start := time.Now()
	for range *n {
		wg.Go(func() { res.add(fetch(client, *url)) })
	}
	wg.Wait()
	keys := make([]string, 0, len(res.count))
	for k := range res.count {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var slowest time.Duration
	for _, o := range res.last {
		slowest = max(slowest, o.ended)
	}
	fmt.Printf("clients %d in %v (slowest %v), limit of open files %d:\n", *n, time.Since(start).Round(time.Millisecond), slowest.Round(time.Millisecond), lim.Cur)
	for _, k := range keys {
		fmt.Printf("  %s: %d, ended after %v–%v (connected by %v, written by %v at the latest)\n", k, res.count[k],
			res.first[k].ended.Round(time.Millisecond), res.last[k].ended.Round(time.Millisecond),
			res.connMax[k].Round(time.Millisecond), res.wroteMax[k].Round(time.Millisecond))
	}
}

// fetch makes one request on a connection of its own and says how it
// ended.
func fetch(client *http.Client, url string) outcome {
	t := time.Now()
	var mu sync.Mutex
	var o outcome
	phase := "dial"
	trace := &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) {
			mu.Lock()
			o.conn, phase = time.Since(t), "written"
			mu.Unlock()
		},
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			mu.Lock()
			if info.Err == nil {
				o.wrote, phase = time.Since(t), "sent"
			}
			mu.Unlock()
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

// errorKey shortens an error to what tells outcomes apart: no ports or
// addresses, which differ per connection.
func errorKey(err error) string {
	s := err.Error()
	switch {
	case strings.Contains(s, "EOF"):
		return "error EOF"
	case strings.Contains(s, "connection reset"):
		return "error connection reset"
	case strings.Contains(s, "server closed idle connection"):
		return "error server closed idle connection"
	case strings.Contains(s, "too many open files"):
		return "error too many open files"
	case strings.Contains(s, "Client.Timeout"), strings.Contains(s, "deadline exceeded"):
		return "error timeout"
	case strings.Contains(s, "connection refused"):
		return "error connection refused"
	}
	if len(s) > 80 {
		s = s[:80]
	}
	return "error " + s
}
