package retry

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// recorder is an httptest handler that answers the first failures requests
// with status (and header) and the rest with 200 "ok", recording the bodies
// it received.
type recorder struct {
	mu       sync.Mutex
	failures int
	status   int
	header   http.Header
	bodies   []string
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	rec.mu.Lock()
	rec.bodies = append(rec.bodies, string(b))
	n := len(rec.bodies)
	rec.mu.Unlock()
	if n <= rec.failures {
		for k, v := range rec.header {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.status)
		io.WriteString(w, "try again")
		return
	}
	io.WriteString(w, "ok")
}

func (rec *recorder) Bodies() []string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]string(nil), rec.bodies...)
}

func testClient(clock Clock, opts ...Option) *http.Client {
	opts = append([]Option{WithClock(clock), WithRand(fixedRand(0.5))}, opts...)
	return &http.Client{Transport: &Transport{Policy: New(opts...)}}
}

// onlyReader hides every method but Read, so http.NewRequest cannot set
// GetBody and Transport must buffer.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

func TestTransportRetriesGET(t *testing.T) {
	rec := &recorder{failures: 3, status: http.StatusServiceUnavailable}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	clock := newFakeClock()
	resp, err := testClient(clock).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(b) != "ok" || len(rec.Bodies()) != 4 {
		t.Fatalf("status %d, body %q, attempts %d", resp.StatusCode, b, len(rec.Bodies()))
	}
	want := []time.Duration{1500 * time.Millisecond, 2500 * time.Millisecond, 4500 * time.Millisecond}
	got := clock.Sleeps()
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("waits = %v, want %v", got, want)
		}
	}
}

func TestTransportBodiesResentByteIdentical(t *testing.T) {
	payload := strings.Repeat("tollgate\x00\xff", 1000)
	for _, c := range []struct {
		name string
		body func() io.Reader
	}{
		{"GetBody", func() io.Reader { return strings.NewReader(payload) }},
		{"buffered", func() io.Reader { return onlyReader{strings.NewReader(payload)} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := &recorder{failures: 2, status: http.StatusBadGateway}
			srv := httptest.NewServer(rec)
			defer srv.Close()
			req, _ := http.NewRequest(http.MethodPut, srv.URL, c.body())
			resp, err := testClient(newFakeClock()).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			bodies := rec.Bodies()
			if resp.StatusCode != 200 || len(bodies) != 3 {
				t.Fatalf("status %d after %d attempts", resp.StatusCode, len(bodies))
			}
			for i, b := range bodies {
				if b != payload {
					t.Fatalf("attempt %d sent %d bytes, not the original %d", i+1, len(b), len(payload))
				}
			}
		})
	}
}

func TestTransportBodyTooLargeSentOnce(t *testing.T) {
	rec := &recorder{failures: 5, status: http.StatusServiceUnavailable}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	payload := strings.Repeat("x", 100)
	req, _ := http.NewRequest(http.MethodPut, srv.URL, onlyReader{strings.NewReader(payload)})
	client := &http.Client{Transport: &Transport{Policy: New(WithClock(newFakeClock())), MaxBufferedBody: 10}}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if bodies := rec.Bodies(); resp.StatusCode != 503 || len(bodies) != 1 || bodies[0] != payload {
		t.Fatalf("status %d, bodies %q", resp.StatusCode, bodies)
	}
}

func TestTransportPOSTOnlyWhenMarked(t *testing.T) {
	for _, c := range []struct {
		name     string
		prepare  func(*http.Request) *http.Request
		attempts int
	}{
		{"POST", func(r *http.Request) *http.Request { return r }, 1},
		{"PATCH", func(r *http.Request) *http.Request { r.Method = http.MethodPatch; return r }, 1},
		{"marked", func(r *http.Request) *http.Request { return r.WithContext(MarkRetryable(r.Context())) }, 3},
		{"Idempotency-Key", func(r *http.Request) *http.Request { r.Header.Set("Idempotency-Key", "k1"); return r }, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := &recorder{failures: 2, status: http.StatusServiceUnavailable}
			srv := httptest.NewServer(rec)
			defer srv.Close()
			req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("order=1"))
			resp, err := testClient(newFakeClock()).Do(c.prepare(req))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if got := len(rec.Bodies()); got != c.attempts {
				t.Fatalf("attempts = %d, want %d", got, c.attempts)
			}
		})
	}
}

