package cloudmap_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
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
