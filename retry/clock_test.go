package retry

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"
)

// fakeClock is a virtual clock: Sleep returns at once and moves Now forward.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, d)
	c.now = c.now.Add(d)
	return nil
}

// Advance moves Now forward by d without recording a wait, as a slow
// attempt would.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *fakeClock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

func (c *fakeClock) Total() time.Duration {
	var t time.Duration
	for _, d := range c.Sleeps() {
		t += d
	}
	return t
}

// blockingClock blocks every Sleep until the context is done, announcing
// each wait on started.
type blockingClock struct {
	started chan time.Duration
}

func (blockingClock) Now() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }

func (c blockingClock) Sleep(ctx context.Context, d time.Duration) error {
	c.started <- d
	<-ctx.Done()
	return ctx.Err()
}

// fixedRand always draws the same fraction.
type fixedRand float64

func (f fixedRand) Float64() float64 { return float64(f) }

func seeded() *rand.Rand { return rand.New(rand.NewPCG(7, 11)) }