func TestSafeToRetry(t *testing.T) {
	for m, want := range map[string]bool{
		"": true, "GET": true, "HEAD": true, "OPTIONS": true, "TRACE": true, "PUT": true, "DELETE": true,
		"POST": false, "PATCH": false, "CONNECT": false,
	} {
		req := httptest.NewRequest(m, "http://x/", nil)
		req.Method = m
		if got := SafeToRetry(req); got != want {
			t.Errorf("SafeToRetry(%q) = %v", m, got)
		}
	}
	req := httptest.NewRequest("POST", "http://x/", nil)
	req.Header.Set("X-Idempotency-Key", "1")
	if !SafeToRetry(req) {
		t.Error("X-Idempotency-Key not honoured")
	}
}

func TestTransportRetryAfterHonouredAndClamped(t *testing.T) {
	for _, c := range []struct {
		header string
		want   time.Duration
	}{
		{"7", 7 * time.Second},
		{"3600", 20 * time.Second},
	} {
		rec := &recorder{failures: 1, status: http.StatusTooManyRequests, header: http.Header{"Retry-After": {c.header}}}
		srv := httptest.NewServer(rec)
		clock := newFakeClock()
		resp, err := testClient(clock, WithMaxHint(20*time.Second)).Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		srv.Close()
		if got := clock.Sleeps(); resp.StatusCode != 200 || len(got) != 1 || got[0] != c.want {
			t.Fatalf("Retry-After %s: status %d, waits %v, want [%v]", c.header, resp.StatusCode, got, c.want)
		}
	}
}

func TestTransportGivesUpWithLastResponse(t *testing.T) {
	rec := &recorder{failures: 100, status: http.StatusInternalServerError}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	resp, err := testClient(newFakeClock(), WithMaxAttempts(3)).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 500 || string(b) != "try again" || len(rec.Bodies()) != 3 {
		t.Fatalf("status %d, body %q, attempts %d", resp.StatusCode, b, len(rec.Bodies()))
	}
}

// trackedBody records whether it was read to the end and closed.
type trackedBody struct {
	r      io.Reader
	mu     *sync.Mutex
	closed bool
	eof    bool
}

func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF {
		b.mu.Lock()
		b.eof = true
		b.mu.Unlock()
	}
	return n, err
}

func (b *trackedBody) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	return nil
}

// scripted is a RoundTripper that plays back statuses and errors.
type scripted struct {
	mu     sync.Mutex
	script []any // int status or error
	bodies []*trackedBody
	calls  int
}

func (s *scripted) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		r.Body.Close()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	step := s.script[min(s.calls, len(s.script)-1)]
	s.calls++
	if err, ok := step.(error); ok {
		return nil, err
	}
	b := &trackedBody{r: strings.NewReader("body"), mu: &s.mu}
	s.bodies = append(s.bodies, b)
	return &http.Response{StatusCode: step.(int), Header: http.Header{}, Body: b, Request: r}, nil
}

func TestTransportDrainsAndClosesDiscardedResponses(t *testing.T) {
	base := &scripted{script: []any{503, 500, 200}}
	tr := &Transport{Base: base, Policy: New(WithClock(newFakeClock()))}
	req := httptest.NewRequest(http.MethodGet, "http://x/", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("resp %v, err %v", resp, err)
	}
	base.mu.Lock()
	for i, b := range base.bodies[:2] {
		if !b.closed || !b.eof {
			t.Errorf("discarded response %d: closed %v, drained %v", i, b.closed, b.eof)
		}
	}
	if last := base.bodies[2]; last.closed {
		t.Error("returned response body was closed")
	}
	base.mu.Unlock()
	resp.Body.Close()
}

func TestTransportErrorAfterConnectionFailures(t *testing.T) {
	base := &scripted{script: []any{syscall.ECONNREFUSED}}
	tr := &Transport{Base: base, Policy: New(WithClock(newFakeClock()), WithMaxAttempts(3))}
	_, err := tr.RoundTrip(httptest.NewRequest(http.MethodGet, "http://x/", nil))
	var re *Error
	if !errors.As(err, &re) || re.Attempts != 3 || !errors.Is(err, syscall.ECONNREFUSED) || base.calls != 3 {
		t.Fatalf("err = %v, calls = %d", err, base.calls)
	}
}

// TLS and certificate errors, wrapped as net/http wraps them, are not
// retried, even when the connection was reset as well.
func TestTransportTLSErrorsNotRetried(t *testing.T) {
	cert := &x509.Certificate{}
	for _, tlsErr := range []error{
		x509.UnknownAuthorityError{Cert: cert},
		&tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{Cert: cert}},
		x509.HostnameError{Certificate: cert, Host: "x"},
	} {
		wrapped := &net.OpError{Op: "remote error", Net: "tcp", Err: errors.Join(tlsErr, syscall.ECONNRESET)}
		base := &scripted{script: []any{wrapped, 200}}
		tr := &Transport{Base: base, Policy: New(WithClock(newFakeClock()))}
		_, err := tr.RoundTrip(httptest.NewRequest(http.MethodGet, "https://x/", nil))
		if err == nil || base.calls != 1 || !errors.As(err, new(*net.OpError)) {
			t.Fatalf("%T retried: err = %v, calls = %d", tlsErr, err, base.calls)
		}
	}
}

