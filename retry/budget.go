package retry

import (
	"errors"
	"sync"
)

// ErrBudgetExhausted is reported (through [*Error]) when a retry was due but
// the [Budget] had too few tokens left to pay for it.
var ErrBudgetExhausted = errors.New("retry: retry budget exhausted")

// Default shape of [NewTokenBudget], the numbers of the AWS SDK for Go v2's
// standard retryer.
const (
	// DefaultBudgetTokens is the capacity of the token budget.
	DefaultBudgetTokens = 500
	// DefaultRetryCost is what a retry after a non-throttling error costs.
	DefaultRetryCost = 14
	// DefaultThrottleRetryCost is what a retry after a throttling error costs.
	DefaultThrottleRetryCost = 5
	// DefaultFirstSuccessRefund is returned when a call succeeds on its
	// first attempt.
	DefaultFirstSuccessRefund = 1
	// DefaultRetryRatio is the share of retries to calls of [NewRatioBudget].
	DefaultRetryRatio = 0.1
)

// A Budget is a client-side token bucket shared by many calls that bounds
// how much extra load retries put on a failing dependency: each retry must
// withdraw tokens first, and when the bucket is empty the call fails at once
// with [ErrBudgetExhausted] instead of retrying.
//
// A Budget is safe for concurrent use. The retry loop calls Begin once per
// call, Withdraw before each retry and Succeeded when a call succeeds; other
// retry loops (such as the AWS SDK adapter) may do the same.
//
// The zero Budget charges nothing for a retry and so never refuses one: it
// is unlimited. Use [NewTokenBudget], [DefaultTokenBudget] or
// [NewRatioBudget] for a bounding one.
type Budget struct {
	mu     sync.Mutex
	tokens float64

	capacity     float64
	retryCost    float64
	throttleCost float64
	firstRefund  float64
	refundRetry  bool
	perCall      float64
}

// NewTokenBudget returns a budget in the AWS SDK's shape: it starts full
// with capacity tokens, a retry after a throttling error costs
// throttleCost, any other retry costs retryCost, a call that succeeds on its
// first attempt returns firstSuccessRefund tokens, and a retry that
// succeeds returns its own cost. Tokens never exceed capacity. Negative
// arguments are treated as zero.
//
// NewTokenBudget(DefaultBudgetTokens, DefaultRetryCost,
// DefaultThrottleRetryCost, DefaultFirstSuccessRefund) is the SDK's default.
func NewTokenBudget(capacity, retryCost, throttleCost, firstSuccessRefund float64) *Budget {
	capacity = max(capacity, 0)
	return &Budget{
		tokens:       capacity,
		capacity:     capacity,
		retryCost:    max(retryCost, 0),
		throttleCost: max(throttleCost, 0),
		firstRefund:  max(firstSuccessRefund, 0),
		refundRetry:  true,
	}
}

// DefaultTokenBudget returns the AWS SDK's default budget: 500 tokens,
// throttle retry 5, other retry 14, first-attempt success refunds 1, a
// successful retry refunds its cost.
func DefaultTokenBudget() *Budget {
	return NewTokenBudget(DefaultBudgetTokens, DefaultRetryCost, DefaultThrottleRetryCost, DefaultFirstSuccessRefund)
}

// NewRatioBudget returns a budget that holds retries to at most ratio times
// the number of calls, plus a burst: every call deposits ratio tokens, every
// retry costs one token, and the bucket starts full at burst tokens and
// never holds more. Over any stretch of time, retries ≤ ratio·calls + burst.
// NewRatioBudget(DefaultRetryRatio, 10) allows retries for at most 10 % of
// calls in the long run. A negative ratio is treated as zero, and a burst
// below 1 as 1: a bucket that never holds a whole token would never pay for
// a retry.
func NewRatioBudget(ratio, burst float64) *Budget {
	burst = max(burst, 1)
	return &Budget{
		tokens:       burst,
		capacity:     burst,
		retryCost:    1,
		throttleCost: 1,
		perCall:      max(ratio, 0),
	}
}

// Begin records the start of a call (its first attempt). A ratio budget
// deposits its per-call share here.
func (b *Budget) Begin() {
	if b.perCall == 0 {
		return
	}
	b.mu.Lock()
	b.tokens = min(b.tokens+b.perCall, b.capacity)
	b.mu.Unlock()
}

// Withdraw takes the price of one retry after an error of class c. It
// returns the cost taken, or [ErrBudgetExhausted] and takes nothing when
// fewer tokens are left.
func (b *Budget) Withdraw(c Class) (cost float64, err error) {
	cost = b.retryCost
	if c == Throttle {
		cost = b.throttleCost
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	// The epsilon absorbs the rounding of repeated fractional deposits
	// (ten deposits of 0.1 make 0.9999999999999999).
	if b.tokens+1e-9 < cost {
		return 0, ErrBudgetExhausted
	}
	b.tokens = max(b.tokens-cost, 0)
	return cost, nil
}

// Succeeded records a successful call. firstAttempt tells whether it
// succeeded without retrying; otherwise lastCost is what its last retry
// withdrew. A token budget refunds the first-success refund or lastCost;
// a ratio budget refunds nothing.
func (b *Budget) Succeeded(firstAttempt bool, lastCost float64) {
	var refund float64
	switch {
	case firstAttempt:
		refund = b.firstRefund
	case b.refundRetry:
		refund = max(lastCost, 0)
	}
	if refund == 0 {
		return
	}
	b.mu.Lock()
	b.tokens = min(b.tokens+refund, b.capacity)
	b.mu.Unlock()
}

// Tokens returns the number of tokens left.
func (b *Budget) Tokens() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.tokens
}
