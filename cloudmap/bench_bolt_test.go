package cloudmap_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cloudmap"
	"github.com/tollgate/tollgate/state/bolt"
)

// BenchmarkDurableWrites registers instances over HTTP (loopback, as a
// tenant's SDK does), from 64 clients at once, in memory and in the
// embedded store at a few batch delays: each durable answer waits for its
// fsync, shared by the writes of its group. It reports writes/s and the
// p50 and p99 of a write's latency; compare the durable rows with the
// memory row of the same run.
func BenchmarkDurableWrites(b *testing.B) {
	for _, bc := range []struct {
		name  string
		delay time.Duration // 0: memory
	}{{"memory", 0}, {"bolt/delay=10ms", 10 * time.Millisecond}, {"bolt/delay=2ms", 2 * time.Millisecond}, {"bolt/delay=500us", 500 * time.Microsecond}} {
		b.Run(bc.name, func(b *testing.B) {
			opts := cloudmap.Options{Limits: cloudmap.Limits{InstancesPerService: 1 << 30, InstancesPerNamespace: 1 << 30}}
			if bc.delay > 0 {
				db, err := bolt.Open(b.TempDir(), bolt.Options{MaxBatchDelay: bc.delay})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { db.Close() })
				opts.Durable = db
			}
			r, err := cloudmap.New(opts)
			if err != nil {
				b.Fatal(err)
			}
			if err := r.RegisterInstance(b.Context(), cloudmap.DefaultScope, "local", "web", "i-0", map[string]string{"AWS_INSTANCE_PORT": "80"}); err != nil {
				b.Fatal(err)
			}
			srv := httptest.NewServer(r)
			b.Cleanup(srv.Close)
			tr := http.DefaultTransport.(*http.Transport).Clone()
			tr.MaxIdleConnsPerHost = 128
			client := &http.Client{Transport: tr}
			svc := serviceID(b, client, srv.URL)
			var worker atomic.Int64
			var mu sync.Mutex
			var lat []time.Duration
			b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				w := worker.Add(1)
				var mine []time.Duration
				for i := 0; pb.Next(); i++ {
					body := fmt.Sprintf(`{"ServiceId":%q,"InstanceId":"w-%d-%d","Attributes":{"AWS_INSTANCE_IPV4":"10.0.0.2","AWS_INSTANCE_PORT":"80"}}`, svc, w, i)
					began := time.Now()
					post(b, client, srv.URL, "RegisterInstance", body)
					mine = append(mine, time.Since(began))
				}
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "writes/s")
			slices.Sort(lat)
			if len(lat) > 0 {
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
			}
		})
	}
}

func post(b *testing.B, c *http.Client, url, op, body string) string {
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("X-Amz-Target", cloudmap.TargetPrefix+"."+op)
	resp, err := c.Do(req)
	if err != nil {
		b.Error(err)
		return ""
	}
	defer resp.Body.Close()
	var sb strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			break
		}
	}
	if resp.StatusCode != http.StatusOK {
		b.Errorf("%s: %d %s", op, resp.StatusCode, sb.String())
	}
	return sb.String()
}

func serviceID(b *testing.B, c *http.Client, url string) string {
	out := post(b, c, url, "ListServices", `{}`)
	i := strings.Index(out, `"Id":"`)
	if i < 0 {
		b.Fatalf("ListServices: %s", out)
	}
	id, _, _ := strings.Cut(out[i+6:], `"`)
	return id
}
