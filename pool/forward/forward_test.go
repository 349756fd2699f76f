package forward

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// proxyHarness is a revision's proxy in front of one instance (a real
// HTTP server), reached through two real HTTP servers: fast serves as the
// pool does (the forwarder takes what it may), std through
// httputil.ReverseProxy alone, so a test can check that both give the
// client the same answer.
type proxyHarness struct {
	p         *Proxy
	in        *testTarget
	instance  *httptest.Server
	fast, std *httptest.Server
}

func newProxyHarness(t *testing.T, h http.Handler, timeout time.Duration) *proxyHarness {
	t.Helper()
	ph := &proxyHarness{instance: httptest.NewServer(h)}
	t.Cleanup(ph.instance.Close)
	ph.p = New(Options{Service: "s", Logger: testLogger(t), MaxConcurrency: 8})
	t.Cleanup(ph.p.CloseIdleConnections)
	ph.in = &testTarget{name: "s-1", url: &url.URL{Scheme: "http", Host: ph.instance.Listener.Addr().String()}}
	front := func(serve http.HandlerFunc) *httptest.Server {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// As revision.ServeHTTP hands it to the proxy.
			ctx, cancel := context.WithTimeout(r.Context(), timeout)
			defer cancel()
			ctx = context.WithValue(ctx, targetKey{}, ph.in)
			ctx = context.WithValue(ctx, clientCtxKey{}, r.Context())
			serve(w, r.WithContext(ctx))
		}))
		t.Cleanup(s.Close)
		return s
	}
	ph.fast = front(ph.p.serveHTTP)
	ph.std = front(ph.p.rp.ServeHTTP)
	return ph
}

// idle is how many idle connections the forwarder keeps to the instance:
// only the forwarder puts them there.
func (ph *proxyHarness) idle() int { return ph.p.conns.idleCount(ph.in.url.Host) }

// rawAnswer is what a client read for one raw request: the informational
// statuses, then the final response and its body.
type rawAnswer struct {
	informational []int
	resp          *http.Response
	body          string
	err           error // reading the body
}

// rawDo sends raw (a whole request) on a new connection to addr and reads
// the answer.
func rawDo(t *testing.T, addr, raw string) rawAnswer {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	method, _, _ := strings.Cut(raw, " ")
	var a rawAnswer
	for {
		resp, err := http.ReadResponse(br, &http.Request{Method: method})
		if err != nil {
			t.Fatalf("reading the answer to %q: %v", raw, err)
		}
		if resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != 101 {
			a.informational = append(a.informational, resp.StatusCode)
			continue
		}
		a.resp = resp
		b, err := io.ReadAll(resp.Body)
		a.body, a.err = string(b), err
		return a
	}
}

// same reports how two answers differ, "" when they do not: status,
// informational statuses, headers (but Date), body and trailers.
func same(a, b rawAnswer) string {
	if a.resp.StatusCode != b.resp.StatusCode {
		return fmt.Sprintf("status %d vs %d", a.resp.StatusCode, b.resp.StatusCode)
	}
	if !slices.Equal(a.informational, b.informational) {
		return fmt.Sprintf("informational %v vs %v", a.informational, b.informational)
	}
	if ha, hb := headerLines(a.resp.Header), headerLines(b.resp.Header); ha != hb {
		return fmt.Sprintf("headers\n%s\nvs\n%s", ha, hb)
	}
	if a.body != b.body || (a.err == nil) != (b.err == nil) {
		return fmt.Sprintf("body %q (%v) vs %q (%v)", a.body, a.err, b.body, b.err)
	}
	if ta, tb := headerLines(a.resp.Trailer), headerLines(b.resp.Trailer); ta != tb {
		return fmt.Sprintf("trailers\n%s\nvs\n%s", ta, tb)
	}
	if a.resp.ContentLength != b.resp.ContentLength || !slices.Equal(a.resp.TransferEncoding, b.resp.TransferEncoding) {
		return fmt.Sprintf("framing %d %v vs %d %v", a.resp.ContentLength, a.resp.TransferEncoding, b.resp.ContentLength, b.resp.TransferEncoding)
	}
	return ""
}

