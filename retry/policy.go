package retry

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrDeadline is reported (through [*Error]) when the next wait would have
// crossed the deadline, so the call returned at once instead of waiting.
var ErrDeadline = errors.New("retry: next wait would cross the deadline")

// ErrAttemptsExhausted is reported (through [*Error]) when the call made the
// number of attempts set by [WithMaxAttempts] without success.
var ErrAttemptsExhausted = errors.New("retry: attempts exhausted")

// Error is the error of a call that did not succeed. It reports how many
// attempts were made and wraps the error of the last one, so errors.Is and
// errors.As find that cause. When the loop stopped for a reason of its own
// ([ErrDeadline], [ErrBudgetExhausted], [ErrAttemptsExhausted], or the
// caller's context error), errors.Is finds that reason too.
type Error struct {
	// Attempts is the number of attempts made; 0 when the context was done
	// before the first.
	Attempts int
	// Err is the error of the last attempt.
	Err error
	// Reason is why the loop stopped retrying a retryable error, or nil when
	// Err itself was not retryable.
	Reason error
}

// Error describes the attempts, the reason to stop and the last cause.
func (e *Error) Error() string {
	if e.Reason != nil && !errors.Is(e.Err, e.Reason) {
		return fmt.Sprintf("retry: %d attempt(s): %v: %v", e.Attempts, e.Reason, e.Err)
	}
	return fmt.Sprintf("retry: %d attempt(s): %v", e.Attempts, e.Err)
}

// Unwrap returns the last cause and, if set, the reason to stop.
func (e *Error) Unwrap() []error {
	if e.Reason == nil {
		return []error{e.Err}
	}
	return []error{e.Err, e.Reason}
}

// An Option configures a [Policy].
type Option func(*Policy)

// WithSchedule sets the backoff schedule. It replaces the default
// [Exponential] schedule, so [WithUnit] and [WithMaxBackoff] no longer shape
// the waits; [WithMaxBackoff] still sets the default ceiling on server
// hints (see [WithMaxHint]).
func WithSchedule(s Schedule) Option {
	return func(p *Policy) {
		if s != nil {
			p.schedule = s
		}
	}
}

// WithUnit sets the unit of the default [Exponential] schedule (1 s).
func WithUnit(d time.Duration) Option {
	return func(p *Policy) { p.unit = d }
}

// WithMaxBackoff sets maximum_backoff (32 s): the longest wait of the
// default [Exponential] schedule, and the longest wait a server's
// Retry-After hint may ask for unless [WithMaxHint] sets another ceiling.
func WithMaxBackoff(d time.Duration) Option {
	return func(p *Policy) { p.maxBackoff = d }
}

// WithDeadline sets how long a call may go on retrying, counted from the
// start of its first attempt (300 s). The context's deadline applies as
// well when it is earlier. A non-positive d leaves only the context's
// deadline.
//
// The deadline bounds when a new attempt may start and how long the waits
// may be: a wait that would end past it is not started, and the call
// returns the last error wrapped with [ErrDeadline]. It never cuts an
// attempt in flight: an attempt (for [Transport], also the reading of the
// body of the response it returns) ends only by the caller's context or
// by [WithAttemptTimeout]. The deadline is measured on the policy's
// [Clock].
func WithDeadline(d time.Duration) Option {
	return func(p *Policy) { p.deadline = d }
}

// WithMaxAttempts caps the number of attempts, first attempt included. Zero
// (the default) means no cap other than the deadline.
func WithMaxAttempts(n int) Option {
	return func(p *Policy) { p.maxAttempts = max(n, 0) }
}

// WithAttemptTimeout bounds each attempt: the attempt's context is cancelled
// after d, and the resulting context.DeadlineExceeded is retryable. For
// [Transport] the bound covers the reading of the returned response's body
// too. Zero (the default) means no per-attempt bound: an attempt then ends
// only by the caller's context, whatever the policy's deadline. The timeout
// runs on the context's own timer, not on the [Clock].
func WithAttemptTimeout(d time.Duration) Option {
	return func(p *Policy) { p.attemptTimeout = max(d, 0) }
}

// WithClock sets the clock that tells the time and performs the waits
// ([SystemClock] by default). The context's deadline, when it has one, is
// compared with the clock's Now.
func WithClock(c Clock) Option {
	return func(p *Policy) {
		if c != nil {
			p.clock = c
		}
	}
}

// WithRand sets the source of random fractions (math/rand/v2's global source
// by default). Draws are serialised through a lock created by this call, so a
// *rand.Rand may be shared by concurrent calls that use the same Option value.
func WithRand(r Rand) Option {
	if r == nil {
		return func(*Policy) {}
	}
	l := &lockedRand{r: r}
	return func(p *Policy) { p.rand = l }
}

// WithClassifier sets the rule that decides which errors are retried
// ([DefaultClassifier] by default).
func WithClassifier(c Classifier) Option {
	return func(p *Policy) {
		if c != nil {
			p.classifier = c
		}
	}
}

