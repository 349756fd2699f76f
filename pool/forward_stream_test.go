package pool

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/autoscale"
	"github.com/tollgate/tollgate/pool/forward"
)

// handlerPool runs a pool of one service whose instance answers with h,
// behind a real HTTP server (HTTP/2 over TLS when h2), and returns the
// server and its client.
func handlerPool(t *testing.T, h http.Handler, timeout time.Duration, h2 bool) (*httptest.Server, *http.Client) {
	t.Helper()
	r := &serverRunner{handler: h}
	p, _ := newTestPool(t, ServiceSpec{Name: "s", Runner: r, RequestTimeout: timeout,
		Engine: autoscale.Config{MinInstances: 1, MaxInstances: 1, MaxConcurrency: 100}})
	runPool(t, p)
	front := httptest.NewUnstartedServer(p.Handler("s"))
	if h2 {
		front.EnableHTTP2 = true
		front.StartTLS()
	} else {
		front.Start()
	}
	t.Cleanup(front.Close)
	return front, front.Client()
}

// within fails the test unless f returns within d.
func within(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s: not within %v", what, d)
	}
}

// A stream reaches the client as the instance sends it: the first part
// arrives while the instance still holds back the second. Unknown length
// (chunked), SSE and X-Accel-Buffering: no are streams, through HTTP/1.1
// and HTTP/2 alike; all go through the forwarder (GET, no body).
func TestProxiedStreamsFlushAsTheyCome(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		header map[string]string
	}{
		{"chunked", nil},
		{"sse", map[string]string{"Content-Type": "text/event-stream", "Content-Length": "13"}},
		{"x-accel-buffering", map[string]string{"X-Accel-Buffering": "no", "Content-Length": "13"}},
	} {
		for _, h2 := range []bool{false, true} {
			name := c.name + "/http1"
			if h2 {
				name = c.name + "/http2"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				next := make(chan struct{})
				h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					for k, v := range c.header {
						w.Header().Set(k, v)
					}
					io.WriteString(w, "first\n")
					w.(http.Flusher).Flush()
					select {
					case <-next:
					case <-r.Context().Done():
						return
					}
					io.WriteString(w, "second\n")
				})
				front, client := handlerPool(t, h, 60*time.Second, h2)
				req, _ := http.NewRequest(http.MethodGet, front.URL+"/stream", nil)
				if !forward.FastPath(req) {
					t.Fatal("the request would not take the forwarder")
				}
				resp, err := client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				if resp.ProtoMajor != map[bool]int{false: 1, true: 2}[h2] {
					t.Fatalf("client spoke %s", resp.Proto)
				}
				br := bufio.NewReader(resp.Body)
				var line string
				within(t, 20*time.Second, "the first part, while the instance holds back the second", func() {
					line, err = br.ReadString('\n')
				})
				if err != nil || line != "first\n" {
					t.Fatalf("first part: %q %v", line, err)
				}
				close(next)
				rest, err := io.ReadAll(br)
				if err != nil || string(rest) != "second\n" {
					t.Fatalf("second part: %q %v", rest, err)
				}
			})
		}
	}
}

// An answer of known length is not flushed part by part: its first part
// does not reach the client before the rest (it goes out with the head,
// in one write, when the instance's answer is complete).
func TestProxiedKnownLengthIsNotFlushedEarly(t *testing.T) {
	t.Parallel()
	next := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "12")
		io.WriteString(w, "first\n")
		w.(http.Flusher).Flush()
		select {
		case <-next:
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, "second\n"[:6])
	})
	front, client := handlerPool(t, h, 60*time.Second, false)
	type answer struct {
		resp *http.Response
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		resp, err := client.Get(front.URL + "/")
		got <- answer{resp, err}
	}()
	select {
	case a := <-got:
		t.Fatalf("the answer's head came before the instance finished it (err %v)", a.err)
	case <-time.After(time.Second):
	}
	close(next)
	a := <-got
	if a.err != nil {
		t.Fatal(a.err)
	}
	body, err := io.ReadAll(a.resp.Body)
	a.resp.Body.Close()
	if err != nil || string(body) != "first\nsecond" {
		t.Fatalf("%q %v", body, err)
	}
}

