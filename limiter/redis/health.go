package redis

import (
	"context"
	"sync"
	"time"

	"github.com/tollgate/tollgate/limiter"
)

// healthEvery is how long a health check's result is reused, so that
// readiness probes, however frequent, cost Redis at most one round trip a
// second.
const healthEvery = time.Second

// healthCache holds the latest health check.
type healthCache struct {
	mu   sync.Mutex
	at   time.Time // when h was checked; zero: never
	h    limiter.Health
	busy chan struct{} // closed when the check in flight ends; nil: none
}

var _ limiter.HealthReporter = (*Store)(nil)

// Health implements [limiter.HealthReporter]: it checks that Redis answers
// (as [Store.Ping] does) within the store's timeout, reusing a result for
// a second. While Redis does not answer the store is ready unless its
// policy is FailClosed, which denies every take, or Redis has never
// answered this store: a node that has never reached its Redis is not
// ready unless its policy is FailOpen. The status says "redis up", "redis
// down" or "redis never reached" and names the failure policy; it does
// not say why Redis is down (the answer may be public, and the cause
// names internal addresses): the store's log does. A FailLocal store that
// has not yet counted the nodes sharing its Redis (see [Store.Nodes]) is
// not ready either, and says "nodes not yet counted": until it has, it
// would decide closed whatever Redis did not answer.
func (s *Store) Health(ctx context.Context) limiter.Health {
	c := &s.health
	c.mu.Lock()
	for {
		if !c.at.IsZero() && time.Since(c.at) < healthEvery {
			h := c.h
			c.mu.Unlock()
			return h
		}
		if c.busy == nil {
			break
		}
		busy := c.busy
		c.mu.Unlock()
		select {
		case <-busy:
		case <-ctx.Done():
			return s.healthOf(ctx.Err())
		}
		c.mu.Lock()
	}
	busy := make(chan struct{})
	c.busy = busy
	c.mu.Unlock()

	pctx, cancel := context.WithTimeout(ctx, s.maxWait)
	err := s.Ping(pctx)
	cancel()
	h := s.healthOf(err)

	c.mu.Lock()
	if ctx.Err() == nil { // a probe that gave up says nothing of Redis
		c.at, c.h = time.Now(), h
	}
	c.busy = nil
	close(busy)
	c.mu.Unlock()
	return h
}

func (s *Store) healthOf(err error) limiter.Health {
	if err == nil {
		if s.policy == FailLocal && !s.Counted() {
			return limiter.Health{Status: "redis up, nodes sharing it not yet counted (on failure: local; closed until counted)"}
		}
		status := "redis up (on failure: " + s.policy.String() + ")"
		if p := s.Persistence(); p != "" {
			status += "; a restart of Redis " + p
		}
		return limiter.Health{Ready: true, Status: status}
	}
	if !s.contacted.Load() {
		return limiter.Health{
			Ready:  s.policy == FailOpen,
			Status: "redis never reached (on failure: " + s.policy.String() + ")",
		}
	}
	if s.policy == FailLocal && !s.Counted() {
		return limiter.Health{Status: "redis down, nodes sharing it not yet counted (on failure: local; closed until counted)"}
	}
	return limiter.Health{
		Ready:  s.policy != FailClosed,
		Status: "redis down (on failure: " + s.policy.String() + ")",
	}
}
