package pool

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/autoscale"
)

// BenchmarkProxy compares a trivial backend called directly, through
// httputil.ReverseProxy alone, and through the pool (route, slot, proxy),
// each over real loopback HTTP at 16 and 64 concurrent clients. Besides
// ns/op (the inverse of throughput) it reports p50 and p99 latency.
func BenchmarkProxy(b *testing.B) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok\n")
	}))
	defer backend.Close()
	u, _ := url.Parse(backend.URL)
	rp := httputil.NewSingleHostReverseProxy(u)
	rpTransport := http.DefaultTransport.(*http.Transport).Clone()
	rpTransport.MaxIdleConnsPerHost = 1000
	rp.Transport = rpTransport
	viaRP := httptest.NewServer(rp)
	defer viaRP.Close()

	p := New(Options{})
	if err := p.Apply([]ServiceSpec{{Name: "s", Runner: &serverRunner{}, Engine: autoscale.Config{MaxInstances: 1, MaxConcurrency: 1000, MinInstances: 1}}}); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- p.Run(ctx) }()
	defer func() { cancel(); <-done }()
	viaPool := httptest.NewServer(p.Handler("s"))
	defer viaPool.Close()
	for deadline := time.Now().Add(30 * time.Second); ; {
		if resp, err := http.Get(viaPool.URL); err == nil && resp.StatusCode == 200 {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("pool not serving")
		}
		time.Sleep(50 * time.Millisecond)
	}

	for _, target := range []struct{ name, url string }{{"direct", backend.URL}, {"reverseproxy", viaRP.URL}, {"pool", viaPool.URL}} {
		for _, c := range []int{16, 64} {
			b.Run(target.name+"/c="+strconv.Itoa(c), func(b *testing.B) {
				tr := http.DefaultTransport.(*http.Transport).Clone()
				tr.MaxIdleConnsPerHost = c
				client := &http.Client{Transport: tr}
				defer tr.CloseIdleConnections()
				var mu sync.Mutex
				var lat []time.Duration
				b.SetParallelism(max(1, c/runtime.GOMAXPROCS(0)))
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					var mine []time.Duration
					for pb.Next() {
						start := time.Now()
						resp, err := client.Get(target.url)
						if err != nil {
							b.Error(err)
							return
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != 200 {
							b.Errorf("status %d", resp.StatusCode)
							return
						}
						mine = append(mine, time.Since(start))
					}
					mu.Lock()
					lat = append(lat, mine...)
					mu.Unlock()
				})
				b.StopTimer()
				if len(lat) > 0 {
					slices.Sort(lat)
					b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
					b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
				}
			})
		}
	}
}
