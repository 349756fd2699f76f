// Package bucket implements the token-bucket arithmetic of API throttling:
// pure, exact, with no I/O and no locks.
//
// A bucket has a capacity (the burst: the most requests allowed at once) and
// a refill rate (the sustained rate, tokens per second). It starts full;
// every take of n tokens either succeeds and removes n, or fails and changes
// nothing; tokens arrive continuously at the refill rate and are discarded
// while the bucket is full.
//
// The state of a bucket is one integer, [State]: the instant, in Unix
// nanoseconds, at which the bucket will be full again (the "theoretical
// arrival time" of the generic cell rate algorithm, GCRA). A bucket that is
// full — or was never used — has state 0, so a store only has to remember
// buckets that are in debt, can keep each in one machine word, update it
// with a compare-and-swap, and mirror the same arithmetic in a Redis script.
//
// All arithmetic is on integers. A limit's refill is held as the interval
// between two tokens in whole nanoseconds: rates whose interval is a whole
// number of nanoseconds (every rate of the ECS and Cloud Map tables, 0.5/s,
// 1,000,000/s …) are exact with no drift however long a bucket runs; any
// other rate has its interval rounded up to the next nanosecond, which never
// admits more than the configured rate (see [NewLimit]).
package bucket

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// State is the whole state of one bucket: the Unix time in nanoseconds at
// which it will be full again. Any value at or before the current time means
// the bucket is full; the zero State is a full bucket.
type State int64

// Never is the RetryAfter of a take that can never succeed because it asks
// for more tokens than the bucket's capacity.
const Never = time.Duration(math.MaxInt64)

// maxBurstWindow bounds capacity × interval, the time an empty bucket needs
// to refill, so that state arithmetic cannot overflow for any realistic
// clock (Unix nanoseconds stay below 2^62 until the year 2116).
const maxBurstWindow = int64(1) << 61

// ErrInvalidLimit is wrapped by the errors of [NewLimit].
var ErrInvalidLimit = errors.New("bucket: invalid limit")

// ErrExceedsCapacity reports a take of more tokens than a bucket can ever
// hold. Stores return it wrapped; [Limit.Take] reports the same case with a
// RetryAfter of [Never].
var ErrExceedsCapacity = errors.New("bucket: take exceeds capacity")

// Limit is the shape of a bucket: its capacity and refill rate. The zero
// Limit is invalid; make one with [NewLimit].
type Limit struct {
	capacity int64
	perSec   float64
	interval int64 // nanoseconds between two tokens
}

// NewLimit returns the limit of a bucket holding at most capacity tokens and
// refilled with perSecond tokens per second. capacity must be at least 1 and
// perSecond greater than 0; an empty bucket must refill within about 73
// years.
//
// The refill is kept as the interval between two tokens in whole
// nanoseconds, 1e9/perSecond. When that is not a whole number it is rounded
// up, so the effective rate is never above perSecond: at 3 tokens/s the
// interval is 333,333,334 ns, 2 ns short of 1 s every 3 tokens.
func NewLimit(capacity int64, perSecond float64) (Limit, error) {
	if capacity < 1 {
		return Limit{}, fmt.Errorf("%w: capacity %d must be at least 1", ErrInvalidLimit, capacity)
	}
	if !(perSecond > 0) || math.IsInf(perSecond, 0) {
		return Limit{}, fmt.Errorf("%w: refill rate %v must be greater than 0", ErrInvalidLimit, perSecond)
	}
	exact := 1e9 / perSecond
	interval := math.Ceil(exact)
	if r := math.Round(exact); r*perSecond == 1e9 {
		interval = r // a whole number of nanoseconds, up to float rounding
	}
	if exact < 1 {
		return Limit{}, fmt.Errorf("%w: refill rate %v is above 1e9 tokens per second", ErrInvalidLimit, perSecond)
	}
	if interval > float64(maxBurstWindow) || float64(capacity)*interval > float64(maxBurstWindow) {
		return Limit{}, fmt.Errorf("%w: capacity %d at %v per second takes too long to refill", ErrInvalidLimit, capacity, perSecond)
	}
	return Limit{capacity: capacity, perSec: perSecond, interval: int64(interval)}, nil
}

