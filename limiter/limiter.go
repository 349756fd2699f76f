// Package limiter defines the interface between tollgate's front doors and
// the stores that hold bucket state.
//
// A [Limiter] takes tokens from named buckets. The arithmetic is always that
// of package bucket; stores differ only in where the one-integer state of
// each bucket lives: in this process (limiter/memory) or in Redis, shared
// by many gateway nodes (limiter/redis). Every store passes the conformance
// suite in limiter/limitertest.
//
// Keys are opaque strings. A key may contain a hash tag in braces, as
// [quota.Key] writes them ("{ecs/123456789012}:us-east-1:cluster-read"):
// stores that partition their keyspace keep keys with one tag together.
//
// [quota.Key]: https://pkg.go.dev/github.com/tollgate/tollgate/quota#Key
package limiter

import (
	"context"
	"errors"
	"fmt"

	"github.com/tollgate/tollgate/bucket"
)

// Limiter takes tokens from token buckets.
//
// The limit is passed with every call rather than stored, so that a config
// reload applies at once without resetting any bucket: a bucket's state is
// the instant it will be full again, meaningful under any limit.
type Limiter interface {
	// Take takes n tokens from the bucket key with the given limit. A take
	// of 0 tokens reports the bucket's state without changing it. When the
	// store cannot decide (it is unreachable, or ctx ends first) Take
	// returns an error and the zero Decision — unless the store has a
	// failure policy that decides for it, as limiter/redis does. A take
	// larger than the limit's capacity returns an error wrapping
	// bucket.ErrExceedsCapacity along with its denied decision.
	//
	// A store must not keep key beyond the call without copying it.
	Take(ctx context.Context, key string, limit bucket.Limit, n int64) (bucket.Decision, error)

	// TakeBatch decides reqs in order, as if each were a separate Take,
	// and writes decision i to out[i]; len(out) must equal len(reqs). A
	// request larger than its capacity is denied with RetryAfter
	// bucket.Never; an error means the store decided nothing.
	TakeBatch(ctx context.Context, reqs []Request, out []bucket.Decision) error
}

// Request is one take of a batch.
type Request struct {
	Key    string       // the bucket's name
	Limit  bucket.Limit // its capacity and refill rate
	Tokens int64        // tokens to take; 0 looks without taking
}

// ErrInvalidRequest is wrapped by errors for requests no store can decide:
// a negative token count, a zero limit, mismatched batch lengths.
var ErrInvalidRequest = errors.New("limiter: invalid request")

// Check validates one take before any store sees it.
func Check(limit bucket.Limit, n int64) error {
	if limit.IsZero() {
		return fmt.Errorf("%w: zero limit", ErrInvalidRequest)
	}
	if n < 0 {
		return fmt.Errorf("%w: negative token count %d", ErrInvalidRequest, n)
	}
	if n > limit.Capacity() {
		return fmt.Errorf("take of %d tokens from a bucket of %d: %w", n, limit.Capacity(), bucket.ErrExceedsCapacity)
	}
	return nil
}

// CheckBatch validates a batch before any store sees it: lengths match and
// no request has a negative count or a zero limit. Requests larger than
// their capacity are valid; they are denied.
func CheckBatch(reqs []Request, out []bucket.Decision) error {
	if len(reqs) != len(out) {
		return fmt.Errorf("%w: %d requests but %d decisions", ErrInvalidRequest, len(reqs), len(out))
	}
	for i, r := range reqs {
		if r.Limit.IsZero() {
			return fmt.Errorf("%w: request %d has a zero limit", ErrInvalidRequest, i)
		}
		if r.Tokens < 0 {
			return fmt.Errorf("%w: request %d has negative token count %d", ErrInvalidRequest, i, r.Tokens)
		}
	}
	return nil
}

// Health is a store's answer to a readiness probe.
type Health struct {
	// Ready is false when the node should not take traffic because of
	// its store: the store cannot decide, and its failure policy denies.
	Ready bool
	// Status describes the store's state in one line for people, such as
	// "memory" or "redis up (on failure: local)".
	Status string
}

// HealthReporter is implemented by stores that describe their state to
// readiness probes (a gateway's /readyz).
type HealthReporter interface {
	// Health reports the store's state now. It returns within the
	// store's own timeout, or when ctx ends.
	Health(ctx context.Context) Health
}
