package redis

// This file is the store's background work beside its pipelines: Run
// announces the node, says loudly when Redis has never answered, and
// warns once when Redis would lose every bucket in a restart.

import (
	"context"
	"time"
)

// Run announces this node in Redis's set of live nodes (see
// Options.Nodes) at once and then every third of Options.NodeTTL, until
// ctx ends or the store is closed; then it removes the node from the set
// and returns nil. It also says what a store cannot say on a take:
//
//   - while Redis has never answered since the store was made, an error
//     is logged at once and then every Options.LogInterval (every take is
//     decided by the failure policy, and [Store.Health] reports the store
//     not ready unless the policy is FailOpen);
//   - at its first answer, a warning when Redis keeps no persistence
//     (neither an append-only file nor RDB snapshots): a restart of Redis
//     then refills every bucket. A Redis that refuses CONFIG GET (a
//     managed service, an ACL) is not warned about.
//
// Without Run, a store decides as well, but counts no nodes: under
// FailLocal it shares a bucket among Options.Nodes nodes, or, without
// them, decides closed what Redis does not answer. Call Run once.
func (s *Store) Run(ctx context.Context) error {
	t := time.NewTicker(s.nodeTTL / 3)
	defer t.Stop()
	checked := false
	lastErrLog := time.Time{}
	for {
		err := s.announce(ctx)
		switch {
		case err == nil && !checked:
			checked = true
			s.checkPersistence(ctx)
		case err != nil && !s.contacted.Load() && ctx.Err() == nil:
			if lastErrLog.IsZero() || time.Since(lastErrLog) >= time.Duration(s.logEvery) {
				lastErrLog = time.Now()
				s.logNeverReached(err)
			}
		}
		select {
		case <-ctx.Done():
			s.leave()
			return nil
		case <-s.quit:
			return nil
		case <-t.C:
		}
	}
}

// reached records that Redis answered.
func (s *Store) reached() {
	if !s.contacted.Load() {
		s.contacted.Store(true)
	}
}

// Reached reports whether Redis has answered this store at least once.
func (s *Store) Reached() bool { return s.contacted.Load() }

// logNeverReached logs, as an error, that Redis has never answered.
func (s *Store) logNeverReached(err error) {
	readyz := "not ready until it answers"
	if s.policy == FailOpen {
		readyz = "ready (on failure: open)"
	}
	s.log.Error("redis store has never answered since start: every take is decided by the failure policy",
		"policy", s.policy.String(),
		"for", time.Since(s.epoch).Round(time.Second),
		"decisions", s.fallbackN.Load(),
		"readiness", readyz,
		"error", err)
}

// checkPersistence warns when Redis keeps neither an append-only file nor
// RDB snapshots. A CONFIG GET refused (renamed, forbidden by an ACL) or
// unanswered says nothing: it is logged at debug level only.
func (s *Store) checkPersistence(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, s.maxWait)
	defer cancel()
	aof, err := s.client.ConfigGet(ctx, "appendonly").Result()
	if err == nil {
		var rdb map[string]string
		if rdb, err = s.client.ConfigGet(ctx, "save").Result(); err == nil {
			a, okA := aof["appendonly"]
			r, okR := rdb["save"]
			if okA && okR && a != "yes" && r == "" {
				s.log.Warn("redis keeps no persistence (appendonly no, save \"\"): a restart of Redis refills every bucket, and the nodes admit a full burst on every key again",
					"key_prefix", s.prefix)
			}
			return
		}
	}
	s.log.Debug("redis store: persistence not checked: CONFIG GET refused", "error", err)
}
