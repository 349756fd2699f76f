// Package awsretry adapts a [retry.Policy] to the AWS SDK for Go v2, so that
// SDK clients retry with the policy's schedule, classifier, deadline and
// budget instead of the SDK's standard retryer.
//
// Installing a [Retryer] as the client's Retryer is enough:
//
//	client := ecs.NewFromConfig(cfg, func(o *ecs.Options) {
//		o.Retryer = awsretry.New()
//	})
//
// In that form the SDK's retry interface carries no per-operation state, so
// the wait before retry n is the schedule's delay for n (from the attempt
// number the SDK passes), without the previous wait (only
// [retry.DecorrelatedJitter] uses it); the policy's deadline is enforced as a cap on
// attempts (see [Retryer.MaxAttempts]); the context's deadline ends a wait
// through the SDK's sleep; and a budget is charged for retries and refunded
// for successful ones, but neither counts calls nor refunds first-attempt
// successes.
//
// [Retryer.AddMiddleware] adds precision: it gives each operation its own
// state (start time, attempts, previous wait), so the policy's and the
// context's deadlines are checked before each wait and a wait that would
// cross one is refused at once, and the budget sees whole calls.
// [Retryer.Apply] installs both for an aws.Config; for a single client:
//
//	r := awsretry.New()
//	client := ecs.NewFromConfig(cfg, func(o *ecs.Options) {
//		o.Retryer = r
//		o.APIOptions = append(o.APIOptions, r.AddMiddleware)
//	})
//
// The SDK performs the waits itself with a real timer (its retry middleware
// sleeps for the delay the retryer returns), so the policy's [retry.Clock]
// only tells the time for the deadline. With AddMiddleware, a wait that
// would cross the deadline is refused before it starts: the operation fails
// at once with the last error joined with [retry.ErrDeadline]. An empty
// budget fails it with [retry.ErrBudgetExhausted].
//
// The delay returned here already honours Retry-After and X-Amz-Retry-After
// up to the policy's hint ceiling. When an X-Amz-Retry-After hint exceeds
// the ceiling, the SDK's own rule lengthens the wait by up to 5 s beyond the
// retryer's delay; the deadline check and the OnRetry hook account for that.
package awsretry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sdkretry "github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/tollgate/tollgate/retry"
)

// Retryer implements aws.RetryerV2 with a [retry.Policy]. It is safe for
// concurrent use by many operations and clients.
type Retryer struct {
	policy *retry.Policy
	// derivedMax is MaxAttempts when the policy sets no cap: the most
	// attempts whose shortest waits fit in the policy's deadline.
	derivedMax int
}

var _ aws.RetryerV2 = (*Retryer)(nil)

// DefaultMaxAttempts caps the attempts of an operation run without
// [Retryer.AddMiddleware] when the policy sets no cap and its deadline does
// not bound them (no deadline, or a schedule whose waits can be 0).
const DefaultMaxAttempts = 20

// New returns a Retryer for the policy built from opts: by default the
// exponential schedule (1+r, 2+r, 4+r … s, capped at 32 s), a 300 s deadline, no cap on
// attempts and no budget. Add retry.WithBudget(retry.DefaultTokenBudget())
// for the SDK's retry quota.
func New(opts ...retry.Option) *Retryer {
	return NewWithPolicy(retry.New(opts...))
}

// NewWithPolicy returns a Retryer for p.
func NewWithPolicy(p *retry.Policy) *Retryer {
	return &Retryer{policy: p, derivedMax: attemptsWithin(p)}
}

// zeroRand draws 0, the shortest wait of a schedule.
type zeroRand struct{}

func (zeroRand) Float64() float64 { return 0 }

// attemptsWithin returns the most attempts whose shortest waits fit in p's
// deadline, at most DefaultMaxAttempts.
func attemptsWithin(p *retry.Policy) int {
	total, limit := time.Duration(0), p.Deadline()
	if limit <= 0 {
		return DefaultMaxAttempts
	}
	prev := time.Duration(0)
	for n := 0; n < DefaultMaxAttempts-1; n++ {
		d := p.Schedule().Delay(n, prev, zeroRand{})
		if total+d > limit {
			return n + 1
		}
		total += d
		prev = d
	}
	return DefaultMaxAttempts
}

