package cloudmap_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/cloudmap"
	"github.com/tollgate/tollgate/internal/redistest"
)

// BenchmarkDiscoverInstances answers DiscoverInstances from a service of n
// instances, straight from the registry (no gateway), in memory and in
// Redis (which loads the scope's whole state per request).
func BenchmarkDiscoverInstances(b *testing.B) {
	for _, store := range []string{"memory", "redis"} {
		for _, n := range []int{3, 1000} {
			b.Run(fmt.Sprintf("%s/instances=%d", store, n), func(b *testing.B) {
				opts := cloudmap.Options{}
				if store == "redis" {
					srv := redistest.Start(b)
					client := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
					b.Cleanup(func() { client.Close() })
					opts.Redis = client
				}
				r, err := cloudmap.New(opts)
				if err != nil {
					b.Fatal(err)
				}
				for i := range n {
					if err := r.RegisterInstance(context.Background(), cloudmap.DefaultScope, "local", "web", fmt.Sprint("i-", i),
						map[string]string{"AWS_INSTANCE_IPV4": "10.0.0.1", "AWS_INSTANCE_PORT": "80", "stage": "prod"}); err != nil {
						b.Fatal(err)
					}
				}
				body := `{"NamespaceName":"local","ServiceName":"web","QueryParameters":{"stage":"prod"},"MaxResults":10}`
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
					req.Header.Set("X-Amz-Target", cloudmap.TargetPrefix+".DiscoverInstances")
					w := httptest.NewRecorder()
					r.ServeHTTP(w, req)
					if w.Code != 200 {
						b.Fatalf("%d %s", w.Code, w.Body)
					}
				}
			})
		}
	}
}

// BenchmarkRedisWrites registers and deregisters instances through the API
// (RegisterInstance then DeregisterInstance, from 1 or 8 goroutines) in a
// service that already holds n instances, on Redis: the write rate with a
// large registry. It reports writes/s (each iteration is two writes).
func BenchmarkRedisWrites(b *testing.B) {
	for _, bc := range []struct{ n, clients int }{{1000, 1}, {1000, 8}, {10000, 1}, {10000, 8}} {
		n := bc.n
		b.Run(fmt.Sprintf("instances=%d/clients=%d", n, bc.clients), func(b *testing.B) {
			srv := redistest.Start(b)
			client := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
			b.Cleanup(func() { client.Close() })
			r, err := cloudmap.New(cloudmap.Options{Redis: client,
				Limits: cloudmap.Limits{InstancesPerService: 2 * n, InstancesPerNamespace: 2 * n}})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			for i := range n {
				if err := r.RegisterInstance(ctx, cloudmap.DefaultScope, "local", "web", fmt.Sprint("i-", i),
					map[string]string{"AWS_INSTANCE_IPV4": "10.0.0.1", "AWS_INSTANCE_PORT": "80", "stage": "prod"}); err != nil {
					b.Fatal(err)
				}
			}
			serve := func(op, body string) string {
				req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
				req.Header.Set("X-Amz-Target", cloudmap.TargetPrefix+"."+op)
				w := httptest.NewRecorder()
				r.ServeHTTP(w, req)
				if w.Code != 200 {
					b.Errorf("%s: %d %s", op, w.Code, w.Body)
				}
				return w.Body.String()
			}
			var list struct{ Services []struct{ Id string } }
			if err := json.Unmarshal([]byte(serve("ListServices", `{}`)), &list); err != nil || len(list.Services) != 1 {
				b.Fatalf("ListServices: %v %+v", err, list)
			}
			svc := list.Services[0].Id
			cycle := func(id string) {
				serve("RegisterInstance", `{"ServiceId":"`+svc+`","InstanceId":"`+id+`","Attributes":{"AWS_INSTANCE_IPV4":"10.0.0.2","AWS_INSTANCE_PORT":"80"}}`)
				serve("DeregisterInstance", `{"ServiceId":"`+svc+`","InstanceId":"`+id+`"}`)
			}
			b.ResetTimer()
			if bc.clients == 1 {
				for i := 0; i < b.N; i++ {
					cycle(fmt.Sprint("w-", i))
				}
			} else {
				var worker atomic.Int64
				b.SetParallelism(max(1, bc.clients/runtime.GOMAXPROCS(0)))
				b.RunParallel(func(pb *testing.PB) {
					w := worker.Add(1)
					for i := 0; pb.Next(); i++ {
						cycle(fmt.Sprintf("w-%d-%d", w, i))
					}
				})
			}
			b.ReportMetric(float64(2*b.N)/b.Elapsed().Seconds(), "writes/s")
		})
	}
}