func TestTransportPerAttemptTimeout(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n == 1 {
			<-r.Context().Done() // hang until the client gives up on the attempt
			return
		}
		w.Write(bytes.Repeat([]byte("z"), 1<<16))
	}))
	defer srv.Close()
	// The timeout must also cover the whole second attempt, body included,
	// on a loaded machine under -race: 5 s is a wide margin for 64 KiB over
	// loopback (and what the first attempt costs the test).
	client := testClient(newFakeClock(), WithAttemptTimeout(5*time.Second))
	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// The returned body stays readable after RoundTrip returned.
	b, err := io.ReadAll(resp.Body)
	if err != nil || len(b) != 1<<16 {
		t.Fatalf("read %d bytes, err %v", len(b), err)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != 2 {
		t.Fatalf("calls = %d, want 2", calls)
	}
}

func TestTransportCancelledContextStopsAtOnce(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	clock := blockingClock{started: make(chan time.Duration)}
	base := &scripted{script: []any{503}}
	tr := &Transport{Base: base, Policy: New(WithClock(clock))}
	req := httptest.NewRequest(http.MethodGet, "http://x/", nil).WithContext(ctx)
	done := make(chan error)
	go func() {
		_, err := tr.RoundTrip(req)
		done <- err
	}()
	<-clock.started
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if base.calls != 1 {
		t.Fatalf("calls = %d", base.calls)
	}
}

func TestTransportConcurrentUse(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen[string(b)]++
		n := seen[string(b)]
		mu.Unlock()
		if n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Write(b)
	}))
	defer srv.Close()
	client := testClient(newFakeClock(), WithBudget(DefaultTokenBudget()), WithRand(seeded()))
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			payload := strings.Repeat(string(rune('a'+i)), 100+i)
			req, _ := http.NewRequest(http.MethodPut, srv.URL, onlyReader{strings.NewReader(payload)})
			resp, err := client.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 || string(b) != payload {
				t.Errorf("status %d, echoed %q", resp.StatusCode, b)
			}
		}()
	}
	wg.Wait()
}

func TestTransportClosesBodyWhenCancelledBeforeSending(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var mu sync.Mutex
	body := &trackedBody{r: strings.NewReader("payload"), mu: &mu}
	req := httptest.NewRequest(http.MethodPut, "http://x/", nil).WithContext(ctx)
	req.Body = body
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("payload")), nil }
	base := &scripted{script: []any{200}}
	_, err := (&Transport{Base: base, Policy: New(WithClock(newFakeClock()))}).RoundTrip(req)
	mu.Lock()
	defer mu.Unlock()
	if !errors.Is(err, context.Canceled) || base.calls != 0 || !body.closed {
		t.Fatalf("err = %v, calls = %d, body closed = %v", err, base.calls, body.closed)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func statusResponse(code int, h http.Header) *http.Response {
	if h == nil {
		h = http.Header{}
	}
	return &http.Response{StatusCode: code, Header: h, Body: io.NopCloser(strings.NewReader(""))}
}

// A body that GetBody cannot produce again ends the call: the error is
// permanent and wraps GetBody's.
func TestTransportGetBodyFailureIsPermanent(t *testing.T) {
	errGetBody := fmt.Errorf("reopening body: %w", syscall.ECONNRESET) // retryable on its own
	calls := 0
	tr := &Transport{Base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		calls++
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
		return statusResponse(503, nil), nil
	}), Policy: New(WithClock(newFakeClock()))}
	req := httptest.NewRequest(http.MethodPut, "http://x/", strings.NewReader("payload"))
	req.GetBody = func() (io.ReadCloser, error) { return nil, errGetBody }
	_, err := tr.RoundTrip(req)
	var re *Error
	if calls != 1 || !errors.Is(err, errGetBody) || !errors.As(err, &re) || re.Attempts != 2 {
		t.Fatalf("calls = %d, err = %v", calls, err)
	}
}

