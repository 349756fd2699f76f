package forward

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"net/url"
	"strings"
	"testing"
	"time"
)

// Whatever an instance answers, the forwarder relays a response it could
// parse or returns an error (a 502 for the client), and never panics;
// a relayed answer of known length is relayed whole.
func FuzzForwarderResponse(f *testing.F) {
	for _, seed := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-T\r\n\r\n2\r\nok\r\n0\r\nX-T: 1\r\n\r\n",
		"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n",
		"HTTP/1.1 200 OK\r\nConnection: X-A, close\r\nX-A: 1\r\n\r\nuntil the end",
		"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
		"HTTP/1.0 200 OK\r\n\r\nold",
		"HTTP/1.1 999 Odd\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
		"garbage",
		"",
	} {
		f.Add(seed, "GET")
		f.Add(seed, "HEAD")
	}
	f.Fuzz(func(t *testing.T, answer, method string) {
		if method != "GET" && method != "HEAD" {
			return
		}
		client, server := net.Pipe()
		defer client.Close()
		go func() {
			defer server.Close()
			server.SetDeadline(time.Now().Add(10 * time.Second))
			br := bufio.NewReader(server)
			if _, err := http.ReadRequest(br); err != nil {
				return
			}
			io.WriteString(server, answer)
		}()
		c := newUpConn(client)
		client.SetDeadline(time.Now().Add(10 * time.Second))
		p := New(Options{Service: "s", Logger: testLogger(t), MaxConcurrency: 1})
		r := httptest.NewRequestWithContext(context.Background(), method, "/", nil)
		rec := finalRecorder{httptest.NewRecorder()}
		resp, err := roundTrip(c, rec, r, "instance:80")
		if err != nil {
			return // the proxy answers 502
		}
		p.relay(rec, r, resp, c)
		if rec.Code != resp.StatusCode {
			t.Fatalf("relayed status %d, the instance's %d", rec.Code, resp.StatusCode)
		}
		if cl := resp.ContentLength; cl >= 0 && method == "GET" && rec.Body.Len() > int(cl) {
			t.Fatalf("relayed %d bytes of a %d-byte answer", rec.Body.Len(), cl)
		}
		for _, k := range []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"} {
			if _, ok := rec.Header()[k]; ok && k != "Trailer" {
				t.Fatalf("hop-by-hop header %s relayed", k)
			}
		}
	})
}

// finalRecorder records the final answer: informational ones (1xx) are
// dropped, as a client reading the final one sees them.
type finalRecorder struct{ *httptest.ResponseRecorder }

func (r finalRecorder) WriteHeader(code int) {
	if code >= 100 && code < 200 {
		clear(r.Header())
		return
	}
	r.ResponseRecorder.WriteHeader(code)
}

// Whatever the request, the head the forwarder writes is refused or
// parses back, by net/http's own server parser, as one request with the
// same method, path, query and header: nothing can be smuggled in.
func FuzzWriteHead(f *testing.F) {
	f.Add("GET", "/a/b", "x=1", "h.example", "X-Custom", "value")
	f.Add("GET", "/a%2Fb", "q=%zz;a=1", "h:8080", "Accept", "*/*")
	f.Add("HEAD", "/", "", "", "User-Agent", "")
	f.Add("GET", "/", "", "h", "X-Bad", "a\r\nX-Injected: 1")
	f.Add("GET", "/ HTTP/1.1\r\nX: y", "", "h", "X", "y")
	f.Add("OPTIONS", "/", "", "h", "Connection", "X-Custom")
	f.Add("G\x00T", "/", "", "h", "X", "y")
	f.Fuzz(func(t *testing.T, method, path, query, host, key, value string) {
		if len(method)+len(path)+len(query)+len(host)+len(key)+len(value) > 4096 {
			return
		}
		r := &http.Request{
			Method:     method,
			URL:        &url.URL{Path: path, RawQuery: query},
			Host:       host,
			Header:     http.Header{key: {value}},
			RemoteAddr: "192.0.2.1:1234",
		}
		if !FastPath(r) {
			return
		}
		var buf bytes.Buffer
		bw := bufio.NewWriter(&buf)
		if err := writeHead(bw, r, "instance:80"); err != nil {
			return
		}
		bw.Flush()
		head := buf.String()
		got, err := http.ReadRequest(bufio.NewReader(strings.NewReader(head)))
		if err != nil {
			t.Fatalf("wrote a head net/http cannot parse (%v): %q", err, head)
		}
		if got.Method != method {
			t.Fatalf("method %q, wrote %q", got.Method, method)
		}
		if got.URL.Path != path && got.URL.EscapedPath() != r.URL.EscapedPath() {
			t.Fatalf("path %q, wrote %q from %q", got.URL.Path, head, path)
		}
		if rest, _ := io.ReadAll(got.Body); len(rest) != 0 {
			t.Fatalf("a body after the head: %q", rest)
		}
		want := map[string]bool{"X-Forwarded-For": true, "X-Forwarded-Host": true, "X-Forwarded-Proto": true}
		ck := textproto.CanonicalMIMEHeaderKey(key)
		if !skipRequestHeader(key, r.Header["Connection"]) || (ck == "User-Agent" && value != "") || (ck == "Te" && strings.Contains(strings.ToLower(value), "trailers")) {
			want[ck] = true
		}
		for k := range got.Header {
			if !want[k] {
				t.Fatalf("header %q in %q, not sent by the client", k, head)
			}
		}
		if v := got.Header.Get(ck); want[ck] && !skipRequestHeader(key, r.Header["Connection"]) && v != textproto.TrimString(value) {
			t.Fatalf("header %s = %q, sent %q", ck, v, value)
		}
	})
}