// WithThrottleRetries switches retries of [Throttle] errors (HTTP 429 and
// throttling error codes) on or off. They are on by default.
func WithThrottleRetries(on bool) Option {
	return func(p *Policy) { p.retryThrottles = on }
}

// WithMaxHint sets the ceiling on a server's Retry-After hint. By default a
// hint may raise a wait only up to maximum_backoff ([WithMaxBackoff], 32 s),
// as the schedule min(2^n + r, maximum_backoff) intends; a d above that lets a
// hint raise the wait further, up to d (a wait still never crosses the
// deadline). A non-positive d ignores hints altogether.
func WithMaxHint(d time.Duration) Option {
	return func(p *Policy) { p.maxHint, p.maxHintSet = d, true }
}

// WithBudget makes calls pay for their retries from b, which is typically
// shared by all calls to one dependency. Nil (the default) means no budget.
func WithBudget(b *Budget) Option {
	return func(p *Policy) { p.budget = b }
}

// OnRetry registers fn to be called before each wait, with the number of the
// attempt that failed (1 for the first), the wait about to start and that
// attempt's error. It is meant for logs and metrics and must not block.
func OnRetry(fn func(attempt int, delay time.Duration, err error)) Option {
	return func(p *Policy) { p.onRetry = fn }
}

// A Policy is a compiled set of [Option]s. It is immutable and safe for
// concurrent use; a [Budget] given to it is shared by all its calls.
type Policy struct {
	schedule       Schedule
	unit           time.Duration
	maxBackoff     time.Duration
	deadline       time.Duration
	maxAttempts    int
	attemptTimeout time.Duration
	clock          Clock
	rand           Rand
	classifier     Classifier
	retryThrottles bool
	maxHint        time.Duration
	maxHintSet     bool
	budget         *Budget
	onRetry        func(int, time.Duration, error)
}

// New returns the policy of the package defaults modified by opts.
func New(opts ...Option) *Policy {
	p := &Policy{
		unit:           DefaultUnit,
		maxBackoff:     DefaultMaxBackoff,
		deadline:       DefaultDeadline,
		clock:          SystemClock{},
		rand:           globalRand{},
		classifier:     DefaultClassifier(),
		retryThrottles: true,
	}
	for _, o := range opts {
		if o != nil {
			o(p)
		}
	}
	if p.schedule == nil {
		p.schedule = Exponential{Unit: p.unit, Max: p.maxBackoff}
	}
	return p
}

// Clock returns the policy's clock. It, and the other accessors below
// (Budget, MaxAttempts, Deadline, Schedule, Classify, Wait, Notify), let a
// retry loop other than [Policy.Do] (such as the AWS SDK adapter in
// retry/awsretry) follow the policy; callers of Do and Transport do not
// need them.
func (p *Policy) Clock() Clock { return p.clock }

// Budget returns the budget set by [WithBudget], or nil when the policy has
// none. A retry loop withdraws from it before each retry.
func (p *Policy) Budget() *Budget { return p.budget }

// MaxAttempts returns the cap on attempts set by [WithMaxAttempts], first
// attempt included; 0 means no cap other than the deadline.
func (p *Policy) MaxAttempts() int { return p.maxAttempts }

// Deadline returns how long a call may go on retrying, set by
// [WithDeadline] and counted from its first attempt: no wait that would end
// past it is started. 0 means only the context's deadline applies.
func (p *Policy) Deadline() time.Duration { return max(p.deadline, 0) }

// Classify returns the class of err under the policy: the classifier's
// verdict, with [Throttle] turned into [NotRetryable] when throttle retries
// are off.
func (p *Policy) Classify(err error) Class {
	if err == nil {
		return NotRetryable
	}
	c := p.classifier.Classify(err)
	if c == Throttle && !p.retryThrottles {
		return NotRetryable
	}
	return c
}

// Wait returns the wait before retry n (0 for the first retry) after err: the
// schedule's delay given the previous wait prev, raised to the server's hint
// carried by err if that is longer. The hint is first clamped to the hint
// ceiling: maximum_backoff unless [WithMaxHint] set another.
func (p *Policy) Wait(n int, prev time.Duration, err error, now time.Time) time.Duration {
	d := max(p.schedule.Delay(n, prev, p.rand), 0)
	ceiling := p.hintCeiling()
	if ceiling <= 0 {
		return d
	}
	var h interface {
		RetryAfter(time.Time) (time.Duration, bool)
	}
	if errors.As(err, &h) {
		if hint, ok := h.RetryAfter(now); ok {
			d = max(d, min(hint, ceiling))
		}
	}
	return d
}

// hintCeiling returns the longest wait a server's hint may ask for: the
// one set by WithMaxHint, or else maximum_backoff. Non-positive means hints
// are ignored.
func (p *Policy) hintCeiling() time.Duration {
	if p.maxHintSet {
		return p.maxHint
	}
	if p.maxBackoff <= 0 {
		return DefaultMaxBackoff
	}
	return p.maxBackoff
}

