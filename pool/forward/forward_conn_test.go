package forward

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// rawInstance is an instance written byte by byte: answer writes what it
// likes on each connection after reading one request head; it counts the
// connections.
type rawInstance struct {
	ln    net.Listener
	conns atomic.Int64
}

func newRawInstance(t *testing.T, answer func(c net.Conn, br *bufio.Reader)) *rawInstance {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ri := &rawInstance{ln: ln}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			ri.conns.Add(1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				c.SetDeadline(time.Now().Add(time.Minute))
				answer(c, bufio.NewReader(c))
			}()
		}
	}()
	return ri
}

// readHead reads one request head from br.
func readHead(br *bufio.Reader) error {
	_, err := http.ReadRequest(br)
	return err
}

// serveRaw proxies one GET through p to the instance at addr, behind a
// real HTTP server, and returns the client's status and body.
func serveRaw(t *testing.T, p *Proxy, addr string) (int, string) {
	t.Helper()
	in := &testTarget{name: "raw", url: mustURL(t, "http://"+addr)}
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
		defer cancel()
		p.serveHTTP(w, r.WithContext(context.WithValue(ctx, targetKey{}, in)))
	}))
	defer front.Close()
	a := rawDo(t, front.Listener.Addr().String(), "GET / HTTP/1.1\r\nHost: h\r\n\r\n")
	return a.resp.StatusCode, a.body
}

// A connection the instance closed while it idled (a restart, its
// keep-alive timeout) is not the request's failure: the forwarder takes
// a new one. Each connection here answers once, without saying it will
// close.
func TestForwarderRetriesAConnectionClosedWhileIdle(t *testing.T) {
	t.Parallel()
	ri := newRawInstance(t, func(c net.Conn, br *bufio.Reader) {
		if readHead(br) == nil {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	p := New(Options{Service: "s", Logger: testLogger(t), MaxConcurrency: 4})
	defer p.CloseIdleConnections()
	for i := range 5 {
		if code, body := serveRaw(t, p, ri.ln.Addr().String()); code != 200 || body != "ok" {
			t.Fatalf("request %d: %d %q", i, code, body)
		}
		// Let the close reach the kept connection before the next request.
		time.Sleep(20 * time.Millisecond)
	}
	if n := ri.conns.Load(); n != 5 {
		t.Fatalf("%d connections for 5 requests on connections that answer once", n)
	}
}

// The forwarder keeps its connections: sequential requests share one; a
// burst leaves at most the instance's concurrency idle (max concurrency,
// here 4), and CloseIdleConnections closes them.
func TestForwarderKeepsConnectionsPerInstance(t *testing.T) {
	t.Parallel()
	var conns atomic.Int64
	inst := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("wait") != "" {
			time.Sleep(50 * time.Millisecond)
		}
		io.WriteString(w, "ok\n")
	}))
	inst.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	inst.Start()
	defer inst.Close()
	p := New(Options{Service: "s", Logger: testLogger(t), MaxConcurrency: 4})
	in := &testTarget{name: "i", url: mustURL(t, inst.URL)}
	do := func(target string) int {
		ctx := context.WithValue(context.Background(), targetKey{}, in)
		rec := httptest.NewRecorder()
		p.serveHTTP(rec, httptest.NewRequestWithContext(ctx, http.MethodGet, target, nil))
		return rec.Code
	}
	for range 50 {
		if code := do("/"); code != 200 {
			t.Fatal(code)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("50 sequential requests opened %d connections", n)
	}
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if code := do("/?wait=1"); code != 200 {
				t.Error(code)
			}
		}()
	}
	wg.Wait()
	if n := p.conns.idleCount(in.url.Host); n < 1 || n > 4 {
		t.Fatalf("%d idle connections after a burst, want 1 to 4", n)
	}
	p.CloseIdleConnections()
	if n := p.conns.idleCount(in.url.Host); n != 0 {
		t.Fatalf("%d idle connections after CloseIdleConnections", n)
	}
}

// An instance that sends an endless response head, or endless
// informational answers, gets a 502, not the proxy's memory.
func TestForwarderBoundsTheResponseHead(t *testing.T) {
	t.Parallel()
	for name, answer := range map[string]func(c net.Conn){
		"head": func(c net.Conn) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\n")
			line := "X-Filler: " + strings.Repeat("a", 1000) + "\r\n"
			for i := 0; i < 20000; i++ { // 20 MB
				if _, err := io.WriteString(c, line); err != nil {
					return
				}
			}
		},
		"1xx": func(c net.Conn) {
			for i := 0; i < 1000; i++ {
				if _, err := io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"); err != nil {
					return
				}
			}
		},
	} {
		ri := newRawInstance(t, func(c net.Conn, br *bufio.Reader) {
			if readHead(br) == nil {
				answer(c)
			}
		})
		p := New(Options{Service: "s", Logger: testLogger(t), MaxConcurrency: 4})
		if code, body := serveRaw(t, p, ri.ln.Addr().String()); code != http.StatusBadGateway {
			t.Errorf("%s: %d %q, want 502", name, code, body)
		}
	}
}

