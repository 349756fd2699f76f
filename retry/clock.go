package retry

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"
)

// A Clock tells the time and waits. The retry loop reads the time only
// through Now and waits only through Sleep, so a virtual clock makes the
// whole loop deterministic.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// Sleep waits for d, or until ctx is done, whichever comes first. It
	// returns ctx.Err() if ctx ended the wait and nil otherwise. A
	// non-positive d returns at once (with ctx.Err() if ctx is already done).
	Sleep(ctx context.Context, d time.Duration) error
}

// SystemClock is the [Clock] of the operating system: time.Now and a timer.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// Sleep waits for d on a timer, or until ctx is done.
func (SystemClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Rand is a source of uniform random fractions. *rand.Rand from math/rand/v2
// satisfies it.
type Rand interface {
	// Float64 returns a uniformly distributed number in [0, 1).
	Float64() float64
}

// globalRand draws from math/rand/v2's goroutine-safe global source.
type globalRand struct{}

func (globalRand) Float64() float64 { return rand.Float64() }

// lockedRand serialises draws from a Rand that is not safe for concurrent use.
type lockedRand struct {
	mu sync.Mutex
	r  Rand
}

func (l *lockedRand) Float64() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.Float64()
}
