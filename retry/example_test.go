package retry_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/retry"
)

// Do retries a function that fails twice with HTTP 503. The example uses a
// 1 ms constant schedule to run fast; without WithSchedule the waits would
// be the default 1+r, 2+r, 4+r … seconds.
func ExampleDo() {
	attempts := 0
	err := retry.Do(context.Background(), func(ctx context.Context) error {
		attempts++
		if attempts < 3 {
			return &retry.StatusError{StatusCode: http.StatusServiceUnavailable}
		}
		return nil
	},
		retry.WithSchedule(retry.Constant(time.Millisecond)),
		retry.OnRetry(func(attempt int, delay time.Duration, err error) {
			fmt.Printf("attempt %d: %v; retrying in %v\n", attempt, err, delay)
		}),
	)
	fmt.Println("err:", err, "attempts:", attempts)
	// Output:
	// attempt 1: retry: HTTP 503 Service Unavailable; retrying in 1ms
	// attempt 2: retry: HTTP 503 Service Unavailable; retrying in 1ms
	// err: <nil> attempts: 3
}

// A final error is a *retry.Error that reports the attempts and wraps the
// last cause. Permanent stops retrying at once.
func ExampleDo_error() {
	errNotFound := errors.New("no such table")
	err := retry.Do(context.Background(), func(ctx context.Context) error {
		return retry.Permanent(errNotFound)
	})
	var re *retry.Error
	if errors.As(err, &re) {
		fmt.Println("attempts:", re.Attempts)
	}
	fmt.Println(errors.Is(err, errNotFound))
	// Output:
	// attempts: 1
	// true
}

// DoValue returns the value of the successful attempt.
func ExampleDoValue() {
	calls := 0
	n, err := retry.DoValue(context.Background(), func(ctx context.Context) (int, error) {
		calls++
		if calls == 1 {
			return 0, &retry.StatusError{StatusCode: http.StatusTooManyRequests}
		}
		return 42, nil
	}, retry.WithSchedule(retry.Constant(time.Millisecond)))
	fmt.Println(n, err)
	// Output: 42 <nil>
}

// The default schedule, drawn from a seeded source: 1+r, 2+r, 4+r … seconds,
// capped at 32 s.
func ExampleExponential() {
	rnd := rand.New(rand.NewPCG(1, 2))
	for n := range 7 {
		fmt.Println(n, retry.DefaultSchedule().Delay(n, 0, rnd).Round(time.Millisecond))
	}
	// Output:
	// 0 1.676s
	// 1 2.461s
	// 2 4.509s
	// 3 8.43s
	// 4 16.798s
	// 5 32s
	// 6 32s
}

// Transport retries an HTTP GET that the server answers twice with 503.
func ExampleTransport() {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) <= 2 {
			w.Header().Set("Retry-After", "0")
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, "hello")
	}))
	defer srv.Close()

	client := &http.Client{Transport: &retry.Transport{
		Policy: retry.New(
			retry.WithSchedule(retry.Constant(time.Millisecond)),
			retry.WithAttemptTimeout(5*time.Second),
			retry.WithBudget(retry.DefaultTokenBudget()),
		),
	}}
	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(body), "after", hits.Load(), "requests")
	// Output: 200 hello after 3 requests
}

// A server's Retry-After lengthens a wait only up to maximum_backoff (32 s
// by default); WithMaxHint sets a larger ceiling for hints.
func ExampleWithMaxHint() {
	throttled := &retry.StatusError{
		StatusCode: http.StatusTooManyRequests,
		Header:     http.Header{"Retry-After": {"120"}},
	}
	now := time.Now()
	fmt.Println("default:", retry.New().Wait(0, 0, throttled, now))
	fmt.Println("WithMaxBackoff(64s):", retry.New(retry.WithMaxBackoff(64*time.Second)).Wait(0, 0, throttled, now))
	fmt.Println("WithMaxHint(5m):", retry.New(retry.WithMaxHint(5*time.Minute)).Wait(0, 0, throttled, now))
	// Output:
	// default: 32s
	// WithMaxBackoff(64s): 1m4s
	// WithMaxHint(5m): 2m0s
}
