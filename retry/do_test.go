package retry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"
)

var errUnavailable = &StatusError{StatusCode: http.StatusServiceUnavailable}

// failing returns a function that fails with err for the first k calls and
// then succeeds, and a pointer to its call count.
func failing(k int, err error) (func(context.Context) error, *int) {
	calls := new(int)
	return func(context.Context) error {
		*calls++
		if *calls <= k {
			return err
		}
		return nil
	}, calls
}

func TestDoExactSeedSchedule(t *testing.T) {
	clock := newFakeClock()
	fn, calls := failing(8, errUnavailable)
	if err := Do(context.Background(), fn, WithClock(clock), WithRand(seeded())); err != nil {
		t.Fatalf("Do = %v", err)
	}
	if *calls != 9 {
		t.Fatalf("calls = %d, want 9", *calls)
	}
	ref := seeded()
	var want []time.Duration
	for n := range 8 {
		want = append(want, min(time.Duration(1<<n)*time.Second+time.Duration(ref.Float64()*float64(time.Second)), 32*time.Second))
	}
	got := clock.Sleeps()
	if len(got) != len(want) {
		t.Fatalf("sleeps = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("wait %d = %v, want %v", i, got[i], want[i])
		}
	}
	// 1+r, 2+r, 4+r, 8+r, 16+r, then the 32 s cap.
	for i, base := range []time.Duration{1, 2, 4, 8, 16} {
		if got[i] < base*time.Second || got[i] >= (base+1)*time.Second {
			t.Errorf("wait %d = %v, want in [%ds, %ds)", i, got[i], base, base+1)
		}
	}
	for i := 5; i < len(got); i++ {
		if got[i] != 32*time.Second {
			t.Errorf("wait %d = %v, want the 32s cap", i, got[i])
		}
	}
}