// Notify calls the [OnRetry] hook, if any, with the number of the attempt
// that failed, the wait about to start and that attempt's error. Retry loops
// other than [Policy.Do] (such as the AWS SDK adapter) call it before each
// wait.
func (p *Policy) Notify(attempt int, delay time.Duration, err error) {
	if p.onRetry != nil {
		p.onRetry(attempt, delay, err)
	}
}

// attemptHooks lets Transport act on the loop's decisions.
type attemptHooks struct {
	// discard is called when an attempt's result will not be returned,
	// before the wait.
	discard func()
	// ownTimeout tells the loop that fn applies the attempt timeout itself.
	ownTimeout bool
}

// Do calls fn until it succeeds, returns an error that is not retried, or
// the policy gives up; see [Do].
func (p *Policy) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	return p.run(ctx, fn, attemptHooks{})
}

func (p *Policy) run(ctx context.Context, fn func(context.Context) error, hooks attemptHooks) error {
	if err := ctx.Err(); err != nil {
		return &Error{Attempts: 0, Err: err, Reason: err}
	}
	if p.budget != nil {
		p.budget.Begin()
	}
	var deadline time.Time
	start := p.clock.Now()
	if p.deadline > 0 {
		deadline = start.Add(p.deadline)
	}
	if d, ok := ctx.Deadline(); ok && (deadline.IsZero() || d.Before(deadline)) {
		deadline = d
	}
	var (
		prev     time.Duration
		lastCost float64
	)
	for attempt := 1; ; attempt++ {
		var err error
		if hooks.ownTimeout {
			err = fn(ctx)
		} else {
			err = p.attempt(ctx, fn)
		}
		if err == nil {
			if p.budget != nil {
				p.budget.Succeeded(attempt == 1, lastCost)
			}
			return nil
		}
		if cerr := ctx.Err(); cerr != nil {
			return &Error{Attempts: attempt, Err: err, Reason: cerr}
		}
		class := p.Classify(err)
		if class == NotRetryable {
			return &Error{Attempts: attempt, Err: err}
		}
		if p.maxAttempts > 0 && attempt >= p.maxAttempts {
			return &Error{Attempts: attempt, Err: err, Reason: ErrAttemptsExhausted}
		}
		now := p.clock.Now()
		delay := p.Wait(attempt-1, prev, err, now)
		if !deadline.IsZero() && delay > deadline.Sub(now) {
			return &Error{Attempts: attempt, Err: err, Reason: ErrDeadline}
		}
		if p.budget != nil {
			cost, berr := p.budget.Withdraw(class)
			if berr != nil {
				return &Error{Attempts: attempt, Err: err, Reason: berr}
			}
			lastCost = cost
		}
		if hooks.discard != nil {
			hooks.discard()
		}
		p.Notify(attempt, delay, err)
		if serr := p.clock.Sleep(ctx, delay); serr != nil {
			return &Error{Attempts: attempt, Err: err, Reason: serr}
		}
		prev = delay
	}
}

func (p *Policy) attempt(ctx context.Context, fn func(context.Context) error) error {
	if p.attemptTimeout <= 0 {
		return fn(ctx)
	}
	actx, cancel := context.WithTimeout(ctx, p.attemptTimeout)
	defer cancel()
	return fn(actx)
}

// Do calls fn until it succeeds, returns an error that is not retried, or
// the policy built from opts gives up: the next wait would cross the
// deadline, the budget is empty, the attempts are used up, or ctx is done.
// It returns nil on success and otherwise an [*Error] wrapping the last
// error of fn.
//
// Do cannot tell whether fn is safe to repeat; call it only with operations
// that are (idempotent ones, or ones carrying an idempotency key). Each
// call builds a new [Policy]; to share one, use [Policy.Do].
func Do(ctx context.Context, fn func(ctx context.Context) error, opts ...Option) error {
	return New(opts...).Do(ctx, fn)
}

// DoValue is [Do] for functions that return a value. It returns the value of
// the successful attempt, or the zero value and an [*Error].
func DoValue[T any](ctx context.Context, fn func(ctx context.Context) (T, error), opts ...Option) (T, error) {
	return DoValueWithPolicy(ctx, New(opts...), fn)
}

// DoValueWithPolicy is [DoValue] under an existing policy.
func DoValueWithPolicy[T any](ctx context.Context, p *Policy, fn func(ctx context.Context) (T, error)) (T, error) {
	var out T
	err := p.Do(ctx, func(ctx context.Context) error {
		v, err := fn(ctx)
		if err == nil {
			out = v
		}
		return err
	})
	if err != nil {
		var zero T
		return zero, err
	}
	return out, nil
}

// Schedule returns the policy's backoff schedule: the one set by
// [WithSchedule], or the [Exponential] built from [WithUnit] and
// [WithMaxBackoff].
func (p *Policy) Schedule() Schedule { return p.schedule }