// MustLimit is like [NewLimit] but panics on an invalid limit. It is for
// limits written in code, such as built-in tables.
func MustLimit(capacity int64, perSecond float64) Limit {
	l, err := NewLimit(capacity, perSecond)
	if err != nil {
		panic(err)
	}
	return l
}

// Capacity is the most tokens the bucket holds: the burst.
func (l Limit) Capacity() int64 { return l.capacity }

// RefillPerSecond is the configured refill rate: the sustained rate.
func (l Limit) RefillPerSecond() float64 { return l.perSec }

// Interval is the time between two tokens, as the arithmetic uses it.
func (l Limit) Interval() time.Duration { return time.Duration(l.interval) }

// IsZero reports whether l is the zero (invalid) Limit.
func (l Limit) IsZero() bool { return l.interval == 0 }

// String formats l as "capacity/refill per second", e.g. "50/20".
func (l Limit) String() string {
	return fmt.Sprintf("%d/%g", l.capacity, l.perSec)
}

// Decision is the outcome of one take.
type Decision struct {
	// Allowed reports whether the tokens were taken.
	Allowed bool
	// Limit is the limit the decision was made under.
	Limit Limit
	// Remaining is the number of whole tokens left after the take.
	Remaining int64
	// RetryAfter is how long until the same take would succeed: zero when
	// it was allowed, Never when it asks for more than the capacity.
	RetryAfter time.Duration
	// ResetAfter is how long until the bucket is full again.
	ResetAfter time.Duration
}

// Take takes n tokens at instant now from a bucket in state s. It returns
// the new state and the decision. A denied take returns s unchanged: a
// rejected request never consumes quota. A take of 0 tokens inspects the
// bucket without changing it; n must not be negative.
func (l Limit) Take(s State, now time.Time, n int64) (State, Decision) {
	return l.TakeAt(s, now.UnixNano(), n)
}

// TakeAt is [Limit.Take] with now given in Unix nanoseconds.
//
// State written under one limit stays meaningful under another (a config
// reload): it is the instant the bucket is full again. After a quota
// decrease the bucket may owe more than its new capacity; it then reports
// 0 tokens and refills from its debt at the new rate.
func (l Limit) TakeAt(s State, now int64, n int64) (State, Decision) {
	if l.interval == 0 {
		panic("bucket: Take on the zero Limit")
	}
	tat := int64(s)
	if tat < now {
		tat = now // full: tokens that arrived while full were discarded
	}
	burst := l.capacity * l.interval // time an empty bucket needs to refill
	d := Decision{Limit: l, ResetAfter: time.Duration(tat - now)}
	// The whole tokens the bucket holds now. It is negative only for state
	// left by a larger limit (a quota decrease): the bucket then owes more
	// than it can hold, and reads empty until the debt is paid.
	held := max((now+burst-tat)/l.interval, 0)
	if n > l.capacity {
		d.RetryAfter = Never
		d.Remaining = held
		return s, d
	}
	next := tat + n*l.interval
	if n > 0 && next-now > burst {
		// Denied: the take would succeed once the bucket has refilled
		// enough for next to fit within the burst.
		d.RetryAfter = time.Duration(next - burst - now)
		d.Remaining = held
		return s, d
	}
	d.Allowed = true
	if n == 0 { // a look: always answered, nothing taken
		d.Remaining = held
		return s, d
	}
	d.Remaining = (now + burst - next) / l.interval
	d.ResetAfter = time.Duration(next - now)
	return State(next), d
}

// Full reports whether a bucket in state s is full at now. A store may
// forget a full bucket: it is the same as one never used.
func (s State) Full(now time.Time) bool { return int64(s) <= now.UnixNano() }