// headerLines is h sorted, one "Key: values" a line, without Date.
func headerLines(h http.Header) string {
	var lines []string
	for k, vv := range h {
		if k != "Date" {
			lines = append(lines, k+": "+strings.Join(vv, " | "))
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// echoRequest answers with the request as the instance received it.
var echoRequest = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	fmt.Fprintf(w, "%s %s %s host=%s length=%d te=%v\n", r.Method, r.RequestURI, r.Proto, r.Host, r.ContentLength, r.TransferEncoding)
	io.WriteString(w, headerLines(r.Header)+"\n")
})

// The instance gets the same request from the forwarder as from
// httputil.ReverseProxy: the client's Host, X-Forwarded-* set anew,
// hop-by-hop headers (and those Connection names) dropped, Te: trailers
// kept, no User-Agent added, unparsable query parameters dropped, the
// escaped path kept.
func TestForwarderSendsWhatReverseProxySends(t *testing.T) {
	t.Parallel()
	ph := newProxyHarness(t, echoRequest, 30*time.Second)
	for _, req := range []string{
		"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n",
		"GET /a/b?x=1&y=2 HTTP/1.1\r\nHost: example.com:8080\r\nUser-Agent: curl/8\r\nAccept: */*\r\n\r\n",
		"GET /a%2Fb/%7Ec?q=%zz&r=1 HTTP/1.1\r\nHost: h\r\n\r\n",
		"GET /semi?a=1;b=2&c=3 HTTP/1.1\r\nHost: h\r\n\r\n",
		"GET /force? HTTP/1.1\r\nHost: h\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, X-Private\r\nX-Private: secret\r\nKeep-Alive: 5\r\nProxy-Authorization: Basic x\r\nTe: trailers, deflate\r\nX-Kept: 1\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: h\r\nX-Forwarded-For: 6.6.6.6\r\nX-Forwarded-Host: evil\r\nX-Forwarded-Proto: https\r\nForwarded: for=1.2.3.4\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: h\r\nUser-Agent:\r\nX-Empty:\r\nX-Multi: a\r\nX-Multi: b\r\nCookie: a=1\r\nCookie: b=2\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: h\r\nX-Spaces:   padded   \r\n\r\n",
		"HEAD /head HTTP/1.1\r\nHost: h\r\n\r\n",
		"OPTIONS /opt HTTP/1.1\r\nHost: h\r\n\r\n",
		"TRACE /t HTTP/1.1\r\nHost: h\r\n\r\n",
		"POST /idem HTTP/1.1\r\nHost: h\r\nIdempotency-Key: k1\r\n\r\n",
		"PUT /idem HTTP/1.1\r\nHost: h\r\nX-Idempotency-Key: k2\r\nContent-Length: 0\r\n\r\n",
		"GET http://other.example/abs?z=1 HTTP/1.1\r\nHost: other.example\r\n\r\n",
		"GET / HTTP/1.0\r\nHost: h\r\n\r\n",
		"GET / HTTP/1.0\r\n\r\n",
	} {
		fast := rawDo(t, ph.fast.Listener.Addr().String(), req)
		std := rawDo(t, ph.std.Listener.Addr().String(), req)
		if diff := same(fast, std); diff != "" {
			t.Errorf("%q: forwarder and ReverseProxy differ: %s", req, diff)
		}
		if fast.resp.StatusCode != 200 {
			t.Errorf("%q: %d %s", req, fast.resp.StatusCode, fast.body)
		}
	}
	if ph.idle() == 0 {
		t.Fatal("the forwarder kept no connection: it took none of the requests")
	}
}

// answers is an instance with one answer of every shape a client must get
// unchanged through the proxy, by path.
var answers = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	switch r.URL.Path {
	case "/trailers":
		h.Set("Trailer", "X-Sum, X-Count")
		io.WriteString(w, "body")
		h.Set("X-Sum", "42")
		h.Set("X-Count", "1")
	case "/unannounced":
		io.WriteString(w, "body")
		w.(http.Flusher).Flush() // chunked: the only way to send trailers
		h.Set(http.TrailerPrefix+"X-Late", "yes")
	case "/chunked":
		for i := range 3 {
			fmt.Fprintf(w, "part %d\n", i)
			w.(http.Flusher).Flush()
		}
	case "/sse":
		h.Set("Content-Type", "text/event-stream; charset=utf-8")
		io.WriteString(w, "data: one\n\n")
		w.(http.Flusher).Flush()
		io.WriteString(w, "data: two\n\n")
	case "/head":
		h.Set("Content-Length", "11")
		if r.Method != http.MethodHead {
			io.WriteString(w, "hello world")
		}
	case "/204":
		w.WriteHeader(http.StatusNoContent)
	case "/304":
		h.Set("Etag", `"x"`)
		w.WriteHeader(http.StatusNotModified)
	case "/early":
		h.Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		h.Del("Link")
		io.WriteString(w, "after hints")
	case "/close":
		h.Set("Connection", "close")
		io.WriteString(w, "bye")
	case "/hop":
		h.Set("Connection", "X-Hop")
		h.Set("X-Hop", "1")
		h.Set("Keep-Alive", "timeout=5")
		h.Set("X-Kept", "2")
		io.WriteString(w, "hop")
	case "/cookies":
		h.Add("Set-Cookie", "a=1")
		h.Add("Set-Cookie", "b=2")
		h.Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	case "/big":
		h.Set("Content-Type", "application/octet-stream")
		b := []byte(strings.Repeat("0123456789abcdef", 1<<16)) // 1 MiB
		h.Set("Content-Length", fmt.Sprint(len(b)))
		w.Write(b)
	case "/status":
		http.Error(w, "teapot", http.StatusTeapot)
	case "/sniff":
		io.WriteString(w, "<html><body>no type set</body></html>")
	case "/eof":
		// No length and no chunking: the body ends when the connection
		// does (an HTTP/1.0-style answer).
		c, bw, _ := w.(http.Hijacker).Hijack()
		bw.WriteString("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end")
		bw.Flush()
		c.Close()
	}
})

