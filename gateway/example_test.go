package gateway_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
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

// A reverse proxy of its own (an instance pool's, say) answers and logs
// upstream failures as the gateway's proxies do: a client that went away is
// routine, a refused connection is a 503 and a timeout a 504, in the AWS
// error shape.
func ExampleClassifyUpstreamError() {
	upstream, _ := url.Parse("http://127.0.0.1:1") // nothing listens on port 1
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(upstream) },
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			f := gateway.ClassifyUpstreamError(r, err)
			fmt.Println(f.Level, f.Reason) // in a server: log.Log(ctx, f.Level, …)
			w.Header().Set("X-Amzn-ErrorType", f.Code)
			http.Error(w, f.Message, f.Status)
		},
	}
	w := httptest.NewRecorder()
	proxy.ServeHTTP(w, httptest.NewRequest("POST", "/", nil))
	fmt.Println(w.Code, w.Header().Get("X-Amzn-ErrorType"))

	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the client is gone before the upstream answers
	proxy.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/", nil).WithContext(ctx))
	// Output:
	// WARN refused
	// 503 ServiceUnavailableException
	// DEBUG client_gone
}
