package gateway

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestPoolRoutesAndUpstream checks that a route reaches its service's pool
// handler (prefix stripped, or matched by host), that an allowed AWS JSON
// request of a throttled service with a pool goes to that pool, and that
// extra admin endpoints sit behind the token.
func TestPoolRoutesAndUpstream(t *testing.T) {
	cfg, err := parseConfig("pools.yaml", []byte(`services:
  - name: hello
    route: {path_prefix: /hello/, strip_prefix: true}
    autoscale: {command: [sh]}
  - name: byhost
    route: {host: api.example}
    autoscale: {command: [sh]}
  - preset: ecs
    autoscale: {command: [sh]}
`))
	if err != nil {
		t.Fatal(err)
	}
	pools := func(service string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "%s %s %s", service, r.Method, r.URL.Path)
		})
	}
	g, err := New(Options{Config: cfg, Pools: pools, AdminToken: "tok",
		AdminHandlers: map[string]http.Handler{"GET /v1/admin/pools": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("pools")) })}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g)
	defer srv.Close()
	get := func(path, host string, hdr ...string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		if host != "" {
			req.Host = host
		}
		if len(hdr) == 2 {
			req.Header.Set(hdr[0], hdr[1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		return resp.StatusCode, readAll(t, resp.Body)
	}
	for _, c := range []struct{ path, host, want string }{
		{"/hello/a/b", "", "hello GET /a/b"},
		{"/hello", "", "hello GET /"},
		{"/anything", "api.example:8080", "byhost GET /anything"},
	} {
		if code, body := get(c.path, c.host); code != 200 || body != c.want {
			t.Errorf("GET %s (host %q) = %d %q, want %q", c.path, c.host, code, body, c.want)
		}
	}
	if code, _ := get("/helloworld", ""); code == 200 {
		t.Error("/helloworld reached the /hello/ pool")
	}
	if code, body := get("/healthz", ""); code != 200 || body != "ok\n" {
		t.Errorf("/healthz = %d %q", code, body)
	}
	resp := awsRequest(t, srv.URL, ecsTarget+"ListClusters", sigv4("AKIDEXAMPLE", "us-east-1", "ecs"), "{}")
	if body := readAll(t, resp.Body); resp.StatusCode != 200 || body != "ecs POST /" {
		t.Errorf("ecs through its pool = %d %q", resp.StatusCode, body)
	}
	if code, _ := get("/v1/admin/pools", ""); code != http.StatusUnauthorized {
		t.Errorf("admin pools without token = %d", code)
	}
	if code, body := get("/v1/admin/pools", "", "Authorization", "Bearer tok"); code != 200 || body != "pools" {
		t.Errorf("admin pools = %d %q", code, body)
	}
}