// The client gets the same answer through the forwarder as through
// httputil.ReverseProxy, for every shape of answer: trailers (announced or
// not), chunked streams, SSE, HEAD, 204 and 304, 1xx early hints,
// Connection: close, hop-by-hop headers, repeated headers, a large body,
// an error status, a sniffed type, a body that ends with the connection.
func TestForwarderAnswersAsReverseProxy(t *testing.T) {
	t.Parallel()
	ph := newProxyHarness(t, answers, 30*time.Second)
	for _, path := range []string{"/trailers", "/unannounced", "/chunked", "/sse", "/head", "/204", "/304", "/early", "/close", "/hop", "/cookies", "/big", "/status", "/sniff", "/eof"} {
		for _, method := range []string{"GET", "HEAD"} {
			req := method + " " + path + " HTTP/1.1\r\nHost: h\r\nTe: trailers\r\n\r\n"
			fast := rawDo(t, ph.fast.Listener.Addr().String(), req)
			std := rawDo(t, ph.std.Listener.Addr().String(), req)
			if diff := same(fast, std); diff != "" {
				t.Errorf("%s %s: forwarder and ReverseProxy differ: %s", method, path, diff)
			}
			if fast.err != nil {
				t.Errorf("%s %s: body: %v", method, path, fast.err)
			}
		}
	}
	// What the comparison stands on.
	a := rawDo(t, ph.fast.Listener.Addr().String(), "GET /trailers HTTP/1.1\r\nHost: h\r\n\r\n")
	if a.body != "body" || a.resp.Trailer.Get("X-Sum") != "42" || a.resp.Trailer.Get("X-Count") != "1" {
		t.Errorf("trailers: body %q, trailer %v", a.body, a.resp.Trailer)
	}
	a = rawDo(t, ph.fast.Listener.Addr().String(), "GET /unannounced HTTP/1.1\r\nHost: h\r\n\r\n")
	if a.resp.Trailer.Get("X-Late") != "yes" {
		t.Errorf("unannounced trailer: %v", a.resp.Trailer)
	}
	a = rawDo(t, ph.fast.Listener.Addr().String(), "GET /early HTTP/1.1\r\nHost: h\r\n\r\n")
	if !slices.Equal(a.informational, []int{103}) || a.body != "after hints" {
		t.Errorf("early hints: %v %q", a.informational, a.body)
	}
	a = rawDo(t, ph.fast.Listener.Addr().String(), "GET /hop HTTP/1.1\r\nHost: h\r\n\r\n")
	if a.resp.Header.Get("X-Hop") != "" || a.resp.Header.Get("Keep-Alive") != "" || a.resp.Header.Get("X-Kept") != "2" {
		t.Errorf("hop-by-hop headers: %v", a.resp.Header)
	}
	a = rawDo(t, ph.fast.Listener.Addr().String(), "GET /big HTTP/1.1\r\nHost: h\r\n\r\n")
	if len(a.body) != 1<<20 || a.resp.ContentLength != 1<<20 {
		t.Errorf("big body: %d bytes, Content-Length %d", len(a.body), a.resp.ContentLength)
	}
}

// testTarget is an instance for the proxy alone: a name and an address,
// and no process whose exit it could wait for.
type testTarget struct {
	name string
	url  *url.URL
}

func (t *testTarget) Name() string             { return t.name }
func (t *testTarget) URL() *url.URL            { return t.url }
func (t *testTarget) AwaitExit() (bool, error) { return false, nil }

// testLogger is the proxy's log in a test: on stderr with -v, else
// discarded.
func testLogger(_ testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}
