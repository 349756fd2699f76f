// Command pending opens many concurrent HTTP requests at once, each on a
// connection of its own, and reports how each was answered: the client
// side of bench/autoscale-long.sh's "20,000 pending clients" row.
//
//	pending -url http://127.0.0.1:8080/crowd/ -n 20000 -timeout 10m
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"sync"
	"time"
)

func main() {
	url := flag.String("url", "", "the URL every client GETs")
	n := flag.Int("n", 1000, "concurrent clients")
	timeout := flag.Duration("timeout", 10*time.Minute, "bound on each request")
	flag.Parse()
	if *url == "" || *n < 1 {
		fmt.Fprintln(os.Stderr, "pending: give -url and -n ≥ 1")
		os.Exit(2)
	}
	tr := &http.Transport{DisableKeepAlives: true, MaxIdleConns: -1, Proxy: nil}
	client := &http.Client{Transport: tr, Timeout: *timeout}
	var mu sync.Mutex
	codes := map[string]int{}
	first, last := map[string]time.Duration{}, map[string]time.Duration{}
	var slowest time.Duration
	var wg sync.WaitGroup
	start := time.Now()
	for range *n {
		wg.Go(func() {
			t := time.Now()
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, *url, nil)
			resp, err := client.Do(req)
			key := ""
			if err != nil {
				key = "error: " + err.Error()
				if len(key) > 80 {
					key = key[:80]
				}
			} else {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				key = fmt.Sprint(resp.StatusCode)
			}
			d := time.Since(t)
			mu.Lock()
			codes[key]++
			slowest = max(slowest, d)
			if f, ok := first[key]; !ok || d < f {
				first[key] = d
			}
			last[key] = max(last[key], d)
			mu.Unlock()
		})
	}
	wg.Wait()
	keys := make([]string, 0, len(codes))
	for k := range codes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Printf("clients %d in %v (slowest %v):", *n, time.Since(start).Round(time.Millisecond), slowest.Round(time.Millisecond))
	for _, k := range keys {
		fmt.Printf(" %s=%d (after %v–%v)", k, codes[k], first[k].Round(time.Millisecond), last[k].Round(time.Millisecond))
	}
	fmt.Println()
}