func TestDoUnitAndMaxBackoffOptions(t *testing.T) {
	clock := newFakeClock()
	fn, _ := failing(4, errUnavailable)
	err := Do(context.Background(), fn, WithClock(clock), WithRand(fixedRand(0.5)),
		WithUnit(100*time.Millisecond), WithMaxBackoff(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{150 * time.Millisecond, 250 * time.Millisecond, 300 * time.Millisecond, 300 * time.Millisecond}
	for i, d := range clock.Sleeps() {
		if d != want[i] {
			t.Errorf("wait %d = %v, want %v", i, d, want[i])
		}
	}
}

func TestDoDefaultDeadline(t *testing.T) {
	clock := newFakeClock()
	fn, calls := failing(100, errUnavailable)
	err := Do(context.Background(), fn, WithClock(clock), WithRand(seeded()))
	var re *Error
	if !errors.As(err, &re) || !errors.Is(err, ErrDeadline) || !errors.Is(err, errUnavailable) {
		t.Fatalf("err = %v, want *Error wrapping ErrDeadline and the cause", err)
	}
	total := clock.Total()
	if total > DefaultDeadline {
		t.Fatalf("slept %v, more than the 300s deadline", total)
	}
	// The wait that was refused would have crossed the deadline, so the
	// deadline is honoured within one wait (at most 32 s early).
	if DefaultDeadline-total >= DefaultMaxBackoff {
		t.Fatalf("stopped %v before the deadline, more than one capped wait", DefaultDeadline-total)
	}
	if re.Attempts != *calls || re.Attempts != len(clock.Sleeps())+1 {
		t.Fatalf("Attempts = %d, calls = %d, waits = %d", re.Attempts, *calls, len(clock.Sleeps()))
	}
}

func TestDoDeadlineReturnsWithoutWaiting(t *testing.T) {
	clock := newFakeClock()
	fn, calls := failing(100, errUnavailable)
	err := Do(context.Background(), fn, WithClock(clock), WithRand(fixedRand(0.5)), WithDeadline(20*time.Second))
	// 1.5 + 2.5 + 4.5 + 8.5 = 17 s; the next wait, 16.5 s, would cross 20 s.
	if !errors.Is(err, ErrDeadline) {
		t.Fatalf("err = %v, want ErrDeadline", err)
	}
	if got := clock.Total(); got != 17*time.Second {
		t.Fatalf("slept %v, want 17s", got)
	}
	if *calls != 5 {
		t.Fatalf("calls = %d, want 5", *calls)
	}
}

func TestDoContextDeadlineEarlierThanPolicy(t *testing.T) {
	clock := newFakeClock()
	clock.now = time.Now()
	ctx, cancel := context.WithDeadline(context.Background(), clock.now.Add(5*time.Second))
	defer cancel()
	fn, calls := failing(100, errUnavailable)
	err := Do(ctx, fn, WithClock(clock), WithRand(fixedRand(0.5)))
	// 1.5 + 2.5 = 4 s; the next wait of 4.5 s would cross the 5 s deadline.
	if !errors.Is(err, ErrDeadline) || *calls != 3 || clock.Total() != 4*time.Second {
		t.Fatalf("err = %v, calls = %d, slept %v", err, *calls, clock.Total())
	}
}

func TestDoMaxAttempts(t *testing.T) {
	fn, calls := failing(10, errUnavailable)
	err := Do(context.Background(), fn, WithClock(newFakeClock()), WithMaxAttempts(3))
	var re *Error
	if !errors.As(err, &re) || re.Attempts != 3 || *calls != 3 || !errors.Is(err, ErrAttemptsExhausted) {
		t.Fatalf("err = %v, calls = %d", err, *calls)
	}
}

func hinted(h http.Header) *StatusError {
	return &StatusError{StatusCode: http.StatusTooManyRequests, Header: h}
}

func TestDoRetryAfter(t *testing.T) {
	now := newFakeClock().Now()
	cases := []struct {
		name string
		h    http.Header
		opts []Option
		want time.Duration
	}{
		{"seconds above backoff", http.Header{"Retry-After": {"10"}}, nil, 10 * time.Second},
		{"seconds below backoff", http.Header{"Retry-After": {"1"}}, nil, 1500 * time.Millisecond},
		{"http-date", http.Header{"Retry-After": {now.Add(20 * time.Second).Format(http.TimeFormat)}}, nil, 20 * time.Second},
		{"http-date past", http.Header{"Retry-After": {now.Add(-time.Hour).Format(http.TimeFormat)}}, nil, 1500 * time.Millisecond},
		{"x-amz ms", http.Header{"X-Amz-Retry-After": {"2500"}}, nil, 2500 * time.Millisecond},
		{"clamped to maximum_backoff", http.Header{"Retry-After": {"120"}}, nil, 32 * time.Second},
		{"clamped to a raised maximum_backoff", http.Header{"Retry-After": {"120"}}, []Option{WithMaxBackoff(64 * time.Second)}, 64 * time.Second},
		{"clamped to a lowered maximum_backoff", http.Header{"Retry-After": {"30"}}, []Option{WithMaxBackoff(10 * time.Second)}, 10 * time.Second},
		{"x-amz clamped to maximum_backoff", http.Header{"X-Amz-Retry-After": {"120000"}}, nil, 32 * time.Second},
		{"custom schedule, default ceiling", http.Header{"Retry-After": {"120"}}, []Option{WithSchedule(Constant(time.Second))}, 32 * time.Second},
		{"larger ceiling by option", http.Header{"Retry-After": {"120"}}, []Option{WithMaxHint(5 * time.Minute)}, 120 * time.Second},
		{"clamped by option", http.Header{"Retry-After": {"3600"}}, []Option{WithMaxHint(45 * time.Second)}, 45 * time.Second},
		{"hints off", http.Header{"Retry-After": {"30"}}, []Option{WithMaxHint(0)}, 1500 * time.Millisecond},
		{"malformed ignored", http.Header{"Retry-After": {"soon"}}, nil, 1500 * time.Millisecond},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clock := newFakeClock()
			fn, _ := failing(1, hinted(c.h))
			opts := append([]Option{WithClock(clock), WithRand(fixedRand(0.5))}, c.opts...)
			if err := Do(context.Background(), fn, opts...); err != nil {
				t.Fatal(err)
			}
			if got := clock.Sleeps(); len(got) != 1 || got[0] != c.want {
				t.Fatalf("waits = %v, want [%v]", got, c.want)
			}
		})
	}
}

func TestDoRetryAfterBeyondDeadlineReturnsAtOnce(t *testing.T) {
	clock := newFakeClock()
	fn, calls := failing(1, hinted(http.Header{"Retry-After": {"50"}}))
	err := Do(context.Background(), fn, WithClock(clock), WithDeadline(30*time.Second))
	if !errors.Is(err, ErrDeadline) || *calls != 1 || len(clock.Sleeps()) != 0 {
		t.Fatalf("err = %v, calls = %d, waits = %v", err, *calls, clock.Sleeps())
	}
}

func TestDoCancelledBeforeStart(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	fn, calls := failing(0, nil)
	err := Do(ctx, fn, WithClock(newFakeClock()))
	if !errors.Is(err, context.Canceled) || *calls != 0 {
		t.Fatalf("err = %v, calls = %d", err, *calls)
	}
}

