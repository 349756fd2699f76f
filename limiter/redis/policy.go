package redis

// This file is the failure policy: what a store decides when Redis
// does not answer.

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/tollgate/tollgate/bucket"
)

// FailurePolicy says how a store decides when Redis cannot answer.
type FailurePolicy int

const (
	// FailLocal decides from the state Redis last reported for the key,
	// charged with what this node sent or admitted since, under the
	// node's share of the limit (see Failures in the package
	// documentation). It is the default: one node never admits more than
	// the bucket allows, and N nodes (counted by Store.Run, or with
	// Options.Nodes ≥ N) admit together at most one bucket's worth during
	// an outage, where FailOpen admits
	// everything that fits the capacity, however often it is asked.
	FailLocal FailurePolicy = iota
	// FailOpen decides as if the bucket were full: every take that fits
	// the capacity is allowed. A Redis outage (or a slow Redis) then costs
	// all throttling for its duration, but never the availability of an
	// API behind the gateway.
	FailOpen
	// FailClosed decides as if the bucket were empty: every take of one
	// token or more is denied, retry after the time its tokens take to
	// refill.
	FailClosed
)

// String returns "local", "open" or "closed": the words of tollgate's
// --store-on-failure flag and store.on_failure setting.
func (p FailurePolicy) String() string {
	switch p {
	case FailLocal:
		return "local"
	case FailOpen:
		return "open"
	case FailClosed:
		return "closed"
	}
	return "FailurePolicy(" + strconv.Itoa(int(p)) + ")"
}

// ErrInvalidPolicy is wrapped by the error of [ParseFailurePolicy].
var ErrInvalidPolicy = errors.New("redis: invalid failure policy")

// ParseFailurePolicy parses "local", "open" or "closed", the forms
// [FailurePolicy.String] writes and tollgate's flags and config files use,
// or the long forms "fail-local", "fail-open" and "fail-closed".
func ParseFailurePolicy(s string) (FailurePolicy, error) {
	switch s {
	case "fail-local", "local":
		return FailLocal, nil
	case "fail-open", "open":
		return FailOpen, nil
	case "fail-closed", "closed":
		return FailClosed, nil
	}
	return 0, fmt.Errorf("%w %q: want local, open or closed (or fail-local, fail-open, fail-closed)", ErrInvalidPolicy, s)
}

// MarshalText implements [encoding.TextMarshaler] with [FailurePolicy.String].
func (p FailurePolicy) MarshalText() ([]byte, error) {
	if p != FailLocal && p != FailOpen && p != FailClosed {
		return nil, fmt.Errorf("%w: %d", ErrInvalidPolicy, int(p))
	}
	return []byte(p.String()), nil
}

// UnmarshalText implements [encoding.TextUnmarshaler] with
// [ParseFailurePolicy], so config files can name a policy.
func (p *FailurePolicy) UnmarshalText(b []byte) error {
	v, err := ParseFailurePolicy(string(b))
	if err != nil {
		return err
	}
	*p = v
	return nil
}

// errTimeout is the logged cause of takes Redis did not answer in time.
var errTimeout = fmt.Errorf("no answer from redis in time: %w", context.DeadlineExceeded)

// errOutage is the logged cause of takes decided while the breaker is open.
var errOutage = errors.New("redis store in an outage: pipelines failed in a row, probing")

// timedOut is the decision of a take Redis did not answer in time; ent
// and fate are its shadow entry and fate (nil if it was never sent).
func (s *Store) timedOut(key string, limit bucket.Limit, n int64, ent *shadowEntry, fate *uint8) bucket.Decision {
	s.fallbackN.Add(1)
	s.noteDown(errTimeout, -1)
	return s.fallback(key, limit, n, ent, fate)
}

// failFast is the decision of a take while the breaker is open.
func (s *Store) failFast(key string, limit bucket.Limit, n int64) bucket.Decision {
	s.fallbackN.Add(1)
	s.noteDown(errOutage, -1)
	return s.fallback(key, limit, n, nil, nil)
}

// fallback is the decision of the failure policy: from what Redis last
// said of key (FailLocal), of a full bucket (FailOpen) or of an empty one
// (FailClosed, and FailLocal before the nodes sharing Redis are counted).
func (s *Store) fallback(key string, limit bucket.Limit, n int64, ent *shadowEntry, fate *uint8) bucket.Decision {
	if s.shadow != nil {
		nodes := s.count.divisor()
		return s.shadow.decide(key, ent, limit, share(limit, nodes), nodes == 0, n, fate, s.clock())
	}
	var st bucket.State
	if s.policy == FailClosed {
		st = bucket.State(limit.Capacity() * int64(limit.Interval()))
	}
	_, d := limit.TakeAt(st, 0, n)
	return d
}
