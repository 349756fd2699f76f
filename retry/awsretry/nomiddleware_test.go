package awsretry

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	"github.com/aws/smithy-go"

	"github.com/tollgate/tollgate/retry"
)

// plainClient installs r only as o.Retryer, as the issue shows.
func plainClient(url string, r *Retryer) *ecs.Client {
	cfg := aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""),
	}
	return ecs.NewFromConfig(cfg, func(o *ecs.Options) {
		o.BaseEndpoint = aws.String(url)
		o.Retryer = r
	})
}

// With the Retryer installed only as o.Retryer, the waits follow the seed
// schedule (1+r, 2+r, 4+r … units, capped) and the retries stop.
func TestECSOnlyRetryerGrowingScheduleAndStops(t *testing.T) {
	srv := &throttler{k: -1}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	var mu sync.Mutex
	var delays []time.Duration
	var attempts []int
	r := New(retry.WithUnit(time.Millisecond), retry.WithMaxBackoff(8*time.Millisecond),
		retry.WithDeadline(40*time.Millisecond), retry.WithRand(fixedRand(0.5)),
		retry.OnRetry(func(a int, d time.Duration, err error) {
			mu.Lock()
			defer mu.Unlock()
			attempts = append(attempts, a)
			delays = append(delays, d)
		}))
	_, err := plainClient(ts.URL, r).ListClusters(context.Background(), &ecs.ListClustersInput{})
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "ThrottlingException" {
		t.Fatalf("err = %v", err)
	}
	// Minimal waits 1, 2, 4, 8, 8, 8, 8 ms fit in 40 ms (39 ms); an eighth
	// retry would not: at most 8 attempts.
	if got := srv.Hits(); got != 8 {
		t.Fatalf("hits = %d, want 8", got)
	}
	want := []time.Duration{1500 * time.Microsecond, 2500 * time.Microsecond, 4500 * time.Microsecond,
		8 * time.Millisecond, 8 * time.Millisecond, 8 * time.Millisecond, 8 * time.Millisecond}
	if fmt.Sprint(delays) != fmt.Sprint(want) {
		t.Fatalf("delays = %v, want %v", delays, want)
	}
	for i, a := range attempts {
		if a != i+1 {
			t.Fatalf("OnRetry attempts = %v", attempts)
		}
	}
}

// valueErr is a comparable value-type error: equal values from different
// operations must not share a delay.
type valueErr struct{ code string }

func (e valueErr) Error() string     { return e.code }
func (e valueErr) ErrorCode() string { return e.code }

// sliceErr is not comparable.
type sliceErr []string

func (e sliceErr) Error() string { return "slice" }

// Interleaved operations with equal or non-comparable errors each get back
// from RetryDelay the wait that GetRetryToken checked and reported.
func TestRetryDelayIsPerOperation(t *testing.T) {
	for _, opErr := range []error{valueErr{"ThrottlingException"}, sliceErr{"x"}} {
		var mu sync.Mutex
		notified := map[int]time.Duration{}
		var current int
		r := New(retry.WithClassifier(retry.ClassifierFunc(func(error) retry.Class { return retry.Retryable })),
			retry.OnRetry(func(_ int, d time.Duration, _ error) {
				mu.Lock()
				notified[current] = d
				mu.Unlock()
			}))
		const n = 8
		ops := make([]*operation, n)
		for i := range ops {
			ops[i] = &operation{r: r, st: &opState{}}
			if _, err := ops[i].GetAttemptToken(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		for i, op := range ops {
			current = i
			if _, err := op.GetRetryToken(context.Background(), opErr); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		for i, op := range ops {
			wg.Go(func() {
				d, err := op.RetryDelay(1, opErr)
				mu.Lock()
				defer mu.Unlock()
				if err != nil || d != notified[i] {
					t.Errorf("%T: op %d: RetryDelay = %v, %v; reported %v", opErr, i, d, err, notified[i])
				}
			})
		}
		wg.Wait()
	}
}

// Without the middleware the budget pays for retries and refunds the
// successful one, once.
func TestECSOnlyRetryerBudget(t *testing.T) {
	srv := &throttler{k: 3}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	budget := retry.DefaultTokenBudget()
	r := New(fast(retry.WithBudget(budget))...)
	if _, err := plainClient(ts.URL, r).ListClusters(context.Background(), &ecs.ListClustersInput{}); err != nil {
		t.Fatal(err)
	}
	// Three throttle retries at 5 tokens, the successful last one refunded.
	if got := budget.Tokens(); got != 490 {
		t.Fatalf("budget = %v, want 490", got)
	}
}