// Apply installs r in cfg: as cfg.Retryer and as a middleware in
// cfg.APIOptions, for every client made from cfg.
func (r *Retryer) Apply(cfg *aws.Config) {
	cfg.Retryer = func() aws.Retryer { return r }
	cfg.APIOptions = append(cfg.APIOptions, r.AddMiddleware)
}

// opState is what the retryer knows about one operation.
type opState struct {
	started  bool
	start    time.Time
	attempts int
	prev     time.Duration
	// pending is the wait decided by GetRetryToken, which RetryDelay
	// returns next.
	pending time.Duration
}

// AddMiddleware gives the operation whose stack it is added to its own
// state: it replaces the SDK's retry middleware in stack with one that runs
// r with a per-operation record of the start time, the attempts and the
// previous wait. It returns an error when the stack's retry middleware is
// not the SDK's (retry.Attempt); a stack without one is left as it is. The
// replacement keeps the SDK middleware's logging, metrics and clock skew
// settings, and uses r whatever retryer the client was given.
func (r *Retryer) AddMiddleware(stack *middleware.Stack) error {
	old, ok := stack.Finalize.Get("Retry")
	if !ok {
		return nil
	}
	sdk, ok := old.(*sdkretry.Attempt)
	if !ok {
		return fmt.Errorf("awsretry: the stack's retry middleware is a %T, not the SDK's", old)
	}
	op := &operation{r: r, st: &opState{}}
	m := sdkretry.NewAttemptMiddleware(op, smithyhttp.RequestCloner, func(m *sdkretry.Attempt) {
		m.LogAttempts = sdk.LogAttempts
		m.OperationMeter = sdk.OperationMeter
		m.ClientSkew = sdk.ClientSkew
		m.DisableClockSkewCorrection = sdk.DisableClockSkewCorrection
	})
	_, err := stack.Finalize.Swap("Retry", m)
	return err
}

// IsErrorRetryable reports whether the policy retries err.
func (r *Retryer) IsErrorRetryable(err error) bool {
	return r.policy.Classify(err) != retry.NotRetryable
}

// MaxAttempts returns the policy's cap on attempts or, when it sets none,
// the most attempts whose shortest waits fit in the policy's deadline (at
// most [DefaultMaxAttempts]). Without [Retryer.AddMiddleware] this is how
// the deadline ends the retries; with it, the deadline itself is checked
// before each wait, and the cap does not stop a retry earlier.
func (r *Retryer) MaxAttempts() int {
	if n := r.policy.MaxAttempts(); n > 0 {
		return n
	}
	return r.derivedMax
}

// RetryDelay returns the wait before the retry that follows attempt (1 for
// the first attempt) after opErr: the schedule's delay for retry
// attempt-1, raised to a server's hint. It calls the policy's OnRetry hook
// with the wait the SDK will sleep.
func (r *Retryer) RetryDelay(attempt int, opErr error) (time.Duration, error) {
	p := r.policy
	d := p.Wait(max(attempt-1, 0), 0, hinted{opErr}, p.Clock().Now())
	p.Notify(max(attempt, 1), sdkAdjusted(d, opErr), opErr)
	return d, nil
}

// GetRetryToken pays for the retry after opErr from the policy's budget, if
// any; it returns retry.ErrBudgetExhausted when the budget cannot pay, and
// the SDK then fails the operation at once with opErr joined with that
// error. The returned release function refunds a successful retry.
func (r *Retryer) GetRetryToken(ctx context.Context, opErr error) (func(error) error, error) {
	return r.withdraw(opErr)
}

func (r *Retryer) withdraw(opErr error) (func(error) error, error) {
	p := r.policy
	b := p.Budget()
	if b == nil {
		return nopRelease, nil
	}
	cost, err := b.Withdraw(p.Classify(opErr))
	if err != nil {
		return nil, err
	}
	return func(err error) error {
		if err == nil {
			b.Succeeded(false, cost)
		}
		return nil
	}, nil
}