// MaxBufferedBody < 0 turns buffering off: a body without GetBody is sent
// once, whole, and not retried.
func TestTransportNoBufferingNotRetried(t *testing.T) {
	var got []string
	tr := &Transport{Base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		got = append(got, string(b))
		return statusResponse(503, nil), nil
	}), Policy: New(WithClock(newFakeClock())), MaxBufferedBody: -1}
	req := httptest.NewRequest(http.MethodPut, "http://x/", strings.NewReader("payload"))
	req.GetBody = nil
	resp, err := tr.RoundTrip(req)
	if err != nil || resp.StatusCode != 503 || len(got) != 1 || got[0] != "payload" {
		t.Fatalf("resp = %v, err = %v, bodies = %q", resp, err, got)
	}
	resp.Body.Close()
}

// X-Amz-Retry-After (milliseconds) lengthens the wait through Transport.
func TestTransportAmzRetryAfter(t *testing.T) {
	calls := 0
	clock := newFakeClock()
	tr := &Transport{Base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		calls++
		if calls == 1 {
			return statusResponse(503, http.Header{"X-Amz-Retry-After": {"7500"}}), nil
		}
		return statusResponse(200, nil), nil
	}), Policy: New(WithClock(clock), WithRand(fixedRand(0.5)))}
	resp, err := tr.RoundTrip(httptest.NewRequest(http.MethodGet, "http://x/", nil))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("resp = %v, err = %v", resp, err)
	}
	resp.Body.Close()
	if s := clock.Sleeps(); len(s) != 1 || s[0] != 7500*time.Millisecond {
		t.Fatalf("waits = %v, want [7.5s]", s)
	}
}

// held is a handler that answers with 200 and a first chunk of body, then
// holds the rest back until release is closed. It counts its requests.
type held struct {
	release chan struct{}
	mu      sync.Mutex
	calls   int
}

func (h *held) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	h.mu.Lock()
	h.calls++
	h.mu.Unlock()
	io.WriteString(w, "first,")
	w.(http.Flusher).Flush()
	select {
	case <-h.release:
		io.WriteString(w, "rest")
	case <-r.Context().Done():
	}
}

func (h *held) Calls() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls
}

// pastDeadline waits, on the system clock, until a deadline of d counted
// from any moment before from has certainly passed.
func pastDeadline(from time.Time, d time.Duration) {
	for time.Since(from) <= 2*d {
		time.Sleep(d)
	}
}

// A 200 whose body is still streaming when the policy's deadline passes is
// read to the end: the deadline bounds when a retry may start, not the
// attempt in flight.
func TestTransportBodyStreamsPastDeadline(t *testing.T) {
	h := &held{release: make(chan struct{})}
	srv := httptest.NewServer(h)
	defer srv.Close()
	const deadline = time.Millisecond
	client := &http.Client{Transport: &Transport{Policy: New(WithDeadline(deadline))}}
	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	pastDeadline(time.Now(), deadline) // the call started before Get returned
	close(h.release)
	b, err := io.ReadAll(resp.Body)
	if err != nil || string(b) != "first,rest" {
		t.Fatalf("body %q, err %v", b, err)
	}
}

// A POST, sent once, whose answer comes after the policy's deadline gets
// that answer instead of context.DeadlineExceeded.
func TestTransportPOSTAnsweredPastDeadline(t *testing.T) {
	release := make(chan struct{})
	var calls sync.WaitGroup
	calls.Add(1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		calls.Done()
		select {
		case <-release:
			io.WriteString(w, "created")
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	const deadline = time.Millisecond
	client := &http.Client{Transport: &Transport{Policy: New(WithDeadline(deadline))}}
	go func() {
		calls.Wait() // the request is at the server, so the call has started
		pastDeadline(time.Now(), deadline)
		close(release)
	}()
	resp, err := client.Post(srv.URL, "text/plain", strings.NewReader("order=1"))
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 || string(b) != "created" {
		t.Fatalf("status %d, body %q, err %v", resp.StatusCode, b, err)
	}
}

// The per-attempt timeout still bounds a request sent once.
func TestTransportAttemptTimeoutBoundsRequestSentOnce(t *testing.T) {
	h := &held{release: make(chan struct{})} // never released
	srv := httptest.NewServer(h)
	defer srv.Close()
	defer close(h.release)
	client := &http.Client{Transport: &Transport{Policy: New(WithAttemptTimeout(50 * time.Millisecond))}}
	resp, err := client.Post(srv.URL, "text/plain", strings.NewReader("order=1"))
	if err == nil {
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if !errors.Is(err, context.DeadlineExceeded) || h.Calls() != 1 {
		t.Fatalf("err = %v, calls = %d; want context.DeadlineExceeded after 1 call", err, h.Calls())
	}
}