func TestDoCancelledDuringAttemptStopsAtOnce(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clock := newFakeClock()
	calls, retries := 0, 0
	err := Do(ctx, func(ctx context.Context) error {
		calls++
		cancel()
		return errUnavailable
	}, WithClock(clock), OnRetry(func(int, time.Duration, error) { retries++ }))
	var re *Error
	// The fake clock's Sleep returns at once on a cancelled context, so the
	// hook, called before any wait, is what shows no retry was started.
	if !errors.As(err, &re) || re.Attempts != 1 || calls != 1 || retries != 0 || len(clock.Sleeps()) != 0 {
		t.Fatalf("err = %v, calls = %d, waits = %v", err, calls, clock.Sleeps())
	}
	if !errors.Is(err, context.Canceled) || !errors.Is(err, errUnavailable) {
		t.Fatalf("err = %v, want both context.Canceled and the cause", err)
	}
}

func TestDoCancelledDuringWaitStopsAtOnce(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clock := blockingClock{started: make(chan time.Duration)}
	fn, calls := failing(100, errUnavailable)
	done := make(chan error)
	go func() { done <- Do(ctx, fn, WithClock(clock)) }()
	<-clock.started
	cancel()
	err := <-done
	var re *Error
	if !errors.As(err, &re) || re.Attempts != 1 || *calls != 1 || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, calls = %d", err, *calls)
	}
}

func TestDoCallerDeadlineNotRetried(t *testing.T) {
	// The caller's deadline passes while the attempt runs; the loop must stop
	// without a retry, a wait or a budget withdrawal.
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	budget := DefaultTokenBudget()
	before := budget.Tokens()
	calls, retries := 0, 0
	err := Do(ctx, func(ctx context.Context) error {
		calls++
		<-ctx.Done()
		return ctx.Err()
	}, WithClock(newFakeClock()), WithDeadline(0), WithBudget(budget),
		OnRetry(func(int, time.Duration, error) { retries++ }))
	if calls != 1 || retries != 0 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("calls = %d, retries = %d, err = %v", calls, retries, err)
	}
	if got := budget.Tokens(); got != before {
		t.Fatalf("budget = %v, want %v unchanged", got, before)
	}
}

func TestDoPerAttemptTimeoutRetried(t *testing.T) {
	calls := 0
	err := Do(context.Background(), func(ctx context.Context) error {
		calls++
		if calls == 1 {
			<-ctx.Done() // the attempt's own timeout
			return ctx.Err()
		}
		if _, ok := ctx.Deadline(); !ok {
			t.Error("attempt context has no deadline")
		}
		return nil
	}, WithClock(newFakeClock()), WithAttemptTimeout(10*time.Millisecond))
	if err != nil || calls != 2 {
		t.Fatalf("err = %v, calls = %d", err, calls)
	}
}

func TestDoNotRetryable(t *testing.T) {
	cause := &StatusError{StatusCode: http.StatusNotFound}
	fn, calls := failing(5, cause)
	err := Do(context.Background(), fn, WithClock(newFakeClock()))
	var re *Error
	if !errors.As(err, &re) || re.Attempts != 1 || re.Reason != nil || *calls != 1 {
		t.Fatalf("err = %v, calls = %d", err, *calls)
	}
	var se *StatusError
	if !errors.As(err, &se) || se.StatusCode != 404 || !errors.Is(err, cause) {
		t.Fatalf("errors.As/Is did not find the cause in %v", err)
	}
	if got := err.Error(); got != "retry: 1 attempt(s): retry: HTTP 404 Not Found" {
		t.Fatalf("Error() = %q", got)
	}
}

func TestDoThrottleSwitch(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(strconv.FormatBool(on), func(t *testing.T) {
			fn, calls := failing(2, &StatusError{StatusCode: http.StatusTooManyRequests})
			err := Do(context.Background(), fn, WithClock(newFakeClock()), WithThrottleRetries(on))
			if on && (err != nil || *calls != 3) {
				t.Fatalf("on: err = %v, calls = %d", err, *calls)
			}
			if !on && (err == nil || *calls != 1) {
				t.Fatalf("off: err = %v, calls = %d", err, *calls)
			}
		})
	}
}

func TestDoCustomClassifier(t *testing.T) {
	sentinel := errors.New("flaky")
	fn, calls := failing(2, sentinel)
	err := Do(context.Background(), fn, WithClock(newFakeClock()),
		WithClassifier(ClassifierFunc(func(err error) Class {
			if errors.Is(err, sentinel) {
				return Retryable
			}
			return NotRetryable
		})))
	if err != nil || *calls != 3 {
		t.Fatalf("err = %v, calls = %d", err, *calls)
	}
}

