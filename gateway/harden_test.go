package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/awsjson"
	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/internal/logtest"
	"github.com/tollgate/tollgate/internal/redistest"
	"github.com/tollgate/tollgate/limiter"
	"github.com/tollgate/tollgate/limiter/limitertest"
	"github.com/tollgate/tollgate/limiter/memory"
)

// batchBody is a batch of n ListClusters takes of account acct.
func batchBody(n int, acct string) string {
	var sb strings.Builder
	sb.WriteString(`{"service":"ecs","region":"us-east-1","account":"` + acct + `","requests":[`)
	for i := range n {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(`{"action":"ListClusters","tokens":0}`)
	}
	sb.WriteString("]}")
	return sb.String()
}

func TestBatchOverMaxBatchIs400NamingTheLimit(t *testing.T) {
	for _, tc := range []struct {
		opt, limit int
	}{{0, DefaultMaxBatch}, {3, 3}} {
		_, srv := newTestServer(t, limitertest.NewClock(), Options{MaxBatch: tc.opt})
		if status, body := postJSON(t, srv.URL+"/v1/take/batch", batchBody(tc.limit, "1")); status != 200 {
			t.Fatalf("MaxBatch %d: a batch of %d: %d %s", tc.opt, tc.limit, status, body)
		}
		status, body := postJSON(t, srv.URL+"/v1/take/batch", batchBody(tc.limit+1, "1"))
		want := fmt.Sprintf("at most %d", tc.limit)
		if status != 400 || !strings.Contains(body, want) || !strings.Contains(body, `"field":"requests"`) {
			t.Fatalf("MaxBatch %d: a batch of %d: %d %s; want 400 naming %q", tc.opt, tc.limit+1, status, body, want)
		}
	}
}

// gatedLimiter is a real memory store whose TakeBatch waits at a gate, so
// a test can hold batches in flight for as long as it needs.
type gatedLimiter struct {
	limiter.Limiter
	entered chan struct{}
	open    chan struct{}
}

func (l *gatedLimiter) TakeBatch(ctx context.Context, reqs []limiter.Request, out []bucket.Decision) error {
	l.entered <- struct{}{}
	<-l.open
	return l.Limiter.TakeBatch(ctx, reqs, out)
}

