// Package awsretry adapts a [retry.Policy] to the AWS SDK for Go v2, so that
// SDK clients retry with the policy's schedule, classifier, deadline and
// budget instead of the SDK's standard retryer.
//
// A [Retryer] is installed in two places: as the client's Retryer, and as a
// middleware that gives each operation the state the SDK's retryer interface
// does not carry (its start time, attempt count and previous wait). [Retryer.Apply]
// does both for an aws.Config; for a single client:
//
//	r := awsretry.New()
//	client := ecs.NewFromConfig(cfg, func(o *ecs.Options) {
//		o.Retryer = r
//		o.APIOptions = append(o.APIOptions, r.AddMiddleware)
//	})
//
// The SDK performs the waits itself with a real timer (its retry middleware
// sleeps for the delay the retryer returns), so the policy's [retry.Clock]
// only tells the time for the deadline. A wait that would cross the deadline
// (the policy's, counted from the operation's start, or the context's) is
// refused before it starts: the operation fails at once with the last error
// joined with [retry.ErrDeadline]. An empty budget fails it with
// [retry.ErrBudgetExhausted].
//
// The delay returned here already honours Retry-After and X-Amz-Retry-After
// up to the policy's hint ceiling. When an X-Amz-Retry-After hint exceeds
// the ceiling, the SDK's own rule lengthens the wait by up to 5 s beyond the
// retryer's delay; the deadline check and the OnRetry hook account for that.
package awsretry

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/tollgate/tollgate/retry"
)

// Retryer implements aws.RetryerV2 with a [retry.Policy]. It is safe for
// concurrent use by many operations and clients.
type Retryer struct {
	policy *retry.Policy
	// pending hands the delay decided in GetRetryToken, which sees the
	// context, to RetryDelay, which the SDK calls next with the same error.
	pending sync.Map
}

var _ aws.RetryerV2 = (*Retryer)(nil)

// New returns a Retryer for the policy built from opts: by default the seed
// schedule (1+r, 2+r, 4+r … s, capped at 32 s), a 300 s deadline, no cap on
// attempts and no budget. Add retry.WithBudget(retry.DefaultTokenBudget())
// for the SDK's retry quota.
func New(opts ...retry.Option) *Retryer {
	return NewWithPolicy(retry.New(opts...))
}

// NewWithPolicy returns a Retryer for p.
func NewWithPolicy(p *retry.Policy) *Retryer {
	return &Retryer{policy: p}
}

// Apply installs r in cfg: as cfg.Retryer and as a middleware in
// cfg.APIOptions, for every client made from cfg.
func (r *Retryer) Apply(cfg *aws.Config) {
	cfg.Retryer = func() aws.Retryer { return r }
	cfg.APIOptions = append(cfg.APIOptions, r.AddMiddleware)
}

type stateKey struct{}

// opState is what the retryer knows about one operation.
type opState struct {
	mu       sync.Mutex
	start    time.Time
	attempts int
	prev     time.Duration
}

// AddMiddleware adds to stack the middleware that records each operation's
// start time and attempts for r. Without it the policy's deadline is not
// known (only the context's applies), a retry's wait cannot depend on the
// previous wait, and the budget treats every attempt as a new call.
func (r *Retryer) AddMiddleware(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("TollgateRetryState",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			st := &opState{start: r.policy.Clock().Now()}
			return next.HandleInitialize(context.WithValue(ctx, stateKey{}, st), in)
		}), middleware.Before)
}

func stateOf(ctx context.Context) *opState {
	st, _ := ctx.Value(stateKey{}).(*opState)
	return st
}

// IsErrorRetryable reports whether the policy retries err.
func (r *Retryer) IsErrorRetryable(err error) bool {
	return r.policy.Classify(err) != retry.NotRetryable
}

// MaxAttempts returns the policy's cap on attempts; 0 means none, and the
// deadline ends the retries.
func (r *Retryer) MaxAttempts() int { return r.policy.MaxAttempts() }

// RetryDelay returns the wait before the retry that follows attempt (1 for
// the first attempt) after opErr: the one decided by GetRetryToken, or,
// when GetRetryToken did not run for opErr, a fresh draw from the schedule.
func (r *Retryer) RetryDelay(attempt int, opErr error) (time.Duration, error) {
	if key, ok := keyOf(opErr); ok {
		if d, found := r.pending.LoadAndDelete(key); found {
			return d.(time.Duration), nil
		}
	}
	return r.policy.Wait(max(attempt-1, 0), 0, hinted{opErr}, r.policy.Clock().Now()), nil
}

// GetRetryToken decides the retry after opErr. It returns retry.ErrDeadline
// when the wait would cross the deadline and retry.ErrBudgetExhausted when
// the budget cannot pay for the retry; the SDK then fails the operation at
// once with opErr joined with that error. The returned release function
// refunds a successful retry to the budget.
func (r *Retryer) GetRetryToken(ctx context.Context, opErr error) (func(error) error, error) {
	p := r.policy
	now := p.Clock().Now()
	st := stateOf(ctx)

	var deadline time.Time
	attempt, prev := 0, time.Duration(0)
	if st != nil {
		st.mu.Lock()
		attempt, prev = st.attempts, st.prev
		if d := p.Deadline(); d > 0 {
			deadline = st.start.Add(d)
		}
		st.mu.Unlock()
	}
	if d, ok := ctx.Deadline(); ok && (deadline.IsZero() || d.Before(deadline)) {
		deadline = d
	}
	delay := p.Wait(max(attempt-1, 0), prev, hinted{opErr}, now)
	if !deadline.IsZero() && sdkAdjusted(delay, opErr) > deadline.Sub(now) {
		return nil, retry.ErrDeadline
	}
	var cost float64
	if b := p.Budget(); b != nil {
		c, err := b.Withdraw(p.Classify(opErr))
		if err != nil {
			return nil, err
		}
		cost = c
	}
	if st != nil {
		st.mu.Lock()
		st.prev = delay
		st.mu.Unlock()
	}
	if key, ok := keyOf(opErr); ok {
		r.pending.Store(key, delay)
	}
	p.Notify(max(attempt, 1), sdkAdjusted(delay, opErr), opErr)
	return func(err error) error {
		if err == nil && p.Budget() != nil {
			p.Budget().Succeeded(false, cost)
		}
		return nil
	}, nil
}

// GetAttemptToken is called before every attempt. It counts the attempt,
// records the start of a call with the budget, and returns a release
// function that refunds a first-attempt success.
func (r *Retryer) GetAttemptToken(ctx context.Context) (func(error) error, error) {
	first := true
	if st := stateOf(ctx); st != nil {
		st.mu.Lock()
		st.attempts++
		first = st.attempts == 1
		st.mu.Unlock()
	}
	b := r.policy.Budget()
	if b == nil || !first {
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

// GetInitialToken is the deprecated form of GetAttemptToken, kept for
// aws.Retryer; it cannot tell attempts apart and does nothing.
func (r *Retryer) GetInitialToken() func(error) error { return nopRelease }

func nopRelease(error) error { return nil }

// keyOf returns opErr as a map key when it is comparable.
func keyOf(err error) (any, bool) {
	if err == nil || !reflect.ValueOf(err).Comparable() {
		return nil, false
	}
	return err, true
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