func TestDoOnRetry(t *testing.T) {
	type call struct {
		attempt int
		delay   time.Duration
		err     error
	}
	var got []call
	fn, _ := failing(2, errUnavailable)
	err := Do(context.Background(), fn, WithClock(newFakeClock()), WithRand(fixedRand(0)),
		OnRetry(func(a int, d time.Duration, err error) { got = append(got, call{a, d, err}) }))
	if err != nil {
		t.Fatal(err)
	}
	want := []call{{1, time.Second, errUnavailable}, {2, 2 * time.Second, errUnavailable}}
	if len(got) != len(want) {
		t.Fatalf("OnRetry calls = %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("OnRetry %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestDoValue(t *testing.T) {
	calls := 0
	v, err := DoValue(context.Background(), func(context.Context) (string, error) {
		calls++
		if calls < 3 {
			return "partial", errUnavailable
		}
		return "done", nil
	}, WithClock(newFakeClock()))
	if err != nil || v != "done" || calls != 3 {
		t.Fatalf("v = %q, err = %v, calls = %d", v, err, calls)
	}
	v, err = DoValue(context.Background(), func(context.Context) (string, error) {
		return "partial", Permanent(errUnavailable)
	}, WithClock(newFakeClock()))
	if err == nil || v != "" {
		t.Fatalf("v = %q, err = %v, want zero value and error", v, err)
	}
}

func TestDoBudgetExhausted(t *testing.T) {
	b := NewTokenBudget(20, 14, 5, 1)
	fn, calls := failing(100, errUnavailable)
	err := Do(context.Background(), fn, WithClock(newFakeClock()), WithBudget(b))
	var re *Error
	if !errors.As(err, &re) || !errors.Is(err, ErrBudgetExhausted) || !errors.Is(err, errUnavailable) {
		t.Fatalf("err = %v, want *Error with ErrBudgetExhausted and the cause", err)
	}
	// One retry for 14 tokens; the second would need 14 of the 6 left.
	if re.Attempts != 2 || *calls != 2 || b.Tokens() != 6 {
		t.Fatalf("attempts = %d, calls = %d, tokens = %v", re.Attempts, *calls, b.Tokens())
	}
	// The next call fails on its first error without waiting.
	clock := newFakeClock()
	fn, calls = failing(1, errUnavailable)
	err = Do(context.Background(), fn, WithClock(clock), WithBudget(b))
	if !errors.Is(err, ErrBudgetExhausted) || *calls != 1 || len(clock.Sleeps()) != 0 {
		t.Fatalf("err = %v, calls = %d", err, *calls)
	}
	// Throttles cost 5, so one more throttle retry fits, and its success
	// refunds its cost.
	fn, calls = failing(1, &StatusError{StatusCode: http.StatusTooManyRequests})
	if err := Do(context.Background(), fn, WithClock(newFakeClock()), WithBudget(b)); err != nil || *calls != 2 {
		t.Fatalf("throttle retry: err = %v, calls = %d", err, *calls)
	}
	if b.Tokens() != 6 {
		t.Fatalf("tokens after refunded throttle retry = %v, want 6", b.Tokens())
	}
	// A first-attempt success refunds 1.
	if err := Do(context.Background(), func(context.Context) error { return nil }, WithBudget(b)); err != nil {
		t.Fatal(err)
	}
	if b.Tokens() != 7 {
		t.Fatalf("tokens after first-attempt success = %v, want 7", b.Tokens())
	}
}

// The deadline bounds when a new attempt may start, never an attempt in
// flight: on the system clock, an attempt that outlives the deadline gets no
// deadline on its context and its success is returned.
func TestDoDeadlineDoesNotCutAttemptInFlight(t *testing.T) {
	const deadline = time.Millisecond
	calls := 0
	v, err := DoValue(context.Background(), func(ctx context.Context) (string, error) {
		calls++
		if d, ok := ctx.Deadline(); ok {
			return "", Permanent(fmt.Errorf("attempt context has a deadline (%v)", d))
		}
		start := time.Now()
		for time.Since(start) <= 10*deadline { // run well past the policy's deadline
			select {
			case <-ctx.Done():
				return "", ctx.Err()
			case <-time.After(deadline):
			}
		}
		return "done", nil
	}, WithDeadline(deadline))
	if err != nil || v != "done" || calls != 1 {
		t.Fatalf("v = %q, err = %v, calls = %d", v, err, calls)
	}
}

// An attempt that fails after the deadline passed is not retried: the
// deadline still bounds when a new attempt may start.
func TestDoAttemptEndingPastDeadlineNotRetried(t *testing.T) {
	clock := newFakeClock()
	calls := 0
	err := Do(context.Background(), func(ctx context.Context) error {
		calls++
		clock.Advance(400 * time.Second) // a slow attempt, past the 300 s deadline
		if err := ctx.Err(); err != nil {
			return Permanent(fmt.Errorf("attempt context ended: %w", err))
		}
		return errUnavailable
	}, WithClock(clock))
	if calls != 1 || !errors.Is(err, ErrDeadline) || !errors.Is(err, errUnavailable) || len(clock.Sleeps()) != 0 {
		t.Fatalf("calls = %d, err = %v, waits = %v", calls, err, clock.Sleeps())
	}
}
