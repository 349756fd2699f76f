package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/tollgate/tollgate/gateway"
)

// A gateway on the built-in ECS and Cloud Map quotas, asked through the
// native API: a burst of 50 DescribeClusters empties the cluster-read
// bucket, and ListClusters, which shares it, is throttled.
func Example() {
	g, err := gateway.New(gateway.Options{})
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(g)
	defer srv.Close()

	take := func(body string) {
		resp, err := http.Post(srv.URL+"/v1/take", "application/json", strings.NewReader(body))
		if err != nil {
			panic(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var allowed string
		if strings.Contains(string(b), `"allowed":true`) {
			allowed = "allowed"
		} else {
			allowed = "throttled, Retry-After " + resp.Header.Get("Retry-After")
		}
		fmt.Println(resp.StatusCode, allowed, resp.Header.Get("RateLimit-Policy"))
	}
	take(`{"service":"ecs","account":"123456789012","region":"us-east-1","action":"DescribeClusters","tokens":50}`)
	take(`{"service":"ecs","account":"123456789012","region":"us-east-1","action":"ListClusters"}`)
	// Output:
	// 200 allowed "cluster-read";q=50;w=3
	// 429 throttled, Retry-After 1 "cluster-read";q=50;w=3
}
