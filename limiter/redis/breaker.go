package redis

import (
	"context"
	"sync"
	"time"
)

const (
	// breakerFailures is how many pipelines in a row must fail (no answer
	// within the pipeline deadline, or a refused connection) before the
	// store declares an outage and stops sending takes.
	breakerFailures = 3
	// probeEvery is how often a store in an outage asks Redis whether it
	// is back.
	probeEvery = 100 * time.Millisecond
)

// waitEstimator picks how long a take waits for Redis: twice the smoothed
// round trip plus four deviations (TCP's retransmission timer, RFC 6298:
// a take may wait for the pipeline in flight before its own), within a
// floor and a ceiling.
type waitEstimator struct {
	mu             sync.Mutex
	srtt, rttvar   time.Duration
	floor, ceiling time.Duration
	seen           bool
}

// observe records the round trip of an answered pipeline and returns the
// wait to use from now on.
func (w *waitEstimator) observe(rtt time.Duration) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.seen {
		w.srtt, w.rttvar, w.seen = rtt, rtt/2, true
	} else {
		dev := w.srtt - rtt
		if dev < 0 {
			dev = -dev
		}
		w.rttvar += (dev - w.rttvar) / 4
		w.srtt += (rtt - w.srtt) / 8
	}
	return min(max(2*(w.srtt+4*w.rttvar), w.floor), w.ceiling)
}

// open reports whether the store is in an outage: takes are decided by the
// failure policy at once, without waiting for Redis.
func (s *Store) open() bool { return s.broken.Load() }

// pipelineEnded counts a pipeline that reached Redis (answered, even with
// an error) or not, and opens the breaker after breakerFailures failures
// in a row. An answer closes the breaker as a probe's would: a pipeline
// sent before the breaker opened may be the first to see Redis back, and
// the outage it ends must not begin again at the next take because the
// prober has not yet looked.
func (s *Store) pipelineEnded(reached bool) {
	if reached {
		s.fails.Store(0)
		s.broken.Store(false)
		return
	}
	if s.fails.Add(1) >= breakerFailures && s.broken.CompareAndSwap(false, true) {
		select {
		case s.probeNow <- struct{}{}:
		default:
		}
	}
}

// probe is the store's prober goroutine: while the breaker is open it asks
// Redis every probeEvery whether it answers, and closes the breaker when
// it does.
func (s *Store) probe() {
	defer s.wg.Done()
	t := time.NewTicker(probeEvery)
	defer t.Stop()
	for {
		select {
		case <-s.quit:
			return
		case <-s.probeNow:
		}
		for s.broken.Load() {
			ctx, cancel := context.WithTimeout(context.Background(), s.maxWait)
			err := s.client.Ping(ctx).Err()
			cancel()
			if err == nil {
				s.reached()
				s.fails.Store(0)
				s.broken.Store(false)
				break
			}
			select {
			case <-s.quit:
				return
			case <-t.C:
			}
		}
	}
}