func TestInFlightBoundAnswers503WithRetryAfter(t *testing.T) {
	clock := limitertest.NewClock()
	gate := &gatedLimiter{memory.New(memory.Options{Now: clock.Now}), make(chan struct{}, 16), make(chan struct{})}
	held := batchBody(2, "1") // counts len + 2×640 bytes
	bound := int64(len(held) + 2*batchItemCost + 100)
	_, srv := newTestServer(t, clock, Options{Limiter: gate, MaxInFlightBytes: bound})

	first := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest("POST", srv.URL+"/v1/take/batch", strings.NewReader(held))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			first <- 0
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	<-gate.entered // the first batch holds its bytes until the gate opens

	// A second batch, a padded single take and a padded AWS request do
	// not fit: each is refused at once, not queued.
	pad := strings.Repeat(" ", 200)
	status, body := postJSON(t, srv.URL+"/v1/take/batch", held)
	if status != 503 || !strings.Contains(body, fmt.Sprint(bound)) {
		t.Errorf("second batch: %d %s; want 503 naming the bound %d", status, body, bound)
	}
	resp := postResp(t, srv.URL+"/v1/take/batch", held)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "1" {
		t.Errorf("second batch: %d Retry-After %q; want 503 and 1", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	resp = postResp(t, srv.URL+"/v1/take", `{"service":"ecs","account":"1","region":"us-east-1","action":"ListClusters"}`+pad)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "1" {
		t.Errorf("padded take: %d Retry-After %q; want 503 and 1", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	aws := awsRequest(t, srv.URL, ecsTarget+"ListClusters", sigv4("AKIDFULL", "us-east-1", "ecs"), "{}"+pad)
	if aws.StatusCode != 503 || aws.Header.Get("X-Amzn-ErrorType") != "ServiceUnavailableException" || aws.Header.Get("Retry-After") != "1" {
		t.Errorf("padded AWS request: %d %q Retry-After %q", aws.StatusCode, aws.Header.Get("X-Amzn-ErrorType"), aws.Header.Get("Retry-After"))
	}
	_, metrics := adminRequest(t, "GET", srv.URL+"/metrics", "")
	if want := fmt.Sprintf("tollgate_in_flight_bytes %d\n", len(held)+2*batchItemCost); !strings.Contains(metrics, want) {
		t.Errorf("/metrics lacks %q while one batch is held", want)
	}
	// A small take still fits beside the batch.
	if status, body := postJSON(t, srv.URL+"/v1/take", `{"service":"ecs","account":"1","region":"us-east-1","action":"ListClusters"}`); status != 200 {
		t.Errorf("small take beside the batch: %d %s", status, body)
	}

	close(gate.open)
	if s := <-first; s != 200 {
		t.Fatalf("held batch: %d", s)
	}
	// The handler released its bytes before its answer was flushed.
	if status, body := postJSON(t, srv.URL+"/v1/take/batch", held); status != 200 {
		t.Fatalf("batch after the first finished: %d %s", status, body)
	}
	if status, _ := postJSON(t, srv.URL+"/v1/take", `{"service":"ecs","account":"1","region":"us-east-1","action":"ListClusters"}`+pad); status != 200 {
		t.Fatalf("padded take after the batch finished: %d", status)
	}
}

func postResp(t *testing.T, url, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp.Body)
	resp.Body.Close()
	return resp
}

// refusedURL is the URL of a loopback port nothing listens on, held so
// that no other test's server can take it while t runs.
func refusedURL(t *testing.T) string {
	t.Helper()
	return "http://" + redistest.ClosedAddr(t)
}

func TestUnreachableUpstreamKeepsTheRequestID(t *testing.T) {
	cfg, err := parseConfig("test.yaml", []byte("services:\n  - preset: ecs\n    upstream: "+refusedURL(t)+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	var logs logtest.Buffer
	_, srv := newTestServer(t, limitertest.NewClock(), Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	resp := awsRequest(t, srv.URL, ecsTarget+"ListClusters", sigv4("AKIDDOWN", "us-east-1", "ecs"), "{}")
	body := readAll(t, resp.Body)
	if resp.StatusCode != 503 || resp.Header.Get("X-Amzn-ErrorType") != "ServiceUnavailableException" {
		t.Fatalf("unreachable upstream: %d %q %s", resp.StatusCode, resp.Header.Get("X-Amzn-ErrorType"), body)
	}
	ids := resp.Header.Values("X-Amzn-Requestid")
	if len(ids) != 1 || len(ids[0]) != 36 {
		t.Fatalf("request ids %q, want one UUID", ids)
	}
	log := logs.String()
	if !strings.Contains(log, "request_id="+ids[0]) || !strings.Contains(log, "reason=refused") || !strings.Contains(log, "level=WARN") {
		t.Fatalf("log lacks the request id %s, reason=refused or WARN:\n%s", ids[0], log)
	}
}

func TestClassifyUpstreamError(t *testing.T) {
	r := httptest.NewRequest("POST", "/", nil)
	// A real refused dial.
	_, dialErr := net.Dial("tcp", strings.TrimPrefix(refusedURL(t), "http://"))
	if dialErr == nil {
		t.Skip("something listens on a just-closed port")
	}
	if f := ClassifyUpstreamError(r, dialErr); f.Status != 503 || f.Code != "ServiceUnavailableException" || f.Reason != "refused" || f.Level != slog.LevelWarn {
		t.Errorf("refused: %+v", f)
	}
	// A real dial timeout (a deadline already past).
	d := net.Dialer{Deadline: time.Unix(1, 0)}
	_, toErr := d.Dial("tcp", "127.0.0.1:9")
	if f := ClassifyUpstreamError(r, toErr); f.Status != 504 || f.Code != "RequestTimeoutException" || f.Reason != "timeout" {
		t.Errorf("timeout %v: %+v", toErr, f)
	}
	if f := ClassifyUpstreamError(r, fmt.Errorf("roundtrip: %w", context.DeadlineExceeded)); f.Status != 504 {
		t.Errorf("deadline: %+v", f)
	}
	// A client that went away: debug, whatever the transport said.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if f := ClassifyUpstreamError(r.WithContext(ctx), errors.New("read: connection reset")); f.Reason != "client_gone" || f.Level != slog.LevelDebug {
		t.Errorf("client gone: %+v", f)
	}
	if f := ClassifyUpstreamError(r, errors.New("malformed HTTP response")); f.Status != 503 || f.Reason != "failed" || f.Level != slog.LevelWarn {
		t.Errorf("other: %+v", f)
	}
}

func TestErrorsEchoOnlyAShortPrefix(t *testing.T) {
	_, srv := newTestServer(t, limitertest.NewClock(), Options{})
	huge := strings.Repeat("A", 60<<10)
	for name, req := range map[string][3]string{ // target, auth, content type
		"authorization": {ecsTarget + "ListClusters", "AWS4-HMAC-SHA256 Credential=" + huge + ", SignedHeaders=host, Signature=ab", awsjson.ContentType},
		"parameter":     {ecsTarget + "ListClusters", "AWS4-HMAC-SHA256 " + huge, awsjson.ContentType},
		"target":        {ecsTarget + huge, sigv4("AKIDECHO", "us-east-1", "ecs"), awsjson.ContentType},
		"content type":  {ecsTarget + "ListClusters", sigv4("AKIDECHO", "us-east-1", "ecs"), huge},
	} {
		resp := awsRequest(t, srv.URL, req[0], req[1], "{}", func(r *http.Request) { r.Header.Set("Content-Type", req[2]) })
		body := readAll(t, resp.Body)
		if resp.StatusCode != 400 || len(body) > 512 || !strings.Contains(body, "AAAA") {
			t.Errorf("%s of 60 KB: %d, %d-byte answer; want 400 quoting a short prefix: %.300s", name, resp.StatusCode, len(body), body)
		}
	}
	resp := awsRequest(t, srv.URL, ecsTarget+"ListClusters", sigv4("AKIDECHO", "us-east-1", "ecs"), `{"`+huge+`":1,"`+huge+`":2}`)
	if body := readAll(t, resp.Body); resp.StatusCode != 400 || len(body) > 512 {
		t.Errorf("duplicate 60 KB member: %d, %d-byte answer", resp.StatusCode, len(body))
	}
}

func TestNativeErrorsEchoOnlyAShortPrefix(t *testing.T) {
	_, srv := newTestServer(t, limitertest.NewClock(), Options{})
	huge := strings.Repeat("B", 60<<10)
	for name, body := range map[string]string{
		"service":        `{"service":"` + huge + `","account":"1","region":"us-east-1","action":"ListClusters"}`,
		"action":         `{"service":"ecs","account":"1","region":"us-east-1","action":"` + huge + `"}`,
		"unknown member": `{"` + huge + `":1}`,
		"duplicate":      `{"` + huge + `":1,"` + huge + `":2}`,
		"syntax":         `{"service":"ecs",` + huge + `}`,
	} {
		for _, path := range []string{"/v1/take", "/v1/take/batch"} {
			if path == "/v1/take/batch" {
				body = `{"requests":[` + body + `]}`
			}
			status, answer := postJSON(t, srv.URL+path, body)
			if status != 400 || len(answer) > 1024 {
				t.Errorf("%s %s of 60 KB: %d, %d-byte answer; want 400 quoting a short prefix: %.300s", path, name, status, len(answer), answer)
			}
		}
	}
}
