package retry

import (
	"math"
	"time"
)

// A Schedule decides how long to wait before each retry.
//
// Delay returns the wait before retry n, where n = 0 is the wait between the
// first and the second attempt. prev is the wait returned for retry n-1 (0
// when n = 0); only stateful schedules such as [DecorrelatedJitter] use it.
// Random draws must come from rnd. Delay never returns a negative duration
// and must not panic for any n ≥ 0.
type Schedule interface {
	Delay(n int, prev time.Duration, rnd Rand) time.Duration
}

// Default parameters of the default policy (truncated exponential backoff
// with jitter).
const (
	// DefaultUnit is the unit of [Exponential]: the wait before retry n is
	// 2^n units plus a random fraction of a unit.
	DefaultUnit = time.Second
	// DefaultMaxBackoff is the cap on any single wait of the default schedule.
	DefaultMaxBackoff = 32 * time.Second
	// DefaultDeadline bounds how long a call goes on retrying: no wait that
	// would end past it is started. It never cuts an attempt in flight.
	DefaultDeadline = 300 * time.Second
	// DefaultMaxHint is the ceiling on a server's Retry-After hint under the
	// default policy: maximum_backoff, so a hint never makes a wait longer
	// than the schedule's longest. It follows [WithMaxBackoff] and is
	// replaced by [WithMaxHint].
	DefaultMaxHint = DefaultMaxBackoff
)

// DefaultSchedule returns the default policy's schedule: 1+r, 2+r, 4+r …
// seconds, capped at 32 s.
func DefaultSchedule() Schedule { return Exponential{Unit: DefaultUnit, Max: DefaultMaxBackoff} }

// Exponential is truncated exponential backoff with additive jitter, the
// default policy: the wait before retry n is
//
//	min(2^n·Unit + U[0,1)·Unit, Max)
//
// A zero Unit means [DefaultUnit]; a zero Max means [DefaultMaxBackoff].
type Exponential struct {
	// Unit is the base of the exponent and the scale of the jitter.
	Unit time.Duration
	// Max is maximum_backoff, the longest wait.
	Max time.Duration
}

// Delay returns min(2^n·Unit + U[0,1)·Unit, Max).
func (e Exponential) Delay(n int, _ time.Duration, rnd Rand) time.Duration {
	unit, limit := e.Unit, e.Max
	if unit <= 0 {
		unit = DefaultUnit
	}
	if limit <= 0 {
		limit = DefaultMaxBackoff
	}
	d := scaled(unit, n) + time.Duration(rnd.Float64()*float64(unit))
	if d < 0 || d > limit {
		return limit
	}
	return d
}

// FullJitter waits a uniform random time in [0, min(Cap, Base·2^n)): the
// "full jitter" of the AWS Architecture Blog's backoff study. A zero Base
// means 1 s; a zero Cap means [DefaultMaxBackoff].
type FullJitter struct {
	// Base is the first wait's scale; 1 s when zero.
	Base time.Duration
	// Cap is the longest wait; [DefaultMaxBackoff] when zero.
	Cap time.Duration
}

// Delay returns U[0, min(Cap, Base·2^n)).
func (f FullJitter) Delay(n int, _ time.Duration, rnd Rand) time.Duration {
	v := capped(f.Base, f.Cap, n)
	return time.Duration(rnd.Float64() * float64(v))
}

// EqualJitter waits half of min(Cap, Base·2^n) plus a uniform random time in
// the other half. A zero Base means 1 s; a zero Cap means [DefaultMaxBackoff].
type EqualJitter struct {
	// Base is the first wait's scale; 1 s when zero.
	Base time.Duration
	// Cap is the longest wait; [DefaultMaxBackoff] when zero.
	Cap time.Duration
}

// Delay returns v/2 + U[0, v/2) with v = min(Cap, Base·2^n).
func (e EqualJitter) Delay(n int, _ time.Duration, rnd Rand) time.Duration {
	v := capped(e.Base, e.Cap, n)
	half := v / 2
	return half + time.Duration(rnd.Float64()*float64(v-half))
}

// DecorrelatedJitter waits min(Cap, U[Base, 3·prev)), starting from prev =
// Base: each wait depends on the one before rather than on n. A zero Base
// means 1 s; a zero Cap means [DefaultMaxBackoff].
type DecorrelatedJitter struct {
	// Base is the first wait's scale; 1 s when zero.
	Base time.Duration
	// Cap is the longest wait; [DefaultMaxBackoff] when zero.
	Cap time.Duration
}

// Delay returns min(Cap, U[Base, 3·max(prev, Base))).
func (d DecorrelatedJitter) Delay(_ int, prev time.Duration, rnd Rand) time.Duration {
	base, limit := d.Base, d.Cap
	if base <= 0 {
		base = time.Second
	}
	if limit <= 0 {
		limit = DefaultMaxBackoff
	}
	if prev < base {
		prev = base
	}
	hi := 3 * float64(prev)
	v := float64(base) + rnd.Float64()*(hi-float64(base))
	if v >= float64(limit) {
		return limit
	}
	return time.Duration(v)
}

// Constant waits the same time before every retry: Constant(time.Second)
// retries once a second. A negative Constant waits zero.
type Constant time.Duration

// Delay returns the constant wait.
func (c Constant) Delay(int, time.Duration, Rand) time.Duration {
	return max(time.Duration(c), 0)
}

// scaled returns unit·2^n, saturating at math.MaxInt64.
func scaled(unit time.Duration, n int) time.Duration {
	if n < 0 {
		n = 0
	}
	if n >= 63 || unit > time.Duration(math.MaxInt64>>uint(n)) {
		return time.Duration(math.MaxInt64)
	}
	return unit << uint(n)
}

// capped returns min(limit, base·2^n) with the zero-value defaults applied.
func capped(base, limit time.Duration, n int) time.Duration {
	if base <= 0 {
		base = time.Second
	}
	if limit <= 0 {
		limit = DefaultMaxBackoff
	}
	if v := scaled(base, n); v < limit {
		return v
	}
	return limit
}