// A websocket (an upgrade: ReverseProxy's path) is proxied both ways
// through the pool.
func TestProxiedWebSocket(t *testing.T) {
	t.Parallel()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "websocket" {
			http.Error(w, "want a websocket", http.StatusBadRequest)
			return
		}
		c, brw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n")
		brw.Flush()
		io.Copy(c, brw) // echo until the client closes
	})
	front, _ := handlerPool(t, h, 60*time.Second, false)
	c, err := net.Dial("tcp", front.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Upgrade") != "websocket" {
		t.Fatalf("upgrade answered %d %v", resp.StatusCode, resp.Header)
	}
	for _, msg := range []string{"hello\n", "again\n"} {
		io.WriteString(c, msg)
		line, err := br.ReadString('\n')
		if err != nil || line != msg {
			t.Fatalf("echo of %q: %q %v", msg, line, err)
		}
	}
}

// The request timeout cuts a request the instance does not answer: 504,
// and the instance sees its request end; an answer that stalls after its
// head is cut, never completed as if whole.
func TestForwarderRequestTimeout(t *testing.T) {
	t.Parallel()
	ended := make(chan struct{}, 2)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/stall" {
			io.WriteString(w, "part")
			w.(http.Flusher).Flush()
		}
		select {
		case <-r.Context().Done():
			ended <- struct{}{}
		case <-time.After(2 * time.Minute):
		}
	})
	front, client := handlerPool(t, h, 3*time.Second, false)
	start := time.Now()
	resp, err := client.Get(front.URL + "/slow")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusGatewayTimeout || !strings.Contains(string(body), "request timeout") {
		t.Fatalf("%d %q, want 504 saying the request timeout passed", resp.StatusCode, body)
	}
	if el := time.Since(start); el > 60*time.Second {
		t.Fatalf("answered after %v", el)
	}
	within(t, 30*time.Second, "the instance's request ending", func() { <-ended })

	resp, err = client.Get(front.URL + "/stall")
	if err != nil {
		t.Fatal(err)
	}
	body, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil {
		t.Fatalf("a stalled answer cut by the request timeout read as complete: %d %q", resp.StatusCode, body)
	}
	within(t, 30*time.Second, "the instance's request ending", func() { <-ended })
}

// An instance that fails mid-answer never gives the client a complete
// answer: a cut length or a chunked stream without its end reads as an
// error; one that fails before answering gets a 502.
func TestForwarderNoFalse200(t *testing.T) {
	t.Parallel()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/short":
			w.Header().Set("Content-Length", "100")
			io.WriteString(w, "only ten b")
			w.(http.Flusher).Flush()
		case "/chunked":
			io.WriteString(w, "part")
			w.(http.Flusher).Flush()
		}
		panic(http.ErrAbortHandler) // the instance drops the connection
	})
	front, client := handlerPool(t, h, 60*time.Second, false)
	for _, path := range []string{"/short", "/chunked"} {
		// The head of a known length waits for its body, so the client
		// may see the connection cut before any head: an error too.
		resp, err := client.Get(front.URL + path)
		if err != nil {
			continue
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			t.Errorf("%s: a cut answer read as complete: %d %q", path, resp.StatusCode, body)
		}
	}
	for range 2 { // on a new connection, then on a kept one
		resp, err := client.Get(front.URL + "/none")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadGateway {
			t.Fatalf("an instance that dropped the request: %d, want 502", resp.StatusCode)
		}
	}
}

// A client that goes away ends the instance's request: the forwarder
// closes its connection rather than wait for the answer.
func TestForwarderClientGoneEndsTheInstanceRequest(t *testing.T) {
	t.Parallel()
	started, ended := make(chan struct{}), make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		select {
		case <-r.Context().Done():
			close(ended)
		case <-time.After(2 * time.Minute):
		}
	})
	front, client := handlerPool(t, h, 5*time.Minute, false)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, front.URL+"/wait", nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	within(t, 30*time.Second, "the request reaching the instance", func() { <-started })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("client: %v", err)
	}
	within(t, 30*time.Second, "the instance's request ending after the client left", func() { <-ended })
}