// A status net/http cannot write (outside 100-999) is answered 502 on
// both paths (a GET through the forwarder, a POST with a body through
// ReverseProxy), not a panic in the handler.
func TestProxyRefusesAnInvalidStatus(t *testing.T) {
	t.Parallel()
	ri := newRawInstance(t, func(c net.Conn, br *bufio.Reader) {
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			io.Copy(io.Discard, req.Body)
			io.WriteString(c, "HTTP/1.1 000 Zero\r\nContent-Length: 0\r\n\r\n")
		}
	})
	in := &testTarget{name: "raw", url: mustURL(t, "http://"+ri.ln.Addr().String())}
	p := New(Options{Service: "s", Logger: testLogger(t), MaxConcurrency: 4})
	defer p.CloseIdleConnections()
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.serveHTTP(w, r.WithContext(context.WithValue(r.Context(), targetKey{}, in)))
	}))
	defer front.Close()
	for _, req := range []string{
		"GET / HTTP/1.1\r\nHost: h\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n\r\nbody",
	} {
		if a := rawDo(t, front.Listener.Addr().String(), req); a.resp.StatusCode != http.StatusBadGateway {
			t.Errorf("%q: %d %q, want 502", req, a.resp.StatusCode, a.body)
		}
	}
}

// A request the instance cannot be sent (a header value with a line
// break, set by code, not parsed from a client) gets a 502 through the
// forwarder as through ReverseProxy, and nothing reaches the instance.
func TestForwarderRefusesAnUnsendableHeader(t *testing.T) {
	t.Parallel()
	var reached atomic.Int64
	ph := newProxyHarness(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached.Add(1) }), 30*time.Second)
	for _, serve := range []http.HandlerFunc{ph.p.serveHTTP, ph.p.rp.ServeHTTP} {
		ctx := context.WithValue(context.Background(), targetKey{}, ph.in)
		req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
		req.Header.Set("X-Bad", "a\r\nX-Injected: 1")
		rec := httptest.NewRecorder()
		serve(rec, req)
		if rec.Code != http.StatusBadGateway {
			t.Errorf("%d %q, want 502", rec.Code, rec.Body)
		}
	}
	if n := reached.Load(); n != 0 {
		t.Fatalf("%d requests reached the instance", n)
	}
}

// Which requests the forwarder takes.
func TestFastPath(t *testing.T) {
	for _, c := range []struct {
		method, target string
		header         map[string]string
		body           string
		want           bool
	}{
		{"GET", "/", nil, "", true},
		{"HEAD", "/x?y", nil, "", true},
		{"OPTIONS", "/", nil, "", true},
		{"TRACE", "/", nil, "", true},
		{"DELETE", "/", nil, "", false},
		{"POST", "/", nil, "", false},
		{"POST", "/", map[string]string{"Idempotency-Key": "k"}, "", true},
		{"PUT", "/", map[string]string{"X-Idempotency-Key": "k"}, "", true},
		{"POST", "/", map[string]string{"Idempotency-Key": "k"}, "body", false},
		{"GET", "/", nil, "body", false},
		{"GET", "/", map[string]string{"Upgrade": "websocket", "Connection": "Upgrade"}, "", false},
		{"CONNECT", "/", nil, "", false},
	} {
		var body io.Reader
		if c.body != "" {
			body = strings.NewReader(c.body)
		}
		r := httptest.NewRequest(c.method, c.target, body)
		for k, v := range c.header {
			r.Header.Set(k, v)
		}
		if got := FastPath(r); got != c.want {
			t.Errorf("%s %s %v body %q: FastPath %v, want %v", c.method, c.target, c.header, c.body, got, c.want)
		}
	}
	r := httptest.NewRequest("OPTIONS", "*", nil)
	if FastPath(r) {
		t.Error("OPTIONS *: taken by the forwarder")
	}
	r = httptest.NewRequest("GET", "/", nil)
	r.Host = "bücher.example"
	if FastPath(r) {
		t.Error("a host to punycode: taken by the forwarder")
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// Trailers, announced or not, reach a net/http client through the forwarder.
func TestProxiedTrailers(t *testing.T) {
	t.Parallel()
	ph := newProxyHarness(t, answers, 60*time.Second)
	client := ph.fast.Client()
	for path, want := range map[string]map[string]string{
		"/trailers":    {"X-Sum": "42", "X-Count": "1"},
		"/unannounced": {"X-Late": "yes"},
	} {
		resp, err := client.Get(ph.fast.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(body) != "body" {
			t.Fatalf("%s: %q %v", path, body, err)
		}
		for k, v := range want {
			if got := resp.Trailer.Get(k); got != v {
				t.Errorf("%s: trailer %s = %q, want %q (all: %v)", path, k, got, v, resp.Trailer)
			}
		}
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestProxyErrorStatus(t *testing.T) {
	for _, c := range []struct {
		err  error
		want int
	}{
		{context.DeadlineExceeded, http.StatusGatewayTimeout},
		{fmt.Errorf("read: %w", timeoutErr{}), http.StatusGatewayTimeout},
		{errors.New("connection refused"), http.StatusBadGateway},
		{io.ErrUnexpectedEOF, http.StatusBadGateway},
	} {
		if got, _ := proxyError(context.Background(), c.err); got != c.want {
			t.Errorf("proxyError(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}
