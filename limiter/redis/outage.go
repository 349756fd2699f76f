package redis

// This file is how a store notices, logs and ends an outage of Redis.

import (
	"time"

	"github.com/tollgate/tollgate/bucket"
)

// startLogBurst is how many outages in a row may log their start at once;
// beyond it, one more per log interval (a flapping Redis).
const startLogBurst = 3

// noteDown records a fallback decision; sentAt is when its pipeline was
// sent (time since s.epoch), or -1 for a take that was not answered or
// not sent. The first of an outage begins it and is logged at once,
// unless startLogBurst outage starts were logged lately (a flapping
// Redis): then its warning waits for the log interval. Later decisions
// are logged at most once per interval, with their count. A pipeline sent
// before the last outage ended (one whose dial was still retrying when
// Redis came back) begins no outage: its failure was that outage's.
func (s *Store) noteDown(cause error, sentAt int64) {
	s.unlogged.Add(1)
	now := int64(time.Since(s.epoch))
	if sentAt >= 0 && sentAt < s.endedAt.Load() && !s.down.Load() {
		return
	}
	if s.down.CompareAndSwap(false, true) {
		s.downSince.Store(now)
		s.logged.Store(false)
		s.outages.Add(1)
		if s.startLogAllowed(now) {
			s.lastLog.Store(now)
			s.warn(now, cause)
			return
		}
	}
	last := s.lastLog.Load()
	if now-last < s.logEvery || !s.lastLog.CompareAndSwap(last, now) {
		return
	}
	s.warn(now, cause)
}

// startLogAllowed takes a token from the bucket of outage-start warnings:
// startLogBurst at once, refilled one per log interval.
func (s *Store) startLogAllowed(now int64) bool {
	s.startLogMu.Lock()
	defer s.startLogMu.Unlock()
	limit, err := bucket.NewLimit(startLogBurst, float64(time.Second)/float64(s.logEvery))
	if err != nil {
		return true // an interval too long for a bucket: log every start
	}
	next, d := limit.TakeAt(s.startLog, now, 1)
	s.startLog = next
	return d.Allowed
}

// warn logs that Redis is unavailable, with what happened since the last
// warning.
func (s *Store) warn(now int64, cause error) {
	if s.down.Load() {
		s.logged.Store(true)
	}
	s.log.Warn("redis store unavailable, deciding by failure policy",
		"policy", s.policy.String(),
		"decisions", s.unlogged.Swap(0),
		"outages", s.outages.Swap(0),
		"down_for", time.Duration(now-s.downSince.Load()).Round(time.Millisecond),
		"timeout", time.Duration(s.wait.Load()),
		"error", cause)
}

// noteUp ends an outage, and logs its end if its start was logged, when
// Redis answered a pipeline sent at sentAt (time since s.epoch). An answer
// to a pipeline sent before the outage began does not end it: a caller
// that gave up waiting for that very pipeline may be what began it.
func (s *Store) noteUp(sentAt int64) {
	if !s.down.Load() || sentAt < s.downSince.Load() || !s.down.CompareAndSwap(true, false) {
		return
	}
	s.endedAt.Store(max(1, int64(time.Since(s.epoch))))
	if !s.logged.Swap(false) {
		return
	}
	s.log.Info("redis store available again",
		"outage", time.Duration(int64(time.Since(s.epoch))-s.downSince.Load()).Round(time.Millisecond),
		"policy", s.policy.String())
}