// GetAttemptToken is called before every attempt. Without per-operation
// state it cannot tell a first attempt from a retry, so it does nothing.
func (r *Retryer) GetAttemptToken(context.Context) (func(error) error, error) {
	return nopRelease, nil
}

// GetInitialToken is the deprecated form of GetAttemptToken, kept for
// aws.Retryer; it does nothing.
func (r *Retryer) GetInitialToken() func(error) error { return nopRelease }

func nopRelease(error) error { return nil }

// operation is the retryer of one operation, installed by AddMiddleware.
// The SDK calls it from the operation's goroutine only, one attempt after
// another, so its state needs no lock.
type operation struct {
	r  *Retryer
	st *opState
}

func (o *operation) IsErrorRetryable(err error) bool { return o.r.IsErrorRetryable(err) }

// MaxAttempts is the policy's cap: the deadline is checked before each wait.
func (o *operation) MaxAttempts() int { return o.r.policy.MaxAttempts() }

func (o *operation) RetryDelay(int, error) (time.Duration, error) { return o.st.pending, nil }

func (o *operation) GetInitialToken() func(error) error { return nopRelease }

func (o *operation) GetAttemptToken(context.Context) (func(error) error, error) {
	st, p := o.st, o.r.policy
	if !st.started {
		st.started, st.start = true, p.Clock().Now()
	}
	st.attempts++
	b := p.Budget()
	if b == nil || st.attempts != 1 {
		return nopRelease, nil
	}
	b.Begin()
	return func(err error) error {
		if err == nil {
			b.Succeeded(true, 0)
		}
		return nil
	}, nil
}

func (o *operation) GetRetryToken(ctx context.Context, opErr error) (func(error) error, error) {
	st, p := o.st, o.r.policy
	now := p.Clock().Now()
	var deadline time.Time
	if d := p.Deadline(); d > 0 {
		deadline = st.start.Add(d)
	}
	if d, ok := ctx.Deadline(); ok && (deadline.IsZero() || d.Before(deadline)) {
		deadline = d
	}
	delay := p.Wait(max(st.attempts-1, 0), st.prev, hinted{opErr}, now)
	if !deadline.IsZero() && sdkAdjusted(delay, opErr) > deadline.Sub(now) {
		return nil, retry.ErrDeadline
	}
	release, err := o.r.withdraw(opErr)
	if err != nil {
		return nil, err
	}
	st.prev, st.pending = delay, delay
	p.Notify(max(st.attempts, 1), sdkAdjusted(delay, opErr), opErr)
	return release, nil
}

// hinted exposes the Retry-After and X-Amz-Retry-After headers of the HTTP
// response behind an SDK error to [retry.Policy.Wait].
type hinted struct{ err error }

func (h hinted) Error() string { return h.err.Error() }
func (h hinted) Unwrap() error { return h.err }

// RetryAfter returns the server's hint from the response headers, if any.
func (h hinted) RetryAfter(now time.Time) (time.Duration, bool) {
	var re *smithyhttp.ResponseError
	if !errors.As(h.err, &re) || re.Response == nil || re.Response.Response == nil {
		return 0, false
	}
	return retry.HeaderHint(re.Response.Header, now)
}

// sdkAdjusted returns the wait the SDK's retry middleware will actually
// sleep for delay: it raises the delay towards an X-Amz-Retry-After value,
// by at most 5 s.
func sdkAdjusted(delay time.Duration, opErr error) time.Duration {
	var re *smithyhttp.ResponseError
	if !errors.As(opErr, &re) || re.Response == nil || re.Response.Response == nil {
		return delay
	}
	v := re.Response.Header.Get("X-Amz-Retry-After")
	if v == "" {
		return delay
	}
	ra, err := retry.ParseAmzRetryAfter(v)
	if err != nil {
		return delay
	}
	return min(max(ra, delay), delay+5*time.Second)
}
