package awsretry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sdkretry "github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/tollgate/tollgate/retry"
)

// throttler answers the first k requests with ECS's throttling error and
// the rest with an empty JSON object. A negative k throttles forever.
type throttler struct {
	mu      sync.Mutex
	k       int
	hits    int
	targets []string
	code    string
}

func (s *throttler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.ReadAll(r.Body)
	s.mu.Lock()
	s.hits++
	n := s.hits
	s.targets = append(s.targets, r.Header.Get("X-Amz-Target"))
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	if s.k < 0 || n <= s.k {
		code := s.code
		if code == "" {
			code = "ThrottlingException"
		}
		w.Header().Set("X-Amzn-ErrorType", code)
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"__type":"`+code+`","message":"Rate exceeded"}`)
		return
	}
	io.WriteString(w, `{}`)
}

func (s *throttler) Hits() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits
}

func ecsClient(url string, r *Retryer) *ecs.Client {
	cfg := aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""),
	}
	r.Apply(&cfg)
	return ecs.NewFromConfig(cfg, func(o *ecs.Options) { o.BaseEndpoint = aws.String(url) })
}

// The SDK sleeps for real for the delay the retryer returns, so these tests
// use a 1 ms constant schedule; the seed schedule's exact values are tested
// through RetryDelay below.
func fast(opts ...retry.Option) []retry.Option {
	return append([]retry.Option{retry.WithSchedule(retry.Constant(time.Millisecond))}, opts...)
}

func TestECSRetriesThrottling(t *testing.T) {
	srv := &throttler{k: 3}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	budget := retry.DefaultTokenBudget()
	var retries []int
	r := New(fast(retry.WithBudget(budget), retry.OnRetry(func(a int, d time.Duration, err error) {
		var ae smithy.APIError
		if !errors.As(err, &ae) || ae.ErrorCode() != "ThrottlingException" || d != time.Millisecond {
			t.Errorf("OnRetry(%d, %v, %v)", a, d, err)
		}
		retries = append(retries, a)
	}))...)
	out, err := ecsClient(ts.URL, r).ListClusters(context.Background(), &ecs.ListClustersInput{})
	if err != nil {
		t.Fatal(err)
	}
	if out == nil || srv.Hits() != 4 {
		t.Fatalf("hits = %d, want 4", srv.Hits())
	}
	for _, target := range srv.targets {
		if !strings.HasSuffix(target, ".ListClusters") {
			t.Fatalf("X-Amz-Target = %q", target)
		}
	}
	if len(retries) != 3 || retries[0] != 1 || retries[2] != 3 {
		t.Fatalf("OnRetry attempts = %v, want [1 2 3]", retries)
	}
	// Three throttle retries at 5 tokens, the successful last one refunded.
	if got := budget.Tokens(); got != 490 {
		t.Fatalf("budget = %v, want 490", got)
	}
	// A call that succeeds at once refunds 1.
	if _, err := ecsClient(ts.URL, r).ListClusters(context.Background(), &ecs.ListClustersInput{}); err != nil {
		t.Fatal(err)
	}
	if got := budget.Tokens(); got != 491 {
		t.Fatalf("budget = %v, want 491", got)
	}
}

func TestECSMaxAttempts(t *testing.T) {
	srv := &throttler{k: -1}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	_, err := ecsClient(ts.URL, New(fast(retry.WithMaxAttempts(4))...)).ListClusters(context.Background(), &ecs.ListClustersInput{})
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "ThrottlingException" || srv.Hits() != 4 {
		t.Fatalf("err = %v, hits = %d", err, srv.Hits())
	}
}

func TestECSThrottleRetriesOff(t *testing.T) {
	srv := &throttler{k: 1}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	_, err := ecsClient(ts.URL, New(fast(retry.WithThrottleRetries(false))...)).ListClusters(context.Background(), &ecs.ListClustersInput{})
	if err == nil || srv.Hits() != 1 {
		t.Fatalf("err = %v, hits = %d", err, srv.Hits())
	}
}

func TestECSNotRetryable(t *testing.T) {
	srv := &throttler{k: 1, code: "ClientException"}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	_, err := ecsClient(ts.URL, New(fast()...)).ListClusters(context.Background(), &ecs.ListClustersInput{})
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "ClientException" || srv.Hits() != 1 {
		t.Fatalf("err = %v, hits = %d", err, srv.Hits())
	}
}

func TestECSBudgetExhausted(t *testing.T) {
	srv := &throttler{k: -1}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	budget := retry.NewTokenBudget(12, 14, 5, 1)
	_, err := ecsClient(ts.URL, New(fast(retry.WithBudget(budget))...)).ListClusters(context.Background(), &ecs.ListClustersInput{})
	// Two throttle retries take 10 of 12 tokens; the third is refused.
	if !errors.Is(err, retry.ErrBudgetExhausted) || srv.Hits() != 3 || budget.Tokens() != 2 {
		t.Fatalf("err = %v, hits = %d, tokens = %v", err, srv.Hits(), budget.Tokens())
	}
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "ThrottlingException" {
		t.Fatalf("the last cause is lost: %v", err)
	}
}

// A wait that would cross the deadline is refused before it starts, so
// these calls return without sleeping the 1 s schedule.
func TestECSDeadlineReturnsAtOnce(t *testing.T) {
	for _, c := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		opts []retry.Option
	}{
		{"policy deadline", func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) },
			[]retry.Option{retry.WithDeadline(500 * time.Millisecond)}},
		{"context deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), time.Minute)
		},
			[]retry.Option{retry.WithDeadline(0), retry.WithSchedule(retry.Constant(2 * time.Minute))}},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := &throttler{k: -1}
			ts := httptest.NewServer(srv)
			defer ts.Close()
			ctx, cancel := c.ctx()
			defer cancel()
			opts := append([]retry.Option{retry.WithSchedule(retry.Constant(time.Second))}, c.opts...)
			_, err := ecsClient(ts.URL, New(opts...)).ListClusters(ctx, &ecs.ListClustersInput{})
			if !errors.Is(err, retry.ErrDeadline) || srv.Hits() != 1 {
				t.Fatalf("err = %v, hits = %d", err, srv.Hits())
			}
		})
	}
}

// fixedRand always draws the same fraction.
type fixedRand float64

func (f fixedRand) Float64() float64 { return float64(f) }

func throttleErr(h http.Header) error {
	resp := &smithyhttp.Response{Response: &http.Response{StatusCode: 400, Header: h}}
	return &smithyhttp.ResponseError{Response: resp, Err: &smithy.GenericAPIError{Code: "ThrottlingException"}}
}

func TestRetryDelaySeedSchedule(t *testing.T) {
	r := New(retry.WithRand(fixedRand(0.5)))
	want := []time.Duration{1500 * time.Millisecond, 2500 * time.Millisecond, 4500 * time.Millisecond,
		8500 * time.Millisecond, 16500 * time.Millisecond, 32 * time.Second, 32 * time.Second}
	for i, w := range want {
		got, err := r.RetryDelay(i+1, throttleErr(nil))
		if err != nil || got != w {
			t.Errorf("RetryDelay(%d) = %v, %v; want %v", i+1, got, err, w)
		}
	}
	got, _ := r.RetryDelay(1, throttleErr(http.Header{"Retry-After": {"9"}}))
	if got != 9*time.Second {
		t.Errorf("with Retry-After 9: %v", got)
	}
	got, _ = r.RetryDelay(1, throttleErr(http.Header{"Retry-After": {"3600"}}))
	if got != retry.DefaultMaxHint {
		t.Errorf("with Retry-After 3600: %v, want the %v ceiling", got, retry.DefaultMaxHint)
	}
}

func TestIsErrorRetryable(t *testing.T) {
	r := New()
	for err, want := range map[error]bool{
		throttleErr(nil): true,
		&smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: 503}}, Err: errors.New("x")}: true,
		&smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: 404}}, Err: errors.New("x")}: false,
		&aws.RequestCanceledError{Err: context.Canceled}: false,
		retry.Permanent(throttleErr(nil)):                false,
	} {
		if got := r.IsErrorRetryable(err); got != want {
			t.Errorf("IsErrorRetryable(%v) = %v", err, got)
		}
	}
	// Shortest seed waits 1, 2, 4, 8, 16, 32, 32 … s: 13 retries fit in 300 s.
	if r.MaxAttempts() != 14 {
		t.Errorf("MaxAttempts = %d, want 14 (deadline-bound)", r.MaxAttempts())
	}
}

func TestSDKAdjusted(t *testing.T) {
	for _, c := range []struct {
		header string
		delay  time.Duration
		want   time.Duration
	}{
		{"", 2 * time.Second, 2 * time.Second},
		{"1000", 2 * time.Second, 2 * time.Second},
		{"3000", 2 * time.Second, 3 * time.Second},
		{"3600000", 60 * time.Second, 65 * time.Second},
		{"junk", 2 * time.Second, 2 * time.Second},
	} {
		h := http.Header{}
		if c.header != "" {
			h.Set("X-Amz-Retry-After", c.header)
		}
		if got := sdkAdjusted(c.delay, throttleErr(h)); got != c.want {
			t.Errorf("sdkAdjusted(%v, %q) = %v, want %v", c.delay, c.header, got, c.want)
		}
	}
	if got := sdkAdjusted(time.Second, errors.New("plain")); got != time.Second {
		t.Errorf("plain error: %v", got)
	}
}

// A throttle whose X-Amz-Retry-After would push the SDK's wait past the
// deadline is refused before the SDK sleeps.
func TestECSAmzRetryAfterCountsTowardsDeadline(t *testing.T) {
	var hits atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		w.Header().Set("X-Amz-Retry-After", "3600000")
		w.Header().Set("X-Amzn-ErrorType", "ThrottlingException")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"__type":"ThrottlingException","message":"Rate exceeded"}`)
	}))
	defer ts.Close()
	// The hint is clamped to 1 s, which fits the 3 s deadline, but the SDK
	// would sleep min(1 h, 1 s + 5 s) = 6 s.
	r := New(fast(retry.WithMaxHint(time.Second), retry.WithDeadline(3*time.Second))...)
	_, err := ecsClient(ts.URL, r).ListClusters(context.Background(), &ecs.ListClustersInput{})
	if !errors.Is(err, retry.ErrDeadline) || hits.Load() != 1 {
		t.Fatalf("err = %v, hits = %d", err, hits.Load())
	}
}

// retry.ThrottleCodes and retry.TransientCodes must stay the SDK's lists.
func TestCodeListsMatchTheSDK(t *testing.T) {
	for name, c := range map[string]struct {
		ours []string
		is   func(string) bool
		sdk  map[string]struct{}
	}{
		"throttle":  {retry.ThrottleCodes(), retry.IsThrottleCode, sdkretry.DefaultThrottleErrorCodes},
		"transient": {retry.TransientCodes(), retry.IsTransientCode, sdkretry.DefaultRetryableErrorCodes},
	} {
		if len(c.ours) != len(c.sdk) {
			t.Errorf("%s: %d codes, the SDK has %d", name, len(c.ours), len(c.sdk))
		}
		for code := range c.sdk {
			if !c.is(code) {
				t.Errorf("%s: missing the SDK's %s", name, code)
			}
		}
	}
}
